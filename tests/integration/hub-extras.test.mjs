// The installer's drafts, vision projectors and --language-only against the fake Hub
// (fakehub.mjs), and the sweep of models/ folders no server holds.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { FakeHub } from "./fakehub.mjs";
import { freePort, splash, storiesModel, testdata } from "./harness.mjs";

const stories = fs.readFileSync(storiesModel);
const draftDir = path.join(testdata, "drafts/qwen35-stories-DFlash2");
const draftFiles = () => Object.fromEntries(["config.json", "model.safetensors", "mask_embedding.safetensors"]
  .map((f) => [f, fs.readFileSync(path.join(draftDir, f))]));
const sha256 = (b) => crypto.createHash("sha256").update(b).digest("hex");

let hub;
const scratchDirs = [];
before(async () => { hub = new FakeHub(); await hub.listen(); });
after(async () => {
  await hub.close();
  for (const d of scratchDirs) fs.rmSync(d, { recursive: true, force: true });
});

function home() {
  hub.faults = {};
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-hubx-"));
  scratchDirs.push(dir);
  return {
    dir, cache: path.join(dir, "hf/hub"), models: path.join(dir, "data/splash/models"),
    env: { HOME: dir, XDG_DATA_HOME: path.join(dir, "data"), HF_HOME: path.join(dir, "hf"),
           HF_ENDPOINT: hub.url, SPLASH_HUB_RETRIES: "2", HF_TOKEN: "", HF_HUB_OFFLINE: "" },
  };
}

function run(args, env) {
  return new Promise((resolve) => {
    const proc = spawn(splash, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    proc.stdout.on("data", (d) => { out += d; });
    proc.stderr.on("data", (d) => { err += d; });
    proc.on("exit", (code) => resolve({ code, out, err }));
  });
}
const cdn = (data) => hub.requests.filter((r) => r.path === `/cdn/${sha256(data)}`);
const meta = (dir) => JSON.parse(fs.readFileSync(path.join(dir, "model.json"), "utf8"));

// A GGUF of one 32x4 tensor: a clip projector header of the given weight type.
function projector(type /* GGUF type id: 0 F32, 1 F16, 8 Q8_0, 30 BF16 */) {
  const str = (s) => { const b = Buffer.from(s); const l = Buffer.alloc(8); l.writeBigUInt64LE(BigInt(b.length)); return Buffer.concat([l, b]); };
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return b; };
  const head = Buffer.concat([Buffer.from("GGUF"), u32(3), u64(1), u64(1),
    str("general.architecture"), u32(8), str("clip"),
    str("v.patch_embd.weight"), u32(2), u64(32), u64(4), u32(type), u64(0)]);
  const padded = Buffer.concat([head, Buffer.alloc((32 - (head.length % 32)) % 32)]);
  return Buffer.concat([padded, Buffer.alloc(4 * ({ 0: 128, 1: 64, 8: 34, 30: 64 })[type], 1)]);
}

