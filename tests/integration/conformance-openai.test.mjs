// OpenAI API conformance as client code relies on it, through the unmodified openai SDK (raw
// fetch only for what the SDK cannot send): Chat Completions, Completions and Responses shapes,
// stop strings, limits and usage, seeds, logprobs, tools and tool_choice, errors, and a stream
// the client drops. The stories model writes gibberish: these assert structure, counts and
// determinism, never content.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Ajv from "ajv";
import OpenAI from "openai";
import { startServer } from "./harness.mjs";

// A request's usage but what the prefix cache gave it: a repeat of a request reads its
// prompt back from the cache.
// What two runs of one request may differ in: the prefix cache's hits, and how many tokens
// speculation proposed (the verify budget learns across requests); the output is the same.
const uncached = (u) => ({
  ...u,
  prompt_tokens_details: undefined,
  input_tokens_details: undefined,
  completion_tokens_details: u.completion_tokens_details && {
    ...u.completion_tokens_details,
    accepted_prediction_tokens: undefined,
    rejected_prediction_tokens: undefined,
  },
});

let server;
let client;
const MODEL = "test/stories";
const ajv = new Ajv({ strict: false });

async function post(p, body) {
  const r = await fetch(`${server.url}${p}`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

// The data lines of an SSE body, parsed.
async function sse(p, body) {
  const r = await fetch(`${server.url}${p}`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  assert.equal(r.status, 200);
  const text = await r.text();
  return text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6))
    .filter((d) => d !== "[DONE]").map((d) => JSON.parse(d));
}

before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
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

const ask = [{ role: "user", content: "Tell me a story about a fox." }];
const plain = { model: MODEL, messages: ask, temperature: 0, reasoning_effort: "none" };

// Streams a chat request through the SDK and joins what a client joins.
async function streamChat(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true,
    stream_options: { include_usage: true } });
  const out = { content: "", reasoning: "", finish: null, usage: null, logprobs: [], chunks: [] };
  for await (const chunk of stream) {
    out.chunks.push(chunk);
    if (chunk.usage) {
      out.usage = chunk.usage;
      assert.deepEqual(chunk.choices, [], "the usage chunk has no choices");
      continue;
    }
    assert.equal(chunk.object, "chat.completion.chunk");
    const c = chunk.choices[0];
    out.content += c.delta.content || "";
    out.reasoning += c.delta.reasoning_content || "";
    if (c.logprobs?.content) out.logprobs.push(...c.logprobs.content);
    if (c.finish_reason) out.finish = c.finish_reason;
  }
  return out;
}

// A word of the greedy answer to stop at, and the answer before it.
async function stopWord(params, nth = 2) {
  const whole = await client.chat.completions.create({ ...params, max_tokens: 40 });
  const text = whole.choices[0].message.content;
  const words = text.split(/\s+/).filter((w) => /^[a-z]{3,}$/.test(w));
  assert.ok(words.length > nth, `no word to stop at in ${JSON.stringify(text)}`);
  const word = words[nth];
  return { word, before: text.slice(0, text.indexOf(word)) };
}

test("chat: system and developer messages, text parts and multi-turn history render and answer", async () => {
  const messages = [
    { role: "system", content: "You tell short stories." },
    { role: "developer", content: "Keep it simple." },
    { role: "user", content: [{ type: "text", text: "Tell me a story" }, { type: "text", text: "about a fox." }] },
    { role: "assistant", content: [{ type: "text", text: "Once upon a time there was a fox." }] },
    { role: "user", content: "And then?", name: "reader" },
  ];
  const r = await client.chat.completions.create({ ...plain, messages, max_tokens: 6 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, "chat.completion");
  assert.equal(r.model, MODEL);
  assert.equal(typeof r.created, "number");
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].index, 0);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.equal(r.usage.completion_tokens, 6);
  const t = await post("/apply-template", { messages, reasoning_effort: "none" });
  assert.equal(t.status, 200);
  assert.equal(r.usage.prompt_tokens, t.body.count);
  // both leading instructions reach the prompt, merged into the one system turn
  assert.match(t.body.prompt, /^<\|im_start\|>system\nYou tell short stories\.\n\nKeep it simple\.<\|im_end\|>/);
  assert.ok(t.body.prompt.includes("Tell me a story"));
  assert.ok(t.body.prompt.includes("about a fox."));
  // greedy answers repeat
  const again = await client.chat.completions.create({ ...plain, messages, max_tokens: 6 });
  assert.equal(again.choices[0].message.content, r.choices[0].message.content);
});

