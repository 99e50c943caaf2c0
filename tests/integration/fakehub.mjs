// A fake Hugging Face Hub on loopback for the installer's tests: the revision endpoint
// (/api/models/OWNER/REPO/revision/REV?blobs=true), resolve URLs that redirect LFS files to
// a "CDN" path, ETags and Range, gated repositories, and faults on demand. It counts the
// requests and the bytes it serves.
import crypto from "node:crypto";
import http from "node:http";

const sha256 = (b) => crypto.createHash("sha256").update(b).digest("hex");
const gitBlob = (b) => crypto.createHash("sha1").update(`blob ${b.length}\0`).update(b).digest("hex");
const isLfs = (p) => /\.(gguf|safetensors|bin)$/.test(p);

export class FakeHub {
  constructor() {
    this.repos = new Map();   // "owner/repo" -> { commits: Map(sha -> files), refs: {main: sha}, gated }
    this.blobs = new Map();   // sha256 -> Buffer
    this.requests = [];       // { method, url, status }
    this.bytesServed = 0;
    this.faults = {};         // see serveBlob and handle
  }

  // files: { path: Buffer }; returns the new commit's sha, which `branch` then names.
  commit(repoId, files, { branch = "main", gated = false } = {}) {
    let repo = this.repos.get(repoId);
    if (!repo) this.repos.set(repoId, (repo = { commits: new Map(), refs: {}, gated }));
    const sha = crypto.createHash("sha1").update(repoId + repo.commits.size + Date.now() + Math.random()).digest("hex");
    const entries = {};
    for (const [p, data] of Object.entries(files)) {
      const e = { data, size: data.length, blobId: gitBlob(data) };
      if (isLfs(p)) { e.sha256 = sha256(data); this.blobs.set(e.sha256, data); }
      entries[p] = e;
    }
    repo.commits.set(sha, entries);
    repo.refs[branch] = sha;
    return sha;
  }

  listen() {
    this.server = http.createServer((req, res) => this.handle(req, res));
    return new Promise((resolve) => this.server.listen(0, "127.0.0.1", () => {
      this.url = `http://127.0.0.1:${this.server.address().port}`;
      resolve(this.url);
    }));
  }

  close() {
    this.server.closeAllConnections?.();
    return new Promise((resolve) => this.server.close(resolve));
  }

  reset() { this.requests = []; this.bytesServed = 0; }

  resolveRev(repo, rev) {
    if (repo.commits.has(rev)) return rev;
    return repo.refs[rev];
  }

  fail(res, status, code, message) {
    res.writeHead(status, { "X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json" });
    res.end(JSON.stringify({ error: message }));
  }

  handle(req, res) {
    const url = new URL(req.url, "http://x");
    const entry = { method: req.method, path: url.pathname, range: req.headers.range || null };
    this.requests.push(entry);
    if (this.faults.hangApi && url.pathname.startsWith("/api/")) return; // never answers
    let m = url.pathname.match(/^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/);
    if (m) return this.revision(req, res, m[1], decodeURIComponent(m[2]));
    m = url.pathname.match(/^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/);
    if (m) return this.resolve(req, res, m[1], m[2], decodeURIComponent(m[3]));
    m = url.pathname.match(/^\/cdn\/([0-9a-f]{64})$/);
    if (m) return this.serveBlob(req, res, m[1]);
    m = url.pathname.match(/^\/loop\/(\d+)$/);
    if (m) { res.writeHead(302, { Location: `/loop/${Number(m[1]) + 1}` }); return res.end(); }
    res.writeHead(404); res.end();
  }

  authorized(req, repo) {
    return !repo.gated || req.headers.authorization === "Bearer hf_good";
  }

  revision(req, res, repoId, rev) {
    const repo = this.repos.get(repoId);
    if (!repo) return this.fail(res, 401, "RepoNotFound", "Repository not found");
    if (!this.authorized(req, repo)) return this.fail(res, 401, "GatedRepo", "Access to this model is restricted");
    const sha = this.resolveRev(repo, rev);
    if (!sha) return this.fail(res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
    const siblings = Object.entries(repo.commits.get(sha)).map(([p, e]) => {
      const s = { rfilename: p, blobId: e.blobId, size: e.size };
      if (e.sha256) s.lfs = { sha256: e.sha256, size: e.size, pointerSize: 134 };
      if (this.faults.lieSize?.[p] !== undefined) { s.size = this.faults.lieSize[p]; if (s.lfs) s.lfs.size = s.size; }
      return s;
    });
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ id: repoId, modelId: repoId, sha, private: false, gated: repo.gated ? "manual" : false, siblings }));
  }

  resolve(req, res, repoId, rev, p) {
    const repo = this.repos.get(repoId);
    if (!repo) return this.fail(res, 401, "RepoNotFound", "Repository not found");
    if (!this.authorized(req, repo)) return this.fail(res, 401, "GatedRepo", "Access restricted");
    const sha = this.resolveRev(repo, rev);
    const e = sha && repo.commits.get(sha)[p];
    if (!e) return this.fail(res, 404, "EntryNotFound", "Entry not found");
    if (this.faults.redirectLoop) { res.writeHead(302, { Location: "/loop/0" }); return res.end(); }
    if (e.sha256) {
      res.writeHead(302, { Location: `/cdn/${e.sha256}?X-Amz-Signature=fake`, "X-Repo-Commit": sha,
                           "X-Linked-Etag": `"${e.sha256}"`, "X-Linked-Size": String(e.size), ETag: `"${e.blobId}"` });
      return res.end();
    }
    return this.sendBytes(req, res, e.data, e.blobId, {});
  }

  serveBlob(req, res, id) {
    let data = this.blobs.get(id);
    if (!data) { res.writeHead(404); return res.end(); }
    const f = this.faults;
    if (f.corruptOnce?.has(id) && !req.headers.range) { // one wrong byte in a whole download, once
      f.corruptOnce.delete(id);
      data = Buffer.from(data); data[data.length >> 1] ^= 0xff;
    }
    return this.sendBytes(req, res, data, id, { cutAt: f.cutAt?.[id], stall: f.stall?.[id] });
  }

  sendBytes(req, res, data, etag, { cutAt, stall }) {
    let start = 0, end = data.length - 1, status = 200;
    const range = req.headers.range && req.headers.range.match(/^bytes=(\d+)-(\d*)$/);
    if (range) {
      start = Number(range[1]);
      end = range[2] ? Math.min(Number(range[2]), data.length - 1) : data.length - 1;
      if (start >= data.length) { res.writeHead(416, { "Content-Range": `bytes */${data.length}` }); return res.end(); }
      status = 206;
    }
    const body = data.subarray(start, end + 1);
    const headers = { ETag: `"${etag}"`, "Accept-Ranges": "bytes", "Content-Length": body.length,
                      "Content-Type": "application/octet-stream" };
    if (status === 206) headers["Content-Range"] = `bytes ${start}-${end}/${data.length}`;
    res.writeHead(status, headers);
    if (req.method === "HEAD") return res.end();
    if (stall !== undefined && start + body.length > stall) { // sends up to byte `stall`, then nothing
      const part = body.subarray(0, Math.max(0, stall - start));
      this.bytesServed += part.length;
      res.write(part);
      return;
    }
    if (cutAt !== undefined && cutAt > start && cutAt < end + 1) { // the connection drops mid-body, once
      const part = body.subarray(0, cutAt - start);
      this.bytesServed += part.length;
      delete this.faults.cutAt[etag];
      return res.write(part, () => res.destroy());
    }
    this.bytesServed += body.length;
    res.end(body);
  }
}

