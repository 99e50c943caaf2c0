// The unmodified agent clients (Claude Code, Codex, OpenCode, Pi; pinned in package.json) run
// headless through their launchers against `splash serve` on the stories model, each completing
// a turn with exit 0. A recording proxy between client and server keeps what they exchange, so
// the request and response shapes are asserted; for Codex and Pi the proxy forces a tool call
// on the first request (tool_choice, which the server's grammar honours) to drive a tool-call
// round trip through the client.
// Nothing leaves loopback: HOME is a temporary directory, telemetry and update checks are off,
// and the proxy variables name a closed local port, so only hosts the launchers exempt
// (127.0.0.1, localhost, ::1) can be reached at all.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { startServer, splash, freePort } from "./harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const clientBin = path.join(here, "node_modules", ".bin");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "splash-agents-"));
const data = path.join(tmp, "data");
const home = path.join(tmp, "home");
const work = path.join(tmp, "work");
let server;
let proxyPort;
let proxy;
let exchanges = [];
let rewrite = null; // { url, fn: (body) => body }, for the next request to url only
let cap = null;     // an output limit for every request, where a client's own runs long

// Forwards to the server and keeps each request and response.
function startProxy(target) {
  return new Promise((resolve) => {
    const srv = http.createServer(async (req, res) => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      let body = Buffer.concat(chunks).toString();
      let json = null;
      try { json = JSON.parse(body); } catch { /* not JSON */ }
      if (json && rewrite && req.url === rewrite.url) {
        json = rewrite.fn(json);
        rewrite = null;
        body = JSON.stringify(json);
      }
      if (json && cap && req.url === "/v1/chat/completions") {
        // max_completion_tokens, where sent, is the limit the server takes
        json = { ...json, max_tokens: Math.min(json.max_tokens ?? cap, cap),
                 ...(json.max_completion_tokens != null
                   ? { max_completion_tokens: Math.min(json.max_completion_tokens, cap) } : {}) };
        body = JSON.stringify(json);
      }
      const headers = { ...req.headers };
      delete headers["content-length"];
      delete headers.host;
      let r, text;
      try {
        r = await fetch(target + req.url, { method: req.method, headers,
          body: ["GET", "HEAD"].includes(req.method) ? undefined : body });
        text = await r.text();
      } catch (e) { // the server went away mid-answer
        exchanges.push({ method: req.method, url: req.url, body: json, status: 502, response: String(e) });
        res.writeHead(502);
        res.end();
        return;
      }
      exchanges.push({ method: req.method, url: req.url, headers: req.headers, body: json,
                       status: r.status, response: text, affinity: r.headers.get("x-splash-affinity") });
      const out = {};
      r.headers.forEach((v, k) => { if (!["content-length", "transfer-encoding", "connection", "content-encoding"].includes(k)) out[k] = v; });
      res.writeHead(r.status, out);
      res.end(text);
    });
    srv.listen(proxyPort, "127.0.0.1", () => resolve(srv));
  });
}

// Runs `splash <client> --port <proxy> ARGS` to its end.
function run(client, args, env = {}, timeoutMs = 150000) {
  exchanges = [];
  return new Promise((resolve) => {
    const p = spawn(splash, [client, "--port", String(proxyPort), ...args], {
      cwd: work, stdio: ["ignore", "pipe", "pipe"],
      env: {
        PATH: `${clientBin}:${process.env.PATH}`, HOME: home, XDG_DATA_HOME: data,
        XDG_CONFIG_HOME: path.join(home, ".config"), XDG_CACHE_HOME: path.join(home, ".cache"),
        TERM: "dumb", LANG: "C.UTF-8",
        // nothing but loopback: the launchers exempt 127.0.0.1, localhost and ::1
        https_proxy: "http://127.0.0.1:9", http_proxy: "http://127.0.0.1:9", all_proxy: "http://127.0.0.1:9",
        ...env,
      },
    });
    let out = "", err = "";
    p.stdout.on("data", (d) => { out += d; });
    p.stderr.on("data", (d) => { err += d; });
    const timer = setTimeout(() => p.kill("SIGKILL"), timeoutMs);
    p.on("exit", (code) => { clearTimeout(timer); resolve({ code, out, err, exchanges }); });
  });
}

const sse = (text) => text.split("\n").filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
  .map((l) => JSON.parse(l.slice(6)));

