// Anthropic Messages through the unmodified @anthropic-ai/sdk: blocks, stop reasons, usage,
// streaming events, history conversion (against Jinja2's renderings, testdata
// README-tokenizer-templates.md §2) and errors in Anthropic's shape.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { execFileSync } from "node:child_process";
import { startServer, rawRequest, testdata } from "./harness.mjs";

let server;
let client;

const fixture = (name) =>
  JSON.parse(fs.readFileSync(path.join(testdata, "templates/fixtures", `${name}.json`), "utf8"));
const expected = (name) =>
  fs.readFileSync(path.join(testdata, "templates/expected", `Qwen3.5-4B__${name}.txt`), "utf8");

async function post(p, body) {
  const r = await fetch(`${server.url}${p}`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

before(async () => {
  server = await startServer();
  client = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

const story = [{ role: "user", content: "Tell me a story about a cat." }];
const base = { model: "test/stories", max_tokens: 24, temperature: 0, messages: story };

test("messages: thinking off by default, a text block, max_tokens and usage", async () => {
  const m = await client.messages.create(base);
  assert.match(m.id, /^msg_[0-9a-f]{24}$/);
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.equal(m.model, "test/stories");
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, "text");
  assert.ok(m.content[0].text.length > 0);
  assert.equal(m.stop_reason, "max_tokens");
  assert.equal(m.stop_sequence, null);
  assert.equal(m.usage.output_tokens, 24);
  assert.equal(m.usage.cache_creation_input_tokens, 0);
  const count = await client.messages.countTokens({ model: "test/stories", messages: story });
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, count.input_tokens);

  // the same answer as Chat Completions with reasoning off: the same prompt, greedy
  const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
  const chat = await openai.chat.completions.create({
    model: "test/stories", messages: story, max_tokens: 24, temperature: 0, reasoning_effort: "none",
  });
  assert.equal(m.content[0].text, chat.choices[0].message.content);
  assert.equal(count.input_tokens, chat.usage.prompt_tokens);

  // a long enough limit ends at the model's end of turn
  const end = await client.messages.create({ ...base, max_tokens: 600,
    messages: [{ role: "user", content: "Hello" }] });
  assert.equal(end.stop_reason, "end_turn");
  assert.ok(end.usage.output_tokens < 600);
});

test("messages: the stream's events build the same message", async () => {
  const whole = await client.messages.create(base);
  const stream = client.messages.stream(base);
  const types = [];
  let text = "";
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
  }
  const final = await stream.finalMessage();
  assert.equal(types[0], "message_start");
  assert.equal(types[1], "content_block_start");
  assert.equal(types.at(-3), "content_block_stop");
  assert.equal(types.at(-2), "message_delta");
  assert.equal(types.at(-1), "message_stop");
  assert.equal(text, whole.content[0].text);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, "max_tokens");
  assert.equal(final.usage.output_tokens, 24);
  assert.equal(final.usage.input_tokens, whole.usage.input_tokens + whole.usage.cache_read_input_tokens
                                         - final.usage.cache_read_input_tokens);

  // the raw stream has a ping after message_start and named events
  const raw = await rawRequest(server.port, { method: "POST", path: "/v1/messages",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...base, stream: true }) });
  assert.equal(raw.status, 200);
  assert.match(raw.body, /^event: message_start\ndata: /m);
  assert.match(raw.body, /event: ping\ndata: \{"type":"ping"\}/);
});

test("messages: thinking enabled gives a signed thinking block, streamed or not", async () => {
  const req = { ...base, max_tokens: 16, thinking: { type: "enabled", budget_tokens: 1024 } };
  const m = await client.messages.create(req);
  assert.equal(m.content[0].type, "thinking");
  assert.ok(m.content[0].thinking.length > 0);
  assert.match(m.content[0].signature, /^[0-9a-f]{64}$/);
  const stream = client.messages.stream(req);
  const deltas = new Set();
  for await (const ev of stream) if (ev.type === "content_block_delta") deltas.add(ev.delta.type);
  const final = await stream.finalMessage();
  assert.ok(deltas.has("thinking_delta") && deltas.has("signature_delta"));
  assert.deepEqual(final.content, m.content);
  // adaptive thinks too; disabled does not
  const adaptive = await client.messages.create({ ...base, max_tokens: 4, thinking: { type: "adaptive" } });
  assert.equal(adaptive.content[0].type, "thinking");
  const disabled = await client.messages.create({ ...base, max_tokens: 4, thinking: { type: "disabled" } });
  assert.equal(disabled.content[0].type, "text");
  // chat_template_kwargs outrank the thinking setting
  const kw = await client.messages.create({ ...base, max_tokens: 4,
    chat_template_kwargs: { enable_thinking: true } });
  assert.equal(kw.content[0].type, "thinking");
});

