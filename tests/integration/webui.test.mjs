// The chat page at / in headless Chromium (Debian's chromium, driven by playwright-core): type a
// message, send it, and read the streamed answer. A screenshot lands in build/webui.png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { startServer, root } from "./harness.mjs";

const executablePath = process.env.SPLASH_CHROMIUM || "/usr/bin/chromium";
const haveChromium = fs.existsSync(executablePath);

let server;
let context;
let userDataDir;

before(async () => {
  if (!haveChromium) return;
  server = await startServer();
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "splash-webui-"));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1000, height: 700 },
  });
});

after(async () => {
  if (context) await context.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  if (server) assert.equal(await server.stop(), 0);
});

test("chat page: a sent message streams an answer", { skip: !haveChromium && `${executablePath} is not installed` }, async () => {
  const page = context.pages()[0] || await context.newPage();
  const failed = [];
  page.on("pageerror", (e) => failed.push(String(e)));
  // the page samples at temperature 1, where the tiny model may end its turn at once: make its
  // request greedy so that the answer is the same every run
  await page.route("**/v1/chat/completions", (route) => {
    const body = JSON.parse(route.request().postData());
    route.continue({ postData: JSON.stringify({ ...body, temperature: 0 }) });
  });
  await page.goto(`${server.url}/`);
  assert.equal(await page.title(), "Splash");
  // the title names the model once /v1/models answered
  await page.waitForFunction(() => document.getElementById("title").textContent.includes("test/stories"));
  // thinking off: the stories model never closes a think block, so its answer is all content
  await page.selectOption("#effort", "none");
  await page.fill("#input", "Tell me a story about a frog.");
  await page.click("#send");
  await page.waitForSelector(".msg.user");
  assert.equal(await page.textContent(".msg.user"), "Tell me a story about a frog.");
  // streamed text arrives, then the stream ends (the page drops its empty reasoning area)
  await page.waitForFunction(() => {
    const a = document.querySelector(".msg.assistant");
    return a && a.textContent.trim().length > 0;
  }, null, { timeout: 30000 });
  await page.waitForFunction(() => !document.querySelector(".msg.reasoning"), null, { timeout: 30000 });
  const answer = await page.textContent(".msg.assistant");
  assert.ok(answer.trim().length > 0, `answer: ${JSON.stringify(answer)}`);
  assert.equal(await page.locator(".msg.error").count(), 0);
  fs.mkdirSync(path.join(root, "build"), { recursive: true });
  await page.screenshot({ path: path.join(root, "build", "webui.png") });
  assert.deepEqual(failed, []);
});
