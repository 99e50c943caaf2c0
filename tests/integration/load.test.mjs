// A bounded loopback load test: 64 concurrent streaming clients against the tiny model.
// No errors but 503s (each with Retry-After) past the queue; no leaked descriptors; bounded memory.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import { execFileSync } from "node:child_process";
import { startServer } from "./harness.mjs";

const SECONDS = Number(process.env.SPLASH_LOAD_SECONDS || 60);
const CLIENTS = 64;

function fdCount(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

function rssKiB(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/);
  return Number(m[1]);
}

function enginePid(serverPid) {
  return Number(execFileSync("pgrep", ["-P", String(serverPid), "-f", "splash engine"], { encoding: "utf8" }).trim());
}

// One streamed chat request on its own connection (closed after the reply), so the
// server's descriptor count returns to its baseline once the clients stop.
function oneStream(port, counters) {
  return new Promise((resolve) => {
    const body = JSON.stringify({ messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 24,
                                  stream: true, reasoning_effort: "none" });
    const req = http.request({ host: "127.0.0.1", port, path: "/v1/chat/completions", method: "POST", agent: false,
                               headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body),
                                          Connection: "close" } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => { text += d; });
      res.on("end", async () => {
        if (res.statusCode === 503) {
          counters.rejected++;
          if (!(Number(res.headers["retry-after"]) >= 1)) counters.errors.push("503 without Retry-After");
          await new Promise((r) => setTimeout(r, 50));
        } else if (res.statusCode !== 200) {
          counters.errors.push(`status ${res.statusCode}: ${text}`);
        } else if (!text.trimEnd().endsWith("data: [DONE]")) {
          counters.errors.push("stream did not end with [DONE]");
        } else {
          counters.completed++;
        }
        resolve();
      });
    });
    req.on("error", (e) => { counters.errors.push(String(e)); resolve(); });
    req.end(body);
  });
}

test(`${CLIENTS} concurrent streaming clients for ${SECONDS} s`, { timeout: (SECONDS + 60) * 1000 }, async () => {
  const server = await startServer(["--threads", "2"]);
  try {
    const engine = enginePid(server.proc.pid);
    // warm up, then measure the baseline
    const warm = { completed: 0, rejected: 0, errors: [] };
    await oneStream(server.port, warm);
    const fd0 = fdCount(server.proc.pid);
    const rss0 = rssKiB(server.proc.pid);
    const counters = { completed: 0, rejected: 0, errors: [] };
    const deadline = Date.now() + SECONDS * 1000;
    await Promise.all(Array.from({ length: CLIENTS }, async () => {
      while (Date.now() < deadline) await oneStream(server.port, counters);
    }));
    assert.deepEqual(counters.errors.slice(0, 5), []);
    assert.ok(counters.completed >= CLIENTS / 2, `completed ${counters.completed}`);
    // connections close asynchronously: give the front a moment
    await new Promise((r) => setTimeout(r, 500));
    const fd1 = fdCount(server.proc.pid);
    const rss1 = rssKiB(server.proc.pid);
    console.log(`load: ${counters.completed} streams, ${counters.rejected} rejected with 503, ` +
                `fds ${fd0} -> ${fd1}, front RSS ${rss0} -> ${rss1} KiB, engine RSS ${rssKiB(engine)} KiB`);
    assert.ok(fd1 <= fd0 + 2, `descriptors grew from ${fd0} to ${fd1}`);
    assert.ok(rss1 < rss0 + 64 * 1024, `front RSS grew from ${rss0} to ${rss1} KiB`);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