// Splits a GGUF into n parts as llama-gguf-split does: the first part keeps every key and
// adds split.no, split.count and split.tensors.count; each part holds its share of the tensors.
export function splitGguf(buf, n) {
  let o = 0;
  const u32 = () => { const v = buf.readUInt32LE(o); o += 4; return v; };
  const u64 = () => { const v = Number(buf.readBigUInt64LE(o)); o += 8; return v; };
  const str = () => { const len = u64(); const s = buf.toString("utf8", o, o + len); o += len; return s; };
  const scalar = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
  const skipValue = (t) => {
    if (t === 8) { str(); return; }
    if (t === 9) { const at = u32(); const cnt = u64(); for (let i = 0; i < cnt; i++) skipValue(at); return; }
    o += scalar[t];
  };
  if (buf.toString("latin1", 0, 4) !== "GGUF") throw new Error("not a GGUF");
  o = 4; const version = u32(); const nTensors = u64(); const nKv = u64();
  const kvs = []; let alignment = 32;
  for (let i = 0; i < nKv; i++) {
    const start = o; const key = str(); const t = u32(); const vStart = o; skipValue(t);
    if (key === "general.alignment") alignment = buf.readUInt32LE(vStart);
    kvs.push({ key, raw: buf.subarray(start, o) });
  }
  const tensors = [];
  for (let i = 0; i < nTensors; i++) {
    const start = o; const name = str(); const nd = u32(); o += 8 * nd; u32(); const offAt = o; const off = u64();
    tensors.push({ name, head: buf.subarray(start, offAt), off });
  }
  const dataStart = Math.ceil(o / alignment) * alignment;
  const sorted = [...tensors].sort((a, b) => a.off - b.off);
  sorted.forEach((t, i) => { t.size = (i + 1 < sorted.length ? sorted[i + 1].off : buf.length - dataStart) - t.off; });
  const kvString = (key, t, value) => {
    const k = Buffer.from(key); const b = Buffer.alloc(8 + k.length + 4 + (t === 2 ? 2 : 4));
    b.writeBigUInt64LE(BigInt(k.length), 0); k.copy(b, 8); b.writeUInt32LE(t, 8 + k.length);
    if (t === 2) b.writeUInt16LE(value, 12 + k.length); else b.writeInt32LE(value, 12 + k.length);
    return b;
  };
  const per = Math.ceil(tensors.length / n);
  const parts = [];
  for (let p = 0; p < n; p++) {
    const mine = tensors.slice(p * per, (p + 1) * per);
    const extra = [kvString("split.no", 2, p), kvString("split.count", 2, n), kvString("split.tensors.count", 5, tensors.length)];
    const keep = p === 0 ? kvs.map((k) => k.raw) : kvs.filter((k) => k.key === "general.alignment" || k.key === "general.architecture").map((k) => k.raw);
    const headerKvs = [...keep, ...extra];
    const head = Buffer.alloc(24);
    head.write("GGUF", 0, "latin1"); head.writeUInt32LE(version, 4);
    head.writeBigUInt64LE(BigInt(mine.length), 8); head.writeBigUInt64LE(BigInt(headerKvs.length), 16);
    const infos = []; const datas = []; let off = 0;
    for (const t of mine) {
      const offBuf = Buffer.alloc(8); offBuf.writeBigUInt64LE(BigInt(off));
      infos.push(t.head, offBuf);
      const data = buf.subarray(dataStart + t.off, dataStart + t.off + t.size);
      const padded = Math.ceil(data.length / alignment) * alignment;
      datas.push(data, Buffer.alloc(padded - data.length));
      off += padded;
    }
    let header = Buffer.concat([head, ...headerKvs, ...infos]);
    header = Buffer.concat([header, Buffer.alloc(Math.ceil(header.length / alignment) * alignment - header.length)]);
    parts.push(Buffer.concat([header, ...datas]));
  }
  return parts;
}
