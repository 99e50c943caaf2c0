// `splash wait-ready`, the readiness check of the systemd units and the Docker image:
// exit 0 once /ready answers 200, exit 1 naming the URL when nothing becomes ready.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { splash, startServer, freePort } from "./harness.mjs";

function waitReady(args, env = {}) {
  return spawnSync(splash, ["wait-ready", ...args], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 60000 });
}

test("wait-ready: 0 once the server's /ready answers 200", async () => {
  const server = await startServer();
  try {
    const r = waitReady(["--port", String(server.port), "--timeout", "30"]);
    assert.equal(r.status, 0, r.stderr);
    const ready = await fetch(`${server.url}/ready`);
    assert.equal(ready.status, 200);
    // SPLASH_PORT names the port as it does for serve; 0.0.0.0 asks loopback
    const viaEnv = waitReady(["--host", "0.0.0.0", "--timeout", "0"], { SPLASH_PORT: String(server.port) });
    assert.equal(viaEnv.status, 0, viaEnv.stderr);
  } finally {
    await server.stop();
  }
});

test("wait-ready: 1 naming the URL when no server answers", async () => {
  const port = await freePort();
  const started = Date.now();
  const r = waitReady(["--port", String(port), "--timeout", "1"]);
  assert.equal(r.status, 1);
  assert.match(r.stderr, new RegExp(`http://127\\.0\\.0\\.1:${port}/ready not ready after 1 s`));
  assert.ok(Date.now() - started >= 1000, "waited the whole timeout");
});

test("wait-ready: a bad option is a usage error", () => {
  const r = waitReady(["--port", "70000"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--port 70000: expected a whole number from 1 to 65535/);
});
