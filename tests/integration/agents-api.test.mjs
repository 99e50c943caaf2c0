// The request shapes real agents send, through the unmodified SDKs: Claude Code's system
// messages inside Messages' messages (its mid-conversation-system beta), Codex's namespaced and
// hosted tools in Responses, and a prompt over the context refused with 400 before a stream
// starts, on every endpoint, in that API's own error shape.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { startServer } from "./harness.mjs";

let server;
let anthropic;
let openai;

async function post(p, body, headers = {}) {
  const r = await fetch(`${server.url}${p}`, {
    method: "POST", headers: { "Content-Type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* a stream */ }
  return { status: r.status, type: r.headers.get("content-type"), body: json, text };
}

before(async () => {
  server = await startServer(["--max-context", "1024"]);
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

// Claude Code 2.1's shape: system blocks with cache_control, then a system message between turns.
const midSystem = {
  model: "test/stories", max_tokens: 8, temperature: 0,
  system: [{ type: "text", text: "You are a storyteller.", cache_control: { type: "ephemeral" } }],
  messages: [
    { role: "user", content: [{ type: "text", text: "Tell me a story." }] },
    { role: "assistant", content: [{ type: "text", text: "Once upon a time." }] },
    { role: "system", content: [{ type: "text", text: "Keep it short." }] },
    { role: "user", content: "Go on." },
  ],
};

test("messages: a system message inside messages renders in place, as Chat renders it", async () => {
  const viaMessages = await post("/apply-template", { api: "messages", ...midSystem });
  assert.equal(viaMessages.status, 200, viaMessages.text);
  const viaChat = await post("/apply-template", { reasoning_effort: "none", messages: [
    { role: "system", content: "You are a storyteller." },
    { role: "user", content: "Tell me a story." },
    { role: "assistant", content: "Once upon a time." },
    { role: "system", content: "Keep it short." },
    { role: "user", content: "Go on." },
  ] });
  assert.equal(viaChat.status, 200, viaChat.text);
  assert.equal(viaMessages.body.prompt, viaChat.body.prompt);
  const at = viaMessages.body.prompt.indexOf("Keep it short.");
  assert.ok(at > viaMessages.body.prompt.indexOf("Once upon a time.") &&
            at < viaMessages.body.prompt.indexOf("Go on."), viaMessages.body.prompt);

  // through the SDK with Claude Code's beta header, streamed and not
  const m = await anthropic.messages.create(midSystem,
    { headers: { "anthropic-beta": "mid-conversation-system-2026-04-07" } });
  assert.equal(m.type, "message");
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, viaMessages.body.count);
  const s = anthropic.messages.stream(midSystem);
  const final = await s.finalMessage();
  assert.equal(final.content[0].text, m.content[0].text);

  // a string content works too, and the leading system joins the top-level one
  const lead = await post("/apply-template", { api: "messages", ...midSystem,
    messages: [{ role: "system", content: "Keep it short." }, ...midSystem.messages.slice(0, 1)] });
  assert.equal(lead.status, 200, lead.text);
  assert.match(lead.body.prompt, /^<\|im_start\|>system\nYou are a storyteller\.\n\nKeep it short\.<\|im_end\|>/);
});

test("messages: a role still refused says it is not supported (Claude Code's retry cue)", async () => {
  for (const role of ["developer", "tool"]) {
    const r = await post("/v1/messages", { ...midSystem, messages: [{ role, content: "x" }] });
    assert.equal(r.status, 400);
    assert.equal(r.body.type, "error");
    assert.equal(r.body.error.type, "invalid_request_error");
    assert.match(r.body.error.message, new RegExp(`^messages\\[0\\]\\.role ${role} is not supported`));
  }
  const bad = await post("/v1/messages", { ...midSystem, messages: [{ role: "system", content: 5 }] });
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /messages\[0\]\.content must be a string or a non-empty array/);
});

// Codex 0.171's tools: functions, a namespace of functions, and hosted web_search.
const codexTools = [
  { type: "function", name: "exec_command", description: "Runs a command.", strict: false,
    parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] } },
  { type: "namespace", name: "multi_agent_v1", description: "Tools for spawning and managing sub-agents.",
    tools: [
      { type: "function", name: "spawn_agent", description: "Starts a sub-agent.", strict: false,
        parameters: { type: "object", properties: { task: { type: "string" } }, required: ["task"] } },
      { type: "function", name: "wait_agent", description: "Waits for a sub-agent.", strict: false,
        parameters: { type: "object", properties: {} } },
    ] },
  { type: "web_search", external_web_access: false },
];

test("responses: Codex's namespaced tools are flattened and its hosted tools left out", async () => {
  const t = await post("/apply-template", { api: "responses", model: "test/stories", tools: codexTools,
    input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "Hi" }] }] });
  assert.equal(t.status, 200, t.text);
  for (const name of ["exec_command", "spawn_agent", "wait_agent"])
    assert.ok(t.body.prompt.includes(`"name": "${name}"`), name);
  assert.ok(t.body.prompt.includes("multi_agent_v1: Tools for spawning and managing sub-agents."));
  assert.ok(!t.body.prompt.includes("web_search"));
  for (let i = 0; i < 50 && !/Note · Responses tool web_search left out/.test(server.output()); i++)
    await new Promise((r) => setTimeout(r, 50));

  // a forced call to a namespaced tool names it back as the client offered it
  const only = codexTools.filter((x) => x.type !== "function");
  const r = await openai.responses.create({ model: "test/stories", input: "Start a helper.", tools: only,
    tool_choice: "required", parallel_tool_calls: false, max_output_tokens: 200,
    reasoning: { effort: "none" }, temperature: 0 });
  const call = r.output.find((o) => o.type === "function_call");
  assert.ok(call, JSON.stringify(r.output));
  assert.ok(["spawn_agent", "wait_agent"].includes(call.name), call.name);
  assert.equal(call.namespace, "multi_agent_v1");

  // streamed: the added and done items and the arguments' done event carry the same names
  const stream = await openai.responses.create({ model: "test/stories", input: "Start a helper.",
    tools: only, tool_choice: "required", parallel_tool_calls: false, max_output_tokens: 200,
    reasoning: { effort: "none" }, temperature: 0, stream: true });
  const items = [];
  let argsDone = null;
  for await (const ev of stream) {
    if (ev.type.startsWith("response.output_item.") && ev.item.type === "function_call") items.push(ev.item);
    if (ev.type === "response.function_call_arguments.done") argsDone = ev;
  }
  assert.equal(items.length, 2);
  for (const item of items) {
    assert.equal(item.name, call.name);
    assert.equal(item.namespace, "multi_agent_v1");
  }
  assert.equal(argsDone.name, call.name);

  // the call and its output replay to the model under the name it knows
  const replay = await post("/apply-template", { api: "responses", model: "test/stories", tools: codexTools,
    input: [
      { type: "message", role: "user", content: "Start a helper." },
      { type: "function_call", call_id: "call_1", name: "spawn_agent", namespace: "multi_agent_v1",
        arguments: "{\"task\":\"x\"}" },
      { type: "function_call_output", call_id: "call_1", output: "started" },
    ] });
  assert.equal(replay.status, 200, replay.text);
  assert.match(replay.body.prompt, /<function=spawn_agent>/);
  // said once, though every request offered it
  assert.equal((server.output().match(/Note · Responses tool web_search left out/g) || []).length, 1);
});