test("the draft --draft-model names installs beside the target and follows its default branch", async () => {
  const h = home();
  hub.commit("test/Draft-GGUF", { "Stories-Q8_0.gguf": stories, "README.md": Buffer.from("# m\n") });
  const files = draftFiles();
  const d1 = hub.commit("test/Stories-DFlash2", { ...files, "README.md": Buffer.from("# d\n") });
  const r = await run(["pull", "test/Draft-GGUF:Q8_0", "--draft-model", "test/Stories-DFlash2"], h.env);
  assert.equal(r.code, 0, r.err);
  const dir = r.out.trim();
  const m = meta(dir);
  assert.deepEqual(m.draft, { repository: "test/Stories-DFlash2", commit: d1,
                              cache: path.join(h.cache, "models--test--Stories-DFlash2") });
  for (const f of Object.keys(files))
    assert.equal(fs.readFileSync(path.join(dir, "draft", f)).length, files[f].length, f);
  assert.ok(!fs.existsSync(path.join(dir, "draft/README.md")), "only the draft's own files");
  assert.ok(m.files.filter((f) => f.role === "draft").length === 3);
  const draftRepo = path.join(h.cache, "models--test--Stories-DFlash2");
  assert.equal(fs.readFileSync(path.join(draftRepo, "refs/main"), "utf8"), d1);
  assert.equal(fs.readFileSync(path.join(draftRepo, "refs/splash/test--Draft-GGUF--Q8_0+draft=test%2FStories-DFlash2"), "utf8"), d1);
  const list = JSON.parse((await run(["models", "--json"], h.env)).out);
  assert.equal(list[0].draft.repository, "test/Stories-DFlash2");

  // a second start asks for both commits and downloads nothing
  hub.reset();
  const again = await run(["pull", "test/Draft-GGUF:Q8_0", "--draft-model", "test/Stories-DFlash2"], h.env);
  assert.equal(again.code, 0, again.err);
  assert.deepEqual(hub.requests.map((q) => q.path), ["/api/models/test/Draft-GGUF/revision/main",
                                                     "/api/models/test/Stories-DFlash2/revision/main"]);
  assert.equal(again.out.trim(), dir);

  // the draft's new commit: only its changed file moves, into a new assembly; the old one goes
  const w2 = Buffer.from(files["model.safetensors"]); w2[w2.length - 1] ^= 1;
  const d2 = hub.commit("test/Stories-DFlash2", { ...files, "model.safetensors": w2 });
  hub.reset();
  const moved = await run(["pull", "test/Draft-GGUF:Q8_0", "--draft-model", "test/Stories-DFlash2"], h.env);
  assert.equal(moved.code, 0, moved.err);
  assert.notEqual(moved.out.trim(), dir);
  assert.equal(meta(moved.out.trim()).draft.commit, d2);
  assert.equal(cdn(w2).length, 1);
  assert.equal(cdn(stories).length + cdn(files["mask_embedding.safetensors"]).length, 0, "nothing else moves");
  assert.ok(!fs.existsSync(dir), "the earlier assembly is removed");
  assert.ok(!fs.existsSync(path.join(draftRepo, "snapshots", d1)), "and the draft commit only it used");
  assert.ok(!fs.existsSync(path.join(draftRepo, "blobs", sha256(files["model.safetensors"]))));
});

