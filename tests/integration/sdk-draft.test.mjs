// The OpenAI and Anthropic SDK suites served with a draft: the stories model's suites run
// again with its trained DFlash2 draft (harness.mjs adds --draft-model where the test
// chooses no speculation of its own); the conformance suites' after() checks the draft's
// cycles took part (its log line, accepted tokens in /metrics).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { testdata } from "./harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const draft = path.join(testdata, "drafts/qwen35-stories-DFlash2");

for (const file of ["conformance-openai.test.mjs", "conformance-anthropic.test.mjs",
                    "chat.test.mjs", "anthropic.test.mjs"]) {
  test(`${file} with the DFlash2 draft`, async () => {
    // a run of its own (node:test refuses a run inside a test file's context)
    const env = { ...process.env, SPLASH_TEST_DRAFT_MODEL: draft };
    delete env.NODE_TEST_CONTEXT;
    // a test that waits forever (a request refused under it) fails after 5 minutes
    // instead of holding CI until its job limit
    const proc = spawn(process.execPath, ["--test", "--test-concurrency=1", "--test-timeout=300000",
                                          path.join(here, file)],
                       { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    proc.stdout.on("data", (d) => { out += d; });
    proc.stderr.on("data", (d) => { out += d; });
    const code = await new Promise((resolve) => proc.on("exit", resolve));
    assert.equal(code, 0, out.split("\n").filter((l) => /^not ok|error|Error|expected|actual/.test(l))
      .slice(0, 40).join("\n"));
    assert.match(out, /^# pass [1-9]/m);
  });
}
