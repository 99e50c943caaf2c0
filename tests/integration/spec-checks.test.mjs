// What server.md and PLATFORM.md say about option combinations, checked on the command line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { splash, storiesModel, startServer } from "./harness.mjs";

function serve(args) {
  return spawnSync(splash, ["serve", "--model", "test/stories", "--model-dir", storiesModel, ...args],
                   { encoding: "utf8", timeout: 20000 });
}

test("refused at startup: --persistent-cache with --max-cache-disk 0; --activations bf16 (not implemented)", () => {
  const cache = serve(["--persistent-cache", "--max-cache-disk", "0"]);
  assert.equal(cache.status, 2, cache.stdout + cache.stderr);
  assert.match(cache.stderr, /--persistent-cache: needs the SSD cache, which --max-cache-disk 0 turns off/);
  const act = serve(["--activations", "bf16"]);
  assert.equal(act.status, 2, act.stdout + act.stderr);
  assert.match(act.stderr, /--activations bf16: .*not implemented/);
});

test("a --max-memory larger than the budget is said to be ignored", async () => {
  const server = await startServer(["--max-memory", "1000G"]);
  try {
    assert.match(server.output(), /Note · --max-memory 1000\.00 GiB is more than the [\d.]+ GiB \S+ leaves; it is ignored/);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
