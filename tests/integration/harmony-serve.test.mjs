// OpenAI's harmony chat format served: a gpt-oss model from make-model carrying the
// shipped gpt-oss template (the test data's openai-gpt-oss-120b.jinja) and the harmony
// tokens. The server picks the HARMONY format; reasoning_effort reaches the template's
// "Reasoning:" line (/v1/models reports the efforts it renders); an assistant turn's
// reasoning_content renders as its analysis channel; constrained output is written in
// harmony by the grammar (the final channel's header then the JSON, or a call's header then
// its arguments) and parsed back as the answer or the call in each API's shape. (Parsing
// free channels out of the output is test-chat-parser's: a random model writes no harmony.)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startServer, splash, testdata } from "./harness.mjs";

let server;
let openai;
let dir;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-harmony-"));
  const model = path.join(dir, "gpt-oss-tiny.gguf");
  execFileSync(splash, ["make-model", "--shape", "gpt-oss-tiny", "--type", "Q8_0", "--threads", "1",
                        "--chat-template", path.join(testdata, "templates/openai-gpt-oss-120b.jinja"),
                        "--out", model]);
  server = await startServer([], { model });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
});

after(async () => {
  assert.equal(await server.stop(), 0);
  fs.rmSync(dir, { recursive: true, force: true });
});

const tools = [{ type: "function",
                 function: { name: "get_weather", description: "The weather in a city.",
                             parameters: { type: "object", properties: { city: { type: "string" } } } } }];

async function promptTokens(req) {
  const r = await openai.chat.completions.create({ model: "test/stories", max_tokens: 1, ...req });
  return r.usage.prompt_tokens;
}

test("the template's efforts are reported and reach its Reasoning line", async () => {
  const models = await (await fetch(`${server.url}/v1/models`)).json();
  const reasoning = models.data[0].reasoning;
  assert.equal(reasoning.thinks, true);
  assert.equal(reasoning.default, "medium");
  for (const e of ["low", "medium", "high"]) assert.ok(reasoning.efforts.includes(e), JSON.stringify(reasoning));
  const messages = [{ role: "user", content: "hi" }];
  const low = await promptTokens({ messages, reasoning_effort: "low" });
  const medium = await promptTokens({ messages, reasoning_effort: "medium" });
  const none = await promptTokens({ messages });
  assert.ok(low < medium, `low ${low}, medium ${medium}`);
  assert.equal(none, medium);
});

test("reasoning_content renders as the analysis channel before a call", async () => {
  const turns = (rc) => [
    { role: "user", content: "Weather in Oslo?" },
    { role: "assistant", content: "", ...(rc ? { reasoning_content: rc } : {}),
      tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }] },
    { role: "tool", tool_call_id: "c1", content: "sunny" },
  ];
  const plain = await promptTokens({ messages: turns(null), tools });
  const thought = await promptTokens({ messages: turns("The user wants Oslo's weather."), tools });
  assert.ok(thought > plain + 5, `${thought} vs ${plain}`);
});

test("answers stream", async () => {
  const r = await openai.chat.completions.create({ model: "test/stories", max_tokens: 6, temperature: 0,
                                                   messages: [{ role: "user", content: "hi" }], tools });
  assert.equal(r.usage.completion_tokens, 6);
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused" });
  const msg = await anthropic.messages.create({ model: "test/stories", max_tokens: 6,
                                                messages: [{ role: "user", content: "hi" }] });
  assert.equal(msg.usage.output_tokens, 6);
});

// The grammar lets an analysis message of free text come first; a random model would ramble
// there, so these requests bias away the tokens that open it (the model's own choice is the
// grammar's unit test's).
async function firstTokens(texts) {
  const ids = new Set();
  for (const content of texts) {
    const r = await (await fetch(`${server.url}/tokenize`, { method: "POST",
                                                             body: JSON.stringify({ content }) })).json();
    ids.add(r.tokens[0]);
  }
  return ids;
}

const oslo = [{ type: "function",
                function: { name: "get_weather", description: "The weather in a city.",
                            parameters: { type: "object", properties: { city: { type: "string", enum: ["Oslo"] } },
                                          required: ["city"], additionalProperties: false } } }];

test("tool_choice required writes a harmony call, parsed as the call (OpenAI SDK)", async () => {
  const [channel] = await firstTokens(["<|channel|>"]);
  const r = await openai.chat.completions.create({
    model: "test/stories", max_tokens: 64, temperature: 0, tools: oslo, tool_choice: "required",
    logit_bias: { [channel]: -100 }, messages: [{ role: "user", content: "Weather in Oslo?" }] });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, "tool_calls", JSON.stringify(r));
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].function.name, "get_weather");
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: "Oslo" });
});

test("response_format json_schema writes the final channel's JSON (OpenAI SDK)", async () => {
  const banned = await firstTokens(["a", "an", "ana", "anal", "analy", "analys", "analysi", "analysis"]);
  const bias = Object.fromEntries([...banned].map((id) => [id, -100]));
  const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"],
                   additionalProperties: false };
  const r = await openai.chat.completions.create({
    model: "test/stories", max_tokens: 64, temperature: 0, logit_bias: bias,
    response_format: { type: "json_schema", json_schema: { name: "answer", schema, strict: true } },
    messages: [{ role: "user", content: "Is it sunny?" }] });
  assert.equal(r.choices[0].finish_reason, "stop", JSON.stringify(r));
  const v = JSON.parse(r.choices[0].message.content);
  assert.equal(typeof v.ok, "boolean");
});

test("Anthropic tool_choice any writes a harmony call, parsed as tool_use", async () => {
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused" });
  const [channel] = await firstTokens(["<|channel|>"]);
  // logit_bias is no Messages field; the SDK passes it through and Splash takes it
  const msg = await anthropic.messages.create({
    model: "test/stories", max_tokens: 64, temperature: 0,
    messages: [{ role: "user", content: "Weather in Oslo?" }],
    tools: [{ name: "get_weather", description: "The weather.", input_schema: oslo[0].function.parameters }],
    tool_choice: { type: "any" }, logit_bias: { [channel]: -100 } });
  assert.equal(msg.stop_reason, "tool_use", JSON.stringify(msg));
  const use = msg.content.find((b) => b.type === "tool_use");
  assert.equal(use.name, "get_weather");
  assert.deepEqual(use.input, { city: "Oslo" });
});
