// The model's own MTP (nextn) block as the proposer: a tiny qwen35 that make-model writes
// with llama.cpp's blk.{n_layer}.nextn.* layout decodes the same greedy text with
// --speculative mtp as with speculation off (int8 and bf16 KV), reports its proposals,
// is what auto picks without a draft, and a model without the block refuses mtp by name.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { splash, startServer, rawRequest, storiesModel, freePort } from "./harness.mjs";

let dir, mtpModel, moeMtpModel;

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-mtp-"));
  mtpModel = path.join(dir, "qwen35-tiny-mtp.gguf");
  moeMtpModel = path.join(dir, "qwen35moe-tiny-mtp.gguf");
  for (const [shape, out] of [["qwen35-tiny-mtp", mtpModel], ["qwen35moe-tiny-mtp", moeMtpModel]]) {
    const r = spawnSync(splash, ["make-model", "--shape", shape, "--type", "Q8_0", "--seed", "7", "--out", out],
                        { encoding: "utf8" });
    assert.equal(r.status, 0, r.stdout + r.stderr);
  }
});

after(() => fs.rmSync(dir, { recursive: true, force: true }));

const prompts = ["Once upon a time", "The little fox ran to the river and", "One two three four five six"];

async function decode(args, model) {
  const server = await startServer(args, { model });
  try {
    const out = [];
    for (const prompt of prompts) {
      const r = await rawRequest(server.port, { method: "POST", path: "/v1/completions",
        body: JSON.stringify({ model: "test/stories", prompt, max_tokens: 40, temperature: 0 }) });
      assert.equal(r.status, 200, r.body);
      const body = JSON.parse(r.body);
      out.push({ ids: body.choices[0].text, usage: body.usage });
    }
    const status = JSON.parse((await rawRequest(server.port, { path: "/status" })).body);
    return { out, status, log: server.output() };
  } finally {
    assert.equal(await server.stop(), 0);
  }
}

for (const kv of ["int8", "bf16"]) {
  test(`--speculative mtp: the same greedy text as plain decoding (${kv} KV), its proposals counted`, async () => {
    const plain = await decode(["--speculative", "off", "--kv-format", kv], mtpModel);
    const mtp = await decode(["--speculative", "mtp", "--kv-format", kv], mtpModel);
    assert.equal(mtp.status.speculation.mode, "mtp");
    assert.match(mtp.log, /Draft · the model's own: NextN qwen35 block 8/);
    assert.match(mtp.log, /Speculation · the model's MTP layers/);
    let proposed = 0;
    for (let i = 0; i < prompts.length; i++) {
      assert.equal(mtp.out[i].ids, plain.out[i].ids, prompts[i]);
      assert.equal(mtp.out[i].usage.completion_tokens, plain.out[i].usage.completion_tokens);
      const d = mtp.out[i].usage.completion_tokens_details;
      proposed += d.accepted_prediction_tokens + d.rejected_prediction_tokens;
    }
    // a random block's guesses are rejected; tests/test-mtp.c shows them accepted
    assert.ok(proposed > 0, "the MTP block proposed nothing");
    assert.match(mtp.log, /Done · request \d+ · output 40 · length · .* · accepted \d+\.\d\/cycle/);
  });
}

test("--speculative auto picks the MTP layers where the GGUF has them and there is no draft", async () => {
  const auto = await decode([], mtpModel);
  assert.equal(auto.status.speculation.mode, "mtp");
  const moe = await decode([], moeMtpModel);
  assert.equal(moe.status.speculation.mode, "mtp");
  assert.match(moe.log, /Draft · the model's own: NextN qwen35moe block 4 \(of 1\), .*8 experts \(2 used\)/);
  const stories = await decode([], storiesModel);
  assert.equal(stories.status.speculation.mode, "ngram");
});

test("--speculative mtp is refused for a model without MTP layers, naming the model", async () => {
  for (const [model, why] of [
    [storiesModel, /--speculative mtp: qwen35-stories-Q8_0\.gguf: the model has no MTP \(nextn\) layers/],
  ]) {
    const r = spawnSync(splash, ["serve", "--model", "test/stories", "--model-dir", model, "--port", String(await freePort()),
                                 "--speculative", "mtp"], { encoding: "utf8", timeout: 30000 });
    assert.notEqual(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout + r.stderr, why);
  }
});