test("chat: stop as a string and as an array ends before the stop text, streamed or not", async () => {
  const { word, before } = await stopWord(plain);
  for (const stop of [word, ["qqzx", word], [word.slice(0, 2) + "\u00e9\u00e9", word]]) {
    const r = await client.chat.completions.create({ ...plain, max_tokens: 40, stop });
    assert.equal(r.choices[0].message.content, before, JSON.stringify(stop));
    assert.equal(r.choices[0].finish_reason, "stop");
    const s = await streamChat({ ...plain, max_tokens: 40, stop });
    assert.equal(s.content, before);
    assert.ok(!s.content.includes(word));
    assert.equal(s.finish, "stop");
    assert.deepEqual(uncached(s.usage), uncached(r.usage));
    assert.ok(r.usage.completion_tokens < 40);
  }
});

test("chat: max_tokens and max_completion_tokens end with length; usage agrees streamed or not", async () => {
  for (const limit of [{ max_tokens: 7 }, { max_completion_tokens: 7 }]) {
    for (const effort of ["none", "high"]) {
      const params = { ...plain, ...limit, reasoning_effort: effort };
      const r = await client.chat.completions.create(params);
      assert.equal(r.choices[0].finish_reason, "length");
      assert.equal(r.usage.completion_tokens, 7);
      assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 7);
      const s = await streamChat(params);
      assert.equal(s.finish, "length");
      assert.deepEqual(uncached(s.usage), uncached(r.usage));
      assert.equal(s.content, r.choices[0].message.content ?? "");
      assert.equal(s.reasoning, r.choices[0].message.reasoning_content ?? "");
      // every chunk names the same completion
      assert.equal(new Set(s.chunks.map((c) => c.id)).size, 1);
      assert.equal(s.chunks[0].choices[0].delta.role, "assistant");
    }
  }
  // without include_usage no usage chunk comes
  const stream = await client.chat.completions.create({ ...plain, max_tokens: 3, stream: true });
  for await (const chunk of stream) {
    assert.ok(!chunk.usage, "usage without include_usage");
    assert.equal(chunk.choices.length, 1);
  }
});

test("chat: n above 1 is refused naming n; n 1 answers", async () => {
  await assert.rejects(client.chat.completions.create({ ...plain, max_tokens: 3, n: 2 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, "n");
    assert.match(e.message, /\bn\b/);
    return true;
  });
  const r = await client.chat.completions.create({ ...plain, max_tokens: 3, n: 1 });
  assert.equal(r.choices.length, 1);
});

test("chat: a seed repeats a sampled answer", async () => {
  const params = { ...plain, temperature: 1, max_tokens: 16 };
  const a = await client.chat.completions.create({ ...params, seed: 1234 });
  const b = await client.chat.completions.create({ ...params, seed: 1234 });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const s = await streamChat({ ...params, seed: 1234 });
  assert.equal(s.content, a.choices[0].message.content);
  const others = [];
  for (const seed of [1, 2, 3]) {
    others.push((await client.chat.completions.create({ ...params, seed })).choices[0].message.content);
  }
  assert.ok(others.some((o) => o !== a.choices[0].message.content), "every seed gave the same answer");
});

test("chat: logprobs and top_logprobs, streamed or not, one entry per token", async () => {
  const params = { ...plain, max_tokens: 8, logprobs: true, top_logprobs: 3 };
  const r = await client.chat.completions.create(params);
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const e of lp) {
    assert.deepEqual(Object.keys(e).sort(), ["bytes", "logprob", "token", "top_logprobs"]);
    assert.equal(typeof e.token, "string");
    assert.ok(e.logprob <= 0);
    assert.deepEqual(Buffer.from(e.bytes).toString("utf8"), e.token);
    assert.equal(e.top_logprobs.length, 3);
    for (const t of e.top_logprobs) {
      assert.equal(typeof t.token, "string");
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes), "top_logprobs entries carry bytes");
    }
    // greedy: the chosen token is the most likely
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
  }
  assert.equal(lp.map((e) => e.token).join(""), r.choices[0].message.content);
  const s = await streamChat(params);
  assert.deepEqual(s.logprobs, lp);
  // the SDK's stream helper accumulates them into the final completion too
  const helper = client.chat.completions.stream(params);
  const final = await helper.finalChatCompletion();
  assert.deepEqual(final.choices[0].logprobs.content, lp);
  // none asked, none given
  const none = await client.chat.completions.create({ ...plain, max_tokens: 3 });
  assert.equal(none.choices[0].logprobs, null);
});

