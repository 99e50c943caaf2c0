// --persistent-cache across a server restart: a conversation's prefix written at the
// clean stop is read back by the next server of the same model, and /status says so.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startServer } from "./harness.mjs";

test("persistent cache: a restarted server reads the conversation's prefix back", async () => {
  const root = mkdtempSync(join(tmpdir(), "splash-persist-"));
  const args = ["--persistent-cache", "--cache-dir", root, "--max-cache-disk", "256M"];
  const messages = [
    { role: "system", content: "You tell stories about a small town. " + "The town is quiet. ".repeat(40) },
    { role: "user", content: "Tell me about the baker." },
  ];
  const ask = async (server) => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
    const r = await client.chat.completions.create({ model: "test/stories", messages, max_tokens: 6,
                                                     temperature: 0, reasoning_effort: "none" });
    return r;
  };
  try {
    let server = await startServer(args);
    const first = await ask(server);
    assert.equal(first.usage.prompt_tokens_details?.cached_tokens ?? 0, 0);
    assert.match(server.output(), /SSD cache · persistent in /);
    assert.equal(await server.stop(), 0);
    assert.equal(statSync(root).mode & 0o777, 0o700);

    server = await startServer(args);
    const second = await ask(server);
    const cached = second.usage.prompt_tokens_details?.cached_tokens ?? 0;
    assert.ok(cached > first.usage.prompt_tokens / 2, `cached ${cached} of ${first.usage.prompt_tokens}`);
    assert.equal(second.choices[0].message.content, first.choices[0].message.content);
    const status = await (await fetch(`${server.url}/status`)).json();
    assert.equal(status.disk.persistent, true);
    assert.ok(status.disk.taken_back >= 1, JSON.stringify(status.disk));
    assert.ok(status.disk.hits >= 1, JSON.stringify(status.disk));
    assert.match(server.output(), /cached [\d,]+ \(read back from the SSD cache\)/);
    assert.equal(await server.stop(), 0);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("a start removes other models' caches nobody used for 14 days, with one line", async () => {
  const root = mkdtempSync(join(tmpdir(), "splash-sweep-"));
  const aged = (name, days) => {
    const dir = join(root, name);
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(dir, "data"), "cached bytes");
    const t = Date.now() / 1000 - days * 86400;
    utimesSync(join(dir, "data"), t, t);
    utimesSync(dir, t, t);
  };
  aged("0123456789abcdef0123456789abcdef", 15);
  aged("fedcba9876543210fedcba9876543210", 3);
  aged("keep-me", 40);
  try {
    const server = await startServer(["--persistent-cache", "--cache-dir", root, "--max-cache-disk", "64M"]);
    assert.match(server.output(), /SSD cache · removed 1 cache nobody used for 14 days under /);
    assert.equal(await server.stop(), 0);
    assert.ok(!existsSync(join(root, "0123456789abcdef0123456789abcdef")));
    assert.ok(existsSync(join(root, "fedcba9876543210fedcba9876543210")));
    assert.ok(existsSync(join(root, "keep-me")));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
