#!/usr/bin/env python3
"""Differential test: every chat template in ../shared/testdata/templates rendered over many
seeded random requests (gen_conversations.py) by Python Jinja2 (render_jinja2.py, the oracle)
and by `build/splash template`, compared byte for byte. Where Jinja2 fails, ours must fail
(nonzero exit), and the other way round.

Environment: JINJA_DIFF_SEED (default 1), JINJA_DIFF_N (cases per template, default 300),
JINJA_DIFF_JOBS (parallel renders, default 2), JINJA_DIFF_SHOW (diffs printed, default 5),
JINJA_DIFF_TEMPLATES (comma-separated template stems to restrict to), SPLASH (the binary,
default build/splash). Exit 0 when all agree, 1 on any mismatch, 77 when Python Jinja2 or the
binary is missing.

strftime_now: both run on the manifest's fixed clock (render_jinja2.py's default,
2026-01-15 12:00; `splash template --now`), so a render near midnight cannot differ."""

import concurrent.futures
import difflib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TEMPLATES = os.path.normpath(os.path.join(ROOT, "..", "shared", "testdata", "templates"))

try:
    import jinja2  # noqa: F401
except ImportError:
    print("jinja-diff: SKIP: Python jinja2 is not installed (apt install python3-jinja2)")
    sys.exit(77)

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
sys.path.insert(0, HERE)
import gen_conversations  # noqa: E402
import render_jinja2  # noqa: E402


def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v not in (None, "") else default


def run_ours(splash, template, req_path):
    p = subprocess.run([splash, "template", "--template", template, "--request", req_path,
                        "--now", render_jinja2.FIXED_CLOCK.strftime("%Y-%m-%dT%H:%M:%S")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = p.stderr.decode("utf-8", "replace")
    return p.returncode, p.stdout, err[:-1] if err.endswith("\n") else err


def raised_matches(want, got):
    """raise_exception's message against splash's stderr (which holds at most 2047 bytes)."""
    w = want.encode("utf-8")
    g = got.encode("utf-8", "replace")
    if len(w) < 2000:
        return g == w
    return w.startswith(g[:1900])


def show_diff(case, want, got):
    a = want.decode("utf-8", "replace").splitlines(keepends=True)
    b = got.decode("utf-8", "replace").splitlines(keepends=True)
    d = "".join(difflib.unified_diff(a, b, "jinja2", "splash", n=2))
    if len(d) > 4000:
        d = d[:4000] + "\n... (diff cut)\n"
    if not d:
        d = "(same lines; bytes differ: %r vs %r)\n" % (want[-60:], got[-60:])
    return d


def main():
    seed = env_int("JINJA_DIFF_SEED", 1)
    n = env_int("JINJA_DIFF_N", 300)
    jobs = env_int("JINJA_DIFF_JOBS", 2)
    show = env_int("JINJA_DIFF_SHOW", 5)
    only = [s for s in os.environ.get("JINJA_DIFF_TEMPLATES", "").split(",") if s]
    splash = os.environ.get("SPLASH", os.path.join(ROOT, "build", "splash"))
    if not os.access(splash, os.X_OK):
        print("jinja-diff: SKIP: %s is not built (make build/splash)" % splash)
        return 77
    names = sorted(f for f in os.listdir(TEMPLATES) if f.endswith(".jinja"))
    if only:
        names = [f for f in names if f[:-len(".jinja")] in only]
    tmp = tempfile.mkdtemp(prefix="jinja-diff-")
    # a private copy, so a rebuild of the tree during the run cannot break it
    lib = os.path.join(os.path.dirname(splash), "libsplash.so")
    if os.path.exists(lib):
        shutil.copy2(lib, tmp)
    shutil.copy2(splash, tmp)
    splash = os.path.join(tmp, os.path.basename(splash))
    t0 = time.monotonic()
    counts = {"same_ok": 0, "same_error": 0, "differ": 0, "ours_failed": 0, "ours_rendered": 0,
              "message": 0}
    per_template = {}
    reports = []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))
    for name in names:
        path = os.path.join(TEMPLATES, name)
        stem = name[:-len(".jinja")]
        with open(path, encoding="utf-8") as f:
            oracle = render_jinja2.Renderer(f.read(), render_jinja2.special_tokens_for(name))
        special = render_jinja2.special_tokens_for(name)
        cases = []
        for i in range(n):
            req = gen_conversations.generate(random.Random("%d:%s:%d" % (seed, stem, i)))
            # `splash template --template` takes special tokens from the request's kwargs;
            # the request's own kwargs still win, as in transformers
            req["kwargs"] = dict(special, **req["kwargs"])
            rp = os.path.join(tmp, "%s-%d-%d.json" % (stem, seed, i))
            with open(rp, "w", encoding="utf-8") as f:
                json.dump(req, f, ensure_ascii=False, indent=1)
            cases.append((i, rp, req))
        futs = [pool.submit(run_ours, splash, path, rp) for (_, rp, _) in cases]
        bad = 0
        for (i, rp, req), fut in zip(cases, futs):
            res = oracle.render(req)
            rc, out, err = fut.result()
            if res[0] == "ok":
                want = res[1].encode("utf-8", "surrogatepass")
                if rc == 0 and out == want:
                    counts["same_ok"] += 1
                    continue
                kind = "ours_failed" if rc != 0 else "differ"
                detail = ("splash failed (exit %d): %s\n" % (rc, err)) if rc != 0 else \
                    show_diff(i, want, out)
            else:
                if rc != 0 and res[1] == "TemplateError" and not raised_matches(res[2], err):
                    # raise_exception's message is template text: ours must say the same
                    kind = "message"
                    detail = "Jinja2 raised: %s\nsplash failed: %s\n" % (res[2], err)
                elif rc != 0:
                    counts["same_error"] += 1
                    continue
                else:
                    kind = "ours_rendered"
                    detail = "Jinja2 raised %s: %s\nsplash rendered %d bytes\n" % (
                        res[1], res[2], len(out))
            counts[kind] += 1
            bad += 1
            if len(reports) < show:
                reports.append("---- %s case %d (%s)\nrequest: %s\n%s" % (
                    name, i, kind, rp, detail))
        per_template[stem] = (n - bad, bad)
    pool.shutdown()
    dt = time.monotonic() - t0
    for r in reports:
        print(r)
    for stem, (good, bad) in per_template.items():
        print("jinja-diff: %-28s %5d agree %5d differ" % (stem, good, bad))
    total_bad = counts["differ"] + counts["ours_failed"] + counts["ours_rendered"] + \
        counts["message"]
    print("jinja-diff: seed %d, %d templates x %d requests in %.1f s: %d rendered identically, "
          "%d failed in both, %d differ, %d only splash failed, %d only Jinja2 failed, "
          "%d raised another message"
          % (seed, len(names), n, dt, counts["same_ok"], counts["same_error"], counts["differ"],
             counts["ours_failed"], counts["ours_rendered"], counts["message"]))
    if total_bad:
        print("jinja-diff: FAIL (requests kept in %s; reproduce with render_jinja2.py "
              "--template T --request R)" % tmp)
        return 1
    shutil.rmtree(tmp)
    print("jinja-diff: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