test("chat: response_format json_object and json_schema constrain the answer", async () => {
  const obj = await client.chat.completions.create({ ...plain, max_tokens: 64,
    response_format: { type: "json_object" } });
  const v = JSON.parse(obj.choices[0].message.content);
  assert.ok(v && typeof v === "object" && !Array.isArray(v));
  const schema = { type: "object", properties: { name: { type: "string", maxLength: 12 }, age: { type: "integer" } },
                   required: ["name", "age"], additionalProperties: false };
  const r = await client.chat.completions.create({ ...plain, max_tokens: 64,
    response_format: { type: "json_schema", json_schema: { name: "pet", schema, strict: true } } });
  assert.ok(ajv.validate(schema, JSON.parse(r.choices[0].message.content)), r.choices[0].message.content);
  // the SDK's stream helper sees the same text
  const s = await streamChat({ ...plain, max_tokens: 64,
    response_format: { type: "json_schema", json_schema: { name: "pet", schema, strict: true } } });
  assert.equal(s.content, r.choices[0].message.content);
  await assert.rejects(client.chat.completions.create({ ...plain, max_tokens: 4,
    response_format: { type: "yaml" } }), (e) => e.status === 400 && e.param === "response_format.type");
});

const weather = { type: "function", function: { name: "get_weather", description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } },
                required: ["city", "days"], additionalProperties: false } } };
const clock = { type: "function", function: { name: "get_time", description: "The time now",
  parameters: { type: "object", properties: {} } } };

test("chat: tool_choice required and named give calls; deltas join to valid JSON arguments", async () => {
  for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
    const params = { ...plain, max_tokens: 80, tools: [weather, clock], tool_choice };
    const r = await client.chat.completions.create(params);
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, "tool_calls");
    assert.equal(m.content, null);
    assert.ok(m.tool_calls.length >= 1);
    for (const call of m.tool_calls) {
      assert.match(call.id, /^call_/);
      assert.equal(call.type, "function");
      assert.ok(["get_weather", "get_time"].includes(call.function.name));
      if (typeof tool_choice === "object") assert.equal(call.function.name, "get_weather");
      assert.equal(typeof call.function.arguments, "string");
      const args = JSON.parse(call.function.arguments);
      if (call.function.name === "get_weather") assert.ok(ajv.validate(weather.function.parameters, args));
    }
    assert.equal(new Set(m.tool_calls.map((c) => c.id)).size, m.tool_calls.length);

    // raw deltas: the first for each index names id, type and function; pieces concatenate
    const s = await streamChat(params);
    assert.equal(s.finish, "tool_calls");
    assert.deepEqual(uncached(s.usage), uncached(r.usage));
    const calls = [];
    for (const chunk of s.chunks) {
      for (const d of chunk.choices[0]?.delta.tool_calls || []) {
        assert.equal(typeof d.index, "number");
        if (!calls[d.index]) {
          assert.match(d.id, /^call_/);
          assert.equal(d.type, "function");
          assert.equal(typeof d.function.name, "string");
          calls[d.index] = { name: d.function.name, arguments: d.function.arguments || "" };
        } else {
          assert.equal(d.id, undefined);
          calls[d.index].arguments += d.function.arguments || "";
        }
      }
    }
    assert.deepEqual(calls.map((c) => c.name), m.tool_calls.map((c) => c.function.name));
    assert.deepEqual(calls.map((c) => JSON.parse(c.arguments)), m.tool_calls.map((c) => JSON.parse(c.function.arguments)));

    // the SDK's stream helper builds the same calls
    const helper = client.chat.completions.stream(params);
    const final = await helper.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, "tool_calls");
    assert.deepEqual(final.choices[0].message.tool_calls.map((c) => [c.type, c.function.name, c.function.arguments]),
                     m.tool_calls.map((c) => [c.type, c.function.name, c.function.arguments]));
  }
});

