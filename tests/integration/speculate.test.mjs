// Speculative decoding served: prompt lookup on a prompt that quotes a passage gives the
// text plain decoding gives, and says what it did (usage's prediction counts, /metrics,
// /status verify_rows, the console's Done line).
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { startServer, rawRequest, testdata } from "./harness.mjs";

const moeModel = path.join(testdata, "models/qwen35moe-tiny-Q4_K_M.gguf");

const passage = "The little fox ran to the river, looked at the moon and sang a song about the stars. ";
const prompt = passage + passage + passage.slice(0, 30);

async function complete(server, body) {
  const r = await rawRequest(server.port, { method: "POST", path: "/v1/completions",
    body: JSON.stringify({ model: "test/stories", prompt, max_tokens: 48, temperature: 0, ...body }) });
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body);
}

test("n-gram speculation: the same greedy text as plain decoding, with its counts reported", async () => {
  const off = await startServer(["--speculative", "off"]);
  let plain;
  try {
    plain = await complete(off, {});
    assert.equal(plain.usage.completion_tokens_details.accepted_prediction_tokens, 0);
    const status = JSON.parse((await rawRequest(off.port, { path: "/status" })).body);
    assert.equal(status.verify_rows, "off");
  } finally {
    assert.equal(await off.stop(), 0);
  }
  const on = await startServer(["--speculative", "ngram"]);
  try {
    const spec = await complete(on, {});
    assert.equal(spec.choices[0].text, plain.choices[0].text);
    assert.equal(spec.usage.completion_tokens, plain.usage.completion_tokens);
    const d = spec.usage.completion_tokens_details;
    assert.ok(d.accepted_prediction_tokens > 0, JSON.stringify(spec.usage));
    assert.ok(d.rejected_prediction_tokens >= 0);
    // chat completions carry the same counts
    const chat = await rawRequest(on.port, { method: "POST", path: "/v1/chat/completions",
      body: JSON.stringify({ model: "test/stories", max_tokens: 8, temperature: 0,
                             messages: [{ role: "user", content: prompt }] }) });
    assert.equal(chat.status, 200, chat.body);
    const cu = JSON.parse(chat.body).usage.completion_tokens_details;
    assert.equal(typeof cu.accepted_prediction_tokens, "number");
    assert.equal(typeof cu.rejected_prediction_tokens, "number");
    const status = JSON.parse((await rawRequest(on.port, { path: "/status" })).body);
    assert.equal(status.verify_rows, "budget");
    assert.equal(status.speculation.mode, "ngram");
    const metrics = (await rawRequest(on.port, { path: "/metrics" })).body;
    const value = (name) => Number(metrics.match(new RegExp(`^${name} (\\d+)$`, "m"))[1]);
    assert.ok(value("splash_draft_accepted_tokens_total") >= d.accepted_prediction_tokens);
    assert.ok(value("splash_draft_proposed_tokens_total") >= value("splash_draft_accepted_tokens_total"));
    assert.ok(value("splash_draft_cycles_total") > 0);
    assert.match(on.output(), /Done · request \d+ · output 48 · length · .* · accepted \d+\.\d\/cycle/);
    assert.match(on.output(), /Speculation · prompt lookup \(n-gram\)/);
  } finally {
    assert.equal(await on.stop(), 0);
  }
});

test("the DFlash2 draft served: the same greedy text as plain decoding, its proposals accepted", async () => {
  const draft = path.join(testdata, "drafts/qwen35-stories-DFlash2");
  const story = "Once upon a time, there was a little girl named Lily. She loved to play in the park with her";
  const ask = async (server) => {
    const r = await rawRequest(server.port, { method: "POST", path: "/v1/completions",
      body: JSON.stringify({ model: "test/stories", prompt: story, max_tokens: 40, temperature: 0 }) });
    assert.equal(r.status, 200, r.body);
    return JSON.parse(r.body);
  };
  const off = await startServer(["--speculative", "off"]);
  let plain;
  try { plain = await ask(off); } finally { assert.equal(await off.stop(), 0); }
  const on = await startServer(["--draft-model", draft]);
  try {
    const spec = await ask(on);
    assert.equal(spec.choices[0].text, plain.choices[0].text);
    assert.ok(spec.usage.completion_tokens_details.accepted_prediction_tokens > 10, JSON.stringify(spec.usage));
    const status = JSON.parse((await rawRequest(on.port, { path: "/status" })).body);
    assert.equal(status.speculation.mode, "dflash");
    assert.equal(status.verify_rows, "all");
    assert.match(on.output(), /Draft · .*DFlash2/);
    assert.match(on.output(), /accepted \d+\.\d\/cycle/);
  } finally {
    assert.equal(await on.stop(), 0);
  }
});

test("a MoE target's cycles verify the budget's rows under auto, every row under --verify-rows all", async () => {
  for (const [args, rule] of [[[], "budget"], [["--verify-rows", "all"], "all"]]) {
    const server = await startServer(["--speculative", "ngram", ...args], { model: moeModel });
    try {
      const status = JSON.parse((await rawRequest(server.port, { path: "/status" })).body);
      assert.equal(status.verify_rows, rule);
      assert.match(server.output(), rule === "budget" ? /verify rows: the budget's/ : /verify rows: all the output limit leaves/);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  }
});

test("a request resumed from the prefix cache drafts as the cold one did (the draft's context kept beside the point)", async () => {
  const draft = path.join(testdata, "drafts/qwen35-stories-DFlash2");
  const messages = [
    { role: "system", content: "You tell short stories for children. " + "Keep them kind. ".repeat(20) },
    { role: "user", content: "Tell me a story about a little girl named Lily who loved to play in the park." },
  ];
  const server = await startServer(["--draft-model", draft]);
  try {
    const ask = async () => {
      const r = await rawRequest(server.port, { method: "POST", path: "/v1/chat/completions",
        body: JSON.stringify({ model: "test/stories", messages, max_tokens: 48, temperature: 0,
                               reasoning_effort: "none" }) });
      assert.equal(r.status, 200, r.body);
      return JSON.parse(r.body);
    };
    const cold = await ask();
    const hit = await ask();
    assert.equal(cold.usage.prompt_tokens_details?.cached_tokens ?? 0, 0);
    assert.ok(hit.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(hit.usage));
    assert.equal(hit.choices[0].message.content, cold.choices[0].message.content);
    // the same proposals: greedy cycles accept and reject the same counts
    assert.ok(cold.usage.completion_tokens_details.accepted_prediction_tokens > 10, JSON.stringify(cold.usage));
    assert.deepEqual(hit.usage.completion_tokens_details, cold.usage.completion_tokens_details);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
