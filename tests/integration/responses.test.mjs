// OpenAI Responses through the unmodified openai SDK: output items, usage, the streaming event
// sequence, input items converted to the template's conversation (against Jinja2's renderings,
// testdata README-tokenizer-templates.md §2), and refusals of what is not supported.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";
import { execFileSync } from "node:child_process";
import { startServer, testdata } from "./harness.mjs";

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
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

const base = { model: "test/stories", input: "Tell me a story about a bird.", temperature: 0 };

test("responses: effort none answers with a message item; usage", async () => {
  const r = await client.responses.create({ ...base, max_output_tokens: 20, reasoning: { effort: "none" } });
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, "response");
  assert.equal(r.status, "incomplete");
  assert.equal(r.incomplete_details.reason, "max_output_tokens");
  assert.equal(r.output.length, 1);
  const msg = r.output[0];
  assert.equal(msg.type, "message");
  assert.equal(msg.role, "assistant");
  assert.equal(msg.content[0].type, "output_text");
  assert.ok(msg.content[0].text.length > 0);
  assert.equal(r.output_text, msg.content[0].text);
  assert.equal(r.usage.output_tokens, 20);
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, "number");
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + 20);
  assert.equal(r.reasoning.effort, "none");

  // the same answer as Chat Completions at the same effort
  const chat = await client.chat.completions.create({
    model: "test/stories", messages: [{ role: "user", content: base.input }], max_tokens: 20,
    temperature: 0, reasoning_effort: "none",
  });
  assert.equal(msg.content[0].text, chat.choices[0].message.content);
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);

  const done = await client.responses.create({ ...base, input: "Hello", max_output_tokens: 600,
                                               reasoning: { effort: "none" } });
  assert.equal(done.status, "completed");
  assert.equal(done.incomplete_details, null);
  assert.ok(done.usage.output_tokens < 600);
});

test("responses: the default thinks: a reasoning item, counted as reasoning tokens", async () => {
  const r = await client.responses.create({ ...base, max_output_tokens: 12 });
  assert.equal(r.output[0].type, "reasoning");
  assert.equal(r.output[0].content[0].type, "reasoning_text");
  assert.ok(r.output[0].content[0].text.length > 0);
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 12);
  // a thinking budget ends the thinking, and the model answers with what is left
  const b = await client.responses.create({ ...base, max_output_tokens: 30, thinking_token_budget: 4 });
  assert.equal(b.output[0].type, "reasoning");
  assert.equal(b.output[1].type, "message");
  assert.ok(b.output[1].content[0].text.length > 0);
  // the budget plus the end's tokens before </think> ("\n", then </think> itself)
  assert.ok(b.usage.output_tokens_details.reasoning_tokens >= 5 &&
            b.usage.output_tokens_details.reasoning_tokens <= 6,
            `reasoning_tokens ${b.usage.output_tokens_details.reasoning_tokens}`);
});

test("responses: the stream's event sequence builds the same response", async () => {
  for (const effort of ["none", "low"]) {
    const req = { ...base, input: "Hello", max_output_tokens: 600, reasoning: { effort } };
    const whole = await client.responses.create(req);
    const stream = client.responses.stream(req);
    const events = [];
    for await (const ev of stream) events.push(ev);
    const final = await stream.finalResponse();
    const types = events.map((e) => e.type);
    assert.deepEqual(types.slice(0, 3), ["response.created", "response.in_progress", "response.output_item.added"]);
    assert.equal(types.at(-1), whole.status === "completed" ? "response.completed" : "response.incomplete");
    events.forEach((e, i) => assert.equal(e.sequence_number, i));
    const want = effort === "none"
      ? ["response.content_part.added", "response.output_text.delta", "response.output_text.done",
         "response.content_part.done", "response.output_item.done"]
      : ["response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.done",
         "response.content_part.done", "response.output_item.done"];
    for (const t of want) assert.ok(types.includes(t), `${effort}: ${t} missing`);
    const text = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
    assert.equal(text, whole.output_text);
    assert.equal(final.status, whole.status);
    // (finalResponse() adds no output_text when nothing is parsed: join the message parts)
    const finalText = final.output.filter((o) => o.type === "message")
      .flatMap((o) => o.content).map((c) => c.text).join("");
    assert.equal(finalText, whole.output_text);
    assert.deepEqual(final.usage, whole.usage);
    assert.deepEqual(final.output.map((o) => o.type), whole.output.map((o) => o.type));
    const done = events.filter((e) => e.type === "response.output_item.done").map((e) => e.item);
    assert.deepEqual(done.map((o) => o.type), whole.output.map((o) => o.type));
  }
  // create({stream: true}) yields the same events
  const s = await client.responses.create({ ...base, max_output_tokens: 5, stream: true });
  const seen = [];
  for await (const ev of s) seen.push(ev.type);
  assert.equal(seen[0], "response.created");
  assert.equal(seen.at(-1), "response.incomplete");
});