test("chat: tool_choice auto and none; a call and its results in history; unknown fields ignored", async () => {
  const history = [
    { role: "system", content: "You can call tools." },
    { role: "user", content: "Weather in Paris and the time?" },
    { role: "assistant", content: null, tool_calls: [
      { id: "call_a", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\",\"days\":1}" } },
      { id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } }] },
    { role: "tool", tool_call_id: "call_a", content: "sunny" },
    { role: "tool", tool_call_id: "call_b", content: [{ type: "text", text: "noon" }] },
  ];
  const auto = await client.chat.completions.create({ ...plain, messages: history, tools: [weather, clock],
    tool_choice: "auto", max_tokens: 6 });
  assert.ok(["length", "stop", "tool_calls"].includes(auto.choices[0].finish_reason));
  const tpl = await post("/apply-template", { messages: history, tools: [weather, clock], reasoning_effort: "none" });
  assert.equal(auto.usage.prompt_tokens, tpl.body.count);
  assert.ok(tpl.body.prompt.includes("sunny") && tpl.body.prompt.includes("noon"));
  assert.ok(tpl.body.prompt.includes("get_weather"));

  // a call replayed without arguments (its deltas carried none) and a refusal part replay too
  const replay = [
    { role: "user", content: "What time is it?" },
    { role: "assistant", content: null, refusal: null, tool_calls: [
      { id: "call_c", type: "function", function: { name: "get_time", arguments: "" } }] },
    { role: "tool", tool_call_id: "call_c", content: "noon" },
    { role: "assistant", content: [{ type: "refusal", refusal: "I cannot say more." }] },
    { role: "user", content: "Fine." },
  ];
  const rp = await client.chat.completions.create({ ...plain, messages: replay, tools: [weather, clock], max_tokens: 3 });
  assert.equal(rp.usage.completion_tokens, 3);
  const rpt = await post("/apply-template", { messages: replay, tools: [weather, clock], reasoning_effort: "none" });
  assert.equal(rpt.status, 200, JSON.stringify(rpt.body));
  assert.ok(rpt.body.prompt.includes("I cannot say more."));
  assert.ok(rpt.body.prompt.includes("<function=get_time>"), rpt.body.prompt);

  const none = await client.chat.completions.create({ ...plain, messages: ask, tools: [weather, clock],
    tool_choice: "none", max_tokens: 6 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  const bare = await client.chat.completions.create({ ...plain, messages: ask, max_tokens: 6 });
  assert.equal(none.usage.prompt_tokens, bare.usage.prompt_tokens, "tool_choice none renders no tools");
  assert.equal(none.choices[0].message.content, bare.choices[0].message.content);

  // fields this server does not use are ignored, as OpenAI's clients send them
  const extra = await client.chat.completions.create({ ...plain, messages: ask, max_tokens: 6,
    user: "u-1", store: false, metadata: { a: "b" }, parallel_tool_calls: true, service_tier: "auto",
    frequency_penalty: 0, presence_penalty: 0, logit_bias: {}, prediction: null, modalities: ["text"],
    some_future_field: { x: 1 } });
  assert.equal(extra.choices[0].message.content, bare.choices[0].message.content);
});

test("chat: wrong types get a 400 in OpenAI's error shape naming the field", async () => {
  const ok = { model: MODEL, messages: ask, max_tokens: 4 };
  const cases = [
    [{ ...ok, temperature: "hot" }, "temperature"],
    [{ ...ok, top_p: 2 }, "top_p"],
    [{ ...ok, max_tokens: "4" }, "max_tokens"],
    [{ ...ok, max_tokens: undefined, max_completion_tokens: -1 }, "max_completion_tokens"],
    [{ ...ok, n: 3 }, "n"],
    [{ ...ok, seed: 1.5 }, "seed"],
    [{ ...ok, stream: "yes" }, "stream"],
    [{ ...ok, stream_options: 1 }, "stream_options"],
    [{ ...ok, stop: 5 }, "stop"],
    [{ ...ok, stop: ["a", 1] }, "stop[1]"],
    [{ ...ok, logprobs: "yes" }, "logprobs"],
    [{ ...ok, top_logprobs: 50, logprobs: true }, "top_logprobs"],
    [{ ...ok, messages: "hi" }, "messages"],
    [{ ...ok, messages: [{ role: "wizard", content: "x" }] }, "messages[0].role"],
    [{ ...ok, tools: [{ type: "function", function: {} }] }, "tools[0].function.name"],
    [{ ...ok, tool_choice: "sometimes" }, "tool_choice"],
    [{ ...ok, reasoning_effort: "extreme" }, "reasoning_effort"],
  ];
  for (const [body, param] of cases) {
    const r = await post("/v1/chat/completions", body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.deepEqual(Object.keys(r.body.error).sort(), ["code", "message", "param", "type"]);
    assert.equal(r.body.error.type, "invalid_request_error");
    assert.equal(r.body.error.param, param, JSON.stringify(r.body));
    assert.equal(typeof r.body.error.message, "string");
    assert.equal(typeof r.body.error.code, "string");
  }
  const bad = await post("/v1/chat/completions", "{nope");
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.param, null);
  // an unknown model: 404, as the SDK's NotFoundError
  await assert.rejects(client.chat.completions.create({ ...plain, model: "gpt-nonexistent", max_tokens: 2 }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, "model_not_found");
    assert.equal(e.param, "model");
    assert.equal(e.type, "invalid_request_error");
    return true;
  });
});

