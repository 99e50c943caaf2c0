// POST /v1/memory/release on a model whose weights the engine repacks at load (Q4_K and
// Q6_K tensors): the engine drops the mapped pages and frees the repacked images, says so
// on its console, and the next requests make them again and answer exactly as before.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";
import { startServer, testdata } from "./harness.mjs";

let server;
let client;

before(async () => {
  server = await startServer([], { model: path.join(testdata, "models/qwen35-tiny-Q4_K_M.gguf") });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
});

after(async () => {
  assert.equal(await server.stop(), 0);
});

async function greedy(prompt) {
  const r = await client.completions.create({ model: "test/stories", prompt, max_tokens: 24, temperature: 0 });
  assert.ok(r.usage.completion_tokens > 0);
  return r.choices[0].text;
}

async function waitFor(pattern, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const m = server.output().match(pattern);
    if (m) return m;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`no console line matching ${pattern}:\n${server.output()}`);
}

test("released weights come back with the same answers", async () => {
  const prompts = ["The quick brown fox", "def fibonacci(n):"];
  const before = [];
  for (const p of prompts) before.push(await greedy(p));
  const res = await fetch(`${server.url}/v1/memory/release`, { method: "POST" });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { status: "released" });
  const m = await waitFor(/Memory released · ([\d.]+) MiB of mapped weights, ([\d.]+) MiB of repacked weights/, 10000);
  // the engine repacks only where the repacked kernels have a SIMD row (AVX-512 VNNI + VBMI)
  const flags = fs.readFileSync("/proc/cpuinfo", "utf8");
  if (/\bavx512_vnni\b/.test(flags) && /\bavx512vbmi\b/.test(flags))
    assert.ok(Number(m[2]) > 0, `the repacked images were freed: ${m[0]}`);
  for (let i = 0; i < prompts.length; i++) assert.equal(await greedy(prompts[i]), before[i]);
});
