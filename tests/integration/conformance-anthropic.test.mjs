// Anthropic Messages conformance as client code relies on it, through the unmodified
// @anthropic-ai/sdk (raw fetch only for what the SDK cannot send): system and content blocks,
// history with tool use, thinking and signatures, prefill, stop sequences, limits, tools and
// tool_choice, the stream's event grammar as messages.stream() and finalMessage() consume it,
// count_tokens and errors. The stories model writes gibberish: these assert structure, counts
// and determinism, never content.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Ajv from "ajv";
import Anthropic from "@anthropic-ai/sdk";
import { startServer } from "./harness.mjs";

let server;
let client;
const MODEL = "test/stories";
const ajv = new Ajv({ strict: false });

async function post(p, body) {
  const r = await fetch(`${server.url}${p}`, {
    method: "POST", headers: { "Content-Type": "application/json", "anthropic-version": "2023-06-01" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

before(async () => {
  server = await startServer();
  client = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
});

after(async () => {
  // run with the draft (sdk-draft.test.mjs): its cycles took part
  if (process.env.SPLASH_TEST_DRAFT_MODEL) {
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const accepted = Number(metrics.match(/^splash_draft_accepted_tokens_total (\d+)$/m)?.[1]);
    assert.match(server.output(), /Speculation · the DFlash2 draft/);
    assert.ok(accepted > 0, `the draft's accepted tokens: ${accepted}`);
  }
  assert.equal(await server.stop(), 0);
});

const story = [{ role: "user", content: "Tell me a story about an owl." }];
const base = { model: MODEL, max_tokens: 12, temperature: 0, messages: story };

// Streams through messages.stream(), checks the event grammar, and returns events and final.
async function streamChecked(params) {
  const stream = client.messages.stream(params);
  const events = [];
  // (the helper builds its snapshot in message_start's object: copy each event as it comes)
  for await (const ev of stream) events.push(structuredClone(ev));
  const final = await stream.finalMessage();
  const types = events.map((e) => e.type);
  assert.equal(types[0], "message_start");
  assert.equal(types.at(-2), "message_delta");
  assert.equal(types.at(-1), "message_stop");
  const start = events[0].message;
  assert.equal(start.role, "assistant");
  assert.deepEqual(start.content, []);
  assert.equal(start.stop_reason, null);
  // blocks open, take deltas of their own kind at their own index, and close, in order
  let open = null;
  let next = 0;
  for (const e of events.slice(1, -2)) {
    if (e.type === "content_block_start") {
      assert.equal(open, null, "a block opened inside another");
      assert.equal(e.index, next);
      open = e.content_block;
    } else if (e.type === "content_block_delta") {
      assert.ok(open, "a delta outside a block");
      assert.equal(e.index, next);
      const kinds = { text: ["text_delta"], thinking: ["thinking_delta", "signature_delta"],
                      tool_use: ["input_json_delta"] }[open.type];
      assert.ok(kinds.includes(e.delta.type), `${e.delta.type} in a ${open.type} block`);
    } else if (e.type === "content_block_stop") {
      assert.equal(e.index, next);
      open = null;
      next++;
    } else {
      assert.fail(`unexpected ${e.type} between message_start and message_delta`);
    }
  }
  assert.equal(open, null);
  assert.equal(next, final.content.length);
  const delta = events.at(-2);
  assert.equal(typeof delta.usage.output_tokens, "number");
  assert.equal(final.stop_reason, delta.delta.stop_reason);
  return { events, final, start };
}

test("messages: system as a string and as blocks, text blocks, unknown fields ignored", async () => {
  const a = await client.messages.create({ ...base, system: "You tell stories.\n\nShort ones." });
  const b = await client.messages.create({ ...base, system: [
    { type: "text", text: "You tell stories.", cache_control: { type: "ephemeral" } },
    { type: "text", text: "Short ones." }],
  messages: [{ role: "user", content: [{ type: "text", text: story[0].content, cache_control: { type: "ephemeral" } }] }],
  metadata: { user_id: "u-1" }, top_k: 40, top_p: 1, service_tier: "auto" });
  assert.equal(b.content[0].text, a.content[0].text);
  // the second reads the first's prompt from the prefix cache: the prompts are the same size
  assert.equal(b.usage.input_tokens + b.usage.cache_read_input_tokens,
               a.usage.input_tokens + a.usage.cache_read_input_tokens);
  assert.match(a.id, /^msg_/);
  assert.equal(a.type, "message");
  assert.equal(a.role, "assistant");
  assert.equal(a.model, MODEL);
  assert.equal(a.stop_reason, "max_tokens");
  assert.equal(a.stop_sequence, null);
  assert.equal(a.usage.output_tokens, 12);
  const count = await client.messages.countTokens({ model: MODEL, system: "You tell stories.\n\nShort ones.",
                                                     messages: story });
  assert.equal(count.input_tokens, a.usage.input_tokens + a.usage.cache_read_input_tokens);
});

test("messages: stop_sequences end the text, with stop_reason and stop_sequence, streamed or not", async () => {
  const whole = await client.messages.create({ ...base, max_tokens: 40 });
  const text = whole.content[0].text;
  const words = text.split(/\s+/).filter((w) => /^[a-z]{3,}$/.test(w));
  assert.ok(words.length > 2, text);
  const stop = words[2];
  const cut = text.slice(0, text.indexOf(stop));
  const m = await client.messages.create({ ...base, max_tokens: 40, stop_sequences: ["QQQ", stop] });
  assert.equal(m.stop_reason, "stop_sequence");
  assert.equal(m.stop_sequence, stop);
  assert.equal(m.content[0].text, cut);
  const { final, events } = await streamChecked({ ...base, max_tokens: 40, stop_sequences: [stop, "QQQ"] });
  assert.equal(final.stop_reason, "stop_sequence");
  assert.equal(final.stop_sequence, stop);
  assert.equal(final.content[0].text, cut);
  assert.equal(final.usage.output_tokens, m.usage.output_tokens);
  assert.ok(!events.some((e) => e.delta?.text?.includes(stop)));
  // a limit reached first is max_tokens, with no stop sequence
  const short = await client.messages.create({ ...base, max_tokens: 2, stop_sequences: [stop] });
  assert.equal(short.stop_reason, "max_tokens");
  assert.equal(short.stop_sequence, null);
  assert.equal(short.usage.output_tokens, 2);
});

test("messages: the stream builds the message create() returns; usage agrees", async () => {
  const whole = await client.messages.create(base);
  const { final, start } = await streamChecked(base);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, "max_tokens");
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(start.usage.input_tokens + start.usage.cache_read_input_tokens,
               whole.usage.input_tokens + whole.usage.cache_read_input_tokens);
  assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens,
               whole.usage.input_tokens + whole.usage.cache_read_input_tokens);
  // the SDK's text event joins to the text
  let text = "";
  const s = client.messages.stream(base).on("text", (t) => { text += t; });
  await s.done();
  assert.equal(text, whole.content[0].text);
});

test("messages: a final assistant message is a prefill the answer continues", async () => {
  const prefill = "Once upon a time";
  const m = await client.messages.create({ ...base, messages: [...story, { role: "assistant", content: prefill }] });
  assert.equal(m.content[0].type, "text");
  assert.ok(!m.content[0].text.startsWith(prefill), "the prefill is not repeated");
  // the prompt ends with the prefill, not a closed turn and a new one
  const tpl = await post("/apply-template", { api: "messages", max_tokens: 8,
    messages: [...story, { role: "assistant", content: [{ type: "text", text: prefill }] }] });
  assert.equal(tpl.status, 200);
  assert.ok(tpl.body.prompt.endsWith(prefill), JSON.stringify(tpl.body.prompt.slice(-80)));
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, tpl.body.count);
  const count = await client.messages.countTokens({ model: MODEL,
    messages: [...story, { role: "assistant", content: prefill }] });
  assert.equal(count.input_tokens, tpl.body.count);
  const { final } = await streamChecked({ ...base, messages: [...story, { role: "assistant", content: prefill }] });
  assert.deepEqual(final.content, m.content);
  // with thinking on there is nothing to continue: refused, as Anthropic's API does
  await assert.rejects(client.messages.create({ ...base, max_tokens: 2048,
    thinking: { type: "enabled", budget_tokens: 1024 },
    messages: [...story, { role: "assistant", content: prefill }] }),
  (e) => e.status === 400 && e.error.error.type === "invalid_request_error");
});

test("messages: thinking enabled streams a signed thinking block, then the answer", async () => {
  const req = { ...base, max_tokens: 1100, thinking: { type: "enabled", budget_tokens: 1024 } };
  const whole = await client.messages.create(req);
  assert.equal(whole.content[0].type, "thinking");
  assert.ok(whole.content[0].thinking.length > 0);
  assert.equal(typeof whole.content[0].signature, "string");
  assert.ok(whole.content[0].signature.length > 0);
  const { final, events } = await streamChecked(req);
  assert.deepEqual(final.content, whole.content);
  assert.deepEqual(final.usage.output_tokens, whole.usage.output_tokens);
  // the signature comes as the thinking block's last delta
  const stop0 = events.findIndex((e) => e.type === "content_block_stop" && e.index === 0);
  assert.equal(events[stop0 - 1].delta.type, "signature_delta");
  assert.equal(events[stop0 - 1].delta.signature, whole.content[0].signature);
  if (whole.content.length > 1) assert.equal(whole.content[1].type, "text");
  // the thinking block, its signature as given, replays in the next turn's history
  const next = [...story, { role: "assistant", content: whole.content },
                { role: "user", content: "And then?" }];
  const again = await client.messages.create({ ...req, max_tokens: 4, messages: next });
  assert.equal(again.usage.output_tokens, 4);
  const count = await client.messages.countTokens({ model: MODEL, messages: next,
                                                     thinking: { type: "enabled", budget_tokens: 1024 } });
  assert.equal(count.input_tokens, again.usage.input_tokens + again.usage.cache_read_input_tokens);
  // adaptive thinks too
  const adaptive = await client.messages.create({ ...base, max_tokens: 4, thinking: { type: "adaptive" } });
  assert.equal(adaptive.content[0].type, "thinking");
});

const weather = { name: "get_weather", description: "Weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } },
                  required: ["city", "days"] } };
