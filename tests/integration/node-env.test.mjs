// tests/node-for-tests.sh: on a machine whose node is older than the test packages'
// engines (Debian 12's stock nodejs is 18), the test command fetches the registry's node
// binary package once into a cache and runs on it. Here the old node and npm are fakes
// on PATH, so nothing is downloaded.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { root } from "./harness.mjs";

const script = path.join(root, "tests/node-for-tests.sh");
const lock = path.join(root, "tests/integration/package-lock.json");

// A bin directory with `node` answering --version with `version` (anything else runs the
// real node, which the script uses to read the lock) and an `npm` whose `pack` writes a
// node package whose bin/node says `packed`, logging each call.
function fakes(dir, version, packed) {
  const bin = path.join(dir, "bin");
  fs.mkdirSync(bin, { recursive: true });
  fs.writeFileSync(path.join(bin, "node"),
    `#!/bin/sh\nif [ "$1" = --version ]; then echo ${version}; exit 0; fi\nexec ${process.execPath} "$@"\n`,
    { mode: 0o755 });
  fs.writeFileSync(path.join(bin, "npm"), `#!/bin/sh
echo "npm $*" >> ${dir}/npm.log
[ "$1" = pack ] || exit 1
[ -n "${packed}" ] || { echo "npm error 404" >&2; exit 1; }
mkdir -p pkg/package/bin
printf '#!/bin/sh\\necho ${packed}\\n' > pkg/package/bin/node
chmod +x pkg/package/bin/node
tar -czf node-fake-1.0.0.tgz -C pkg package
rm -rf pkg
echo node-fake-1.0.0.tgz
`, { mode: 0o755 });
  return bin;
}

function run(dir, bin) {
  return spawnSync("bash", [script, lock], {
    encoding: "utf8",
    env: { PATH: `${bin}:/usr/bin:/bin`, HOME: dir, SPLASH_NODE_CACHE: path.join(dir, "cache") },
  });
}

test("an old node on PATH: a new one is fetched once into the cache and used", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-node-env-"));
  try {
    const bin = fakes(dir, "v18.19.0", "v22.1.0");
    const first = run(dir, bin);
    assert.equal(first.status, 0, first.stderr);
    assert.match(first.stderr, /node v18\.19\.0 is older than 22\.0\.0 .*fetching node-linux-(x64|arm64)@22/);
    const got = first.stdout.trim();
    assert.equal(path.dirname(got).startsWith(path.join(dir, "cache")), true, got);
    assert.equal(spawnSync(path.join(got, "node"), ["--version"], { encoding: "utf8" }).stdout.trim(), "v22.1.0");
    // the second run takes the cached one without asking the registry
    const second = run(dir, bin);
    assert.equal(second.status, 0, second.stderr);
    assert.equal(second.stdout.trim(), got);
    assert.equal(fs.readFileSync(path.join(dir, "npm.log"), "utf8").trim().split("\n").length, 1);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a node new enough is used as it is; a failed fetch says what to install", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-node-env-"));
  try {
    const ok = run(dir, fakes(path.join(dir, "new"), "v22.3.0", "v22.1.0"));
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(ok.stdout.trim(), path.join(dir, "new", "bin"));
    assert.equal(fs.existsSync(path.join(dir, "new", "npm.log")), false);
    const offline = run(dir, fakes(path.join(dir, "old"), "v18.19.0", ""));
    assert.notEqual(offline.status, 0);
    assert.match(offline.stderr, /install Node\.js 22\.0\.0 or newer/);
    // a fetched node that is still too old is refused, not used
    const stale = run(dir, fakes(path.join(dir, "stale"), "v18.19.0", "v20.0.0"));
    assert.notEqual(stale.status, 0);
    assert.match(stale.stderr, /gave node v20\.0\.0, not 22\.0\.0 or newer/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