test("responses: a name two namespaces share is qualified by its namespace", async () => {
  const fn = (name) => ({ type: "function", name, parameters: { type: "object", properties: {} } });
  const tools = [{ type: "namespace", name: "a", description: "", tools: [fn("search")] },
                 { type: "namespace", name: "b", description: "", tools: [fn("search")] }];
  const t = await post("/apply-template", { api: "responses", tools, input: "x" });
  assert.equal(t.status, 200, t.text);
  assert.ok(t.body.prompt.includes('"name": "a.search"') && t.body.prompt.includes('"name": "b.search"'));
  const r = await openai.responses.create({ model: "test/stories", input: "Search.", tools,
    tool_choice: { type: "function", name: "b.search" }, max_output_tokens: 100,
    reasoning: { effort: "none" }, temperature: 0 });
  const call = r.output.find((o) => o.type === "function_call");
  assert.deepEqual([call.name, call.namespace], ["search", "b"]);
  // what is still refused says what is supported
  for (const [bad, re] of [
    [[{ type: "namespace", name: "n", tools: [{ type: "custom", name: "c" }] }], /tools\[0\]\.tools\[0\]\.type custom is not supported/],
    [[{ type: "namespace", tools: [] }], /tools\[0\]\.name must be a non-empty string/],
    [[{ type: "telepathy" }], /tools\[0\]\.type telepathy is not supported/],
  ]) {
    const e = await post("/v1/responses", { model: "test/stories", input: "x", tools: bad });
    assert.equal(e.status, 400);
    assert.match(e.body.error.message, re);
  }
});

test("a prompt over the context gets 400 context_length_exceeded before any stream, on every endpoint", async () => {
  const long = "The cat sat on the mat and looked at the dog. ".repeat(200);
  const openaiShape = (r) => {
    assert.equal(r.status, 400, r.text);
    assert.match(r.type, /application\/json/);
    assert.equal(r.body.error.code, "context_length_exceeded");
    assert.equal(r.body.error.type, "invalid_request_error");
    assert.match(r.body.error.message, /maximum context length is 1024 tokens, and the prompt has \d+/);
  };
  for (const stream of [true, false]) {
    openaiShape(await post("/v1/chat/completions", { model: "test/stories", stream,
      messages: [{ role: "user", content: long }] }));
    openaiShape(await post("/v1/completions", { model: "test/stories", stream, prompt: long }));
    openaiShape(await post("/v1/responses", { model: "test/stories", stream, input: long }));
    const m = await post("/v1/messages", { model: "test/stories", stream, max_tokens: 8,
      messages: [{ role: "user", content: long }] });
    assert.equal(m.status, 400, m.text);
    assert.match(m.type, /application\/json/);
    assert.equal(m.body.type, "error");
    assert.equal(m.body.error.type, "invalid_request_error");
    assert.match(m.body.error.message, /^prompt is too long: \d+ tokens > 1023 maximum$/);
  }
  // the SDKs see their own error classes
  await assert.rejects(anthropic.messages.create({ model: "test/stories", max_tokens: 8, stream: true,
    messages: [{ role: "user", content: long }] }), (e) => e instanceof Anthropic.BadRequestError);
  await assert.rejects(openai.chat.completions.create({ model: "test/stories", stream: true,
    messages: [{ role: "user", content: long }] }),
  (e) => e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded");
  // one that fits still streams
  const ok = await post("/v1/chat/completions", { model: "test/stories", stream: true, max_tokens: 4,
    messages: [{ role: "user", content: "Hi" }] });
  assert.equal(ok.status, 200);
  assert.match(ok.text, /data: \[DONE\]/);
});