test("a draft of another model is refused before its weights move; a local draft directory is linked", async () => {
  const h = home();
  hub.commit("test/Draft2-GGUF", { "Stories-Q8_0.gguf": stories });
  const files = draftFiles();
  const config = JSON.parse(files["config.json"]);
  config.hidden_size = 512;
  hub.commit("test/Other-DFlash2", { ...files, "config.json": Buffer.from(JSON.stringify(config)) });
  hub.reset();
  const r = await run(["pull", "test/Draft2-GGUF:Q8_0", "--draft-model", "test/Other-DFlash2"], h.env);
  assert.equal(r.code, 1);
  assert.match(r.err, /--draft-model test\/Other-DFlash2: draft test\/Other-DFlash2 at \w+: config\.json: hidden_size is 512, the target's hidden size is 256/);
  assert.equal(cdn(files["model.safetensors"]).length, 0, "no draft weight moved");
  assert.equal(cdn(stories).filter((q) => !q.range).length, 0, "no target weight moved");

  const local = await run(["pull", "test/Draft2-GGUF:Q8_0", "--draft-model", draftDir], h.env);
  assert.equal(local.code, 0, local.err);
  const dir = local.out.trim();
  assert.equal(meta(dir).draft.directory, fs.realpathSync(draftDir));
  assert.equal(fs.realpathSync(path.join(dir, "draft/model.safetensors")), fs.realpathSync(path.join(draftDir, "model.safetensors")));

  const bad = await run(["pull", "test/Draft2-GGUF:Q8_0", "--draft-model", "not a repo"], h.env);
  assert.equal(bad.code, 1);
  assert.match(bad.err, /--draft-model not a repo: neither a directory nor OWNER\/REPO/);
});

test("a GGUF repository's projector is chosen by its header and paired; --language-only skips it", async () => {
  const h = home();
  const bf16 = projector(30), f16 = projector(1), q = projector(8);
  hub.commit("test/Vision-GGUF", { "Stories-Q8_0.gguf": stories, "mmproj-F16.gguf": f16,
                                   "mmproj-BF16.gguf": bf16, "Stories-mmproj-Q8_0.gguf": q });
  hub.reset();
  const r = await run(["pull", "test/Vision-GGUF:Q8_0"], h.env);
  assert.equal(r.code, 0, r.err);
  const dir = r.out.trim();
  const proj = meta(dir).files.filter((f) => f.role === "mmproj");
  assert.deepEqual(proj.map((f) => f.link), ["mmproj/mmproj-BF16.gguf"]);
  assert.equal(fs.readFileSync(path.join(dir, "mmproj/mmproj-BF16.gguf")).length, bf16.length);
  assert.ok(cdn(bf16).some((q) => !q.range), "the BF16 projector is downloaded");
  assert.ok(cdn(f16).every((q) => q.range) && cdn(q).every((x) => x.range), "the others: headers only");

  hub.reset();
  const lo = await run(["pull", "test/Vision-GGUF:Q8_0", "--language-only"], h.env);
  assert.equal(lo.code, 0, lo.err);
  assert.equal(meta(lo.out.trim()).files.filter((f) => f.role === "mmproj").length, 0);
  assert.equal(cdn(bf16).length + cdn(f16).length + cdn(q).length, 0, "no projector byte with --language-only");

  // a repository whose projectors are all quantized says why it serves text only
  hub.commit("test/QVision-GGUF", { "Stories-Q8_0.gguf": stories, "mmproj-Q8_0.gguf": q });
  const qv = await run(["pull", "test/QVision-GGUF:Q8_0"], h.env);
  assert.equal(qv.code, 0, qv.err);
  assert.match(qv.err, /Vision · test\/QVision-GGUF:Q8_0: mmproj-Q8_0\.gguf: its weights are Q8_0, not BF16, F32 or F16; it serves text only/);
});

test("--language-only skips a safetensors shard that holds only the vision tower", async () => {
  const h = home();
  const dir = path.join(testdata, "safetensors/qwen35-stories-mlx-4bit");
  const files = {};
  for (const f of fs.readdirSync(dir)) files[f] = fs.readFileSync(path.join(dir, f));
  const shard = files["model.safetensors"];
  const names = Object.keys(JSON.parse(shard.subarray(8, 8 + Number(shard.readBigUInt64LE(0))).toString()))
    .filter((k) => k !== "__metadata__");
  const header = Buffer.from(JSON.stringify({ "vision_tower.patch_embed.weight": { dtype: "BF16", shape: [2, 2], data_offsets: [0, 8] } }));
  const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(header.length));
  const tower = Buffer.concat([len, header, Buffer.alloc(8, 7)]);
  const weightMap = Object.fromEntries(names.map((n) => [n, "model.safetensors"]));
  weightMap["vision_tower.patch_embed.weight"] = "vision/tower.safetensors";
  hub.commit("test/VisionMLX", { ...files, "vision/tower.safetensors": tower,
    "model.safetensors.index.json": Buffer.from(JSON.stringify({ metadata: {}, weight_map: weightMap })) });
  hub.reset();
  const lo = await run(["pull", "test/VisionMLX", "--language-only"], h.env);
  assert.equal(lo.code, 0, lo.err);
  assert.match(lo.err, /--language-only: 1 shard holding only what the text model leaves out \(vision tower, projector, MTP layers\) not downloaded/);
  assert.equal(cdn(tower).length, 0, "the tower's shard never moves");
  const m = meta(lo.out.trim());
  assert.deepEqual(m.files.map((f) => f.path).filter((p) => p.endsWith(".safetensors")), ["model.safetensors"]);

  hub.reset();
  const full = await run(["pull", "test/VisionMLX"], h.env);
  assert.equal(full.code, 0, full.err);
  assert.ok(meta(full.out.trim()).files.some((f) => f.path === "vision/tower.safetensors"), "the index's subdirectory shard");
});

