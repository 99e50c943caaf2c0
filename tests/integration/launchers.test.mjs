// The agent launchers against a running server, with stand-in clients on PATH that record what
// they were started with: the runtime lock, each client's configuration, proxies kept off
// loopback, the key named rather than written, file modes, arguments passed through, and the
// refusals (no server, a stale lock, a wrong key, a client not installed).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { startServer, splash } from "./harness.mjs";

const KEY = "launcher-test-key";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "splash-launchers-"));
const data = path.join(tmp, "data");
const home = path.join(tmp, "home");
const bin = path.join(tmp, "bin");
const log = path.join(tmp, "calls.jsonl");
let server;
let lockPath;

// A stand-in client: records its name, arguments and environment, one JSON line per start.
function fakeClient(name) {
  fs.writeFileSync(path.join(bin, name), `#!/usr/bin/env node
const fs = require("fs"), path = require("path");
const argv = process.argv.slice(2);
fs.appendFileSync(process.env.FAKE_LOG, JSON.stringify({ name: ${JSON.stringify(name)}, argv, env: process.env }) + "\\n");
if (${JSON.stringify(name)} === "hermes" && argv[0] === "profile" && argv[1] === "create") {
  const root = process.env.HERMES_HOME || path.join(process.env.HOME, ".hermes");
  fs.mkdirSync(path.join(root, "profiles", argv[2]), { recursive: true });
}
`, { mode: 0o755 });
}

