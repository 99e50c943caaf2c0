// Engine failures: a clean error mid-stream, 503 engine_recovering while it restarts, then service.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import OpenAI from "openai";
import { startServer, rawRequest } from "./harness.mjs";

function enginePid(serverPid) {
  const out = execFileSync("pgrep", ["-P", String(serverPid), "-f", "splash engine"], { encoding: "utf8" });
  return Number(out.trim().split("\n")[0]);
}

async function waitReady(port) {
  for (let i = 0; i < 100; i++) {
    const r = await rawRequest(port, { path: "/ready" });
    if (r.status === 200) return;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error("not ready");
}

test("kill -9 of the engine mid-stream: clean error, 503 while recovering, then success", async () => {
  const server = await startServer();
  try {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 });
    const stream = await client.completions.create({ model: "test/stories", prompt: "Once upon a time",
                                                     max_tokens: 3000, stream: true });
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    process.kill(enginePid(server.proc.pid), "SIGKILL");
    // the stream ends with an error event, not a hang
    await assert.rejects(async () => { for (;;) { const r = await it.next(); if (r.done) break; } },
                         /engine/);
    await waitReady(server.port);
    // a second failure within 60 s of the start backs off 5 s: requests get 503 meanwhile
    process.kill(enginePid(server.proc.pid), "SIGKILL");
    let saw503 = false;
    for (let i = 0; i < 40 && !saw503; i++) {
      const r = await rawRequest(server.port, { method: "POST", path: "/v1/completions",
                                                body: '{"prompt":"Hi","max_tokens":2}' });
      if (r.status === 503) {
        saw503 = true;
        assert.match(r.body, /engine_recovering/);
        assert.ok(Number(r.headers["retry-after"]) >= 1);
      } else {
        await new Promise((res) => setTimeout(res, 50));
      }
    }
    assert.ok(saw503, "a request during the restart got 503 engine_recovering");
    await waitReady(server.port);
    const ok = await client.completions.create({ model: "test/stories", prompt: "Hi", max_tokens: 3 });
    assert.equal(ok.usage.completion_tokens, 3);
    const status = JSON.parse((await rawRequest(server.port, { path: "/status" })).body);
    assert.equal(status.engine.restarts, 2);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

// The watchdog (SPLASH_TEST_WATCHDOG_S shortens its 30 s, test-only): a stopped engine is
// reported as not answering for the period, not as the SIGKILL the watchdog sends it.
test("SIGSTOP of the engine: the watchdog reports it, restarts it, and the server serves again", async () => {
  const server = await startServer([], { env: { SPLASH_TEST_WATCHDOG_S: "1.5" } });
  let engine = 0;
  try {
    await waitReady(server.port);
    engine = enginePid(server.proc.pid);
    process.kill(engine, "SIGSTOP");
    const t0 = Date.now();
    const hung = await rawRequest(server.port, { method: "POST", path: "/v1/completions",
                                                 body: '{"prompt":"Hi","max_tokens":2}' });
    assert.ok(hung.status >= 500, `the request at the hung engine failed cleanly: ${hung.status}`);
    assert.ok(Date.now() - t0 < 15000, "the watchdog fired within a status interval plus its period");
    // the console line may follow the failed answer by a moment; the watchdog fires on the
    // status request left unanswered, or on the request's frame left unread, whichever
    // comes first: both name the period
    const line = /engine failed: the engine (stopped answering status requests|left a frame unread) for 1\.5 s/;
    for (let i = 0; i < 100 && !line.test(server.output()); i++)
      await new Promise((r) => setTimeout(r, 50));
    assert.match(server.output(), line);
    assert.doesNotMatch(server.output(), /killed by signal/);
    await waitReady(server.port);
    assert.notEqual(enginePid(server.proc.pid), engine, "a new engine runs");
    const ok = await rawRequest(server.port, { method: "POST", path: "/v1/completions",
                                               body: '{"prompt":"Hi","max_tokens":2}' });
    assert.equal(ok.status, 200);
    const status = JSON.parse((await rawRequest(server.port, { path: "/status" })).body);
    assert.equal(status.engine.restarts, 1);
  } finally {
    try { if (engine) process.kill(engine, "SIGCONT"); } catch { /* already gone */ }
    assert.equal(await server.stop(), 0);
  }
});