test("messages: a stop sequence ends the text before it", async () => {
  const whole = await client.messages.create({ ...base, max_tokens: 40 });
  const text = whole.content[0].text;
  const words = text.split(/\s+/).filter((w) => /^[a-z]{4,}$/.test(w));
  const stop = words[2];
  assert.ok(stop, `no word to stop at in ${JSON.stringify(text)}`);
  const cut = text.slice(0, text.indexOf(stop));
  const m = await client.messages.create({ ...base, max_tokens: 40, stop_sequences: ["zzz", stop] });
  assert.equal(m.stop_reason, "stop_sequence");
  assert.equal(m.stop_sequence, stop);
  assert.equal(m.content[0].text, cut);
  const stream = client.messages.stream({ ...base, max_tokens: 40, stop_sequences: [stop] });
  const final = await stream.finalMessage();
  assert.equal(final.stop_reason, "stop_sequence");
  assert.equal(final.stop_sequence, stop);
  assert.equal(final.content[0].text, cut);
});

test("messages: history converts to the template's conversation (Jinja2 renderings)", async () => {
  const render = async (body) => {
    const r = await post("/apply-template", { api: "messages", model: "test/stories", max_tokens: 8, ...body });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const count = await client.messages.countTokens({ model: "test/stories", ...body });
    assert.equal(count.input_tokens, r.body.count);
    return r.body.prompt;
  };
  const on = { thinking: { type: "enabled", budget_tokens: 2048 } };

  // system as a string, alternating turns
  const mt = fixture("multi_turn").messages;
  assert.equal(await render({ ...on, system: mt[0].content, messages: mt.slice(1) }),
               expected("multi_turn"));
  // system as text blocks
  const su = fixture("system_user").messages;
  assert.equal(await render({ ...on, system: [{ type: "text", text: su[0].content }],
                              messages: [{ role: "user", content: [{ type: "text", text: su[1].content }] }] }),
               expected("system_user"));
  // thinking omitted: off, as enable_thinking false renders it
  const off = fixture("enable_thinking_false").messages;
  assert.equal(await render({ messages: off }), expected("enable_thinking_false"));

  // an assistant turn with thinking and a tool_use, then its tool_result
  const rf = fixture("reasoning_after_last_query");
  const toAnthropicTools = (tools) => tools.map((t) => ({
    name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));
  const call = rf.messages[1];
  assert.equal(await render({ ...on, tools: toAnthropicTools(rf.tools), messages: [
    { role: "user", content: rf.messages[0].content },
    { role: "assistant", content: [
      { type: "thinking", thinking: call.reasoning_content, signature: "x" },
      { type: "tool_use", id: "toolu_1", name: call.tool_calls[0].function.name,
        input: call.tool_calls[0].function.arguments }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: rf.messages[2].content }] },
  ] }), expected("reasoning_after_last_query"));

  // text written after a call replays before it (models.md), tool_result content as blocks
  const tf = fixture("tool_call_with_content");
  const tc = tf.messages[1];
  assert.equal(await render({ ...on, tools: toAnthropicTools(tf.tools), messages: [
    { role: "user", content: tf.messages[0].content },
    { role: "assistant", content: [
      { type: "tool_use", id: "toolu_2", name: tc.tool_calls[0].function.name,
        input: tc.tool_calls[0].function.arguments },
      { type: "text", text: tc.content }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_2",
                                content: [{ type: "text", text: tf.messages[2].content }] }] },
  ] }), expected("tool_call_with_content"));

  // tool_choice none leaves the tools out
  const none = await post("/apply-template", { api: "messages", max_tokens: 8, tools: toAnthropicTools(tf.tools),
    tool_choice: { type: "none" }, messages: story });
  assert.ok(!none.body.prompt.includes("<tools>"));
});

test("messages: tools and a tool result in history generate normally", async () => {
  const tf = fixture("tool_call_with_content");
  const tools = tf.tools.map((t) => ({ name: t.function.name, description: t.function.description,
                                       input_schema: t.function.parameters }));
  const m = await client.messages.create({ ...base, max_tokens: 8, tools, tool_choice: { type: "auto" },
    messages: [
      { role: "user", content: "Search the web." },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_9", name: "web_search", input: { query: "x" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_9", content: "nothing found" }] },
    ] });
  assert.equal(m.usage.output_tokens, 8);
  assert.ok(["max_tokens", "tool_use"].includes(m.stop_reason));
});

