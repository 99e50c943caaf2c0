// The installer against a fake Hub on loopback (fakehub.mjs): variants, split GGUFs, the
// Hugging Face cache layout, revisions, offline starts, resumes, digests, gated
// repositories, model-check before any weight moves, and bad input.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { FakeHub, splitGguf } from "./fakehub.mjs";
import { freePort, splash, storiesModel, testdata } from "./harness.mjs";

const stories = fs.readFileSync(storiesModel);
const bf16 = fs.readFileSync(path.join(testdata, "models/qwen35-tiny-BF16.gguf"));
const sha256 = (b) => (import("node:crypto").then((c) => c.createHash("sha256").update(b).digest("hex")));

let hub;
const scratchDirs = [];
before(async () => { hub = new FakeHub(); await hub.listen(); });
after(async () => {
  await hub.close();
  for (const d of scratchDirs) fs.rmSync(d, { recursive: true, force: true });
});

function home() {
  hub.faults = {}; // each test's faults are its own
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-hub-"));
  scratchDirs.push(dir);
  return {
    dir,
    cache: path.join(dir, "hf/hub"),
    models: path.join(dir, "data/splash/models"),
    env: { HOME: dir, XDG_DATA_HOME: path.join(dir, "data"), HF_HOME: path.join(dir, "hf"),
           HF_ENDPOINT: hub.url, SPLASH_HUB_RETRIES: "2", HF_TOKEN: "", HF_HUB_OFFLINE: "" },
  };
}

