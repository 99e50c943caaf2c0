// A MoE model (qwen35moe, llama.cpp's tiny reference GGUF) served through the same API as
// the dense one: model-check picks the MoE family, chat answers streamed and not, and
// greedy answers repeat exactly.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startServer, testdata } from "./harness.mjs";

let server;
let openai;

before(async () => {
  server = await startServer([], { model: path.join(testdata, "models/qwen35moe-tiny-Q4_K_M.gguf") });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

test("status names the MoE family", async () => {
  const status = await (await fetch(`${server.url}/status`)).json();
  assert.equal(status.model.family ?? status.plan?.family ?? status.family, "qwen_moe",
               JSON.stringify(status).slice(0, 400));
});

test("chat completions, streamed and not, agree at temperature 0", async () => {
  const req = { model: "test/stories", messages: [{ role: "user", content: "Hello there" }],
                max_tokens: 12, temperature: 0 };
  const whole = await openai.chat.completions.create(req);
  assert.equal(whole.usage.completion_tokens, 12);
  let text = "";
  const stream = await openai.chat.completions.create({ ...req, stream: true,
                                                        stream_options: { include_usage: true } });
  let usage;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(usage.completion_tokens, 12);
  assert.equal(text, whole.choices[0].message.content ?? "");
});

test("the Anthropic Messages API answers too", async () => {
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused" });
  // greedy: at the default temperature a random model may sample its end token first
  const msg = await anthropic.messages.create({ model: "test/stories", max_tokens: 8, temperature: 0,
                                                messages: [{ role: "user", content: "Hi" }] });
  assert.equal(msg.usage.output_tokens, 8);
  assert.equal(msg.stop_reason, "max_tokens");
});