test("responses: input items convert to the template's conversation (Jinja2 renderings)", async () => {
  const render = async (body) => {
    const r = await post("/apply-template", { api: "responses", model: "test/stories", ...body });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.prompt;
  };
  const toTools = (tools) => tools.map((t) => ({ type: "function", name: t.function.name,
    description: t.function.description, parameters: t.function.parameters }));

  // instructions lead as the system message; output_text replays an assistant turn
  const mt = fixture("multi_turn").messages;
  assert.equal(await render({ instructions: mt[0].content, input: mt.slice(1).map((m) => ({
    type: "message", role: m.role,
    content: [{ type: m.role === "assistant" ? "output_text" : "input_text", text: m.content }] })) }),
    expected("multi_turn"));
  // a leading developer item merges with nothing else and leads too
  const su = fixture("system_user").messages;
  assert.equal(await render({ input: [{ role: "developer", content: su[0].content },
                                      { role: "user", content: su[1].content }] }), expected("system_user"));
  // effort none renders as enable_thinking false
  const off = fixture("enable_thinking_false").messages;
  assert.equal(await render({ input: off[0].content, reasoning: { effort: "none" } }),
               expected("enable_thinking_false"));

  // a reasoning item, a function_call and its output
  const rf = fixture("reasoning_after_last_query");
  const call = rf.messages[1].tool_calls[0].function;
  assert.equal(await render({ tools: toTools(rf.tools), input: [
    { role: "user", content: rf.messages[0].content },
    { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: rf.messages[1].reasoning_content }] },
    { type: "function_call", call_id: "call_1", name: call.name, arguments: JSON.stringify(call.arguments) },
    { type: "function_call_output", call_id: "call_1", output: rf.messages[2].content },
  ] }), expected("reasoning_after_last_query"));

  // a message written after its call replays before it (models.md)
  const tf = fixture("tool_call_with_content");
  const tc = tf.messages[1];
  assert.equal(await render({ tools: toTools(tf.tools), input: [
    { role: "user", content: tf.messages[0].content },
    { type: "function_call", call_id: "call_2", name: tc.tool_calls[0].function.name,
      arguments: JSON.stringify(tc.tool_calls[0].function.arguments) },
    { type: "message", role: "assistant", content: [{ type: "output_text", text: tc.content }] },
    { type: "function_call_output", call_id: "call_2", output: tf.messages[2].content },
  ] }), expected("tool_call_with_content"));

  // parallel calls, then their outputs, then an answer and a new question
  const pf = fixture("parallel_calls_multi_results");
  const [c1, c2] = pf.messages[1].tool_calls;
  assert.equal(await render({ tools: toTools(pf.tools), input: [
    { role: "user", content: pf.messages[0].content },
    { type: "function_call", call_id: c1.id, name: c1.function.name, arguments: JSON.stringify(c1.function.arguments) },
    { type: "function_call", call_id: c2.id, name: c2.function.name, arguments: JSON.stringify(c2.function.arguments) },
    { type: "function_call_output", call_id: c1.id, output: pf.messages[2].content },
    { type: "function_call_output", call_id: c2.id, output: pf.messages[3].content },
    { role: "assistant", content: pf.messages[4].content },
    { role: "user", content: pf.messages[5].content },
  ] }), expected("parallel_calls_multi_results"));

  // tools generate normally, and tool_choice none leaves them out
  const g = await client.responses.create({ ...base, tools: toTools(tf.tools), tool_choice: "auto",
                                            max_output_tokens: 6, reasoning: { effort: "none" } });
  assert.equal(g.usage.output_tokens, 6);
  assert.equal(g.tools[0].name, "web_search");
  const none = await render({ input: "x", tools: toTools(tf.tools), tool_choice: "none" });
  assert.ok(!none.includes("<tools>"));
});

