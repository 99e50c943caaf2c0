// Starts `splash serve` on a tiny reference model and stops it again.
import { spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const root = path.resolve(here, "../..");
export const testdata = process.env.SPLASH_TESTDATA || path.resolve(root, "../shared/testdata");
export const splash = path.join(process.env.SPLASH_BUILD || path.join(root, "build"), "splash");
export const storiesModel = path.join(testdata, "models/qwen35-stories-Q8_0.gguf");

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

// Resolves once the console prints its "Serving" line. demo: `splash serve --demo`.
// launcher: a command and its arguments that exec splash's path and arguments, appended
// (e.g. a shell that first enters a cgroup).
export async function startServer(extraArgs = [], { model = storiesModel, env = {}, demo = false,
                                                    launcher = [] } = {}) {
  const port = await freePort();
  const modelArgs = demo ? ["--demo"] : ["--model", "test/stories", "--model-dir", model];
  // SPLASH_TEST_DRAFT_MODEL: the stories model's suites served with its DFlash2 draft
  // (sdk-draft.test.mjs), unless the test chooses its own speculation
  const draft = process.env.SPLASH_TEST_DRAFT_MODEL;
  const drafted = draft && !demo && model === storiesModel &&
    !extraArgs.some((a) => a === "--draft-model" || a === "--speculative");
  const args = ["serve", ...modelArgs, "--port", String(port), "--threads", "1", ...extraArgs,
                ...(drafted ? ["--draft-model", draft] : [])];
  const [cmd, ...cmdArgs] = [...launcher, splash, ...args];
  const proc = spawn(cmd, cmdArgs, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  proc.stdout.on("data", (d) => { out += d; });
  proc.stderr.on("data", (d) => { err += d; });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGTERM"); // not left running (its engine restarting) after the test gave up
      reject(new Error(`server did not start:\n${out}\n${err}`));
    }, 30000);
    const check = () => {
      if (out.includes("Serving ·")) { clearTimeout(timer); resolve(); }
    };
    proc.stdout.on("data", check);
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`serve exited ${code}:\n${out}\n${err}`)); });
  });
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    proc,
    output: () => out + err,
    stop: () => new Promise((resolve) => {
      if (proc.exitCode !== null) return resolve(proc.exitCode);
      proc.on("exit", (code) => resolve(code));
      proc.kill("SIGTERM");
    }),
  };
}

// A raw HTTP request, for headers fetch() will not send (Host) and for reading status lines.
export function rawRequest(port, { method = "GET", path: p = "/", headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let data = "";
    sock.on("data", (d) => { data += d; });
    sock.on("end", () => {
      const [head, ...rest] = data.split("\r\n\r\n");
      const lines = head.split("\r\n");
      const status = Number(lines[0].split(" ")[1]);
      const hdrs = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(":");
        hdrs[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
      }
      resolve({ status, headers: hdrs, body: rest.join("\r\n\r\n") });
    });
    sock.on("error", reject);
    const payload = body === undefined ? "" : body;
    const allHeaders = { Host: `127.0.0.1:${port}`, Connection: "close", ...headers };
    if (payload) allHeaders["Content-Length"] = Buffer.byteLength(payload);
    let req = `${method} ${p} HTTP/1.1\r\n`;
    for (const [k, v] of Object.entries(allHeaders)) req += `${k}: ${v}\r\n`;
    sock.write(req + "\r\n");
    if (payload) sock.write(payload);
  });
}
