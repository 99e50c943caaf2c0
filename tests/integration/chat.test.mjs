// Chat completions through the unmodified OpenAI SDK, and /apply-template against the prompts
// Python Jinja2 rendered from the same template (testdata README-tokenizer-templates.md §2).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";
import { startServer, testdata } from "./harness.mjs";

let server;
let client;

// The stories model's chat template is llama.cpp's Qwen3.5-4B.jinja byte for byte.
const fixture = (name) =>
  JSON.parse(fs.readFileSync(path.join(testdata, "templates/fixtures", `${name}.json`), "utf8"));
const expected = (name) =>
  fs.readFileSync(path.join(testdata, "templates/expected", `Qwen3.5-4B__${name}.txt`), "utf8");

async function post(p, body) {
  const r = await fetch(`${server.url}${p}`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

const ask = [{ role: "user", content: "Tell me a story about a dog." }];

test("chat: reasoning_effort none answers in content; the default thinks", async () => {
  const off = await client.chat.completions.create({
    model: "test/stories", messages: ask, max_tokens: 24, temperature: 0, reasoning_effort: "none",
  });
  const m = off.choices[0].message;
  assert.ok(m.content.length > 0);
  assert.equal(m.reasoning_content, undefined);
  assert.equal(off.choices[0].finish_reason, "length");
  assert.equal(off.usage.completion_tokens, 24);
  assert.equal(off.usage.completion_tokens_details.reasoning_tokens, 0);
  assert.equal(off.usage.total_tokens, off.usage.prompt_tokens + 24);
  assert.equal(typeof off.usage.prompt_tokens_details.cached_tokens, "number");

  // the template opens <think> by default, and the stories model never closes it
  const on = await client.chat.completions.create({
    model: "test/stories", messages: ask, max_tokens: 24, temperature: 0,
  });
  assert.ok(on.choices[0].message.reasoning_content.length > 0);
  assert.equal(on.choices[0].message.content, "");
  assert.equal(on.usage.completion_tokens_details.reasoning_tokens, 24);

  // the prompt a request renders: the generation prompt ends open or closed
  const tOff = await post("/apply-template", { messages: ask, reasoning_effort: "none" });
  assert.match(tOff.body.prompt, /<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/);
  assert.equal(tOff.body.thinks, false);
  assert.equal(tOff.body.count, off.usage.prompt_tokens);
  const tOn = await post("/apply-template", { messages: ask });
  assert.match(tOn.body.prompt, /<\|im_start\|>assistant\n<think>\n$/);
  assert.equal(tOn.body.thinks, true);
  assert.equal(tOn.body.count, on.usage.prompt_tokens);
});

test("chat: streamed deltas join to the non-streamed answer, with usage", async () => {
  for (const effort of ["none", undefined]) {
    const params = { model: "test/stories", messages: ask, max_tokens: 20, temperature: 0 };
    if (effort) params.reasoning_effort = effort;
    const whole = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({
      ...params, stream: true, stream_options: { include_usage: true },
    });
    let content = "";
    let reasoning = "";
    let finish = null;
    let usage = null;
    let role = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      if (!chunk.choices.length) continue;
      const d = chunk.choices[0].delta;
      role = role || d.role;
      content += d.content || "";
      reasoning += d.reasoning_content || "";
      finish = chunk.choices[0].finish_reason || finish;
    }
    assert.equal(role, "assistant");
    assert.equal(content, whole.choices[0].message.content);
    assert.equal(reasoning, whole.choices[0].message.reasoning_content || "");
    assert.equal(finish, "length");
    assert.deepEqual(usage, whole.usage);
  }
});

test("chat: a long enough limit ends at the model's end of turn with finish_reason stop", async () => {
  const r = await client.chat.completions.create({
    model: "test/stories", messages: [{ role: "user", content: "Hello" }], max_tokens: 600,
    temperature: 0, reasoning_effort: "none",
  });
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.ok(r.usage.completion_tokens < 600);
  assert.ok(!r.choices[0].message.content.includes("<|im_end|>"));
});

test("chat: tools are accepted and rendered; a call and its result replay in the history", async () => {
  // the tiny model never calls a tool, so the round trip is checked where it is decided:
  // the prompt a prior call and its result render, against Jinja2's rendering
  for (const name of ["tools_basic", "tool_call_with_content", "tool_call_object_args",
                      "parallel_calls_multi_results", "reasoning_after_last_query", "multi_turn",
                      "system_user", "enable_thinking_false"]) {
    const f = fixture(name);
    const body = { model: "test/stories", messages: f.messages };
    if (f.tools) body.tools = f.tools;
    if (Object.keys(f.kwargs).length) body.chat_template_kwargs = f.kwargs;
    const r = await post("/apply-template", body);
    assert.equal(r.status, 200, `${name}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.prompt, expected(name), name);
    const tok = await post("/tokenize", { content: expected(name) });
    assert.deepEqual(r.body.tokens, tok.body.tokens, name);
  }
  // arguments as a JSON string (OpenAI's shape) render as the object does
  const f = fixture("tool_call_object_args");
  const stringArgs = structuredClone(f.messages);
  for (const m of stringArgs)
    for (const c of m.tool_calls || []) c.function.arguments = JSON.stringify(c.function.arguments);
  const r = await post("/apply-template", { messages: stringArgs, tools: f.tools });
  assert.equal(r.body.prompt, expected("tool_call_object_args"));

  // a request with tools and a prior call generates normally
  const tf = fixture("tool_call_with_content");
  const gen = await client.chat.completions.create({
    model: "test/stories", messages: tf.messages, tools: tf.tools, tool_choice: "auto",
    max_tokens: 8, temperature: 0, reasoning_effort: "none",
  });
  assert.equal(gen.usage.completion_tokens, 8);
  const t = await post("/apply-template", { messages: tf.messages, tools: tf.tools, reasoning_effort: "none" });
  assert.equal(gen.usage.prompt_tokens, t.body.count);
  // tool_choice none renders no tools
  const none = await post("/apply-template", { messages: tf.messages, tools: tf.tools, tool_choice: "none" });
  assert.ok(!none.body.prompt.includes("<tools>"));
});

test("apply-template: bad requests get a 400 naming the field", async () => {
  const cases = [
    [{ messages: "hi" }, /messages must be a non-empty array/],
    [{ messages: [{ role: "wizard", content: "x" }] }, /messages\[0\]\.role/],
    [{ messages: ask, reasoning_effort: "extreme" }, /reasoning_effort must be/],
    [{ messages: ask, tools: [{ type: "function", function: {} }] }, /tools\[0\]\.function\.name/],
    [{ messages: ask, chat_template_kwargs: [] }, /chat_template_kwargs must be an object/],
    [{ messages: ask, chat_template_kwargs: { enable_thinking: "yes" } }, /enable_thinking/],
    [{ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] },
     /text only/],
    [{ messages: ask, api: "grpc" }, /api must be chat, messages or responses/],
  ];
  for (const [body, re] of cases) {
    const r = await post("/apply-template", body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.match(r.body.error.message, re);
  }
  const r = await post("/apply-template", { model: "other/model", messages: ask });
  assert.equal(r.status, 404);
});
