// A Flint model served: make-model's flint-tiny (sinks, sliding and no-RoPE layers, a dense
// leading layer, MoE with an ungated shared expert; the built-in Flint vocabulary and
// template) passes model-check with its flat configuration, and the server speaks the FLINT
// chat format the family's verdict names: the generation prompt is <|assistant|> alone
// whatever the effort (the model decides whether to reason: /v1/models reports thinks null,
// no efforts), and a forced tool call is written and parsed as GLM-4.7's argument tags
// through the OpenAI and Anthropic SDKs, streamed and not.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startServer, splash } from "./harness.mjs";

let server;
let openai;
let dir;
let model;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-flint-"));
  model = path.join(dir, "flint-tiny.gguf");
  execFileSync(splash, ["make-model", "--shape", "flint-tiny", "--type", "Q8_0", "--threads", "1",
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
                             parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } },
                                           required: ["city"], additionalProperties: false } } }];

test("model-check names the flint family and prints its flat configuration", () => {
  const out = JSON.parse(execFileSync(splash, ["model-check", "--json", model]).toString());
  assert.equal(out.ok, true);
  assert.equal(out.plugin, "flint");
  const c = out.text_config;
  assert.equal(c.model_type, "flint");
  assert.deepEqual(c.mlp_only_layers, [0]);
  assert.deepEqual(c.layer_types, ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]);
  assert.deepEqual(c.no_rope_layer_indices, [1, 3]);
  assert.equal(c.router_score_function, "softmax");
  assert.equal(c.eos_token_id.length, 4);
});

test("the template's generation prompt is <|assistant|> alone whatever the effort", async () => {
  const models = await (await fetch(`${server.url}/v1/models`)).json();
  const reasoning = models.data[0].reasoning;
  assert.equal(reasoning.thinks, null, JSON.stringify(reasoning));
  assert.deepEqual(reasoning.efforts, []);
  const messages = [{ role: "user", content: "hi" }];
  const count = async (extra) => (await openai.chat.completions.create({
    model: "test/stories", max_tokens: 1, messages, ...extra })).usage.prompt_tokens;
  const plain = await count({});
  assert.equal(await count({ reasoning_effort: "high" }), plain);
  assert.equal(await count({ reasoning_effort: "none" }), plain);
  assert.equal(await count({ chat_template_kwargs: { enable_thinking: true } }), plain);
});

test("chat completions, streamed and not, agree at temperature 0 past the window", async () => {
  const long = "The little robot walked slowly along the quiet street, looking at every window.";
  const req = { model: "test/stories", messages: [{ role: "user", content: long }],
                max_tokens: 16, temperature: 0 };
  const whole = await openai.chat.completions.create(req);
  assert.ok(whole.usage.prompt_tokens > 16);
  let text = "";
  let reasoning = "";
  const stream = await openai.chat.completions.create({ ...req, stream: true });
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? "";
  }
  assert.equal(text, whole.choices[0].message.content ?? "");
  assert.equal(reasoning, whole.choices[0].message.reasoning_content ?? "");
});

test("a forced call is written as GLM-4.7 argument tags and parsed (OpenAI)", async () => {
  const req = { model: "test/stories", max_tokens: 60, temperature: 0, tools,
                tool_choice: { type: "function", function: { name: "get_weather" } },
                messages: [{ role: "user", content: "Weather in Oslo?" }] };
  const r = await openai.chat.completions.create(req);
  const calls = r.choices[0].message.tool_calls;
  assert.equal(calls?.length, 1, JSON.stringify(r.choices[0]));
  assert.equal(calls[0].function.name, "get_weather");
  const args = JSON.parse(calls[0].function.arguments);
  assert.equal(typeof args.city, "string");
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  // the same call streamed
  let name = "";
  let argText = "";
  const stream = await openai.chat.completions.create({ ...req, stream: true });
  for await (const chunk of stream) {
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
      name += tc.function?.name ?? "";
      argText += tc.function?.arguments ?? "";
    }
  }
  assert.equal(name, "get_weather");
  assert.deepEqual(JSON.parse(argText), args);
  // the call and its result render back as the template's turns
  const next = await openai.chat.completions.create({
    model: "test/stories", max_tokens: 4, tools,
    messages: [...req.messages, r.choices[0].message,
               { role: "tool", tool_call_id: calls[0].id, content: "sunny" }] });
  assert.ok(next.usage.prompt_tokens > r.usage.prompt_tokens);
});

test("a forced call is parsed through the Anthropic Messages API", async () => {
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused" });
  const msg = await anthropic.messages.create({
    model: "test/stories", max_tokens: 60, temperature: 0,
    tools: [{ name: "get_weather", description: "The weather in a city.",
              input_schema: tools[0].function.parameters }],
    tool_choice: { type: "tool", name: "get_weather" },
    messages: [{ role: "user", content: "Weather in Oslo?" }] });
  const use = msg.content.find((b) => b.type === "tool_use");
  assert.ok(use, JSON.stringify(msg.content));
  assert.equal(use.name, "get_weather");
  assert.equal(typeof use.input.city, "string");
  assert.equal(msg.stop_reason, "tool_use");
});

test("a second turn resumes at the first turn's <|assistant|> and reports its cached tokens", async () => {
  const system = { role: "system", content: "You are a careful assistant who answers in short sentences." };
  const first = [system, { role: "user", content: "Tell me about the little robot and its quiet street." }];
  const one = await openai.chat.completions.create({ model: "test/stories", messages: first,
                                                    max_tokens: 8, temperature: 0 });
  const reply = one.choices[0].message.content ?? "";
  const second = [...first, { role: "assistant", content: reply },
                  { role: "user", content: "And what did it see in the windows?" }];
  const ask = () => openai.chat.completions.create({ model: "test/stories", messages: second,
                                                     max_tokens: 8, temperature: 0 });
  const two = await ask();
  assert.equal(two.usage.prompt_tokens_details?.cached_tokens, one.usage.prompt_tokens,
               JSON.stringify(two.usage));
  assert.ok(two.usage.prompt_tokens > one.usage.prompt_tokens);
  // asked again: resumed at the same boundary (its own end, <|assistant|>, leaves no token
  // to feed for the first logits), to the same answer
  const again = await ask();
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, one.usage.prompt_tokens,
               JSON.stringify(again.usage));
  assert.equal(again.choices[0].message.content, two.choices[0].message.content);
});
