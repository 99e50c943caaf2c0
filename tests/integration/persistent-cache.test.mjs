// --persistent-cache across a server restart: a conversation's prefix written at the
// clean stop is read back by the next server of the same model, and /status says so.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, truncateSync,
         utimesSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startServer } from "./harness.mjs";

function enginePid(serverPid) {
  const out = execFileSync("pgrep", ["-P", String(serverPid), "-f", "splash engine"], { encoding: "utf8" });
  return Number(out.trim().split("\n")[0]);
}

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

// The index (disk_cache_index.c): a 40-byte header (magic, page count, point count, page bytes,
// page tokens, CRC), 32 bytes a page (slot, parent, key, two CRC-32s), then 56 bytes a
// point (n_tokens, class, n_pages, the chain's last slot, offset, span, size, two CRC-32s).
function readIndex(dir) {
  const buf = readFileSync(join(dir, "index"));
  const nPages = Number(buf.readBigUInt64LE(8)), nPoints = Number(buf.readBigUInt64LE(16));
  const pageBytes = Number(buf.readBigUInt64LE(24)), pageTokens = buf.readInt32LE(32);
  const slotBytes = pageBytes ? 32 + 4 * pageTokens + pageBytes : 0;
  const pages = [];
  for (let i = 0; i < nPages; i++) pages.push(Number(buf.readBigInt64LE(40 + 32 * i)));
  const points = [];
  for (let i = 0; i < nPoints; i++) {
    const at = 40 + 32 * nPages + 56 * i;
    points.push({ n: buf.readInt32LE(at), off: Number(buf.readBigUInt64LE(at + 24)),
                  span: Number(buf.readBigUInt64LE(at + 32)) });
  }
  return { points, slotBytes, pagesEnd: Math.max(0, ...pages.map((s) => (s + 1) * slotBytes)) };
}

test("kill -9 of the engine mid-write: a restart serves every prompt right, damaged copies skipped", async () => {
  const root = mkdtempSync(join(tmpdir(), "splash-kill9-"));
  const args = ["--persistent-cache", "--cache-dir", root, "--max-cache-disk", "256M"];
  // each piece of a copy takes 60 ms; a point is copied at once instead of 10 s after it
  // joined (the delay is test-prefix-cache's; here it only made the waits outlast a loaded run)
  const env = { SPLASH_TEST_SLOW_DISK_WRITES: "60", SPLASH_TEST_WRITE_AHEAD_DELAY_MS: "0" };
  const conv = (topic, n) => [
    { role: "system", content: `You tell stories about ${topic}. ` + `The ${topic} is calm. `.repeat(n) },
    { role: "user", content: `Tell me about the ${topic}.` },
  ];
  const convs = { a: conv("town", 20), c: conv("harbour", 70), b: conv("forest", 40) };
  const ask = async (server, messages) => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
    return client.chat.completions.create({ model: "test/stories", messages, max_tokens: 6,
                                           temperature: 0, reasoning_effort: "none" });
  };
  const status = async (server) => (await fetch(`${server.url}/status`)).json();
  // the files tell how the writes go: the index lists what is written whole, and the pages
  // or states file grows past the last listed page or point while a write is under way
  const files = () => {
    const ns = readdirSync(root).filter((n) => /^[0-9a-f]{32}$/.test(n));
    const dir = ns.length ? join(root, ns[0]) : null;
    if (!dir || !existsSync(join(dir, "index"))) return { dir, entries: [], size: 0, end: 0 };
    const { points, pagesEnd } = readIndex(dir);
    const statesEnd = Math.max(0, ...points.map((e) => e.off + e.span));
    const statesSize = statSync(join(dir, "states")).size;
    const pagesSize = statSync(join(dir, "pages")).size;
    // past the listed ones: what a write under way has put in either file
    return { dir, entries: points, size: statesEnd + Math.max(0, statesSize - statesEnd) +
             Math.max(0, pagesSize - pagesEnd), end: statesEnd };
  };
  const until = async (what, ok) => {
    for (let i = 0; i < 1200; i++) {
      if (ok(files())) return;
      await new Promise((res) => setTimeout(res, 10));
    }
    throw new Error(`timed out waiting for ${what}: ${JSON.stringify(files())}`);
  };
  // every turn point of the prompt written: more entries, nothing past them, for 600 ms
  const settled = async (what, atLeast) => {
    let last = -1, since = Date.now();
    await until(what, (f) => {
      const key = f.entries.length * 1e12 + f.size;
      if (key !== last) { last = key; since = Date.now(); }
      return f.entries.length >= atLeast && f.size === f.end && Date.now() - since > 600;
    });
    return files().entries.length;
  };
  try {
    let server = await startServer(args, { env });
    const first = {};
    let listed = 0;
    for (const k of ["a", "c"]) {
      first[k] = await ask(server, convs[k]);
      // the persistent cache copies each turn point ahead, one at a time
      listed = await settled(`${k}'s copies`, listed + 1);
    }
    first.b = await ask(server, convs.b);
    await until("b's copy under way", (f) => f.size > f.end);
    process.kill(enginePid(server.proc.pid), "SIGKILL");
    await new Promise((res) => setTimeout(res, 200));
    assert.equal(await server.stop(), 0);

    // c's copies garbled on purpose (a bad disk): their bytes fail their checksums when read
    const { dir, entries, size, end } = files();
    assert.ok(size > end, "the write the kill cut short is in the file, listed nowhere");
    const aTokens = first.a.usage.prompt_tokens;
    const garbled = entries.filter((e) => e.n > aTokens && e.n <= first.c.usage.prompt_tokens);
    assert.ok(garbled.length >= 1, JSON.stringify(entries));
    const fd = openSync(join(dir, "states"), "r+");
    for (const e of garbled) writeSync(fd, Buffer.alloc(64, 0x5a), 0, 64, e.off + Math.floor(e.span / 2));
    closeSync(fd);

    server = await startServer(args);
    for (const k of ["a", "c", "b"]) {
      const again = await ask(server, convs[k]);
      assert.equal(again.choices[0].message.content, first[k].choices[0].message.content, k);
      const cached = again.usage.prompt_tokens_details?.cached_tokens ?? 0;
      if (k === "a") assert.ok(cached > 0, `a: cached ${cached}`);
      if (k === "c") assert.ok(cached <= aTokens, `c: cached ${cached}`);
    }
    assert.match(server.output(), /SSD cache · the point of \d+ tokens at byte \d+ of the states file is skipped: its bytes fail their checksum/);
    const s = await status(server);
    assert.ok(s.disk.corrupt >= 1, JSON.stringify(s.disk));
    assert.equal(await server.stop(), 0);

    // the pages file cut short by its last listed page (a's pages, written first, are not
    // it): the points whose chains need it are not taken back, the others are
    const { slotBytes, pagesEnd } = readIndex(dir);
    assert.ok(slotBytes > 0 && pagesEnd >= slotBytes, "the points went as chains of pages");
    truncateSync(join(dir, "pages"), pagesEnd - slotBytes);
    server = await startServer(args);
    assert.match(server.output(), /SSD cache · \d+ of the \d+ points and [1-9]\d* of the \d+ pages .*index lists are skipped/);
    for (const k of ["a", "c", "b"]) {
      const again = await ask(server, convs[k]);
      assert.equal(again.choices[0].message.content, first[k].choices[0].message.content, k);
      const cached = again.usage.prompt_tokens_details?.cached_tokens ?? 0;
      if (k === "a") assert.ok(cached > 0, `a after the cut: cached ${cached}`);
    }
    assert.equal((await status(server)).disk.corrupt, 0);
    assert.equal(await server.stop(), 0);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
