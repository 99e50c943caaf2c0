// What server.md and PLATFORM.md say about option combinations, checked on the command line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { splash, storiesModel, startServer, rawRequest } from "./harness.mjs";

function serve(args) {
  return spawnSync(splash, ["serve", "--model", "test/stories", "--model-dir", storiesModel, ...args],
                   { encoding: "utf8", timeout: 20000 });
}

test("refused at startup: --persistent-cache with --max-cache-disk 0; --activations bf16 (not implemented)", () => {
  const cache = serve(["--persistent-cache", "--max-cache-disk", "0"]);
  assert.equal(cache.status, 2, cache.stdout + cache.stderr);
  assert.match(cache.stderr, /--persistent-cache: needs the SSD cache, which --max-cache-disk 0 turns off/);
  const writes = serve(["--max-cache-disk-writes", "10G", "--max-cache-disk", "0"]);
  assert.equal(writes.status, 2, writes.stdout + writes.stderr);
  assert.match(writes.stderr, /--max-cache-disk-writes: needs the SSD cache, which --max-cache-disk 0 turns off/);
  const act = serve(["--activations", "bf16"]);
  assert.equal(act.status, 2, act.stdout + act.stderr);
  assert.match(act.stderr, /--activations bf16: .*not implemented/);
});

test("refused at startup: options whose machinery this build lacks (drafts, vision, streamed memory), and a store of no expert", () => {
  for (const [args, why] of [
    [["--draft-model", "/nowhere"], /--draft-model: \/nowhere holds no readable config\.json/],
    [["--speculative", "dflash"], /--speculative dflash: needs --draft-model PATH/],
    [["--speculative", "eagle"], /--speculative: eagle \(auto, dflash, mtp, ngram or off\)/],
    [["--expert-memory", "0"], /--expert-memory: 0 holds no expert/],
    [["--ple-memory", "1G"], /--ple-memory: not available in this build/],
    [["--sparse-kv-memory", "1G"], /--sparse-kv-memory: not available in this build/],
  ]) {
    const r = serve(args);
    assert.equal(r.status, 2, args.join(" ") + ": " + r.stdout + r.stderr);
    assert.match(r.stderr, why);
  }
});