function run(args, env, { onStderr } = {}) {
  return new Promise((resolve) => {
    const proc = spawn(splash, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    proc.stdout.on("data", (d) => { out += d; });
    proc.stderr.on("data", (d) => { err += d; onStderr?.(err, proc); });
    proc.on("exit", (code, signal) => resolve({ code, signal, out, err }));
  });
}

const pull = (h, model, ...extra) => run(["pull", model, ...extra], h.env);
const repoDir = (h, id) => path.join(h.cache, `models--${id.replace("/", "--")}`);
const cdnRequests = (sha) => hub.requests.filter((r) => r.path === `/cdn/${sha}`);
const ggufRepo = (id, extra = {}) => hub.commit(id, { "Stories-Q8_0.gguf": stories, "Stories-BF16.gguf": bf16,
                                                      "README.md": Buffer.from("# a model\n"), ...extra });

test("a GGUF variant installs into the documented cache layout; a second start makes one request", async () => {
  const h = home();
  const commit = ggufRepo("test/Stories-GGUF");
  hub.reset();
  const r = await pull(h, "test/Stories-GGUF:Q8_0");
  assert.equal(r.code, 0, r.err);
  const digest = await sha256(stories);
  const repo = repoDir(h, "test/Stories-GGUF");
  // blobs named by their SHA-256, snapshot links relative to them, refs/main, Splash's pin
  assert.equal(fs.statSync(path.join(repo, "blobs", digest)).size, stories.length);
  const link = path.join(repo, "snapshots", commit, "Stories-Q8_0.gguf");
  assert.equal(fs.readlinkSync(link), `../../blobs/${digest}`);
  assert.equal(fs.readFileSync(path.join(repo, "refs/main"), "utf8"), commit);
  assert.equal(fs.readFileSync(path.join(repo, "refs/splash/test--Stories-GGUF--Q8_0"), "utf8"), commit);
  assert.ok(!fs.existsSync(path.join(repo, "snapshots", commit, "Stories-BF16.gguf")), "only the variant");
  const dir = r.out.trim();
  const meta = JSON.parse(fs.readFileSync(path.join(dir, "model.json"), "utf8"));
  assert.equal(meta.commit, commit);
  assert.equal(meta.files[0].sha256, digest);
  assert.equal(meta.family, "qwen_hybrid");
  assert.equal(fs.realpathSync(path.join(dir, meta.target)), path.join(fs.realpathSync(repo), "blobs", digest));
  assert.match(r.err, /Downloading · test\/Stories-GGUF:Q8_0/);
  assert.ok(hub.bytesServed < stories.length * 1.2, `served ${hub.bytesServed}`);

  hub.reset();
  const again = await pull(h, "test/Stories-GGUF:Q8_0");
  assert.equal(again.code, 0, again.err);
  assert.equal(hub.requests.length, 1, JSON.stringify(hub.requests));
  assert.match(hub.requests[0].path, /^\/api\/models\/test\/Stories-GGUF\/revision\/main$/);
  assert.equal(hub.bytesServed, 0);
  assert.equal(again.out.trim(), dir);

  const list = await run(["models", "--json"], h.env);
  const models = JSON.parse(list.out);
  assert.equal(models.length, 1);
  assert.equal(models[0].model, "test/Stories-GGUF:Q8_0");
});

test("a header that fails model-check downloads no weights", async () => {
  const h = home();
  ggufRepo("test/Refused-GGUF");
  hub.reset();
  const r = await pull(h, "test/Refused-GGUF:BF16");
  assert.equal(r.code, 1);
  assert.match(r.err, /model-check refused it before any weight download: .*quantiz/i);
  assert.ok(hub.bytesServed < bf16.length / 4, `served ${hub.bytesServed} of ${bf16.length}`);
  assert.ok(hub.requests.every((q) => q.method !== "GET" || !q.path.startsWith("/cdn/") || q.range), "range reads only");
  assert.ok(!fs.existsSync(path.join(h.models, "test--Refused-GGUF--BF16", "current")));
});

test("a split GGUF in a folder installs; a new commit downloads only the changed part", async () => {
  const h = home();
  const [p1, p2] = splitGguf(stories, 2);
  const files = { "Q8_0/Stories-Q8_0-00001-of-00002.gguf": p1, "Q8_0/Stories-Q8_0-00002-of-00002.gguf": p2,
                  "Stories-BF16.gguf": bf16 };
  const commit1 = hub.commit("test/Split-GGUF", files);
  const r = await pull(h, "test/Split-GGUF:q8_0");
  assert.equal(r.code, 0, r.err);
  const dir = r.out.trim();
  assert.ok(fs.existsSync(path.join(dir, "target/Stories-Q8_0-00001-of-00002.gguf")));
  assert.ok(fs.existsSync(path.join(dir, "target/Stories-Q8_0-00002-of-00002.gguf")));
  const check = await run(["model-check", path.join(dir, "target/Stories-Q8_0-00001-of-00002.gguf")], h.env);
  assert.equal(check.code, 0, check.err);

  const p2b = Buffer.from(p2); p2b[p2b.length - 1] ^= 1; // a weight byte changes in part 2
  const commit2 = hub.commit("test/Split-GGUF", { ...files, "Q8_0/Stories-Q8_0-00002-of-00002.gguf": p2b });
  hub.reset();
  const r2 = await pull(h, "test/Split-GGUF:q8_0");
  assert.equal(r2.code, 0, r2.err);
  assert.equal(cdnRequests(await sha256(p1)).length, 0, "part 1 is not fetched again");
  assert.ok(cdnRequests(await sha256(p2b)).some((q) => !q.range), "part 2 is downloaded");
  assert.ok(hub.bytesServed < p2b.length + (1 << 20), `served ${hub.bytesServed}`);
  const meta = JSON.parse(fs.readFileSync(path.join(r2.out.trim(), "model.json"), "utf8"));
  assert.equal(meta.commit, commit2);
  // the earlier commit's assembly, snapshot and the blob only it used are freed
  const repo = repoDir(h, "test/Split-GGUF");
  assert.ok(!fs.existsSync(dir), "the earlier assembly is removed");
  assert.ok(!fs.existsSync(path.join(repo, "snapshots", commit1)));
  assert.ok(!fs.existsSync(path.join(repo, "blobs", await sha256(p2))));
  assert.ok(fs.existsSync(path.join(repo, "blobs", await sha256(p1))), "the shared part stays");

  // an assembly a server holds is kept, with its files
  const held = spawn("flock", ["-s", path.join(r2.out.trim(), "model.json"), "sleep", "20"], { stdio: "ignore" });
  await new Promise((resolve) => setTimeout(resolve, 300));
  hub.commit("test/Split-GGUF", { ...files, "Q8_0/Stories-Q8_0-00002-of-00002.gguf": p2 });
  const r3 = await pull(h, "test/Split-GGUF:q8_0");
  held.kill();
  assert.equal(r3.code, 0, r3.err);
  assert.match(r3.err, /kept [0-9a-f]{12}: a running server holds it/);
  assert.ok(fs.existsSync(path.join(r2.out.trim(), "model.json")));
  assert.ok(fs.existsSync(path.join(repo, "blobs", await sha256(p2b))));
});

test("--offline, HF_HUB_OFFLINE, a pinned commit and an unreachable or silent Hub start the installed model", async () => {
  const h = home();
  const commit = ggufRepo("test/Offline-GGUF");
  assert.equal((await pull(h, "test/Offline-GGUF:Q8_0")).code, 0);
  hub.reset();
  const off = await pull(h, "test/Offline-GGUF:Q8_0", "--offline");
  assert.equal(off.code, 0, off.err);
  assert.match(off.err, /Hub · --offline; starting the installed/);
  const env = await run(["pull", "test/Offline-GGUF:Q8_0"], { ...h.env, HF_HUB_OFFLINE: "1" });
  assert.equal(env.code, 0, env.err);
  assert.equal(hub.requests.length, 0);

  const closed = await freePort();
  const down = await run(["pull", "test/Offline-GGUF:Q8_0"], { ...h.env, HF_ENDPOINT: `http://127.0.0.1:${closed}` });
  assert.equal(down.code, 0, down.err);
  assert.match(down.err, /Hub · the Hub at http:\/\/127\.0\.0\.1:\d+ .*; starting the installed test\/Offline-GGUF:Q8_0/);

  hub.faults.hangApi = true;
  const t0 = Date.now();
  const silent = await pull(h, "test/Offline-GGUF:Q8_0");
  hub.faults.hangApi = false;
  assert.equal(silent.code, 0, silent.err);
  assert.match(silent.err, /did not answer within 5 s; starting the installed/);
  assert.ok(Date.now() - t0 < 9000);

  // a damaged installation is rebuilt from the cache without the Hub
  const installed = fs.realpathSync(path.join(h.models, "test--Offline-GGUF--Q8_0", "current"));
  fs.unlinkSync(path.join(installed, "target/Stories-Q8_0.gguf"));
  hub.reset();
  const rebuilt = await pull(h, "test/Offline-GGUF:Q8_0", "--offline");
  assert.equal(rebuilt.code, 0, rebuilt.err);
  assert.match(rebuilt.err, /installed test\/Offline-GGUF:Q8_0 at [0-9a-f]{12} from the Hugging Face cache/);
  assert.ok(fs.existsSync(path.join(installed, "target/Stories-Q8_0.gguf")));
  assert.equal(hub.requests.length, 0);
  // without its blob, nothing is served and the line says why
  fs.unlinkSync(path.join(installed, "target/Stories-Q8_0.gguf"));
  const blob = path.join(repoDir(h, "test/Offline-GGUF"), "blobs", await sha256(stories));
  fs.renameSync(blob, blob + ".away");
  const gone = await pull(h, "test/Offline-GGUF:Q8_0", "--offline");
  assert.equal(gone.code, 1);
  assert.match(gone.err, /Stories-Q8_0.gguf: a broken link \(its blob is gone\)/);
  fs.renameSync(blob + ".away", blob);
  assert.equal((await pull(h, "test/Offline-GGUF:Q8_0", "--offline")).code, 0);

  // the 40-hex revision never moves: installed once, then no request
  const pinned = await pull(h, "test/Offline-GGUF:Q8_0", "--revision", commit);
  assert.equal(pinned.code, 0, pinned.err);
  hub.reset();
  assert.equal((await pull(h, "test/Offline-GGUF:Q8_0", "--revision", commit)).code, 0);
  assert.equal(hub.requests.length, 0);
});

test("a download killed halfway resumes from its .incomplete file", async () => {
  const h = home();
  ggufRepo("test/Resume-GGUF");
  const digest = await sha256(stories);
  const half = stories.length >> 1;
  hub.faults.stall = { [digest]: half };
  const incomplete = path.join(repoDir(h, "test/Resume-GGUF"), "blobs", `${digest}.incomplete`);
  const killed = await new Promise((resolve) => {
    const proc = spawn(splash, ["pull", "test/Resume-GGUF:Q8_0"], { env: { ...process.env, ...h.env }, stdio: "ignore" });
    const timer = setInterval(() => {
      if (fs.existsSync(incomplete) && fs.statSync(incomplete).size >= half) { clearInterval(timer); proc.kill("SIGKILL"); }
    }, 50);
    proc.on("exit", (code, signal) => { clearInterval(timer); resolve(signal); });
  });
  assert.equal(killed, "SIGKILL");
  delete hub.faults.stall;
  hub.reset();
  const r = await pull(h, "test/Resume-GGUF:Q8_0");
  assert.equal(r.code, 0, r.err);
  const gets = cdnRequests(digest).filter((q) => q.range && q.range !== `bytes=0-${(256 << 10) - 1}`);
  assert.ok(gets.some((q) => q.range === `bytes=${half}-`), JSON.stringify(hub.requests));
  assert.ok(hub.bytesServed <= stories.length - half + (1 << 20), `served ${hub.bytesServed}`);
  assert.ok(!fs.existsSync(incomplete));
});

test("a dropped connection resumes; a wrong digest is refused and fetched again", async () => {
  const digest = await sha256(stories);
  let h = home();
  ggufRepo("test/Digest-GGUF");
  hub.faults.cutAt = { [digest]: 1 << 20 };
  hub.reset();
  let r = await pull(h, "test/Digest-GGUF:Q8_0");
  assert.equal(r.code, 0, r.err);
  assert.ok(cdnRequests(digest).some((q) => q.range === `bytes=${1 << 20}-`), "resumed after the cut");

  h = home();
  hub.faults.corruptOnce = new Set([digest]);
  hub.reset();
  r = await pull(h, "test/Digest-GGUF:Q8_0");
  assert.equal(r.code, 0, r.err);
  assert.equal(cdnRequests(digest).filter((q) => !q.range).length, 2, "fetched again after the bad digest");
  const blob = fs.readFileSync(path.join(repoDir(h, "test/Digest-GGUF"), "blobs", digest));
  assert.ok(blob.equals(stories));

  // a blob that never matches its digest is refused, and nothing is installed
  h = home();
  hub.commit("test/Lying-GGUF", { "Lying-Q8_0.gguf": stories });
  hub.blobs.set(digest, Buffer.from(stories).fill(7, stories.length - 16)); // same size, other bytes
  r = await pull(h, "test/Lying-GGUF");
  hub.blobs.set(digest, stories);
  assert.equal(r.code, 1);
  assert.match(r.err, /Lying-Q8_0.gguf: its SHA-256 is [0-9a-f]{16}\.\.\., the listing's [0-9a-f]{16}\.\.\. \(fetched twice\)/);
  assert.ok(!fs.existsSync(path.join(h.models, "test--Lying-GGUF", "current")));
  assert.ok(!fs.existsSync(path.join(repoDir(h, "test/Lying-GGUF"), "blobs", digest)));
});

test("gated, missing and unknown revisions give one clear line", async () => {
  const h = home();
  hub.commit("test/Gated-GGUF", { "Stories-Q8_0.gguf": stories }, { gated: true });
  const r = await pull(h, "test/Gated-GGUF");
  assert.equal(r.code, 1);
  assert.equal(r.err.trim().split("\n").length, 1, r.err);
  assert.match(r.err, /test\/Gated-GGUF is gated: accept its terms at .*set HF_TOKEN or run hf auth login/);
  const bad = await run(["pull", "test/Gated-GGUF"], { ...h.env, HF_TOKEN: "hf_wrong" });
  assert.match(bad.err, /this token has no access/);
  const missing = await pull(h, "test/Nothing-GGUF");
  assert.match(missing.err, /test\/Nothing-GGUF: no such model repository, or it is private/);
  // the token file `hf auth login` writes
  fs.mkdirSync(path.join(h.dir, "hf"), { recursive: true });
  fs.writeFileSync(path.join(h.dir, "hf/token"), "hf_good\n");
  const ok = await pull(h, "test/Gated-GGUF");
  assert.equal(ok.code, 0, ok.err);
  const rev = await pull(h, "test/Gated-GGUF", "--revision", "v9");
  assert.match(rev.err, /test\/Gated-GGUF has no revision v9/);
});

test("a cache made by the documented layout is read as-is, offline and online", async () => {
  const h = home();
  const digest = await sha256(stories);
  const commit = hub.commit("test/Hand-GGUF", { "Hand-Q8_0.gguf": stories });
  const repo = repoDir(h, "test/Hand-GGUF");
  fs.mkdirSync(path.join(repo, "blobs"), { recursive: true });
  fs.mkdirSync(path.join(repo, "snapshots", commit), { recursive: true });
  fs.mkdirSync(path.join(repo, "refs"), { recursive: true });
  fs.writeFileSync(path.join(repo, "blobs", digest), stories);
  fs.symlinkSync(`../../blobs/${digest}`, path.join(repo, "snapshots", commit, "Hand-Q8_0.gguf"));
  fs.writeFileSync(path.join(repo, "refs/main"), commit);
  hub.reset();
  const off = await pull(h, "test/Hand-GGUF", "--offline");
  assert.equal(off.code, 0, off.err);
  assert.equal(hub.requests.length, 0);
  fs.rmSync(h.models, { recursive: true });
  const on = await pull(h, "test/Hand-GGUF:Q8_0");
  assert.equal(on.code, 0, on.err);
  assert.equal(hub.bytesServed, 0, "another tool's download is reused");
});

test("bad input: lying sizes, truncated bodies, redirect loops, stalls and escaping links", async () => {
  const h = home();
  const digest = await sha256(stories);
  ggufRepo("test/Bad-GGUF");
  const notInstalled = () => assert.ok(!fs.existsSync(path.join(h.models, "test--Bad-GGUF--Q8_0", "current")));

  hub.faults.lieSize = { "Stories-Q8_0.gguf": stories.length - 100 };
  let r = await pull(h, "test/Bad-GGUF:Q8_0");
  assert.equal(r.code, 1);
  assert.match(r.err, /Stories-Q8_0.gguf: the server sent more than the \d+ bytes the listing gives/);
  hub.faults.lieSize = { "Stories-Q8_0.gguf": stories.length + 100 };
  r = await pull(h, "test/Bad-GGUF:Q8_0");
  assert.equal(r.code, 1);
  assert.match(r.err, /Stories-Q8_0.gguf: .*(ended after|refused to resume)/);
  delete hub.faults.lieSize;
  notInstalled();

  hub.faults.redirectLoop = true;
  r = await pull(h, "test/Bad-GGUF:Q8_0");
  hub.faults.redirectLoop = false;
  assert.equal(r.code, 1);
  assert.match(r.err, /redirect loop/);
  notInstalled();

  hub.faults.stall = { [digest]: 4096 };
  r = await run(["pull", "test/Bad-GGUF:Q8_0"], { ...h.env, SPLASH_HUB_STALL_SECONDS: "1", SPLASH_HUB_RETRIES: "1" });
  delete hub.faults.stall;
  assert.equal(r.code, 1);
  assert.match(r.err, /no data for 1 s|did not answer/);
  notInstalled();

  // a snapshot link leaving the cache is refused
  const commit = hub.commit("test/Escape-GGUF", { "Escape-Q8_0.gguf": stories });
  const repo = repoDir(h, "test/Escape-GGUF");
  fs.mkdirSync(path.join(repo, "snapshots", commit), { recursive: true });
  fs.mkdirSync(path.join(repo, "refs"), { recursive: true });
  fs.writeFileSync(path.join(repo, "refs/main"), commit);
  fs.symlinkSync(storiesModel, path.join(repo, "snapshots", commit, "Escape-Q8_0.gguf"));
  r = await pull(h, "test/Escape-GGUF", "--offline");
  assert.equal(r.code, 1);
  assert.match(r.err, /the link leaves the cache's repository/);
  assert.ok(!fs.existsSync(path.join(h.models, "test--Escape-GGUF", "current")));
});

test("splash serve --model OWNER/REPO:VARIANT through HF_ENDPOINT answers a chat completion", async () => {
  const h = home();
  ggufRepo("test/Serve-GGUF");
  const port = await freePort();
  const proc = spawn(splash, ["serve", "--model", "test/Serve-GGUF:Q8_0", "--port", String(port), "--threads", "1"],
                     { env: { ...process.env, ...h.env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout.on("data", (d) => { out += d; });
  proc.stderr.on("data", (d) => { out += d; });
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no Serving line:\n${out}`)), 60000);
      proc.stdout.on("data", () => { if (out.includes("Serving ·")) { clearTimeout(timer); resolve(); } });
      proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`exited ${code}:\n${out}`)); });
    });
    assert.match(out, /Downloading · test\/Serve-GGUF:Q8_0/);
    const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "test/Serve-GGUF:Q8_0", messages: [{ role: "user", content: "Once" }], max_tokens: 4 }),
    });
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.object, "chat.completion");
  } finally {
    proc.kill("SIGTERM");
    await new Promise((resolve) => (proc.exitCode !== null ? resolve() : proc.on("exit", resolve)));
  }
});

test("an MLX repository installs its config, tokenizer and shards after model-check on their headers", async () => {
  const h = home();
  const dir = path.join(testdata, "safetensors/qwen35-stories-mlx-4bit");
  const files = {};
  for (const f of fs.readdirSync(dir)) files[f] = fs.readFileSync(path.join(dir, f));
  files["README.md"] = Buffer.from("# mlx\n");
  hub.commit("test/Stories-MLX", files);
  hub.reset();
  const r = await pull(h, "test/Stories-MLX");
  assert.equal(r.code, 0, r.err);
  const out = r.out.trim();
  for (const f of ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"])
    assert.ok(fs.readFileSync(path.join(out, "target", f)).equals(files[f]), f);
  assert.ok(!fs.existsSync(path.join(out, "target/README.md")));
  const shard = await sha256(files["model.safetensors"]);
  const reads = cdnRequests(shard);
  assert.ok(reads[0].range, "the shard's header is read by a range request first");
  const check = await run(["model-check", path.join(out, "target")], h.env);
  assert.equal(check.code, 0, check.err);
  // serve starts on the installed checkpoint and answers
  const port = await freePort();
  const proc = spawn(splash, ["serve", "--model", "test/Stories-MLX", "--offline", "--port", String(port), "--threads", "1"],
                     { env: { ...process.env, ...h.env }, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  proc.stdout.on("data", (d) => { log += d; });
  proc.stderr.on("data", (d) => { log += d; });
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no Serving line:\n${log}`)), 60000);
      proc.stdout.on("data", () => { if (log.includes("Serving ·")) { clearTimeout(timer); resolve(); } });
      proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`exited ${code}:\n${log}`)); });
    });
    const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "test/Stories-MLX", prompt: "Once upon a time", max_tokens: 4 }),
    });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).usage.completion_tokens, 4);
  } finally {
    proc.kill("SIGTERM");
    await new Promise((resolve) => (proc.exitCode !== null ? resolve() : proc.on("exit", resolve)));
  }
});