function calls() {
  if (!fs.existsSync(log)) return [];
  return fs.readFileSync(log, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

function launch(args, env = {}) {
  fs.rmSync(log, { force: true });
  const r = spawnSync(splash, args, {
    encoding: "utf8",
    env: { PATH: `${bin}:${process.env.PATH}`, HOME: home, XDG_DATA_HOME: data, FAKE_LOG: log,
           SPLASH_API_KEY: KEY, ...env },
  });
  return { status: r.status, stderr: r.stderr, calls: calls() };
}

before(async () => {
  fs.mkdirSync(bin, { recursive: true });
  fs.mkdirSync(home, { recursive: true });
  // the stand-ins are CommonJS, whatever package.json a parent directory of /tmp holds
  fs.writeFileSync(path.join(bin, "package.json"), '{"type": "commonjs"}\n');
  for (const c of ["claude", "codex", "opencode", "pi", "hermes"]) fakeClient(c);
  server = await startServer(["--max-context", "8K"], { env: { XDG_DATA_HOME: data, SPLASH_API_KEY: KEY } });
  lockPath = path.join(data, "splash", "runtime", `serve-${server.port}.json`);
});

after(async () => {
  assert.equal(await server.stop(), 0);
  // a clean stop takes the lock away
  assert.ok(!fs.existsSync(lockPath));
  fs.rmSync(tmp, { recursive: true, force: true });
});

test("the running server's lock: where it listens and what it serves, the key only named", () => {
  const lock = JSON.parse(fs.readFileSync(lockPath, "utf8"));
  assert.equal(lock.pid, server.proc.pid);
  assert.equal(lock.port, server.port);
  assert.equal(lock.host, "127.0.0.1");
  assert.equal(lock.model, "test/stories");
  assert.equal(lock.context, 8192);
  assert.equal(lock.api_key.variable, "SPLASH_API_KEY");
  assert.match(lock.api_key.sha256, /^[0-9a-f]{64}$/);
  assert.ok(!fs.readFileSync(lockPath, "utf8").includes(KEY));
  assert.equal(fs.statSync(lockPath).mode & 0o777, 0o600);
  assert.equal(fs.statSync(path.dirname(lockPath)).mode & 0o777, 0o700);
});

test("splash claude: Claude Code's environment, proxies off loopback, arguments as given", () => {
  const r = launch(["claude", "--port", String(server.port), "-p", "Say hi", "--output-format", "json"],
    { https_proxy: "http://proxy.invalid:3128", NO_PROXY: "example.com, .corp", ANTHROPIC_API_KEY: "sk-ant-x" });
  assert.equal(r.status, 0, r.stderr);
  const [c] = r.calls;
  assert.deepEqual(c.argv, ["-p", "Say hi", "--output-format", "json"]);
  assert.equal(c.env.ANTHROPIC_BASE_URL, `http://127.0.0.1:${server.port}`);
  for (const v of ["ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
                   "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"])
    assert.equal(c.env[v], "test/stories", v);
  assert.equal(c.env.CLAUDE_CODE_MAX_CONTEXT_TOKENS, "8192");
  // under 128K of context its output reserve is a quarter of it, unless the user set one
  assert.equal(c.env.CLAUDE_CODE_MAX_OUTPUT_TOKENS, "2048");
  const own = launch(["claude", "--port", String(server.port)], { CLAUDE_CODE_MAX_OUTPUT_TOKENS: "999" });
  assert.equal(own.calls[0].env.CLAUDE_CODE_MAX_OUTPUT_TOKENS, "999");
  assert.equal(c.env.ANTHROPIC_AUTH_TOKEN, KEY);
  assert.equal(c.env.ANTHROPIC_API_KEY, undefined); // an Anthropic key never reaches this server
  assert.equal(c.env.NO_PROXY, "example.com,.corp,127.0.0.1,localhost,::1");
  assert.equal(c.env.no_proxy, c.env.NO_PROXY);

  // no proxy set: NO_PROXY untouched; '*' is left as it is
  assert.equal(launch(["claude", "--port", String(server.port)]).calls[0].env.NO_PROXY, undefined);
  const star = launch(["claude", "--port", String(server.port)], { HTTP_PROXY: "http://p:1", no_proxy: "*" });
  assert.equal(star.calls[0].env.no_proxy, "*");
  assert.equal(star.calls[0].env.NO_PROXY, undefined);
});

test("splash codex: --config overrides with a model_providers entry naming SPLASH_API_KEY", () => {
  const r = launch(["codex", "--port", String(server.port), "exec", "--skip-git-repo-check", "hi"]);
  assert.equal(r.status, 0, r.stderr);
  const argv = r.calls[0].argv;
  const overrides = [];
  for (let i = 0; i < argv.length; i++) if (argv[i] === "-c") overrides.push(argv[++i]);
  assert.deepEqual(overrides, [
    'model_provider="splash"',
    'model_providers.splash.name="Splash"',
    `model_providers.splash.base_url="http://127.0.0.1:${server.port}/v1"`,
    'model_providers.splash.wire_api="responses"',
    'model="test/stories"',
    "model_context_window=8192",
    'model_providers.splash.env_key="SPLASH_API_KEY"',
  ]);
  assert.deepEqual(argv.slice(overrides.length * 2), ["exec", "--skip-git-repo-check", "hi"]);
  assert.ok(!argv.join(" ").includes(KEY));
});

test("splash opencode: OPENCODE_CONFIG_CONTENT with the provider, merged into the user's", () => {
  const mine = { theme: "dark", provider: { other: { name: "Other" } } };
  const r = launch(["opencode", "--port", String(server.port), "run", "hi"],
                   { OPENCODE_CONFIG_CONTENT: JSON.stringify(mine) });
  assert.equal(r.status, 0, r.stderr);
  const cfg = JSON.parse(r.calls[0].env.OPENCODE_CONFIG_CONTENT);
  assert.equal(cfg.theme, "dark");
  assert.equal(cfg.provider.other.name, "Other");
  const p = cfg.provider.splash;
  assert.equal(p.npm, "@ai-sdk/openai-compatible");
  assert.equal(p.options.baseURL, `http://127.0.0.1:${server.port}/v1`);
  assert.equal(p.options.apiKey, "{env:SPLASH_API_KEY}");
  // under 128K of context, a quarter of it for output
  assert.deepEqual(p.models["test/stories"].limit, { context: 8192, output: 2048 });
  assert.equal(cfg.model, "splash/test/stories");
  assert.deepEqual(r.calls[0].argv, ["run", "hi"]);
  const bad = launch(["opencode", "--port", String(server.port)], { OPENCODE_CONFIG_CONTENT: "{oops" });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /OPENCODE_CONFIG_CONTENT is not a JSON object/);
});

test("splash pi: its models.json gains the provider, keeps the rest and its mode; -- passes --port", () => {
  const dir = path.join(home, ".pi", "agent");
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, "models.json");
  fs.writeFileSync(file, JSON.stringify({ providers: { ollama: { baseUrl: "http://localhost:11434/v1" } },
                                          other: 1 }), { mode: 0o640 });
  fs.chmodSync(file, 0o640);
  const r = launch(["pi", "--port", String(server.port), "-p", "hi", "--", "--port", "4096"]);
  assert.equal(r.status, 0, r.stderr);
  const name = `splash-${server.port}`;
  assert.deepEqual(r.calls[0].argv, ["--provider", name, "--model", "test/stories", "-p", "hi", "--port", "4096"]);
  const doc = JSON.parse(fs.readFileSync(file, "utf8"));
  assert.equal(doc.other, 1);
  assert.equal(doc.providers.ollama.baseUrl, "http://localhost:11434/v1");
  const p = doc.providers[name];
  assert.equal(p.baseUrl, `http://127.0.0.1:${server.port}/v1`);
  assert.equal(p.api, "openai-completions");
  assert.equal(p.apiKey, "SPLASH_API_KEY"); // Pi reads the variable; the key stays out of the file
  assert.deepEqual(p.models[0], { id: "test/stories", name: "test/stories", reasoning: true, input: ["text"],
                                  contextWindow: 8192, maxTokens: 32768 });
  assert.ok(!fs.readFileSync(file, "utf8").includes(KEY));
  assert.equal(fs.statSync(file).mode & 0o777, 0o640);

  // a new file is private; the user's own --model wins; subcommands get no model
  const fresh = path.join(tmp, "pi-fresh");
  const r2 = launch(["pi", "--port", String(server.port), "--model", "x"], { PI_CODING_AGENT_DIR: fresh });
  assert.equal(fs.statSync(path.join(fresh, "models.json")).mode & 0o777, 0o600);
  assert.deepEqual(r2.calls[0].argv, ["--model", "x"]);
  assert.deepEqual(launch(["pi", "--port", String(server.port), "list"]).calls[0].argv, ["list"]);
  fs.writeFileSync(file, "[1]");
  const bad = launch(["pi", "--port", String(server.port)]);
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /models\.json: not a JSON object/);
});

