// Streamed experts under a real cgroup memory limit (issue 18, server.md "Streamed experts",
// PLATFORM.md: the memory the host gives the process is MemAvailable and the cgroup limit).
// The server runs in a memory cgroup made for it, a child of the test's own group (cgroup
// v2's memory.max where the unified hierarchy has the memory controller, else cgroup v1's
// memory.limit_in_bytes), whose limit is derived from the model's sizes: the all-resident
// load is refused naming the cgroup bound, while --expert-memory auto streams the experts
// and answers as the all-resident server outside the group does, the group's peak usage
// staying under its limit and below the all-resident one's. Page cache charged to the group
// (a file written there) is not counted against the budget; weights the group cannot hold
// at all are refused before they are read, not loaded into the OOM killer. Skipped with the reason where
// no memory cgroup can be made (not root, no controller).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { startServer, splash } from "./harness.mjs";

const MIB = 1024 * 1024;
const MARGIN = 1024 * MIB; // core/memory_plan.h SPLASH_MEMORY_MARGIN: the plan keeps it free
// every run: a 2K context, and no SSD cache (its file's page cache would be charged to
// the group and blur the peaks)
const common = ["--max-context", "2K", "--max-cache-disk", "0"];
const prompts = ["Once upon a time", "The little dog", "Hello there"];