test("a --max-memory larger than the budget is said to be ignored", async () => {
  const server = await startServer(["--max-memory", "1000G"]);
  try {
    assert.match(server.output(), /Note · --max-memory 1000\.00 GiB is more than the [\d.]+ GiB \S+ leaves; it is ignored/);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("no silent acceptance: logit_bias is checked and applied, broken tool schemas are refused, a missing model is noted", async () => {
  const server = await startServer();
  try {
    const post = (path, body) => rawRequest(server.port, { method: "POST", path, body: JSON.stringify(body) });
    const base = { model: "test/stories", prompt: "Once upon a time", max_tokens: 1, temperature: 0 };
    for (const [bias, re] of [["x", /logit_bias must be an object/], [{ abc: 1 }, /key "abc" is not a token id/],
                              [{ 5: 500 }, /logit_bias\["5"\] must be a number from -100 to 100/],
                              [{ 99999999: 1 }, /token 99999999 is past the vocabulary/]]) {
      const r = await post("/v1/completions", { ...base, logit_bias: bias });
      assert.equal(r.status, 400, r.body);
      assert.match(JSON.parse(r.body).error.message, re);
    }
    // +100 on one token makes greedy decoding pick it
    const ids = JSON.parse((await post("/tokenize", { content: " dragon" })).body).tokens;
    const forced = ids.at(-1);
    const piece = JSON.parse((await post("/detokenize", { tokens: [forced] })).body).content;
    const r = await post("/v1/completions", { ...base, logit_bias: { [forced]: 100 } });
    assert.equal(r.status, 200, r.body);
    assert.equal(JSON.parse(r.body).choices[0].text, piece);
    // a tool whose parameters are no schema, under tool_choice auto
    const tools = [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { x: { type: 42 } } } } }];
    const t = await post("/v1/chat/completions", { model: "test/stories", max_tokens: 1, tools,
                                                   messages: [{ role: "user", content: "Hi" }] });
    assert.equal(t.status, 400, t.body);
    assert.match(JSON.parse(t.body).error.message, /tools\[0\]\.function\.parameters\.properties\.x\.type: must be/);
    // no model: served by the one model, noted once
    for (let i = 0; i < 2; i++) {
      const m = await post("/v1/completions", { prompt: "Hi", max_tokens: 1 });
      assert.equal(m.status, 200, m.body);
    }
    assert.equal(server.output().split("Note · a request without model is served by test/stories").length, 2);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("splash template --now renders strftime_now on a fixed clock", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-now-"));
  try {
    fs.writeFileSync(path.join(dir, "t.jinja"), '{{ strftime_now("%Y-%m-%d %H:%M") }}');
    fs.writeFileSync(path.join(dir, "r.json"), '{"messages":[]}');
    const run = (now, tz) => spawnSync(splash, ["template", "--template", path.join(dir, "t.jinja"),
                                                "--request", path.join(dir, "r.json"), "--now", now],
                                       { encoding: "utf8", env: { ...process.env, TZ: tz } });
    // wall-clock time renders as given in any zone; an instant renders in the local zone
    assert.equal(run("2026-01-15T12:00:00", "America/New_York").stdout, "2026-01-15 12:00");
    assert.equal(run("2026-01-15T12:00:00Z", "UTC").stdout, "2026-01-15 12:00");
    assert.equal(run("2026-01-15T12:00:00+02:00", "UTC").stdout, "2026-01-15 10:00");
    const bad = run("2026-01-15 noon", "UTC");
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--now 2026-01-15 noon is not YYYY-MM-DDTHH:MM:SS/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("/status reports maximum_context_tokens, memory_plan.budget with context_bounds and chat_template.later_system", async () => {
  const server = await startServer();
  try {
    const s = JSON.parse((await rawRequest(server.port, { path: "/status" })).body);
    assert.equal(s.maximum_context_tokens, 4096);
    assert.equal(s.maximum_context_tokens, s.capabilities.max_context_tokens);
    assert.ok(s.memory_plan.budget.usable_bytes > 0);
    assert.equal(typeof s.memory_plan.budget.bound, "string");
    assert.equal(s.memory_plan.budget.context_bounds.model, 4096);
    assert.ok(s.memory_plan.budget.context_bounds.resident >= 4096);
    assert.equal(s.memory_plan.budget.context_bounds.bound, "model");
    assert.match(s.chat_template.later_system, /^(native|patched|unsupported)$/);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("a broken tool schema is refused on every API, naming the field where the client wrote it", async () => {
  const server = await startServer();
  try {
    const post = (p, body) => rawRequest(server.port, { method: "POST", path: p, body: JSON.stringify(body) });
    const broken = { type: "object", properties: { x: { type: 42 } } };
    const m = await post("/v1/messages", { model: "test/stories", max_tokens: 1,
      tools: [{ name: "f", input_schema: broken }], messages: [{ role: "user", content: "Hi" }] });
    assert.equal(m.status, 400, m.body);
    assert.equal(JSON.parse(m.body).error.type, "invalid_request_error");
    assert.match(JSON.parse(m.body).error.message, /tools\[0\]\.input_schema\.properties\.x\.type: must be/);
    const r = await post("/v1/responses", { model: "test/stories", max_output_tokens: 1, input: "Hi",
      tools: [{ type: "function", name: "f", parameters: broken }] });
    assert.equal(r.status, 400, r.body);
    assert.match(JSON.parse(r.body).error.message, /tools\[0\]\.parameters\.properties\.x\.type: must be/);
    // inside a Codex namespace too
    const ns = await post("/v1/responses", { model: "test/stories", max_output_tokens: 1, input: "Hi",
      tools: [{ type: "namespace", name: "ns", tools: [{ type: "function", name: "g", parameters: broken }] }] });
    assert.equal(ns.status, 400, ns.body);
    assert.match(JSON.parse(ns.body).error.message, /tools\[0\]\.tools\[0\]\.parameters\.properties\.x\.type: must be/);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("a prompt whose bytes alone cannot fit is context_length_exceeded in each API's words", async () => {
  const server = await startServer();
  try {
    const post = (p, body) => rawRequest(server.port, { method: "POST", path: p, body: JSON.stringify(body) });
    const long = "once upon a time ".repeat(256 * 1024); // 4 MiB: more bytes than 4096 tokens hold
    const c = await post("/v1/chat/completions", { model: "test/stories", max_tokens: 1, stream: true,
      messages: [{ role: "user", content: long }] });
    assert.equal(c.status, 400, c.body.slice(0, 300));
    assert.equal(JSON.parse(c.body).error.code, "context_length_exceeded");
    assert.equal(JSON.parse(c.body).error.type, "invalid_request_error");
    const r = await post("/v1/responses", { model: "test/stories", max_output_tokens: 1, input: long });
    assert.equal(r.status, 400, r.body.slice(0, 300));
    assert.equal(JSON.parse(r.body).error.code, "context_length_exceeded");
    const m = await post("/v1/messages", { model: "test/stories", max_tokens: 1, stream: true,
      messages: [{ role: "user", content: long }] });
    assert.equal(m.status, 400, m.body.slice(0, 300));
    const e = JSON.parse(m.body);
    assert.equal(e.type, "error");
    assert.equal(e.error.type, "invalid_request_error");
    assert.match(e.error.message, /^prompt is too long: more than \d+ tokens > 4095 maximum$/);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("the chat format is the family's, not guessed from the vocabulary holding <|assistant|>", async () => {
  // the stories model with its unused <|image_pad|> vocabulary entry renamed <|assistant|>
  // (13 bytes each: the GGUF's offsets stay): a Qwen model still speaks Qwen's format
  const buf = Buffer.from(fs.readFileSync(storiesModel));
  const entry = Buffer.concat([Buffer.from([13, 0, 0, 0, 0, 0, 0, 0]), Buffer.from("<|image_pad|>")]);
  const at = buf.indexOf(entry);
  assert.ok(at > 0, "the vocabulary entry");
  buf.write("<|assistant|>", at + 8, "latin1");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-format-"));
  const model = path.join(dir, "stories-assistant-Q8_0.gguf");
  fs.writeFileSync(model, buf);
  let server;
  try {
    server = await startServer([], { model });
    const status = JSON.parse((await rawRequest(server.port, { path: "/status" })).body);
    assert.equal(status.chat_template.format, "qwen", JSON.stringify(status.chat_template));
    const r = await rawRequest(server.port, { method: "POST", path: "/v1/chat/completions", body: JSON.stringify({
      model: "test/stories", max_tokens: 2, messages: [{ role: "user", content: "Hi" }] }) });
    assert.equal(r.status, 200, r.body);
  } finally {
    if (server) assert.equal(await server.stop(), 0);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
