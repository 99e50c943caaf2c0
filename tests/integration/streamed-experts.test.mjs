// Streamed experts (server.md "Streamed experts"): a MoE whose all-resident load the
// --max-memory budget refuses serves with its experts streamed, answering greedy requests
// as the all-resident server does; a read error fails one request, naming the file, and
// the server serves the next; an imported MLX checkpoint streams from its planes; an
// automatic store gives its elastic chunks back under memory pressure and takes them back
// after 30 s of calm.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
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
    assert.match(server.output(), /Experts · streamed: a store of [\d.]+ MiB(, its floor [\d.]+ MiB; the chunks above it elastic)? for 3\.6 MiB/);
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
  const server = await startServer(["--expert-memory", "3M"], {
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

test("a long prompt prefills as one group: each layer's experts are read once (3 readers, as /status says)", async () => {
  const server = await startServer(["--expert-memory", "3M", "--max-context", "4K"], {
    model, env: { SPLASH_EXPERT_READERS: "3" } });
  try {
    const words = ["the", "little", "dog", "ran", "over", "a", "hill", "and", "found", "big"];
    let x = 3;
    const prompt = Array.from({ length: 900 }, () => {
      x = (x * 1103515245 + 12345) % 2147483648;
      return words[x % words.length];
    }).join(" ");
    const { status, body } = await complete(server, prompt, 1);
    assert.equal(status, 200, JSON.stringify(body));
    // more than the 1,024 rows of a dense model's step and the trunk's 512-row pieces
    assert.ok(body.usage.prompt_tokens > 1100 && body.usage.prompt_tokens <= 2048,
              JSON.stringify(body.usage));
    const se = (await (await fetch(`${server.url}/status`)).json()).streamed_experts;
    // qwen35moe-tiny's 4 MoE layers, one round each
    assert.equal(se.prefill.loads, 4, JSON.stringify(se.prefill));
    assert.equal(se.readers, 3, JSON.stringify(se));
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

// Elastic chunks: the memory hooks stand in for /proc/pressure/memory and /proc/meminfo
// (in their own formats), the clock hook for the engine's seconds.
test("an automatic store gives chunks back under memory pressure and with released weights, and takes them back after 30 s of calm", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-elastic-"));
  const put = (name, text) => {
    fs.writeFileSync(path.join(dir, name + ".tmp"), text);
    fs.renameSync(path.join(dir, name + ".tmp"), path.join(dir, name));
  };
  const psi = (some, full) =>
    `some avg10=${some} avg60=0.00 avg300=0.00 total=1000\nfull avg10=${full} avg60=0.00 avg300=0.00 total=500\n`;
  const meminfo = (kb) => `MemTotal:       33554432 kB\nMemFree:         1000000 kB\nMemAvailable:   ${kb} kB\n`;
  put("psi", psi("0.00", "0.00"));
  put("meminfo", meminfo(16 * 1024 * 1024));
  put("clock", "0");
  const whole = await startServer(["--expert-memory", "off"], { model });
  const want = (await complete(whole, "Once upon a time")).body.choices[0].text;
  assert.equal(await whole.stop(), 0);
  const server = await startServer(["--max-memory", "9M", "--max-context", "2K"], {
    model, env: { SPLASH_TEST_PSI_FILE: path.join(dir, "psi"),
                  SPLASH_TEST_MEMINFO_FILE: path.join(dir, "meminfo"),
                  SPLASH_TEST_CLOCK_FILE: path.join(dir, "clock") } });
  const status = async () => (await (await fetch(`${server.url}/status`)).json()).streamed_experts;
  const until = async (what, ok) => {
    for (let i = 0; i < 100; i++) {
      const se = await status();
      if (ok(se)) return se;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`${what}: ${JSON.stringify(await status())}\n${server.output()}`);
  };
  try {
    // it starts at its floor and takes its chunks where the host has room
    let se = await status();
    assert.ok(se.floor_bytes < se.cap_bytes, JSON.stringify(se));
    assert.match(server.output(), /Experts · streamed: a store of [\d.]+ MiB, its floor [\d.]+ MiB; the chunks above it elastic for 3\.6 MiB/);
    assert.equal(se.chunks, se.cap_chunks);
    const elastic = se.regrows;
    assert.ok(elastic >= 1, JSON.stringify(se));
    assert.match(server.output(), /Expert store took back a chunk of [\d.]+ MiB \([\d.]+ MiB free beside the 1 GiB margin\)/);
    // PSI says memory is short: a chunk a second goes, down to the floor
    put("psi", psi("35.00", "0.50"));
    for (let t = 1; t <= elastic; t++) {
      put("clock", String(t));
      se = await until(`shrink ${t}`, (s) => s.shrinks === t);
    }
    assert.equal(se.chunks, se.cap_chunks - elastic);
    assert.match(server.output(), /Expert store gave back a chunk of [\d.]+ MiB \(memory pressure: PSI some avg10 35\.00%\) · \d+ of \d+ chunks live/);
    put("clock", String(elastic + 1));
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await status()).shrinks, elastic, "never below the floor");
    // the floor serves as all-resident does
    const got = await complete(server, "Once upon a time");
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.equal(got.body.choices[0].text, want);
    // calm, but not for 30 s: nothing comes back
    put("psi", psi("0.00", "0.00"));
    const calmFrom = elastic + 1;
    put("clock", String(calmFrom + 29));
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await status()).regrows, elastic);
    // after 30 s of calm one chunk comes back, and the next 30 s later
    put("clock", String(calmFrom + 31));
    se = await until("regrow", (s) => s.regrows === elastic + 1);
    assert.match(server.output(), /Expert store took back a chunk of [\d.]+ MiB \([\d.]+ MiB free beside the 1 GiB margin\) · \d+ of \d+ chunks live/);
    put("clock", String(calmFrom + 45));
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await status()).regrows, elastic + 1);
    // the host's room under the 1 GiB margin is a shortage too
    put("meminfo", meminfo(512 * 1024));
    put("clock", String(calmFrom + 46));
    se = await until("shrink under the margin", (s) => s.shrinks === elastic + 1);
    assert.match(server.output(), /Expert store gave back a chunk of [\d.]+ MiB \(the host has 512\.0 MiB free \(MemAvailable\), under its 1 GiB margin\)/);
    const again = await complete(server, "Once upon a time");
    assert.equal(again.body.choices[0].text, want);
    // released weights take the elastic chunks with them; they come back once requests
    // run again, after 30 s of calm
    put("meminfo", meminfo(16 * 1024 * 1024));
    put("clock", String(calmFrom + 100));
    se = await until("regrow before the release", (s) => s.regrows === elastic + 2);
    const rel = await fetch(`${server.url}/v1/memory/release`, { method: "POST" });
    assert.equal(rel.status, 200);
    se = await until("release", (s) => s.shrinks === elastic + 2);
    assert.equal(se.chunks, se.cap_chunks - elastic);
    assert.match(server.output(), /Expert store gave back a chunk of [\d.]+ MiB \(the weights are released\)/);
    put("clock", String(calmFrom + 200));
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await status()).regrows, elastic + 2, "nothing comes back while released");
    const after = await complete(server, "Once upon a time");
    assert.equal(after.body.choices[0].text, want);
    put("clock", String(calmFrom + 201));
    await until("regrow after the release", (s) => s.regrows === elastic + 3);
  } finally {
    assert.equal(await server.stop(), 0);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// An imported MLX checkpoint (switch_mlp stacks of 4-bit planes): its experts stream from
// the planes in its shard through the smallest store, and under a budget that cannot hold
// them all, and the OpenAI SDK gets the text the all-resident server gives.
test("the MLX MoE checkpoint streams at the smallest store and under a tight budget, answering the OpenAI SDK as off does", async () => {
  const dir = path.join(testdata, "safetensors/qwen35moe-tiny-mlx-4bit");
  const experts = JSON.parse(fs.readFileSync(path.join(dir, "config.json"))).text_config.num_experts;
  // the smallest store, as the refusal of a size below it says (readers' staging depends on
  // the machine's CPUs)
  let smallest;
  await assert.rejects(startServer(["--expert-memory", "1K"], { model: dir }), (e) => {
    const m = /below one layer's experts of each format mix \(([\d.]+) MiB with the readers' staging\)/.exec(e.message);
    assert.ok(m, e.message);
    smallest = Number(m[1]);
    return true;
  });
  const size = `${(Math.ceil(smallest * 100) / 100 + 0.005).toFixed(3)}M`;
  const asks = async (server) => {
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
    const texts = [];
    for (const prompt of ["Once upon a time", "The little dog"]) {
      const done = await openai.completions.create({ model: "test/stories", prompt, max_tokens: 16,
                                                     temperature: 0 });
      assert.equal(done.usage.completion_tokens, 16);
      texts.push(done.choices[0].text);
    }
    const chat = await openai.chat.completions.create({
      model: "test/stories", messages: [{ role: "user", content: "Hello there" }], max_tokens: 12,
      temperature: 0 });
    texts.push(chat.choices[0].message.content ?? "");
    return texts;
  };
  const whole = await startServer(["--expert-memory", "off"], { model: dir });
  let want;
  try {
    assert.match(whole.output(), /Experts · [\d.]+ MiB of routed experts load whole \(--expert-memory off\)/);
    want = await asks(whole);
  } finally {
    assert.equal(await whole.stop(), 0);
  }
  const server = await startServer(["--expert-memory", size], { model: dir });
  try {
    assert.match(server.output(), /Experts · streamed: a store of [\d.]+ MiB for 3\.4 MiB of routed experts/);
    assert.deepEqual(await asks(server), want);
    const se = (await (await fetch(`${server.url}/status`)).json()).streamed_experts;
    assert.equal(se.slots, experts, JSON.stringify(se)); // one layer's experts: the smallest
    assert.ok(se.decode.read > 0 && se.decode.bytes_read > 0, JSON.stringify(se));
    assert.equal(se.failure ?? "", "", JSON.stringify(se));
  } finally {
    assert.equal(await server.stop(), 0);
  }
  // larger than the memory given: every expert (4.7 MiB of weights with them) and the
  // context do not fit in 7 MiB; auto streams them from the planes, never importing them
  const mlxTight = ["--max-memory", "7M", "--max-context", "2K"];
  await assert.rejects(startServer([...mlxTight, "--expert-memory", "off"], { model: dir }),
                       /need more than the 0\.01 GiB available \(--max-memory\)/);
  const tight = await startServer(mlxTight, { model: dir });
  try {
    assert.match(tight.output(), /Experts · streamed: a store of [\d.]+ MiB, its floor [\d.]+ MiB; the chunks above it elastic for 3\.4 MiB of routed experts \(auto/);
    assert.deepEqual(await asks(tight), want);
  } finally {
    assert.equal(await tight.stop(), 0);
  }
});
