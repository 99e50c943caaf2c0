// API keys, the request queue's 503s and Retry-After.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, rawRequest } from "./harness.mjs";

test("an API key is required everywhere but the page, /health and /ready", async () => {
  const server = await startServer(["--api-key", "sekret"]);
  try {
    const bad = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "wrong" });
    await assert.rejects(bad.models.list(), (e) => e.status === 401);
    const good = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "sekret" });
    assert.equal((await good.models.list()).data[0].id, "test/stories");
    // x-api-key alone works; both sent must both match
    let r = await rawRequest(server.port, { path: "/v1/models", headers: { "x-api-key": "sekret" } });
    assert.equal(r.status, 200);
    r = await rawRequest(server.port, { path: "/v1/models",
                                        headers: { "x-api-key": "sekret", Authorization: "Bearer wrong" } });
    assert.equal(r.status, 401);
    assert.equal(r.headers["www-authenticate"], "Bearer");
    for (const p of ["/status", "/metrics"])
      assert.equal((await rawRequest(server.port, { path: p })).status, 401);
    for (const p of ["/", "/health", "/ready"])
      assert.equal((await rawRequest(server.port, { path: p })).status, 200);
    // preflights stay public
    r = await rawRequest(server.port, { method: "OPTIONS", path: "/v1/chat/completions" });
    assert.equal(r.status, 204);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("allowed origins get CORS headers and preflight answers", async () => {
  const server = await startServer(["--allowed-origin", "tauri://localhost"]);
  try {
    const r = await rawRequest(server.port, { path: "/v1/models", headers: { Origin: "tauri://localhost" } });
    assert.equal(r.status, 200);
    assert.equal(r.headers["access-control-allow-origin"], "tauri://localhost");
    const pre = await rawRequest(server.port, { method: "OPTIONS", path: "/v1/completions",
                                                headers: { Origin: "tauri://localhost",
                                                           "Access-Control-Request-Method": "POST" } });
    assert.equal(pre.status, 204);
    assert.match(pre.headers["access-control-allow-methods"], /POST/);
  } finally {
    await server.stop();
  }
});

test("past --queue-size requests get 503 with Retry-After", async () => {
  const server = await startServer(["--queue-size", "1"]);
  try {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 });
    // The first request must still hold its slot when the second arrives: left alone, the
    // stories model ends its story within ~200 ms and the whole stream fits in the socket
    // buffers, so a loaded machine's slow client saw it finished (200). +100 on one token
    // makes it run to its max_tokens: 4,000 tokens, 3 s on a quiet machine.
    const ids = JSON.parse((await rawRequest(server.port, { method: "POST", path: "/tokenize",
                                                            body: '{"content":" dragon"}' })).body).tokens;
    const long = client.completions.create({ model: "test/stories", prompt: "Once upon a time",
                                             max_tokens: 4000, temperature: 0,
                                             logit_bias: { [ids.at(-1)]: 100 }, stream: true });
    const stream = await long;
    const it = stream[Symbol.asyncIterator]();
    await it.next(); // the first request is running
    const r = await rawRequest(server.port, { method: "POST", path: "/v1/completions",
                                              body: '{"prompt":"Hi","max_tokens":2}' });
    assert.equal(r.status, 503);
    assert.ok(Number(r.headers["retry-after"]) >= 1);
    assert.match(r.body, /capacity_exhausted/);
    stream.controller.abort();
    // once the client went away, its slot frees
    let ok = false;
    for (let i = 0; i < 50 && !ok; i++) {
      const again = await rawRequest(server.port, { method: "POST", path: "/v1/completions",
                                                    body: '{"prompt":"Hi","max_tokens":2}' });
      ok = again.status === 200;
      if (!ok) await new Promise((res) => setTimeout(res, 100));
    }
    assert.ok(ok, "the aborted stream released its queue slot");
  } finally {
    await server.stop();
  }
});

test("--help lists the options; bad options exit 2 naming the flag", async () => {
  const { spawnSync } = await import("node:child_process");
  const { splash } = await import("./harness.mjs");
  const help = spawnSync(splash, ["serve", "--help"], { encoding: "utf8" });
  assert.equal(help.status, 0);
  assert.match(help.stdout, /--max-context/);
  const bad = spawnSync(splash, ["serve", "--model", "a/b", "--max-context", "lots"], { encoding: "utf8" });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--max-context: lots/);
  const combo = spawnSync(splash, ["serve", "--model", "a/b", "--mmproj", "x.gguf"], { encoding: "utf8" });
  assert.equal(combo.status, 2);
  assert.match(combo.stderr, /--mmproj: requires --model-dir/);
});
