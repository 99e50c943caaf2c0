// The adversarial probe table (issue "Hardening"), replayed within bounded time:
// signals during a restart, unauthenticated large bodies, idle and slow
// connections, disconnects, kill -9 loops and HTTP smuggling shapes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { startServer, rawRequest } from "./harness.mjs";

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

function enginePids(serverPid) {
  try {
    const out = execFileSync("pgrep", ["-P", String(serverPid), "-f", "splash engine"], { encoding: "utf8" });
    return out.trim().split("\n").filter(Boolean).map(Number);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

async function waitEngine(serverPid, notPid) {
  for (let i = 0; i < 200; i++) {
    const pids = enginePids(serverPid).filter((p) => p !== notPid);
    if (pids.length) return pids[0];
    await sleep(50);
  }
  throw new Error("no engine process appeared");
}

async function waitReady(port) {
  for (let i = 0; i < 200; i++) {
    const r = await rawRequest(port, { path: "/ready" });
    if (r.status === 200) return;
    await sleep(50);
  }
  throw new Error("not ready");
}

function exitWithin(proc, ms) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve(proc.exitCode);
    const timer = setTimeout(() => resolve("timeout"), ms);
    proc.on("exit", (code) => { clearTimeout(timer); resolve(code); });
  });
}

test("SIGTERM during the restart wait exits 0 at once and spawns no engine", async () => {
  const server = await startServer();
  try {
    // two quick failures: the second restart waits 5 s
    const first = await waitEngine(server.proc.pid);
    process.kill(first, "SIGKILL");
    const second = await waitEngine(server.proc.pid, first);
    await waitReady(server.port);
    process.kill(second, "SIGKILL");
    for (let i = 0; i < 100 && !server.output().includes("Engine restarting in"); i++) await sleep(50);
    assert.match(server.output(), /Engine restarting in 5 s/);
    server.proc.kill("SIGTERM");
    // no engine may start after the stop: watch the server's children until it exits
    const spawned = new Set();
    const watch = setInterval(() => { for (const p of enginePids(server.proc.pid)) spawned.add(p); }, 20);
    // server.md: the stop takes at most the engine's 15 s; with no engine it is immediate
    const code = await exitWithin(server.proc, 15000);
    clearInterval(watch);
    if (code === "timeout") server.proc.kill("SIGKILL");
    assert.equal(code, 0, `the server exited ${code}:\n${server.output()}`);
    assert.deepEqual([...spawned], [], "no engine was spawned after SIGTERM");
  } finally {
    if (server.proc.exitCode === null) server.proc.kill("SIGKILL");
  }
});