test("models/ is swept of what no server holds and no preparation returns", async () => {
  const h = home();
  hub.commit("test/Sweep-GGUF", { "Stories-Q8_0.gguf": stories });
  const first = await run(["pull", "test/Sweep-GGUF:Q8_0"], h.env);
  assert.equal(first.code, 0, first.err);
  const dir1 = first.out.trim();
  // a server holds the first assembly while a new commit installs
  const held = spawn("flock", ["-s", "-o", path.join(dir1, "model.json"), "sleep", "30"], { stdio: "ignore" });
  await new Promise((resolve) => setTimeout(resolve, 300));
  const s2 = Buffer.from(stories); s2[s2.length - 1] ^= 1;
  hub.commit("test/Sweep-GGUF", { "Stories-Q8_0.gguf": s2 });
  const second = await run(["pull", "test/Sweep-GGUF:Q8_0"], h.env);
  assert.equal(second.code, 0, second.err);
  assert.match(second.err, /kept \w+: a running server holds it/);
  assert.ok(fs.existsSync(dir1));
  held.kill();
  await new Promise((resolve) => held.on("exit", resolve));

  // local files that are gone, an installation that never completed, a dead process's work folder
  const copy = path.join(h.dir, "Copy-Q8_0.gguf");
  fs.copyFileSync(storiesModel, copy);
  const prep = await run(["prepare", copy], h.env);
  assert.equal(prep.code, 0, prep.err);
  const localInst = path.dirname(prep.out.trim());
  fs.unlinkSync(copy);
  fs.mkdirSync(path.join(h.models, "test--Never-GGUF--Q8_0"));
  fs.mkdirSync(path.join(h.models, ".check-2147483646"));

  // the next preparation sweeps them, and the assembly the stopped server held
  const again = await run(["prepare", storiesModel], h.env);
  assert.equal(again.code, 0, again.err);
  assert.ok(!fs.existsSync(dir1), "the assembly no server holds any more");
  assert.ok(!fs.existsSync(localInst), "local files that are gone");
  assert.ok(!fs.existsSync(path.join(h.models, "test--Never-GGUF--Q8_0")), "an installation never completed");
  assert.ok(!fs.existsSync(path.join(h.models, ".check-2147483646")), "a dead process's work folder");
  assert.ok(fs.existsSync(second.out.trim()), "the current assembly stays");
  assert.ok(fs.existsSync(again.out.trim()));
  assert.ok(!fs.existsSync(path.join(h.cache, "models--test--Sweep-GGUF/blobs", sha256(stories))), "its blob is freed");
});

// `splash serve --model`: the process, its console and a greedy completion (40 tokens).
async function serveOnce(args, env, prompt) {
  const port = await freePort();
  const proc = spawn(splash, ["serve", ...args, "--port", String(port), "--threads", "1"],
                     { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
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
      body: JSON.stringify({ model: args[1], prompt, max_tokens: 40, temperature: 0 }),
    });
    assert.equal(res.status, 200);
    const body = await res.json();
    const status = await (await fetch(`http://127.0.0.1:${port}/status`)).json();
    return { body, status, log };
  } finally {
    proc.kill("SIGTERM");
    await new Promise((resolve) => (proc.exitCode !== null ? resolve() : proc.on("exit", resolve)));
  }
}

test("serve decodes with the draft installed beside the target; --draft-model none leaves it out", async () => {
  const h = home();
  hub.commit("test/Serve-Draft-GGUF", { "Stories-Q8_0.gguf": stories });
  hub.commit("test/Serve-DFlash2", draftFiles());
  const story = "Once upon a time, there was a little girl named Lily. She loved to play in the park with her";
  const on = await serveOnce(["--model", "test/Serve-Draft-GGUF:Q8_0", "--draft-model", "test/Serve-DFlash2"],
                             h.env, story);
  assert.match(on.log, /Draft · test\/Serve-DFlash2 at [0-9a-f]{12} installed beside it; decode cycles draft with it/);
  assert.match(on.log, /Speculation · the DFlash2 draft/);
  assert.equal(on.status.speculation.mode, "dflash");
  assert.ok(on.body.usage.completion_tokens_details.accepted_prediction_tokens > 10, JSON.stringify(on.body.usage));
  const off = await serveOnce(["--model", "test/Serve-Draft-GGUF:Q8_0", "--draft-model", "none"], h.env, story);
  assert.doesNotMatch(off.log, /Draft ·/);
  assert.notEqual(off.status.speculation.mode, "dflash");
  assert.equal(off.body.choices[0].text, on.body.choices[0].text, "the draft changes no greedy token");
  // --speculative dflash on an installation its family gives no draft: refused, saying so
  const none = await run(["serve", "--model", "test/Serve-Draft-GGUF:Q8_0", "--speculative", "dflash",
                          "--offline", "--port", String(await freePort())], h.env);
  assert.equal(none.code, 1, none.err);
  assert.match(none.err, /--speculative dflash: test\/Serve-Draft-GGUF:Q8_0 has no draft installed beside it/);
});