test("splash hermes: the splash profile made once, its model settings set by Hermes itself", () => {
  const r = launch(["hermes", "--port", String(server.port), "chat", "-q", "Hello"]);
  assert.equal(r.status, 0, r.stderr);
  const profile = `splash-${server.port}`;
  const argvs = r.calls.map((c) => c.argv);
  assert.deepEqual(argvs[0], ["profile", "create", profile]);
  const sets = Object.fromEntries(argvs.filter((a) => a[3] === "set").map((a) => [a[4], a[5]]));
  assert.deepEqual(sets, {
    [`providers.${profile}.api`]: `http://127.0.0.1:${server.port}/v1`,
    [`providers.${profile}.transport`]: "chat_completions",
    [`providers.${profile}.key_env`]: "SPLASH_API_KEY",
    "model.provider": `custom:${profile}`,
    "model.default": "test/stories",
    "model.context_length": "8192",
    "model.max_tokens": "2048",
  });
  assert.deepEqual(argvs.at(-1), ["-p", profile, "chat", "-q", "Hello"]);
  // the profile exists now: not created again
  const again = launch(["hermes", "--port", String(server.port)]);
  assert.ok(!again.calls.some((c) => c.argv[0] === "profile"));
});

test("refusals: a client not installed, no server, a stale lock, a missing or wrong key", () => {
  const missing = spawnSync(splash, ["claude", "--port", String(server.port)], { encoding: "utf8",
    env: { PATH: "/nonexistent", HOME: home, XDG_DATA_HOME: data } });
  assert.equal(missing.status, 127);
  assert.match(missing.stderr, /Claude Code is not installed .*npm install -g @anthropic-ai\/claude-code/);

  const none = launch(["codex", "--port", "1"]);
  assert.equal(none.status, 1);
  assert.match(none.stderr, new RegExp(`no splash serve is running on port 1; servers run on port ${server.port}`));
  assert.equal(none.calls.length, 0);

  // no port asked for and one server runs: that one
  const only = launch(["codex", "exec", "x"], { SPLASH_PORT: "" });
  assert.equal(only.status, 0, only.stderr);

  // a lock whose server died is ignored
  const stale = path.join(path.dirname(lockPath), "serve-2.json");
  fs.writeFileSync(stale, JSON.stringify({ pid: 999999999, port: 2, host: "127.0.0.1", model: "m", context: 1 }));
  const dead = launch(["pi", "--port", "2"]);
  assert.equal(dead.status, 1);
  assert.match(dead.stderr, /no splash serve is running on port 2/);
  fs.rmSync(stale);

  const nokey = launch(["claude", "--port", String(server.port)], { SPLASH_API_KEY: "" });
  assert.equal(nokey.status, 1);
  assert.match(nokey.stderr, /requires an API key: set SPLASH_API_KEY/);
  const wrong = launch(["claude", "--port", String(server.port)], { SPLASH_API_KEY: "nope" });
  assert.equal(wrong.status, 1);
  assert.match(wrong.stderr, /SPLASH_API_KEY is not the key the server on port \d+ requires/);

  const badPort = launch(["claude", "--port", "http"]);
  assert.equal(badPort.status, 2);
  assert.match(badPort.stderr, /--port: http is not a port/);
});
