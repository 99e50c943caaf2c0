// A gpt-oss model (llama.cpp's tiny reference GGUF: sliding window, sinks, YaRN, biased MoE)
// served through the same APIs as the Qwen ones: model-check picks the gpt_oss family,
// chat answers streamed and not agree at temperature 0, and the Anthropic Messages API
// answers. (The tiny file carries the test vocabulary and its ChatML template.)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startServer, testdata } from "./harness.mjs";

let server;
let openai;

before(async () => {
  server = await startServer([], { model: path.join(testdata, "gptoss/gptoss-tiny-MXFP4_MOE.gguf") });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

test("status names the gpt_oss family", async () => {
  const status = await (await fetch(`${server.url}/status`)).json();
  assert.equal(status.model.family ?? status.plan?.family ?? status.family, "gpt_oss",
               JSON.stringify(status).slice(0, 400));
});

test("chat completions, streamed and not, agree at temperature 0 past the window", async () => {
  // a prompt longer than the 16-token window, so the sliding layers mask
  const long = "The little robot walked slowly along the quiet street, looking at every window.";
  const req = { model: "test/stories", messages: [{ role: "user", content: long }],
                max_tokens: 24, temperature: 0 };
  const whole = await openai.chat.completions.create(req);
  assert.equal(whole.usage.completion_tokens, 24);
  assert.ok(whole.usage.prompt_tokens > 16);
  let text = "";
  let reasoning = "";
  const stream = await openai.chat.completions.create({ ...req, stream: true,
                                                        stream_options: { include_usage: true } });
  let usage;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(usage.completion_tokens, 24);
  assert.equal(text, whole.choices[0].message.content ?? "");
  assert.equal(reasoning, whole.choices[0].message.reasoning_content ?? "");
});

test("the Anthropic Messages API answers too", async () => {
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused" });
  const msg = await anthropic.messages.create({ model: "test/stories", max_tokens: 8,
                                                messages: [{ role: "user", content: "Hi" }] });
  assert.equal(msg.usage.output_tokens, 8);
  assert.equal(msg.stop_reason, "max_tokens");
});
