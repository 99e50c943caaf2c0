// The prefix cache through the unmodified SDKs: an agent-shaped conversation of five
// tool-calling turns, each resent whole, reads the previous turn's prompt back from the
// cache up to its last turn boundary (the <|im_end|> closing its last message).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startServer } from "./harness.mjs";

let server;
let openai;
let anthropic;

before(async () => {
  server = await startServer([]);
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused" });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

// The opening after the last <|im_end|> of a prompt ("\n<|im_start|>assistant\n" and an
// empty think block where the request does not think) is all a next turn may recompute.
const OPENING = 12;

const tools = [{
  type: "function",
  function: {
    name: "read_file",
    description: "Read a file of the project",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
}];

function fileText(i) {
  return `File ${i}: ` + Array.from({ length: 40 }, (_, k) => `line ${k} of the story ${i}`).join("\n");
}

test("OpenAI: five tool-calling turns each read the previous turn's prompt from the cache", async () => {
  const messages = [
    { role: "system", content: "You are a careful coding agent. " + "Rules follow. ".repeat(30) },
    { role: "user", content: "Read the files one by one and summarise them." },
  ];
  let previous = 0;
  for (let turn = 0; turn < 5; turn++) {
    const r = await openai.chat.completions.create({
      model: "test/stories", messages, tools, max_tokens: 8, temperature: 0,
      reasoning_effort: "none",
    });
    const { prompt_tokens: prompt, prompt_tokens_details: details } = r.usage;
    const cached = details?.cached_tokens ?? 0;
    if (turn === 0) {
      assert.equal(cached, 0);
    } else {
      assert.ok(cached >= previous - OPENING,
                `turn ${turn}: cached ${cached} of ${prompt}, the previous prompt had ${previous}`);
      assert.ok(cached < prompt);
    }
    previous = prompt;
    // the agent's call and its result join the conversation
    const id = `call_${turn}`;
    messages.push({ role: "assistant", content: null, tool_calls: [
      { id, type: "function", function: { name: "read_file", arguments: JSON.stringify({ path: `f${turn}.txt` }) } }] });
    messages.push({ role: "tool", tool_call_id: id, content: fileText(turn) });
  }
  const status = await (await fetch(`${server.url}/status`)).json();
  assert.equal(status.prefix_cache.enabled, true);
  assert.ok(status.prefix_cache.cached_tokens > 0, JSON.stringify(status.prefix_cache));
  assert.ok(status.prefix_cache.bytes_used <= status.prefix_cache.bytes_limit);
  assert.match(server.output(), /Started · request \d+ · input [\d,]+ · cached [1-9][\d,]*/);
});

test("Anthropic: cache_read_input_tokens reports the cached prefix of a tool loop", async () => {
  const toolsA = [{ name: "read_file", description: "Read a file",
                    input_schema: { type: "object", properties: { path: { type: "string" } } } }];
  const messages = [{ role: "user", content: "Open the notes and tell me what they say." }];
  let previous = 0;
  for (let turn = 0; turn < 3; turn++) {
    const r = await anthropic.messages.create({
      model: "test/stories", system: "You read files for the user. ".repeat(20), messages,
      tools: toolsA, max_tokens: 8, temperature: 0,
    });
    const total = r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0);
    if (turn > 0)
      assert.ok(r.usage.cache_read_input_tokens >= previous - OPENING,
                `turn ${turn}: ${JSON.stringify(r.usage)}, previous prompt ${previous}`);
    previous = total;
    const id = `toolu_${turn}`;
    messages.push({ role: "assistant", content: [{ type: "tool_use", id, name: "read_file", input: { path: `n${turn}` } }] });
    messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: id, content: fileText(turn) }] });
  }
});

test("Anthropic stream: message_start reports the cached prefix, as the final usage does", async () => {
  const system = "You answer questions about a long story. " + "It goes on and on. ".repeat(40);
  const messages = [{ role: "user", content: "Who is in the story?" }];
  const first = await anthropic.messages.create({ model: "test/stories", system, messages,
                                                  max_tokens: 8, temperature: 0 });
  messages.push({ role: "assistant", content: "Lily and her dog Max are in the story." });
  messages.push({ role: "user", content: "And where do they live?" });
  const stream = anthropic.messages.stream({ model: "test/stories", system, messages,
                                             max_tokens: 8, temperature: 0 });
  let start;
  for await (const ev of stream)
    if (ev.type === "message_start") start = structuredClone(ev.message.usage); // the SDK updates it later
  const final = await stream.finalMessage();
  const previous = first.usage.input_tokens + first.usage.cache_read_input_tokens;
  assert.ok(start.cache_read_input_tokens >= previous - OPENING,
            `message_start ${JSON.stringify(start)}, previous prompt ${previous}`);
  assert.equal(start.cache_read_input_tokens, final.usage.cache_read_input_tokens);
  assert.equal(start.input_tokens, final.usage.input_tokens);
});
