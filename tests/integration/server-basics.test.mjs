// splash serve driven by the unmodified OpenAI SDK, plus the HTTP rules of server.md.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, rawRequest } from "./harness.mjs";

let server;
let client;

before(async () => {
  server = await startServer(["--served-model-name", "stories-alias"]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

test("completions: greedy text continues the trained stories model", async () => {
  const r = await client.completions.create({
    model: "test/stories",
    prompt: "Once upon a time, there was a little dog named Max. Max liked to run in the park with his friend",
    max_tokens: 32,
    temperature: 0,
  });
  // llama.cpp's 32-token greedy continuation of this prompt (testdata README §7)
  assert.equal(r.choices[0].text, ", Sam. One day, Max saw a big, red ball. He wanted to play with it, but he did");
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 32);
  assert.equal(r.usage.prompt_tokens, 37);
});

test("completions: streamed deltas join to the same text, with usage", async () => {
  const prompt = "Once upon a time";
  const whole = await client.completions.create({ model: "test/stories", prompt, max_tokens: 16, temperature: 0 });
  const stream = await client.completions.create({
    model: "test/stories", prompt, max_tokens: 16, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.choices.length) {
      text += chunk.choices[0].text;
      finish = chunk.choices[0].finish_reason || finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 16);
});

test("completions: a stop string ends the text before it", async () => {
  const r = await client.completions.create({
    model: "test/stories", prompt: "Once upon a time", max_tokens: 40, temperature: 0, stop: ["little"],
  });
  assert.ok(!r.choices[0].text.includes("little"));
  assert.equal(r.choices[0].finish_reason, "stop");
});

test("models: the model and its alias", async () => {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  assert.deepEqual(ids, ["test/stories", "stories-alias"]);
  assert.equal(list.data[0].context_length, 4096);
  const one = await client.models.retrieve("stories-alias");
  assert.equal(one.id, "stories-alias");
  const r = await client.completions.create({ model: "stories-alias", prompt: "Hi", max_tokens: 2 });
  assert.equal(r.usage.completion_tokens, 2);
  await assert.rejects(client.completions.create({ model: "other/model", prompt: "Hi", max_tokens: 2 }),
                       (e) => e.status === 404);
});

test("hostile bodies get a 400 naming the problem", async () => {
  const post = (body) => rawRequest(server.port, { method: "POST", path: "/v1/completions",
                                                    headers: { "Content-Type": "application/json" }, body });
  let r = await post("{not json");
  assert.equal(r.status, 400);
  assert.match(r.body, /not valid JSON/);
  r = await post('{"prompt": 12}');
  assert.equal(r.status, 400);
  assert.match(r.body, /prompt must be/);
  r = await post('{"prompt": "x", "max_tokens": -3}');
  assert.equal(r.status, 400);
  assert.match(r.body, /max_tokens must be a positive integer/);
  r = await post('{"prompt": "x", "temperature": "hot"}');
  assert.equal(r.status, 400);
  assert.match(r.body, /temperature must be a number/);
  r = await post(Buffer.from([0x7b, 0x22, 0x70, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]).toString("latin1"));
  assert.equal(r.status, 400);
  r = await post("[" + "1,".repeat(100000) + "1]");
  assert.equal(r.status, 400);
  assert.match(r.body, /must be a JSON object/);
  r = await post('{"prompt": "x", "thinking_token_budget": 100}');
  assert.equal(r.status, 400);
});

test("Host names outside the allowlist get 403 naming --allowed-host", async () => {
  const r = await rawRequest(server.port, { path: "/v1/models", headers: { Host: "evil.example:80" } });
  assert.equal(r.status, 403);
  assert.match(r.body, /--allowed-host evil\.example/);
  const ok = await rawRequest(server.port, { path: "/v1/models", headers: { Host: `localhost:${server.port}` } });
  assert.equal(ok.status, 200);
});

test("other origins get 403; the page's own origin is fine", async () => {
  const r = await rawRequest(server.port, { path: "/v1/models", headers: { Origin: "http://evil.example" } });
  assert.equal(r.status, 403);
  assert.match(r.body, /--allowed-origin http:\/\/evil\.example/);
  const own = await rawRequest(server.port, { path: "/v1/models", headers: { Origin: `http://127.0.0.1:${server.port}` } });
  assert.equal(own.status, 200);
});

test("health, ready, status, metrics and the chat page", async () => {
  assert.equal((await rawRequest(server.port, { path: "/health" })).status, 200);
  assert.equal((await rawRequest(server.port, { path: "/ready" })).status, 200);
  const status = JSON.parse((await rawRequest(server.port, { path: "/status" })).body);
  assert.equal(status.engine.state, "ready");
  assert.equal(typeof status.console.dropped_lines, "number");
  const metrics = await rawRequest(server.port, { path: "/metrics" });
  assert.match(metrics.body, /^splash_requests_total \d+$/m);
  const page = await rawRequest(server.port, { path: "/" });
  assert.equal(page.status, 200);
  assert.match(page.headers["content-type"], /text\/html/);
  assert.match(page.body, /<title>Splash<\/title>/);
});

test("tokenize and detokenize round trip", async () => {
  const t = await rawRequest(server.port, { method: "POST", path: "/tokenize", body: '{"content":"Hello world"}' });
  const ids = JSON.parse(t.body).tokens;
  assert.ok(ids.length >= 2);
  const d = await rawRequest(server.port, { method: "POST", path: "/detokenize", body: JSON.stringify({ tokens: ids }) });
  assert.equal(JSON.parse(d.body).content, "Hello world");
});