const clock = { name: "get_time", description: "The time now", input_schema: { type: "object", properties: {} } };

test("messages: tool_choice any and tool give tool_use blocks; input_json_delta joins to the input", async () => {
  for (const tool_choice of [{ type: "any" }, { type: "tool", name: "get_weather" }]) {
    const req = { ...base, max_tokens: 80, tools: [weather, clock], tool_choice,
                  messages: [{ role: "user", content: "Weather in Oslo?" }] };
    const m = await client.messages.create(req);
    assert.equal(m.stop_reason, "tool_use");
    const uses = m.content.filter((b) => b.type === "tool_use");
    assert.ok(uses.length >= 1, JSON.stringify(m.content));
    for (const u of uses) {
      assert.match(u.id, /^toolu_/);
      assert.ok(["get_weather", "get_time"].includes(u.name));
      if (tool_choice.type === "tool") assert.equal(u.name, "get_weather");
      assert.equal(typeof u.input, "object");
      if (u.name === "get_weather") assert.ok(ajv.validate(weather.input_schema, u.input), JSON.stringify(u.input));
    }
    const { final, events } = await streamChecked(req);
    assert.equal(final.stop_reason, "tool_use");
    const fUses = final.content.filter((b) => b.type === "tool_use");
    assert.deepEqual(fUses.map((u) => [u.name, u.input]), uses.map((u) => [u.name, u.input]));
    // the raw partial_json pieces join to the block's input
    for (const [i, b] of final.content.entries()) {
      if (b.type !== "tool_use") continue;
      const startEv = events.find((e) => e.type === "content_block_start" && e.index === i);
      assert.deepEqual(startEv.content_block.input, {});
      assert.equal(startEv.content_block.id, b.id);
      const json = events.filter((e) => e.type === "content_block_delta" && e.index === i)
        .map((e) => e.delta.partial_json).join("");
      assert.deepEqual(JSON.parse(json || "{}"), b.input);
    }
  }
});