test("completions: prompt as text or ids, echo, stop, logprobs in the completions shape", async () => {
  const base = { model: MODEL, prompt: "Once upon a time", max_tokens: 12, temperature: 0 };
  const r = await client.completions.create(base);
  assert.equal(r.object, "text_completion");
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 12);
  const text = r.choices[0].text;
  // the same prompt as token ids, and as a one-element list
  const tok = await post("/tokenize", { content: base.prompt });
  const ids = await client.completions.create({ ...base, prompt: tok.body.tokens });
  assert.equal(ids.choices[0].text, text);
  assert.equal(ids.usage.prompt_tokens, tok.body.tokens.length);
  const one = await client.completions.create({ ...base, prompt: [base.prompt] });
  assert.equal(one.choices[0].text, text);
  // echo puts the prompt first, streamed or not
  const echo = await client.completions.create({ ...base, echo: true });
  assert.equal(echo.choices[0].text, base.prompt + text);
  assert.equal(echo.usage.completion_tokens, 12);
  let streamed = "";
  for await (const c of await client.completions.create({ ...base, echo: true, stream: true })) streamed += c.choices[0]?.text ?? "";
  assert.equal(streamed, base.prompt + text);

  // stop: the text before it; usage the same streamed or not
  const word = text.split(/\s+/).filter((w) => /^[a-z]{3,}$/.test(w))[1];
  assert.ok(word, text);
  const cut = text.slice(0, text.indexOf(word));
  const st = await client.completions.create({ ...base, max_tokens: 40, stop: [word] });
  assert.equal(st.choices[0].text, cut);
  assert.equal(st.choices[0].finish_reason, "stop");
  let sText = "", sFinish = null, sUsage = null;
  for await (const c of await client.completions.create({ ...base, max_tokens: 40, stop: word, stream: true,
                                                          stream_options: { include_usage: true } })) {
    if (c.usage) sUsage = c.usage;
    if (!c.choices.length) continue;
    sText += c.choices[0].text;
    sFinish = c.choices[0].finish_reason || sFinish;
  }
  assert.equal(sText, cut);
  assert.equal(sFinish, "stop");
  assert.deepEqual(sUsage, st.usage);
  assert.ok(st.usage.completion_tokens < 40);

  // logprobs: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}
  const lp = await client.completions.create({ ...base, max_tokens: 6, logprobs: 2 });
  const l = lp.choices[0].logprobs;
  assert.deepEqual(Object.keys(l).sort(), ["text_offset", "token_logprobs", "tokens", "top_logprobs"]);
  assert.equal(l.tokens.length, 6);
  assert.equal(l.tokens.join(""), lp.choices[0].text);
  assert.equal(l.token_logprobs.length, 6);
  l.token_logprobs.forEach((v) => assert.ok(typeof v === "number" && v <= 0));
  l.top_logprobs.forEach((t, i) => {
    assert.equal(Object.keys(t).length, 2);
    assert.equal(t[l.tokens[i]], l.token_logprobs[i]);
  });
  let off = 0;
  l.text_offset.forEach((o, i) => { assert.equal(o, off); off += l.tokens[i].length; });
  // streamed logprobs join to the same lists
  const joined = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for await (const c of await client.completions.create({ ...base, max_tokens: 6, logprobs: 2, stream: true })) {
    const cl = c.choices[0]?.logprobs;
    if (cl) for (const k of Object.keys(joined)) joined[k].push(...cl[k]);
  }
  assert.deepEqual(joined, l);
});

