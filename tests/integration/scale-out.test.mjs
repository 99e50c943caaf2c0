// Scale-out: two `splash serve` replicas behind Debian's nginx running
// packaging/deploy/nginx/splash.conf (only its listen port and replica addresses
// rewritten). Conversations keep their replica by affinity key; a killed replica's
// conversations move to the other, and its requests in flight end in a clean error.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { startServer } from "./harness.mjs";
import { startNginx } from "./nginx.mjs";

let replicas = [];
let router;
let url;

before(async () => {
  // room in each replica's prefix cache for all 20 conversations once one replica is gone
  const args = ["--max-context", "16K"];
  replicas = await Promise.all([startServer(args), startServer(args)]);
  router = await startNginx(replicas.map((r) => r.port));
  url = router.url;
});

after(async () => {
  if (router) await router.stop();
  await Promise.all(replicas.map((r) => r.stop()));
});

// The replica that answered: the last of nginx's $upstream_addr list.
const replicaOf = (headers) => (headers.get("x-splash-replica") || "").split(",").pop().trim();

// Conversations of three kinds, each with the affinity a real client sends.
function conversations(n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const kind = ["openai", "claude-code", "codex"][i % 3];
    const key = `conv-${i}-${process.pid}`;
    const header = { openai: "X-Session-Affinity", "claude-code": "X-Claude-Code-Session-Id",
      codex: "Session-Id" }[kind];
    out.push({ i, kind, key, headers: { [header]: key }, turns: [], messages: [] });
  }
  return out;
}

// One turn: the conversation so far plus a new user message; returns what nginx and the
// replica said. stream: SSE, so a kill can land while tokens flow; onFirst: called on each
// delta, the reasoning ones too (the stories model's template opens a think block, so all
// it says is reasoning). bias: logit_bias.
async function turn(c, { maxTokens = 6, stream = false, onFirst, bias } = {}) {
  // the first turn carries a long opening, so the prompt spans several of the cache's steps
  const opening = c.messages.length ? "" :
    Array.from({ length: 40 }, (_, k) => `Line ${k} of story ${c.i}: the fox met a bird.`).join(" ") + " ";
  c.messages.push({ role: "user", content: `${opening}Turn ${c.messages.length} of story ${c.i}: tell more.` });
  let text = "";
  let finished = false;
  let response;
  let cached = null;
  let prompt = null;
  if (c.kind === "claude-code") {
    const client = new Anthropic({ baseURL: url, apiKey: "unused", maxRetries: 0 });
    const body = { model: "test/stories", max_tokens: maxTokens, messages: c.messages,
      metadata: { user_id: `user_x_session_${c.key}` }, ...(bias ? { logit_bias: bias } : {}) };
    if (stream) {
      const r = await client.messages.create({ ...body, stream: true }, { headers: c.headers }).withResponse();
      response = r.response;
      for await (const ev of r.data) {
        if (ev.type === "content_block_delta") { text += ev.delta.text || ""; onFirst?.(); }
        if (ev.type === "message_delta" && ev.delta.stop_reason) finished = true;
      }
    } else {
      const r = await client.messages.create(body, { headers: c.headers }).withResponse();
      response = r.response;
      text = r.data.content.map((b) => b.text || "").join("");
      finished = true;
      cached = r.data.usage.cache_read_input_tokens;
      prompt = r.data.usage.input_tokens + cached;
    }
  } else {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const body = { model: "test/stories", max_tokens: maxTokens, messages: c.messages,
      ...(c.kind === "openai" ? { prompt_cache_key: c.key } : { user: "someone" }),
      ...(bias ? { logit_bias: bias } : {}) };
    if (stream) {
      const r = await client.chat.completions.create({ ...body, stream: true }, { headers: c.headers }).withResponse();
      response = r.response;
      for await (const chunk of r.data) {
        const delta = chunk.choices[0]?.delta;
        if (delta?.content) text += delta.content;
        if (delta?.content || delta?.reasoning_content) onFirst?.();
        if (chunk.choices[0]?.finish_reason) finished = true;
      }
    } else {
      const r = await client.chat.completions.create(body, { headers: c.headers }).withResponse();
      response = r.response;
      text = r.data.choices[0].message.content;
      finished = true;
      cached = r.data.usage.prompt_tokens_details?.cached_tokens ?? null;
      prompt = r.data.usage.prompt_tokens;
    }
  }
  c.messages.push({ role: "assistant", content: text || "." });
  const t = { replica: replicaOf(response.headers), affinity: response.headers.get("x-splash-affinity"),
    finished, cached, prompt };
  c.turns.push(t);
  return t;
}

