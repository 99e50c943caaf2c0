// splash prepare and serve --model-dir's preparation (models.md "Local model files"): the
// same files give the same directory; a changed file another, the earlier one removed;
// split parts, projectors and drafts are linked; bad input names the file.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { splitGguf } from "./fakehub.mjs";
import { splash, storiesModel, testdata } from "./harness.mjs";

function run(args, env) {
  return new Promise((resolve) => {
    const proc = spawn(splash, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    proc.stdout.on("data", (d) => { out += d; });
    proc.stderr.on("data", (d) => { err += d; });
    proc.on("exit", (code) => resolve({ code, out, err }));
  });
}

const scratchDirs = [];
after(() => { for (const d of scratchDirs) fs.rmSync(d, { recursive: true, force: true }); });

function scratch() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-prepare-"));
  scratchDirs.push(dir);
  return { dir, env: { XDG_DATA_HOME: path.join(dir, "data"), HOME: dir } };
}

test("the same files prepare to the same directory; a changed file to another", async () => {
  const s = scratch();
  const model = path.join(s.dir, "Stories-Q8_0.gguf");
  fs.copyFileSync(storiesModel, model);
  const first = await run(["prepare", model], s.env);
  assert.equal(first.code, 0, first.err);
  const dir = first.out.trim();
  assert.match(dir, /splash\/models\/local--Stories-Q8_0--[0-9a-f]{8}\/[0-9a-f]{40}$/);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, "model.json"), "utf8"));
  assert.equal(meta.files[0].source, fs.realpathSync(model));
  assert.match(meta.files[0].sha256, /^[0-9a-f]{64}$/);
  assert.equal(fs.readlinkSync(path.join(dir, "target/Stories-Q8_0.gguf")), fs.realpathSync(model));
  const again = await run(["prepare", model], s.env);
  assert.equal(again.out.trim(), dir);
  const later = new Date(Date.now() + 5000);
  fs.utimesSync(model, later, later);
  const changed = await run(["prepare", model], s.env);
  assert.equal(changed.code, 0, changed.err);
  assert.notEqual(changed.out.trim(), dir);
  assert.ok(!fs.existsSync(dir), "the earlier directory, held by no server, is removed");
  assert.ok(fs.existsSync(model), "the model file itself stays");
});

test("a split part names its parts; projectors and drafts are linked; bad input names the file", async () => {
  const s = scratch();
  const parts = splitGguf(fs.readFileSync(storiesModel), 2);
  const a = path.join(s.dir, "M-Q8_0-00001-of-00002.gguf"), b = path.join(s.dir, "M-Q8_0-00002-of-00002.gguf");
  fs.writeFileSync(a, parts[0]);
  fs.writeFileSync(b, parts[1]);
  const mmproj = path.join(s.dir, "mmproj-F16.gguf");
  fs.writeFileSync(mmproj, "not checked here");
  const draft = path.join(s.dir, "draft");
  fs.mkdirSync(draft);
  const draftConfig = JSON.parse(fs.readFileSync(path.join(testdata, "drafts/qwen35-stories-DFlash2/config.json")));
  fs.writeFileSync(path.join(draft, "config.json"), JSON.stringify(draftConfig));
  // the draft's weights as they are: a local draft is held to the target whole
  for (const f of ["model.safetensors", "mask_embedding.safetensors"])
    fs.symlinkSync(path.join(testdata, "drafts/qwen35-stories-DFlash2", f), path.join(draft, f));
  const r = await run(["prepare", b, "--mmproj", mmproj, "--draft", draft], s.env);
  assert.equal(r.code, 0, r.err);
  const dir = r.out.trim();
  for (const f of ["target/M-Q8_0-00001-of-00002.gguf", "target/M-Q8_0-00002-of-00002.gguf",
                   "mmproj/mmproj-F16.gguf", "draft/config.json", "draft/model.safetensors"])
    assert.ok(fs.existsSync(path.join(dir, f)), f);
  const list = await run(["models"], s.env);
  assert.match(list.out, /M-Q8_0-00002-of-00002.gguf\s+local\s+[0-9a-f]{12}\s+[\d.]+ MB\s+yes/);

  fs.unlinkSync(a);
  const missing = await run(["prepare", b], s.env);
  assert.equal(missing.code, 1);
  assert.match(missing.err, /M-Q8_0-00001-of-00002.gguf is missing \(split part 1 of 2\)/);
  // a draft of another model, or no draft at all, is refused naming its config
  fs.writeFileSync(path.join(draft, "config.json"), JSON.stringify({ ...draftConfig, hidden_size: 512 }));
  const other = await run(["prepare", storiesModel, "--draft", draft], s.env);
  assert.equal(other.code, 1);
  assert.match(other.err, /draft draft: config.json: hidden_size is 512, the target's hidden size is 256/);
  fs.writeFileSync(path.join(draft, "config.json"), "{}");
  const notDraft = await run(["prepare", storiesModel, "--draft", draft], s.env);
  assert.match(notDraft.err, /draft draft: config.json: architectures is missing \(a draft's config.json names its architecture\)/);
  fs.rmSync(path.join(draft, "config.json"));
  const noConfig = await run(["prepare", storiesModel, "--draft", draft], s.env);
  assert.match(noConfig.err, /draft .*: no config.json/);
  const bf16 = await run(["prepare", path.join(testdata, "models/qwen35-tiny-BF16.gguf")], s.env);
  assert.equal(bf16.code, 1);
  assert.match(bf16.err, /qwen35-tiny-BF16.gguf: refused by model-check: .*choose a quantized variant/);
});