test("completions: unsupported shapes get a 400 naming the field", async () => {
  const ok = { model: MODEL, prompt: "Hi", max_tokens: 2 };
  const cases = [
    [{ ...ok, prompt: ["one", "two"] }, "prompt"],
    [{ ...ok, prompt: 5 }, "prompt"],
    [{ ...ok, prompt: [1, -1] }, "prompt[1]"],
    [{ ...ok, n: 2 }, "n"],
    [{ ...ok, best_of: 3 }, "best_of"],
    [{ ...ok, echo: "yes" }, "echo"],
    [{ ...ok, logprobs: 99 }, "logprobs"],
  ];
  for (const [body, param] of cases) {
    const r = await post("/v1/completions", body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.param, param, JSON.stringify(r.body));
  }
});

const rTools = [{ type: "function", name: "get_weather", description: "Weather for a city",
  parameters: weather.function.parameters, strict: true }];

test("responses: string and item input, instructions, function calls, usage and limits", async () => {
  const base = { model: MODEL, temperature: 0, reasoning: { effort: "none" } };
  const a = await client.responses.create({ ...base, input: "Tell me a story.", instructions: "Be brief.",
                                            max_output_tokens: 8 });
  assert.equal(a.status, "incomplete");
  assert.equal(a.incomplete_details.reason, "max_output_tokens");
  assert.equal(a.instructions, "Be brief.");
  assert.equal(a.usage.output_tokens, 8);
  assert.equal(a.usage.total_tokens, a.usage.input_tokens + 8);
  // the same conversation as items, the instructions as a developer message
  const b = await client.responses.create({ ...base, max_output_tokens: 8, input: [
    { role: "developer", content: "Be brief." },
    { type: "message", role: "user", content: [{ type: "input_text", text: "Tell me a story." }] }] });
  assert.equal(b.output_text, a.output_text);
  assert.equal(b.usage.input_tokens, a.usage.input_tokens);

  // tool_choice required: a function_call item with JSON arguments
  const call = await client.responses.create({ ...base, input: "Weather in Paris?", tools: rTools,
                                               tool_choice: "required", max_output_tokens: 80 });
  assert.equal(call.status, "completed");
  const fc = call.output.find((o) => o.type === "function_call");
  assert.ok(fc, JSON.stringify(call.output));
  assert.equal(fc.name, "get_weather");
  assert.match(fc.call_id, /^call_/);
  assert.equal(fc.status, "completed");
  assert.ok(ajv.validate(rTools[0].parameters, JSON.parse(fc.arguments)));
  const named = await client.responses.create({ ...base, input: "Weather?", tools: rTools,
    tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 80 });
  assert.ok(named.output.some((o) => o.type === "function_call" && o.name === "get_weather"));

  // the call and its output in the next request's input
  const next = await client.responses.create({ ...base, tools: rTools, max_output_tokens: 6, input: [
    { role: "user", content: "Weather in Paris?" },
    { type: "function_call", call_id: fc.call_id, name: fc.name, arguments: fc.arguments },
    { type: "function_call_output", call_id: fc.call_id, output: "sunny" }] });
  assert.equal(next.usage.output_tokens, 6);
  const tpl = await post("/apply-template", { api: "responses", tools: rTools, reasoning: { effort: "none" },
    input: [{ role: "user", content: "Weather in Paris?" },
            { type: "function_call", call_id: fc.call_id, name: fc.name, arguments: fc.arguments },
            { type: "function_call_output", call_id: fc.call_id, output: "sunny" }] });
  assert.equal(next.usage.input_tokens, tpl.body.count);
  assert.ok(tpl.body.prompt.includes("sunny"));

  // text.format json_schema constrains the answer and is echoed
  const schema = { type: "object", properties: { name: { type: "string", maxLength: 12 } }, required: ["name"],
                   additionalProperties: false };
  const js = await client.responses.create({ ...base, input: "Name a pet.", max_output_tokens: 60,
    text: { format: { type: "json_schema", name: "pet", schema, strict: true } } });
  assert.ok(ajv.validate(schema, JSON.parse(js.output_text)), js.output_text);
  assert.equal(js.text.format.type, "json_schema");
  assert.equal(js.text.format.name, "pet");

  const bad = await post("/v1/responses", { input: "hi", max_output_tokens: 0 });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.param, "max_output_tokens");
});