test("messages: tool_choice auto and none; tool_use and tool_result history, results as text or blocks", async () => {
  const history = [
    { role: "user", content: "Weather in Oslo, and the time?" },
    { role: "assistant", content: [
      { type: "text", text: "Let me check." },
      { type: "tool_use", id: "toolu_a", name: "get_weather", input: { city: "Oslo", days: 1 } },
      { type: "tool_use", id: "toolu_b", name: "get_time", input: {} }] },
    { role: "user", content: [
      { type: "tool_result", tool_use_id: "toolu_a", content: "rainy" },
      { type: "tool_result", tool_use_id: "toolu_b", is_error: false, content: [{ type: "text", text: "noon" }] },
      { type: "text", text: "Summarise, please." }] },
  ];
  const auto = await client.messages.create({ ...base, max_tokens: 6, tools: [weather, clock],
                                              tool_choice: { type: "auto" }, messages: history });
  assert.ok(["max_tokens", "end_turn", "tool_use"].includes(auto.stop_reason));
  const tpl = await post("/apply-template", { api: "messages", max_tokens: 6, tools: [weather, clock], messages: history });
  assert.equal(tpl.status, 200);
  for (const s of ["rainy", "noon", "Summarise, please.", "get_weather", "Let me check."]) {
    assert.ok(tpl.body.prompt.includes(s), s);
  }
  assert.equal(auto.usage.input_tokens + auto.usage.cache_read_input_tokens, tpl.body.count);
  const count = await client.messages.countTokens({ model: MODEL, tools: [weather, clock], messages: history });
  assert.equal(count.input_tokens, tpl.body.count);

  const none = await client.messages.create({ ...base, max_tokens: 6, tools: [weather, clock],
                                              tool_choice: { type: "none" } });
  const bare = await client.messages.create({ ...base, max_tokens: 6 });
  assert.deepEqual(none.content, bare.content);
  assert.equal(none.usage.input_tokens, bare.usage.input_tokens);
});