// The memory controller's hierarchy a child group of the test's own can be made in.
function hierarchy() {
  const lines = fs.readFileSync("/proc/self/cgroup", "utf8").split("\n");
  const v2 = lines.find((l) => l.startsWith("0::/"));
  let controllers = "";
  try { controllers = fs.readFileSync("/sys/fs/cgroup/cgroup.controllers", "utf8"); } catch {}
  if (v2 && controllers.split(/\s+/).includes("memory"))
    return { own: path.join("/sys/fs/cgroup", v2.slice(3)), limit: "memory.max",
             peak: "memory.peak", bound: "memory.max" };
  const v1 = lines.find((l) => (l.split(":")[1] || "").split(",").includes("memory"));
  if (v1 && fs.existsSync("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
    return { own: path.join("/sys/fs/cgroup/memory", v1.split(":").slice(2).join(":")),
             limit: "memory.limit_in_bytes", peak: "memory.max_usage_in_bytes",
             bound: "memory.limit_in_bytes" };
  return { skip: "no memory cgroup: neither cgroup v2 with the memory controller nor v1's memory hierarchy" };
}

let made = 0;
function makeGroup(h, limit) {
  const dir = path.join(h.own, `splash-test-${process.pid}-${made++}`);
  fs.mkdirSync(dir);
  try {
    if (!fs.existsSync(path.join(dir, h.limit)))
      throw new Error(`${dir} has no ${h.limit}: the memory controller is not enabled for ${h.own}'s children`);
    fs.writeFileSync(path.join(dir, h.limit), String(limit));
  } catch (e) {
    fs.rmdirSync(dir);
    throw e;
  }
  return dir;
}

// A group empties a moment after its last process exits; any left (a server whose start
// the test gave up on) are the test's own and are killed.
async function removeGroup(dir) {
  for (let i = 0; ; i++) {
    if (i === 0 || i === 40) {
      let left = [];
      try { left = fs.readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean); } catch {}
      for (const pid of left) try { process.kill(Number(pid), i ? "SIGKILL" : "SIGTERM"); } catch {}
    }
    try { return fs.rmdirSync(dir); } catch (e) {
      if (e.code === "ENOENT") return;
      if (e.code !== "EBUSY" || i === 100) throw e;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

// The group's peak usage: v1's max_usage_in_bytes or v2's memory.peak, else the processes'
// peak RSS (VmHWM) summed.
function peak(h, dir) {
  try { return Number(fs.readFileSync(path.join(dir, h.peak), "utf8")); } catch {}
  let sum = 0;
  for (const pid of fs.readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean))
    sum += Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
  return sum;
}

function memAvailable() {
  return Number(/MemAvailable:\s+(\d+) kB/.exec(fs.readFileSync("/proc/meminfo", "utf8"))[1]) * 1024;
}

// A shell that enters the group, runs prelude there, then execs the server in it (its
// engine process follows).
const inGroup = (dir, prelude = "") =>
  ["/bin/sh", "-c", `echo $$ > "$0" && ${prelude}exec "$@"`, path.join(dir, "cgroup.procs")];

async function answers(server) {
  const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
  const out = [];
  for (const prompt of prompts) {
    const r = await openai.completions.create({ model: "test/stories", prompt, max_tokens: 16,
                                                temperature: 0 });
    assert.equal(r.usage.completion_tokens, 16, JSON.stringify(r));
    out.push(r.choices[0].text);
  }
  return out;
}

const status = async (server) => (await fetch(`${server.url}/status`)).json();

test("under a cgroup limit the all-resident load is refused; auto streams the experts and serves as all-resident does", async (t) => {
  const h = hierarchy();
  if (h.skip) return t.skip(h.skip);
  try {
    await removeGroup(makeGroup(h, 1 << 30));
  } catch (e) {
    return t.skip(`cannot make a memory cgroup under ${h.own}: ${e.message}`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-cgroup-"));
  // qwen35moe-tiny with 128 experts a layer, all Q4_K (one format mix: the smallest store
  // is one layer's experts, a quarter), sampled: 56 MiB, 54 of it routed experts
  const model = path.join(dir, "moe128.gguf");
  execFileSync(splash, ["make-model", "--shape", "qwen35moe-tiny", "--dims", "expert_count=128",
                        "--type", "Q4_K_S", "--sample-values", "262144", "--seed", "7",
                        "--threads", "1", "--out", model]);
  const servers = [], groups = [];
  const start = async (args, group, prelude) => {
    const s = await startServer([...common, ...args],
                                { model, launcher: group ? inGroup(group, prelude) : [] });
    servers.push(s);
    return s;
  };
  try {
    // the reference: every expert loaded, outside any group of the test's
    const whole = await start(["--expert-memory", "off"]);
    const want = await answers(whole);
    const routed = Number(/Experts · ([\d.]+) MiB of routed experts load whole/.exec(whole.output())[1]) * MIB;
    assert.equal(await whole.stop(), 0);
    const fileBytes = fs.statSync(model).size;
    assert.ok(routed > fileBytes / 2 && routed < fileBytes, `${routed} of ${fileBytes}`);

    // a roomy group (the margin, twice the model and 64 MiB): the engine takes its limit,
    // less what the server and its own start had charged to the group when it read it
    const roomy = MARGIN + 2 * fileBytes + 64 * MIB;
    if (memAvailable() < roomy + 256 * MIB)
      return t.skip(`the host has less memory available than the test's ${roomy} byte limit`);
    const charged = async (server) => {
      const budget = (await status(server)).memory_plan.budget;
      assert.equal(budget.bound, "cgroup memory.max", JSON.stringify(budget));
      return roomy - MARGIN - budget.usable_bytes;
    };
    const roomyGroup = makeGroup(h, roomy);
    groups.push(roomyGroup);
    const all = await start(["--expert-memory", "off"], roomyGroup);
    const started = await charged(all);
    assert.ok(started >= 0 && started < 32 * MIB, `${started} bytes charged when the engine read its budget`);
    assert.deepEqual(await answers(all), want);
    const allPeak = peak(h, roomyGroup);
    assert.equal(await all.stop(), 0);
    // a file of 64 MiB written in the group first charges it that much page cache, which
    // the kernel reclaims before it refuses memory: the budget counts it as room
    const cachedGroup = makeGroup(h, roomy);
    groups.push(cachedGroup);
    const cached = await start(["--expert-memory", "off"], cachedGroup,
                               `head -c ${64 * MIB} /dev/zero > '${path.join(dir, "cache")}' && `);
    const withCache = await charged(cached);
    assert.ok(withCache < started + 16 * MIB, `${withCache} bytes charged beside 64 MiB of page cache, ${started} without`);
    assert.equal(await cached.stop(), 0);

    // the tight limit: the margin, what the start charges, and the weights (the file's
    // bytes stand for them) with half of their routed experts; below the all-resident load (every weight, 2K tokens of KV and
    // 16 lanes' state), above the other weights, the KV, the state and a one-layer store
    const limit = Math.round(MARGIN + started + fileBytes - routed / 2);
    const refusing = makeGroup(h, limit);
    groups.push(refusing);
    await assert.rejects(start(["--expert-memory", "off"], refusing),
                         /the weights \([\d.]+ GiB\) and 16 lanes of recurrent state \([\d.]+ GiB\) need more than the [\d.]+ GiB available \(cgroup memory\.max\)/);
    const tight = makeGroup(h, limit);
    groups.push(tight);
    const server = await start([], tight);
    const line = /Experts · streamed: a store of ([\d.]+) MiB.* for ([\d.]+) MiB of routed experts \(auto: what the memory plan leaves beside the context; the smallest is ([\d.]+) MiB\)/.exec(server.output());
    assert.ok(line, server.output());
    assert.equal((await status(server)).memory_plan.budget.bound, "cgroup memory.max");
    assert.deepEqual(await answers(server), want);
    const se = (await status(server)).streamed_experts;
    assert.ok(se.decode.read > 0 && se.cap_bytes < routed, JSON.stringify(se));
    const tightPeak = peak(h, tight);
    assert.ok(tightPeak < limit, `peak ${tightPeak} over the ${limit} byte limit`);
    // it never held every expert: its peak is below the all-resident one by at least half
    // of the experts its store left out
    assert.ok(tightPeak < allPeak - (routed - se.cap_bytes) / 2,
              `streamed peak ${tightPeak}, all-resident ${allPeak}, store ${se.cap_bytes} of ${routed}`);
    assert.equal(await server.stop(), 0);

    // a group that cannot hold the weights at all (what the start charges and half the
    // file): loading them whole would end in the OOM killer at the limit, the server
    // restarting its engine into it again; they are refused before any is read
    const small = makeGroup(h, Math.round(started + fileBytes / 2));
    groups.push(small);
    await assert.rejects(start(["--expert-memory", "off"], small),
                         /moe128\.gguf: the weights to load \([\d.]+ GiB\) need more than the [\d.]+ GiB of memory free \(cgroup memory\.max\)/);
  } finally {
    try {
      for (const s of servers) await s.stop();
      for (const g of groups) await removeGroup(g);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
});