// Whether the replicas keep a prefix cache (the cache work's /status block); only then
// must a later turn read the earlier prompt back.
async function hasPrefixCache(r) {
  const s = await (await fetch(`${r.url}/status`)).json();
  return Boolean(s.prefix_cache?.enabled);
}

test("conversations keep their replica; a killed replica's conversations move", async () => {
  const convs = conversations(20);
  const caching = await hasPrefixCache(replicas[0]);
  // turns 1 and 2: every conversation on one replica, the key echoed; turn 2 goes one
  // request at a time in the reverse order, which round robin would not keep
  await Promise.all(convs.map((c) => turn(c)));
  for (const c of [...convs].reverse())
    await turn(c);
  const ports = replicas.map((r) => `127.0.0.1:${r.port}`);
  for (const c of convs) {
    const [a, b] = c.turns;
    assert.ok(ports.includes(a.replica), `conversation ${c.i} answered by ${a.replica}`);
    assert.equal(b.replica, a.replica, `conversation ${c.i} moved without a failure`);
    assert.equal(a.affinity, c.key, `conversation ${c.i}: the replica echoes the router's key`);
    if (caching)
      assert.ok(b.cached >= 0.9 * a.prompt, `conversation ${c.i}: ${b.cached} of ${a.prompt} cached`);
  }
  const onVictim = convs.filter((c) => c.turns[0].replica === ports[0]);
  assert.ok(onVictim.length > 0 && onVictim.length < convs.length, "the keys spread over both replicas");

  // turn 3: long streams everywhere; the first replica dies once one of its streams flows.
  // +100 on one token keeps every stream going to its max_tokens: left alone, a story can
  // end within a few tokens, before the kill (or, a client behind on a loaded machine,
  // before its first delta is read)
  const ids = await (await fetch(`${replicas[1].url}/tokenize`, { method: "POST",
    body: JSON.stringify({ content: " dragon" }) })).json();
  const bias = { [ids.tokens.at(-1)]: 100 };
  let killed = false;
  const kill = () => {
    if (!killed) { killed = true; replicas[0].proc.kill("SIGKILL"); }
  };
  const results = await Promise.allSettled(convs.map((c) =>
    turn(c, { maxTokens: 400, stream: true, bias, onFirst: onVictim.includes(c) ? kill : undefined })));
  assert.ok(killed, "a stream of the first replica flowed");
  let failed = 0;
  results.forEach((r, i) => {
    const c = convs[i];
    const done = r.status === "fulfilled" && r.value.finished;
    if (!onVictim.includes(c)) {
      assert.ok(done, `conversation ${c.i} on the live replica: ${r.reason || "unfinished"}`);
      return;
    }
    if (!done) {
      failed++;
      // a clean error: the client saw the failure and no finish claimed success
      if (r.status === "fulfilled") c.turns.pop();
      c.messages.pop();
    }
  });
  assert.ok(failed >= 1, "the stream in flight at the kill failed");

  // turn 4: everyone answers, the victim's conversations now on the other replica
  await Promise.all(convs.map((c) => turn(c)));
  for (const c of convs) {
    const last = c.turns.at(-1);
    assert.equal(last.replica, ports[1], `conversation ${c.i} after the kill on ${last.replica}`);
    assert.equal(last.affinity, c.key);
  }
  // turn 5: a moved conversation is warm again on its new replica
  if (caching) {
    await Promise.all(onVictim.map((c) => turn(c)));
    for (const c of onVictim) {
      const [a, b] = c.turns.slice(-2);
      assert.ok(b.cached >= 0.9 * a.prompt, `moved conversation ${c.i}: ${b.cached} of ${a.prompt} cached`);
    }
  }
});
