// packaging/deploy: the nginx recipe passes `nginx -t`; the Kubernetes, compose and
// Envoy YAML parse and carry the keys the deployment depends on
// (tests/deploy/check-deploy-files.py; their own tools are not in Debian 12).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { root } from "./harness.mjs";

test("deployment YAML parses with its required keys", () => {
  const r = spawnSync("python3", [path.join(root, "tests/deploy/check-deploy-files.py"), root],
    { encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test("the nginx recipes pass nginx -t", () => {
  const nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"].find((p) => fs.existsSync(p));
  assert.ok(nginx, "nginx is not installed (packaging/dependencies.tsv lists it)");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-nginx-t-"));
  try {
    // the compose copy names its replicas by service name: resolve them here
    for (const [name, file] of [["plain", "nginx/splash.conf"], ["compose", "compose/nginx.conf"]]) {
      const text = fs.readFileSync(path.join(root, "packaging/deploy", file), "utf8")
        .replace(/server splash-(\d+):8000/g, "server 127.0.0.$1:8000");
      fs.writeFileSync(path.join(dir, `${name}.conf`), text);
      fs.writeFileSync(path.join(dir, "nginx.conf"),
        `pid ${dir}/nginx.pid; error_log ${dir}/error.log; events {} http { access_log off; include ${dir}/${name}.conf; }\n`);
      const r = spawnSync(nginx, ["-t", "-q", "-p", dir, "-e", `${dir}/error.log`, "-c", `${dir}/nginx.conf`],
        { encoding: "utf8" });
      assert.equal(r.status, 0, `${file}: ${r.stderr}`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
