// Streamed experts (server.md "Streamed experts"): a MoE whose all-resident load the
// --max-memory budget refuses serves with its experts streamed, answering greedy requests
// as the all-resident server does; a read error fails one request, naming the file, and
// the server serves the next.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { startServer, testdata } from "./harness.mjs";

const model = path.join(testdata, "models/qwen35moe-tiny-Q4_K_M.gguf");
// the weights with every expert (5.4 MiB) and 16 lanes' state do not fit in 8 MiB; the
// other weights, a store and the context do
const tight = ["--max-memory", "8M", "--max-context", "2K"];

async function complete(server, prompt, maxTokens = 16) {
  const res = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "test/stories", prompt, max_tokens: maxTokens, temperature: 0 }),
  });
  return { status: res.status, body: await res.json() };
}

test("--expert-memory off under a budget that cannot hold every expert is refused", async () => {
  await assert.rejects(startServer([...tight, "--expert-memory", "off"], { model }),
                       /need more than the 0\.01 GiB available \(--max-memory\)/);
});

test("auto streams them under that budget and answers as the all-resident server", async () => {
  const prompts = ["Once upon a time", "The little dog", "Hello there"];
  const whole = await startServer(["--expert-memory", "off"], { model });
  const want = [];
  for (const p of prompts) want.push((await complete(whole, p)).body.choices[0].text);
  assert.equal(await whole.stop(), 0);
  const server = await startServer(tight, { model });
  try {
    assert.match(server.output(), /Experts · streamed: a store of [\d.]+ MiB for 3\.6 MiB/);
    for (let i = 0; i < prompts.length; i++) {
      const { status, body } = await complete(server, prompts[i]);
      assert.equal(status, 200, JSON.stringify(body));
      assert.equal(body.choices[0].text, want[i], prompts[i]);
    }
    const status = await (await fetch(`${server.url}/status`)).json();
    const se = status.streamed_experts;
    assert.ok(se && se.cap_bytes > 0 && se.slots > 0, JSON.stringify(se));
    assert.ok(se.decode.loads > 0 && se.decode.routed >= se.decode.read, JSON.stringify(se));
    assert.ok(se.decode.hit_rate >= 0 && se.decode.hit_rate <= 1, JSON.stringify(se));
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("a read error fails one request naming the file; the next is served", async () => {
  const server = await startServer(["--expert-memory", "2M"], {
    model, env: { SPLASH_TEST_EXPERT_READ_FAIL: "5" } });
  try {
    const failed = await complete(server, "Once upon a time");
    assert.ok(failed.status >= 500, JSON.stringify(failed.body));
    assert.match(JSON.stringify(failed.body), /qwen35moe-tiny-Q4_K_M\.gguf: reading expert \d+ of layer \d+/);
    assert.match(JSON.stringify(failed.body), /failed twice: Input\/output error/);
    const next = await complete(server, "Once upon a time");
    assert.equal(next.status, 200, JSON.stringify(next.body));
    assert.equal(next.body.usage.completion_tokens, 16);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("a size for a model without routed experts says it does nothing", async () => {
  const server = await startServer(["--expert-memory", "1G"]);
  try {
    assert.match(server.output(), /Note · --expert-memory: this model has no routed experts; it does nothing/);
    const status = await (await fetch(`${server.url}/status`)).json();
    assert.equal(status.streamed_experts, null);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
