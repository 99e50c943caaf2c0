// `splash run` samples with serve's defaults (splash_gen_params_init: temperature 1,
// top_p 1, no top_k, no min_p, no repetition penalty), not a set of its own.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { splash, storiesModel } from "./harness.mjs";

function run(extra) {
  const r = spawnSync(splash, ["run", "--model-dir", storiesModel, "--prompt", "Once upon a time",
                               "-n", "24", "--seed", "7", "--threads", "1", ...extra], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test("splash run's sampling defaults are serve's", () => {
  const plain = run([]);
  const serveDefaults = run(["--temp", "1", "--top-k", "0", "--top-p", "1", "--min-p", "0",
                             "--repeat-penalty", "1"]);
  assert.equal(plain, serveDefaults);
  // the seed does decide: another sampling gives other text
  assert.notEqual(run(["--temp", "0.8", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05"]), plain);
  const help = spawnSync(splash, ["run", "--help"], { encoding: "utf8" }).stdout;
  assert.match(help.replace(/\s+/g, " "), /defaults are serve.s: --temp 1 --top-k 0 \(off\) --top-p 1 --min-p 0 --repeat-penalty 1/);
});
