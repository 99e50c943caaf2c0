// Runs Debian's nginx with packaging/deploy/nginx/splash.conf as shipped, in front of
// replicas on loopback: only its listen port and the replicas' ports are rewritten,
// and everything nginx writes goes to a temporary prefix. roundRobin drops the hash
// line, for measuring what affinity gives (bench/scale-out.mjs).
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort, root } from "./harness.mjs";

export const nginxBin = ["/usr/sbin/nginx", "/usr/bin/nginx"].find((p) => fs.existsSync(p));

export function recipe(listen, ports, { roundRobin = false } = {}) {
  const text = fs.readFileSync(path.join(root, "packaging/deploy/nginx/splash.conf"), "utf8");
  const servers = text.match(/^\s*server 127\.0\.0\.1:\d+ .*$/gm) || [];
  if (servers.length < 1) throw new Error("the recipe lists no replica");
  // the first server line stands for every replica asked for; the others go
  let out = text.replace(/listen 8000;/, `listen 127.0.0.1:${listen};`);
  const lines = ports.map((p) => servers[0].replace(/:\d+ /, `:${p} `)).join("\n");
  servers.forEach((line, i) => { out = out.replace(line + "\n", i === 0 ? lines + "\n" : ""); });
  if (roundRobin) out = out.replace(/^\s*hash \$splash_affinity consistent;\n/m, "");
  return out;
}

export async function startNginx(ports, options = {}) {
  if (!nginxBin) throw new Error("nginx is not installed (packaging/dependencies.tsv lists it)");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-nginx-"));
  fs.chmodSync(dir, 0o755);
  const listen = await freePort();
  fs.writeFileSync(path.join(dir, "splash.conf"), recipe(listen, ports, options));
  const temp = (n) => `${n}_temp_path ${path.join(dir, n)};`;
  fs.writeFileSync(path.join(dir, "nginx.conf"), [
    "daemon off;", "worker_processes 1;", `pid ${dir}/nginx.pid;`, `error_log ${dir}/error.log;`,
    "events { worker_connections 512; }",
    "http {", "access_log off;",
    ...["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(temp),
    `include ${dir}/splash.conf;`, "}",
  ].join("\n"));
  const args = ["-p", dir, "-e", `${dir}/error.log`, "-c", `${dir}/nginx.conf`];
  execFileSync(nginxBin, ["-t", "-q", ...args]);
  const proc = spawn(nginxBin, args, { stdio: "ignore" });
  const url = `http://127.0.0.1:${listen}`;
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const gone = new Promise((r) => proc.on("exit", r));
      proc.kill("SIGTERM");
      await gone;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${url}/ready`)).status === 200) return { url, stop, proc };
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  const log = fs.readFileSync(`${dir}/error.log`, "utf8");
  await stop();
  throw new Error(`nginx did not come up: ${log}`);
}
