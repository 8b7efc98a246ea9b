#!/usr/bin/python3
"""tests/worker/side-by-side.py on a tiny GPT stack with the real worker: a
table row per solver and frontier point, each measured row's peak and step
time errors following from its numbers, and a figure that is well-formed
SVG with a point per solver.  Keeps the script that makes docs/accuracy.md's
side-by-side table runnable (its full run takes an hour on shared cores)."""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

BUILD = os.environ.get("top_builddir", ".")
SRC = os.environ.get("top_srcdir", ".")
WORKER = os.path.join(BUILD, "worker", "remat-worker")
REMAT = os.path.join(BUILD, "cli", "remat")
for prog in (WORKER, REMAT):
    if not os.access(prog, os.X_OK):
        print("SKIP: %s is not built" % prog)
        sys.exit(77)

env = dict(os.environ)
env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


tmp = tempfile.mkdtemp(prefix="remat-side-by-side-")
model = "gpt:label=tiny,batch=2,d_model=16,heads=2,layers=4,seq_len=16,vocab=32"
p = subprocess.run([sys.executable, os.path.join(SRC, "tests", "worker", "side-by-side.py"),
                    "--worker", WORKER, "--remat", REMAT, "--out", os.path.join(tmp, "runs"),
                    "--svg-dir", tmp, "--markdown", os.path.join(tmp, "table.md"),
                    "--warmup", "0", "--profile-repeats", "1", "--repeats", "1",
                    "--validate-warmup", "0", "--frontier", "3", model],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
check(p.returncode == 0, "side-by-side.py exits 0 (%d): %s" % (p.returncode, p.stderr[-2000:]))
rows = [line.split("|")[1:-1] for line in p.stdout.splitlines()
        if line.startswith("| tiny b2 |")]
names = [r[1].strip() for r in rows]
for alg in ("store-all", "sqrt", "acg", "paper-cubic", "paper-linear", "min-peak", "min-time"):
    check(any(n == alg or n.startswith(alg + " (= ") for n in names), "a row for %s" % alg)
check(sum(n.startswith("frontier ") for n in names) >= 1, "rows for frontier points: %s" % names)
for r in rows:
    c = [x.strip() for x in r]
    check(c[3] != "-", "%s was measured" % c[1])
# The errors from the results the table was made of (the table rounds).
results = [f for f in os.listdir(os.path.join(tmp, "runs")) if f.endswith(".result.json")]
check(len(results) >= 3, "results kept in --out: %s" % results)
for f in results:
    x = json.load(open(os.path.join(tmp, "runs", f)))
    pred, meas = x["predicted_peak_bytes"], x["measured_peak_bytes"]
    check(abs(x["relative_error"] - (pred - meas) / meas) < 1e-9,
          "%s: relative_error %.6f is (predicted - measured) / measured" % (f, x["relative_error"]))
    ms, pms = x["step_ms"], x["predicted_step_ms"]
    check(x["step_ms_min"] <= ms <= x["step_ms_max"] and pms > 0 and
          abs(x["step_time_error"] - (ms - pms) / pms) < 1e-9,
          "%s: step %.1f ms, predicted %.1f, error %+.3f" % (f, ms, pms, x["step_time_error"]))
check(open(os.path.join(tmp, "table.md")).read() in p.stdout, "--markdown writes the table")
svg = os.path.join(tmp, "side-by-side-tiny-b2.svg")
try:
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    circles = root.findall(".//%scircle" % ns)
    check(root.tag == ns + "svg" and len(circles) >= 2 * 7,
          "the figure is SVG with a point and a legend mark per solver (%d circles)" % len(circles))
except (OSError, ET.ParseError) as e:
    check(False, "the figure parses: %s" % e)
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
