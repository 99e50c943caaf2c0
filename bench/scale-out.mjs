// Scale-out numbers for docs/scale-out.md: aggregate decode throughput of 2 replicas
// behind nginx against 1 replica (each --threads 1), and how often a conversation's
// next turn lands where its previous one was (and, with a prefix cache, the share of
// prompt tokens it gives) with affinity and with round robin.
//   node bench/scale-out.mjs [conversations=8] [turns=4] [max_tokens=64]
// Run from the repository root after `make` and `npm ci` in tests/integration.
import { startServer } from "../tests/integration/harness.mjs";
import { startNginx } from "../tests/integration/nginx.mjs";

const [nConv = 8, nTurns = 4, maxTokens = 64] = process.argv.slice(2).map(Number);

async function chat(url, conv) {
  // the first turn opens long, as an agent's does, so a turn's prompt spans cache steps
  const opening = conv.messages.length ? "" :
    Array.from({ length: 40 }, (_, k) => `Line ${k} of story ${conv.key}: the fox met a bird.`).join(" ") + " ";
  conv.messages.push({ role: "user", content: `${opening}Part ${conv.messages.length} of story ${conv.key}, go on.` });
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Session-Affinity": conv.key },
    body: JSON.stringify({ model: "test/stories", max_tokens: maxTokens, messages: conv.messages,
      prompt_cache_key: conv.key, temperature: 0 }),
  });
  if (r.status !== 200) throw new Error(`${r.status}: ${await r.text()}`);
  const body = await r.json();
  conv.messages.push({ role: "assistant", content: body.choices[0].message.content || "." });
  return { replica: (r.headers.get("x-splash-replica") || "direct").split(",").pop().trim(),
    usage: body.usage };
}

function shuffled(list, seed) {
  const out = [...list];
  let x = seed * 2654435761 % 4294967296;
  for (let i = out.length - 1; i > 0; i--) {
    x = (x * 1664525 + 1013904223) % 4294967296;
    const j = x % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

async function run(url, label) {
  const convs = Array.from({ length: nConv }, (_, i) => ({ i, key: `${label.replace(/\W+/g, "-")}-${i}`, messages: [], seen: [] }));
  let generated = 0, prompt = 0, cached = 0, same = 0, later = 0;
  const t0 = performance.now();
  for (let t = 0; t < nTurns; t++) {
    // each turn sends the conversations in another (seeded) order, as independent
    // clients would, so round robin does not line up with them by chance
    const order = shuffled(convs, t + 1);
    const out = await Promise.all(order.map((c) => chat(url, c)));
    out.forEach((o, k) => {
      const c = order[k];
      generated += o.usage.completion_tokens;
      if (t > 0) {
        later++;
        same += o.replica === c.seen.at(-1) ? 1 : 0;
        prompt += o.usage.prompt_tokens;
        cached += o.usage.prompt_tokens_details?.cached_tokens ?? 0;
      }
      c.seen.push(o.replica);
    });
  }
  const secs = (performance.now() - t0) / 1000;
  console.log(`${label}: ${generated} tokens in ${secs.toFixed(1)} s = ${(generated / secs).toFixed(1)} tok/s; ` +
    `later turns on the previous replica ${same}/${later}; cached prompt tokens ${cached}/${prompt}`);
}

const servers = [];
try {
  const args = ["--max-context", "16K"]; // prefix-cache room for every conversation
  servers.push(await startServer(args), await startServer(args));
  await run(servers[0].url, "1 replica, direct");
  for (const [label, roundRobin] of [["2 replicas, nginx, affinity", false], ["2 replicas, nginx, round robin", true]]) {
    const router = await startNginx(servers.map((s) => s.port), { roundRobin });
    try {
      await run(router.url, label);
    } finally {
      await router.stop();
    }
  }
} finally {
  await Promise.all(servers.map((s) => s.stop()));
}