test("messages: count_tokens equals a real call's input tokens, with tools and system", async () => {
  const req = { model: MODEL, system: [{ type: "text", text: "Be terse." }], tools: [weather],
                messages: [{ role: "user", content: [{ type: "text", text: "Weather in Rome?" }] }] };
  const count = await client.messages.countTokens(req);
  const m = await client.messages.create({ ...req, max_tokens: 2, temperature: 0 });
  assert.equal(count.input_tokens, m.usage.input_tokens + m.usage.cache_read_input_tokens);
  assert.deepEqual(Object.keys(count), ["input_tokens"]);
});

test("messages: errors in Anthropic's shape", async () => {
  const cases = [
    [{ model: MODEL, messages: story }, 400, "invalid_request_error"],
    [{ ...base, temperature: 2 }, 400, "invalid_request_error"],
    [{ ...base, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64",
      media_type: "image/png", data: "iVBORw0KGgo=" } }] }] }, 400, "invalid_request_error"],
    [{ ...base, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t",
      content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }] }] }] },
     400, "invalid_request_error"],
    [{ ...base, tool_choice: { type: "tool" } }, 400, "invalid_request_error"],
    [{ ...base, model: "claude-nonexistent" }, 404, "not_found_error"],
  ];
  for (const [body, status, type] of cases) {
    const r = await post("/v1/messages", body);
    assert.equal(r.status, status, JSON.stringify(body));
    assert.equal(r.body.type, "error");
    assert.deepEqual(Object.keys(r.body.error).sort(), ["message", "type"]);
    assert.equal(r.body.error.type, type);
    assert.equal(typeof r.body.error.message, "string");
  }
  const bad = await post("/v1/messages", "{oops");
  assert.equal(bad.status, 400);
  assert.equal(bad.body.type, "error");
  const ct = await post("/v1/messages/count_tokens", { model: "claude-nonexistent", messages: story });
  assert.equal(ct.status, 404);
  assert.equal(ct.body.error.type, "not_found_error");
  // the SDK's error classes
  await assert.rejects(client.messages.create({ ...base, max_tokens: 0 }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.equal(e.error.type, "error");
    assert.match(e.error.error.message, /max_tokens/);
    return true;
  });
  await assert.rejects(client.messages.create({ ...base, model: "claude-nonexistent" }),
                       (e) => e instanceof Anthropic.NotFoundError);
});