before(async () => {
  for (const d of [data, home, work]) fs.mkdirSync(d, { recursive: true });
  // Claude Code's prompt with its Read tool alone is about 4K tokens of this tokenizer (19K with
  // all its tools, past the 16K this model's YaRN allows), Codex's 8.4K with short instructions
  // and OpenCode's 12K: past the model's 4K window, within 16K.
  // The stories model never closes a think block: a budget ends it, so answers have text.
  server = await startServer(["--max-context", "16K", "--threads", "2", "--thinking-token-budget", "8"],
                             { env: { XDG_DATA_HOME: data } });
  proxyPort = await freePort();
  proxy = await startProxy(server.url);
  // the proxy stands where the server's lock says it listens
  const dir = path.join(data, "splash", "runtime");
  const lock = JSON.parse(fs.readFileSync(path.join(dir, `serve-${server.port}.json`), "utf8"));
  fs.writeFileSync(path.join(dir, `serve-${proxyPort}.json`), JSON.stringify({ ...lock, port: proxyPort }));
});

after(async () => {
  proxy.close();
  assert.equal(await server.stop(), 0);
  fs.rmSync(tmp, { recursive: true, force: true });
});

test("claude -p: a turn over Messages, its system message inside messages rendered", async () => {
  const r = await run("claude", ["-p", "Say hi", "--tools", "Read"], {
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_AUTOUPDATER: "1", DISABLE_TELEMETRY: "1",
  });
  assert.equal(r.code, 0, r.out + r.err);
  const calls = r.exchanges.filter((e) => e.url.startsWith("/v1/messages"));
  assert.ok(calls.length >= 1, JSON.stringify(r.exchanges.map((e) => e.url)));
  for (const c of calls) {
    assert.equal(c.status, 200, c.response);
    assert.equal(c.body.model, "test/stories");
    assert.equal(c.body.stream, true);
    assert.equal(c.body.max_tokens, 4096); // the launcher's quarter of the 16K context
    assert.equal(c.headers.authorization, "Bearer splash-no-key");
    // its session header, and metadata.user_id (a JSON text naming the session), which the
    // server echoes hashed, being longer than 128 characters (docs/scale-out.md)
    const session = c.headers["x-claude-code-session-id"] ?? "";
    assert.match(session, /^[0-9a-f-]{36}$/);
    assert.equal(JSON.parse(c.body.metadata.user_id).session_id, session);
    const digest = crypto.createHash("sha256").update(c.body.metadata.user_id).digest("hex");
    assert.equal(c.affinity, `sha256:${digest.slice(0, 32)}`);
    // Claude Code 2.1 puts its environment in a system message after the user's
    assert.ok(c.body.messages.some((m, i) => m.role === "system" && i > 0), JSON.stringify(c.body.messages));
    const events = sse(c.response).map((e) => e.type);
    assert.equal(events[0], "message_start");
    assert.equal(events.at(-1), "message_stop");
  }
  // Claude Code samples (temperature 1): the tiny model may end its turn at once, so the
  // printed answer is held to what the server streamed, not to being non-empty
  const streamed = sse(calls.at(-1).response)
    .filter((e) => e.type === "content_block_delta" && e.delta.type === "text_delta")
    .map((e) => e.delta.text).join("");
  assert.equal(r.out.trim(), streamed.trim(), r.err);
});

test("codex exec: a turn over Responses; its namespaced tool's forced call round-trips", async () => {
  // Codex's own 17K-character instructions replaced by a line, to halve its prompt (8.4K tokens)
  const instructions = path.join(tmp, "codex-instructions.md");
  fs.writeFileSync(instructions, "You are Codex, a coding agent. Answer briefly.\n");
  // the first request must call close_agent of the multi_agent_v1 namespace (harmless: no such
  // agent), so Codex has to find its namespaced tool by the name and namespace the server gives
  rewrite = { url: "/v1/responses",
              fn: (body) => ({ ...body, tool_choice: { type: "function", name: "close_agent" },
                               parallel_tool_calls: false, max_output_tokens: 64 }) };
  const r = await run("codex", ["-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false",
                                "-c", `model_instructions_file=${JSON.stringify(instructions)}`,
                                "exec", "--skip-git-repo-check", "Close the helper."]);
  assert.equal(r.code, 0, r.out + r.err);
  const calls = r.exchanges.filter((e) => e.url === "/v1/responses");
  assert.equal(calls.length, 2, JSON.stringify(r.exchanges.map((e) => e.url)));
  const [first, second] = calls;
  assert.equal(first.status, 200, first.response);
  // its session header and prompt_cache_key name the conversation (docs/scale-out.md)
  for (const c of calls) {
    assert.match(c.headers["session-id"] ?? "", /^[0-9a-f-]{36}$/);
    assert.equal(c.body.prompt_cache_key, c.headers["session-id"]);
    assert.equal(c.affinity, c.body.prompt_cache_key);
  }
  assert.ok(first.body.tools.some((t) => t.type === "namespace" && t.name === "multi_agent_v1"));
  assert.ok(first.body.tools.some((t) => t.type === "web_search"), "Codex offers hosted web_search");
  assert.match(server.output(), /Note · Responses tool web_search left out/);
  const events = sse(first.response);
  assert.equal(events[0].type, "response.created");
  assert.equal(events.at(-1).type, "response.completed");
  const call = events.find((e) => e.type === "response.output_item.done" && e.item.type === "function_call").item;
  assert.equal(call.name, "close_agent");
  assert.equal(call.namespace, "multi_agent_v1");
  // Codex ran it (its tool said there is no such agent) and sent the call and its output back
  assert.equal(second.status, 200, second.response);
  const back = second.body.input.find((i) => i.type === "function_call");
  assert.deepEqual([back.name, back.namespace, back.call_id], ["close_agent", "multi_agent_v1", call.call_id]);
  const output = second.body.input.find((i) => i.type === "function_call_output");
  assert.equal(output.call_id, call.call_id);
  assert.equal(sse(second.response).at(-1).type, "response.completed");
  assert.match(r.out + r.err, /tokens used/);
});

