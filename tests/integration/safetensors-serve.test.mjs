// Safetensors checkpoints served through the API (../shared/testdata/safetensors): the MLX
// 4-bit and Model Optimizer NVFP4 stories directories answer the OpenAI SDK with the
// reference's greedy continuation of its prompt (llama.cpp's, for the weights each
// checkpoint decodes to), and chat streams.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import OpenAI from "openai";
import { startServer, testdata, splash } from "./harness.mjs";

const servers = [];
after(async () => {
  for (const s of servers) assert.equal(await s.stop(), 0);
});

for (const name of ["qwen35-stories-mlx-4bit", "qwen35-stories-modelopt-nvfp4"]) {
  test(`${name}: the greedy continuation of the reference's prompt, then chat streamed`, async () => {
    const dir = path.join(testdata, "safetensors", name);
    const ref = JSON.parse(fs.readFileSync(path.join(testdata, "safetensors", `${name}.json`)));
    const server = await startServer([], { model: dir });
    servers.push(server);
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
    const done = await openai.completions.create({ model: "test/stories", prompt: ref.prompt_text,
                                                   max_tokens: ref.n_greedy, temperature: 0 });
    assert.equal(done.usage.prompt_tokens, ref.tokens.length);
    const want = execFileSync(splash, ["detokenize", "--model-dir", dir, ...ref.greedy.map(String)],
                              { encoding: "utf8" }).replace(/\n$/, "");
    assert.equal(done.choices[0].text, want);
    let text = "";
    const stream = await openai.chat.completions.create({
      model: "test/stories", messages: [{ role: "user", content: "Tell me a story" }],
      max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let usage;
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta ?? {};
      text += (d.content ?? "") + (d.reasoning_content ?? "");
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(usage.completion_tokens, 16);
    assert.ok(text.length > 0);
  });
}
