// OpenAI's harmony chat format served: a gpt-oss model from make-model carrying the
// shipped gpt-oss template (the test data's openai-gpt-oss-120b.jinja) and the harmony
// tokens. The server picks the HARMONY format; reasoning_effort reaches the template's
// "Reasoning:" line (/v1/models reports the efforts it renders); an assistant turn's
// reasoning_content renders as its analysis channel; constrained output, which no grammar
// writes in harmony yet, is refused in each API's shape. (Parsing channels out of the
// output is test-chat-parser's: a random model writes no harmony.)
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

test("answers stream and constrained output is refused with its reason", async () => {
  const r = await openai.chat.completions.create({ model: "test/stories", max_tokens: 6, temperature: 0,
                                                   messages: [{ role: "user", content: "hi" }], tools });
  assert.equal(r.usage.completion_tokens, 6);
  await assert.rejects(
    openai.chat.completions.create({ model: "test/stories", max_tokens: 6, tools, tool_choice: "required",
                                     messages: [{ role: "user", content: "hi" }] }),
    (e) => e.status === 400 && /harmony/.test(e.message));
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused" });
  await assert.rejects(
    anthropic.messages.create({ model: "test/stories", max_tokens: 6, messages: [{ role: "user", content: "hi" }],
                                tools: [{ name: "get_weather", description: "The weather.", input_schema: { type: "object" } }],
                                tool_choice: { type: "any" } }),
    (e) => e.status === 400 && e.error?.type === "error" && /harmony/.test(e.message));
  const msg = await anthropic.messages.create({ model: "test/stories", max_tokens: 6,
                                                messages: [{ role: "user", content: "hi" }] });
  assert.equal(msg.usage.output_tokens, 6);
});