test("responses: unsupported and bad fields get a 400 naming them", async () => {
  const ok = { input: "hi", max_output_tokens: 4 };
  const cases = [
    [{ ...ok, previous_response_id: "resp_123" }, /previous_response_id is not supported/],
    [{ ...ok, conversation: "conv_1" }, /conversation is not supported/],
    [{ ...ok, background: true }, /background/],
    [{ ...ok, text: { format: { type: "xml" } } }, /text\.format\.type xml/],
    [{ ...ok, input: 5 }, /input must be/],
    [{ ...ok, input: [] }, /input must be/],
    [{ ...ok, input: [{ type: "message", role: "user", content: [{ type: "input_image", image_url: "x" }] }] },
     /input\[0\]\.content\[0\]: input_image is not supported: this model serves text only/],
    [{ ...ok, input: [{ type: "function_call", call_id: "c", name: "f", arguments: "{oops" }] },
     /input\[0\]\.arguments must be a JSON object/],
    [{ ...ok, input: [{ type: "function_call_output", output: "x" }] }, /input\[0\]\.call_id/],
    [{ ...ok, input: [{ type: "item_reference", id: "msg_1" }] }, /input\[0\]: item_reference/],
    [{ ...ok, input: [{ type: "web_search_call" }] }, /input\[0\]\.type web_search_call/],
    [{ ...ok, input: [{ role: "wizard", content: "x" }] }, /input\[0\]\.role/],
    [{ ...ok, tools: [{ type: "telepathy" }] }, /tools\[0\]\.type telepathy is not supported/],
    [{ ...ok, tools: [{ type: "web_search" }, { type: "function", parameters: 5, name: "f" }] },
     /tools\[1\]\.parameters must be an object/],
    [{ ...ok, tools: [{ type: "function" }] }, /tools\[0\]\.name/],
    [{ ...ok, tool_choice: "sometimes" }, /tool_choice/],
    [{ ...ok, reasoning: { effort: "extreme" } }, /reasoning\.effort/],
    [{ ...ok, reasoning: "high" }, /reasoning must be an object/],
    [{ ...ok, max_output_tokens: 0 }, /max_output_tokens/],
    [{ ...ok, temperature: 3 }, /temperature/],
    [{ ...ok, thinking_token_budget: -5 }, /thinking_token_budget/],
    [{ ...ok, instructions: 7 }, /instructions must be a string/],
    [{ ...ok, stream: 1 }, /stream must be a boolean/],
  ];
  for (const [body, re] of cases) {
    const r = await post("/v1/responses", body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.match(r.body.error.message, re, JSON.stringify(body));
  }
  await assert.rejects(client.responses.create({ ...ok, model: "other/model" }), (e) => e.status === 404);
  await assert.rejects(client.responses.create({ ...ok, previous_response_id: "resp_1" }),
                       (e) => e.status === 400 && /previous_response_id/.test(e.message));
});

test("responses: an engine failure mid-stream ends with response.failed", async () => {
  const pid = Number(execFileSync("pgrep", ["-P", String(server.proc.pid), "-f", "splash engine"],
                                  { encoding: "utf8" }).trim().split("\n")[0]);
  const stream = await client.responses.create({ ...base, max_output_tokens: 3000, temperature: 1, stream: true });
  const it = stream[Symbol.asyncIterator]();
  await it.next();
  process.kill(pid, "SIGKILL");
  let last = null;
  for (;;) { const r = await it.next(); if (r.done) break; last = r.value; }
  assert.equal(last.type, "response.failed");
  assert.equal(last.response.status, "failed");
  assert.match(last.response.error.code, /engine/);
  for (let i = 0; i < 100; i++) {
    if ((await fetch(`${server.url}/ready`)).status === 200) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  const r = await client.responses.create({ ...base, max_output_tokens: 2 });
  assert.equal(r.usage.output_tokens, 2);
});