test("responses: the SDK's stream helper builds the final response from every event's fields", async () => {
  const cases = [
    { input: "Hello", max_output_tokens: 400, reasoning: { effort: "none" } },
    { input: "Hello", max_output_tokens: 400, reasoning: { effort: "low" }, thinking_token_budget: 8 },
    { input: "Weather in Paris?", tools: rTools, tool_choice: "required", max_output_tokens: 80,
      reasoning: { effort: "none" } },
  ];
  for (const req of cases) {
    const params = { model: MODEL, temperature: 0, ...req };
    const whole = await client.responses.create(params);
    const stream = client.responses.stream(params);
    const events = [];
    for await (const ev of stream) events.push(ev);
    const final = await stream.finalResponse();
    events.forEach((e, i) => assert.equal(e.sequence_number, i));
    assert.equal(events[0].type, "response.created");
    assert.equal(events[0].response.status, "in_progress");
    assert.equal(events.at(-1).type, "response.completed");
    const ids = new Set();
    for (const e of events) {
      if (e.type === "response.output_item.added") {
        assert.equal(e.output_index, ids.size);
        assert.equal(typeof e.item.id, "string");
        ids.add(e.item.id);
      }
      if ("item_id" in e) assert.ok(ids.has(e.item_id), `${e.type} names an unknown item`);
      if (e.type.endsWith(".delta")) assert.equal(typeof e.delta, "string");
    }
    assert.equal(final.status, "completed");
    assert.deepEqual(uncached(final.usage), uncached(whole.usage));
    assert.deepEqual(final.output.map((o) => o.type), whole.output.map((o) => o.type));
    for (const [i, o] of final.output.entries()) {
      const w = whole.output[i];
      if (o.type === "message") assert.equal(o.content[0].text, w.content[0].text);
      if (o.type === "reasoning") assert.equal(o.content[0].text, w.content[0].text);
      if (o.type === "function_call") {
        assert.equal(o.name, w.name);
        assert.equal(o.arguments, w.arguments);
        JSON.parse(o.arguments);
        // the deltas join to the arguments, as the helper's snapshot does
        const args = events.filter((e) => e.type === "response.function_call_arguments.delta" && e.item_id === o.id)
          .map((e) => e.delta).join("");
        assert.equal(args, o.arguments);
        const done = events.find((e) => e.type === "response.function_call_arguments.done" && e.item_id === o.id);
        assert.equal(done.arguments, o.arguments);
      }
    }
    // the helper's text snapshot equals the completed response's
    assert.equal(final.output_text ?? final.output.filter((o) => o.type === "message")
      .flatMap((o) => o.content).map((c) => c.text).join(""), whole.output_text);
  }
});

test("a client that drops a stream frees its lane", async () => {
  const status = async () => (await fetch(`${server.url}/status`)).json();
  // more streams than lanes, each dropped after its first chunk
  const dropped = [];
  for (let i = 0; i < 20; i++) {
    dropped.push((async () => {
      const ac = new AbortController();
      const stream = await client.completions.create({ model: MODEL, prompt: `Story ${i}: once`, max_tokens: 3000,
        temperature: 1, seed: i, stream: true }, { signal: ac.signal });
      for await (const _ of stream) break; // eslint-disable-line no-unused-vars
      ac.abort();
    })());
  }
  await Promise.all(dropped);
  const t0 = Date.now();
  let admitted = -1;
  // the 20 would take well over a second to run out on their own
  for (let i = 0; i < 25; i++) {
    admitted = (await status()).queue.admitted;
    if (admitted === 0) break;
    await new Promise((res) => setTimeout(res, 20));
  }
  assert.equal(admitted, 0, "dropped streams still hold their lanes");
  const cancelled = server.output().match(/Cancelled · request/g) || [];
  assert.ok(cancelled.length >= 16, `${cancelled.length} of 20 dropped streams were cancelled`);
  const r = await client.chat.completions.create({ ...plain, max_tokens: 4 });
  assert.equal(r.usage.completion_tokens, 4);
  assert.ok(Date.now() - t0 < 3000, `a request after the drops took ${Date.now() - t0} ms`);
});
