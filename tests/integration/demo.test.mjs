// `splash serve --demo` serves the story model shipped in packaging/demo/ and it speaks
// English: a greedy completion of "Once upon a time" and a chat turn asking for a story
// are made of real words, and the greedy completion is the same twice.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./harness.mjs";

let server;

before(async () => {
  server = await startServer([], { demo: true });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

async function post(p, body) {
  const r = await fetch(`${server.url}${p}`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

// Words any short English story uses; random weights produce none of them in order.
const common = new Set(["the", "a", "and", "was", "to", "he", "she", "they", "there", "little",
  "named", "who", "in", "his", "her", "with", "one", "day", "play", "happy", "friend", "said",
  "very", "is", "it", "of", "lived", "had", "saw", "went", "time", "upon", "loved", "big",
  "small", "were", "you", "i", "not", "so", "that", "liked", "on", "at", "from", "felt"]);

// English enough: 20+ words, 10+ different ones, 8+ different common words making up
// a third of the text, and a sentence that ends.
function assertEnglish(text) {
  const words = text.toLowerCase().match(/[a-z]+/g) || [];
  const known = words.filter((w) => common.has(w));
  const ok = words.length >= 20 && new Set(words).size >= 10 && new Set(known).size >= 8 &&
    known.length >= words.length / 3 && /[a-z][.!?]/i.test(text);
  assert.ok(ok, `not English (${known.length}/${words.length} common words): ${JSON.stringify(text)}`);
}

test("demo: greedy 'Once upon a time' continues in English, the same each time", async () => {
  const body = { model: "splash/demo", prompt: "Once upon a time", max_tokens: 48, temperature: 0 };
  const first = await post("/v1/completions", body);
  assert.equal(first.status, 200, JSON.stringify(first.body));
  const text = first.body.choices[0].text;
  assertEnglish(text);
  const again = await post("/v1/completions", body);
  assert.equal(again.body.choices[0].text, text);
});

test("demo: a chat turn asking for a story is answered with one", async () => {
  const r = await post("/v1/chat/completions", {
    model: "splash/demo", messages: [{ role: "user", content: "Tell me a story about a cat." }],
    max_tokens: 64, temperature: 0,
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assertEnglish(r.body.choices[0].message.content);
});