test("opencode run: a turn over Chat Completions with its provider from the launcher", async () => {
  // the user's own config, which the launcher merges its provider into: fewer tools, a 5K prompt
  const mine = { tools: { bash: false, task: false, todowrite: false, webfetch: false, edit: false, skill: false } };
  cap = 64; // the stories model may tell a story to OpenCode's whole 4K output limit
  const r = await run("opencode", ["run", "Say hi"], {
    OPENCODE_DISABLE_AUTOUPDATE: "1", OPENCODE_DISABLE_MODELS_FETCH: "1", OPENCODE_DISABLE_SHARE: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1", OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
    OPENCODE_CONFIG_CONTENT: JSON.stringify(mine),
  });
  cap = null;
  assert.equal(r.code, 0, r.out + r.err);
  const calls = r.exchanges.filter((e) => e.url === "/v1/chat/completions");
  assert.ok(calls.length >= 1, JSON.stringify(r.exchanges.map((e) => e.url)));
  for (const c of calls) {
    assert.equal(c.status, 200, c.response);
    assert.equal(c.body.model, "test/stories");
    assert.equal(c.body.stream, true);
    assert.match(c.response, /data: \[DONE\]/);
  }
  // the turn with the agent's tools: the ones the user's config left
  const turn = calls.find((c) => Array.isArray(c.body.tools));
  assert.deepEqual(turn.body.tools.map((t) => t.function.name).sort(), ["glob", "grep", "read"]);
  assert.equal(turn.body.tool_choice, "auto");
});

test("pi -p: a turn, and a forced read tool call whose result goes back to the model", async () => {
  fs.writeFileSync(path.join(work, "notes.txt"), "The cat sat on the mat.\n");
  // the first request must call Pi's read tool (the server constrains the output to the call)
  rewrite = { url: "/v1/chat/completions",
              fn: (body) => ({ ...body, tool_choice: { type: "function", function: { name: "read" } },
                               parallel_tool_calls: false, max_tokens: 48, max_completion_tokens: 48 }) };
  // Pi asks for 32,000 tokens after the call and 13,107 for its next request: the stories
  // model's story then runs as long as it likes, and on a loaded machine a long one
  // outlasts the run's 150 s
  cap = 64;
  const r = await run("pi", ["-p", "Read notes.txt", "--tools", "read", "--offline", "--no-session"],
                      { PI_OFFLINE: "1" });
  cap = null;
  assert.equal(r.code, 0, r.out + r.err);
  const calls = r.exchanges.filter((e) => e.url === "/v1/chat/completions");
  assert.ok(calls.length >= 2, JSON.stringify(calls.map((c) => c.body?.messages?.length)));
  const first = calls[0];
  assert.equal(first.status, 200, first.response);
  assert.deepEqual(first.body.tools.map((t) => t.function.name), ["read"]);
  // the streamed call: an id, the name, arguments that join to JSON
  const deltas = sse(first.response).flatMap((c) => c.choices?.[0]?.delta?.tool_calls || []);
  assert.ok(deltas.length > 0, first.response);
  const id = deltas[0].id;
  assert.equal(deltas[0].function.name, "read");
  const args = JSON.parse(deltas.map((d) => d.function.arguments || "").join(""));
  assert.equal(typeof args.path, "string");
  const finish = sse(first.response).map((c) => c.choices?.[0]?.finish_reason).filter(Boolean);
  assert.deepEqual(finish, ["tool_calls"]);
  // Pi ran the tool and sent its result back with the call
  const second = calls[1];
  assert.equal(second.status, 200, second.response);
  const msgs = second.body.messages;
  const asked = msgs.find((m) => m.role === "assistant" && m.tool_calls);
  assert.equal(asked.tool_calls[0].id, id);
  assert.equal(asked.tool_calls[0].function.name, "read");
  const result = msgs.find((m) => m.role === "tool");
  assert.equal(result.tool_call_id, id);
  assert.ok(JSON.stringify(result.content).length > 0);
  assert.match(second.response, /"finish_reason":"(stop|length)"/);
});