test("messages: bad requests get Anthropic-shaped errors naming the field", async () => {
  const ok = { max_tokens: 8, messages: story };
  const cases = [
    [{ messages: story }, /max_tokens/],
    [{ ...ok, max_tokens: 0 }, /max_tokens/],
    [{ ...ok, messages: [] }, /messages must be a non-empty array/],
    [{ ...ok, messages: [{ role: "developer", content: "x" }] }, /messages\[0\]\.role developer is not supported/],
    [{ ...ok, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }] },
     /messages\[0\]\.content\[0\]: image input is not supported: this model serves text only/],
    [{ ...ok, messages: [{ role: "user", content: [{ type: "tool_result", content: "x" }] }] },
     /messages\[0\]\.content\[0\]\.tool_use_id/],
    [{ ...ok, messages: [{ role: "assistant", content: [{ type: "tool_use", id: "t", name: "f", input: [] }] }] },
     /messages\[0\]\.content\[0\]\.input must be an object/],
    [{ ...ok, messages: [{ role: "user", content: [{ type: "video" }] }] }, /messages\[0\]\.content\[0\]\.type video/],
    [{ ...ok, messages: [{ role: "user", content: 5 }] }, /messages\[0\]\.content/],
    [{ ...ok, messages: [{ role: "user", content: [] }] }, /messages\[0\]\.content must not be empty/],
    [{ ...ok, system: 5 }, /system must be/],
    [{ ...ok, thinking: { type: "enabled", budget_tokens: 10 } }, /thinking\.budget_tokens/],
    [{ ...ok, thinking: { type: "sometimes" } }, /thinking\.type/],
    [{ ...ok, tools: [{ name: "f" }] }, /tools\[0\]\.input_schema/],
    [{ ...ok, tools: [{ type: "web_search_20250305", name: "web_search" }] }, /tools\[0\]\.type/],
    [{ ...ok, tool_choice: { type: "maybe" } }, /tool_choice\.type/],
    [{ ...ok, tool_choice: { type: "tool" } }, /tool_choice\.name/],
    [{ ...ok, stop_sequences: "x" }, /stop_sequences must be an array/],
    [{ ...ok, stop_sequences: [1] }, /stop_sequences\[0\]/],
    [{ ...ok, temperature: 1.5 }, /temperature/],
    [{ ...ok, top_k: -1 }, /top_k/],
    [{ ...ok, stream: "yes" }, /stream must be a boolean/],
    [{ ...ok, chat_template_kwargs: { add_generation_prompt: false } }, /add_generation_prompt/],
  ];
  for (const [body, re] of cases) {
    const r = await post("/v1/messages", body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.type, "error");
    assert.equal(r.body.error.type, "invalid_request_error");
    assert.match(r.body.error.message, re, JSON.stringify(body));
  }
  for (const body of ["{nope", "[1]"]) {
    const r = await post("/v1/messages", body);
    assert.equal(r.status, 400);
    assert.equal(r.body.error.type, "invalid_request_error");
  }
  const ct = await post("/v1/messages/count_tokens", { messages: [{ role: "user", content: [{ type: "document" }] }] });
  assert.equal(ct.status, 400);
  assert.match(ct.body.error.message, /text only/);

  // through the SDK: its error classes see the status and Anthropic's error type
  await assert.rejects(client.messages.create({ ...base, model: "claude-other" }), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.error.error.type, "not_found_error");
    return true;
  });
  await assert.rejects(client.messages.create({ ...base, messages: [{ role: "user", content: [
    { type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }] }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.error.error.type, "invalid_request_error");
    return true;
  });
});

test("messages: an engine failure mid-stream ends the stream with an error event", async () => {
  const pid = Number(execFileSync("pgrep", ["-P", String(server.proc.pid), "-f", "splash engine"],
                                  { encoding: "utf8" }).trim().split("\n")[0]);
  const stream = client.messages.stream({ ...base, max_tokens: 3000, temperature: 1, thinking: { type: "adaptive" } });
  const it = stream[Symbol.asyncIterator]();
  await it.next();
  process.kill(pid, "SIGKILL");
  await assert.rejects(async () => { for (;;) { const r = await it.next(); if (r.done) break; } },
                       (e) => e instanceof Anthropic.APIError && /engine/.test(e.message));
  for (let i = 0; i < 100; i++) {
    if ((await rawRequest(server.port, { path: "/ready" })).status === 200) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  const m = await client.messages.create({ ...base, max_tokens: 2 });
  assert.equal(m.usage.output_tokens, 2);
});
