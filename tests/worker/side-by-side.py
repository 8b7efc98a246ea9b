#!/usr/bin/python3
"""Every solver side by side on measured peaks and step times.

For each model: profile it with the real worker (--profile-local), plan it
with cli/remat with every solver (store-all, sqrt, acg, paper-cubic,
paper-linear, min-peak, and min-time at the least budget, min-peak's peak),
take a few points of the min-time frontier (remat frontier), run each plan
for real with the worker (--validate-local) and print a markdown table:
predicted and measured peak and step time, and each solver's saving of
measured peak against sqrt and ACG.  With --svg-dir, one SVG per model:
measured peak against measured step time, each solver a point, the frontier
points joined by a line.  docs/accuracy.md ("Side by side") shows the table
and the command that made it.

    side-by-side.py --worker W --remat R [--device cpu] [--out DIR] \\
        [--svg-dir DIR] [--markdown FILE] MODEL[:key=value,...]...

A model is a zoo name with options after a colon: batch=N, input=3x64x64
(the input shape, batch excluded), dtype=fp16|bf16|fp32, label=NAME (the
table's name for it), and
for gpt the model_options d_model, heads, layers, seq_len, vocab.  Example:
resnet50:batch=2,input=3x64x64  gpt:label=gpt-s,batch=2,d_model=128,heads=4,layers=8,seq_len=64,vocab=1000

--reuse keeps the profiles, plans and results already in --out (rerun after
a change to the table or figure only).  --time-tolerance P exits 1 when a
plan's step time is more than P percent off its prediction, and
--check-order when the frontier's measured step times are not ordered as
predicted (pairs predicted more than --order-gap apart); both are for a
device whose times can be trusted (tests/worker/gpu-time.sh), not shared
CPU cores.  --peak-tolerance P exits 1 when a peak is P percent off.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

SOLVERS = ["store-all", "sqrt", "acg", "paper-cubic", "paper-linear", "min-peak", "min-time"]
GPT_OPTIONS = ("d_model", "heads", "layers", "seq_len", "vocab")


def parse_model(arg):
    name, _, rest = arg.partition(":")
    m = {"model": name, "label": name, "batch": 1, "input": None, "options": {}, "dtype": None}
    for kv in filter(None, rest.split(",")):
        k, eq, v = kv.partition("=")
        if not eq:
            sys.exit("side-by-side: %s: options are key=value" % arg)
        if k == "label":
            m["label"] = v
        elif k == "batch":
            m["batch"] = int(v)
        elif k == "dtype":
            m["dtype"] = v
        elif k == "input":
            m["input"] = [int(d) for d in v.split("x")]
        elif k in GPT_OPTIONS:
            m["options"][k] = int(v)
        else:
            sys.exit("side-by-side: %s: unknown option %s" % (arg, k))
    return m


def run(cmd, out=None):
    """Runs cmd; its stdout into the file out.  Returns (ok, stderr)."""
    with open(out, "w") if out else open(os.devnull, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0 and out:
        os.unlink(out)
    return p.returncode == 0, p.stderr.strip()


def load(path):
    with open(path) as f:
        return json.load(f)


def dump(obj, path):
    with open(path, "w") as f:
        json.dump(obj, f)


def mb(b):
    return b / 1e6


def fmt_saving(x, ref):
    if ref is None or x is None:
        return "-"
    return "%+.1f%%" % (100.0 * (ref - x) / ref)


class Bench:
    def __init__(self, a):
        self.a = a
        self.failures = []

    def step(self, what, cmd, out):
        if self.a.reuse and os.path.exists(out):
            return True, ""
        t0 = time.time()
        ok, err = run(cmd, out)
        if self.a.verbose:
            print("  %s: %.1f s%s" % (what, time.time() - t0, "" if ok else " FAILED"),
                  file=sys.stderr, flush=True)
        return ok, err

    def model(self, m):
        a = self.a
        dtype = m["dtype"] or a.dtype
        tag = "%s-b%d%s" % (m["label"], m["batch"], "" if dtype == "fp32" else "-" + dtype)
        base = os.path.join(a.out, tag)
        spec = {"model": m["model"], "batch_size": m["batch"], "dtype": dtype,
                "device": a.device, "warmup": a.warmup, "repeats": a.profile_repeats}
        if m["input"]:
            spec["input_shape"] = m["input"]
        if m["options"]:
            spec["model_options"] = m["options"]
        dump(spec, base + ".spec.json")
        prof = base + ".profile.json"
        print("%s: profiling" % tag, file=sys.stderr, flush=True)
        ok, err = self.step("profile", [a.worker, "--device", a.device, "--profile-local",
                                        base + ".spec.json"], prof)
        if not ok:
            self.failures.append("%s: profile: %s" % (tag, err))
            return None
        plans = {}
        for alg in a.algorithms:
            cmd = [a.remat, "plan", "--algorithm", alg]
            if alg == "min-time":
                # The least budget: min-peak's peak (solved here when the
                # list leaves min-peak out).
                mp = "%s.min-peak.plan.json" % base
                ok, err = True, ""
                if not plans.get("min-peak"):
                    ok, err = self.step("plan min-peak", [a.remat, "plan", "--algorithm",
                                                          "min-peak", prof], mp)
                if not ok:
                    self.failures.append("%s: min-peak: %s" % (tag, err))
                    continue
                cmd += ["--budget", str(load(mp)["peak_bytes"])]
            out = "%s.%s.plan.json" % (base, alg)
            ok, err = self.step("plan " + alg, cmd + [prof], out)
            if ok:
                plans[alg] = out
            else:
                # A solver that gives up (acg and paper-cubic have stage
                # limits) is a row saying why, not a failure of the table.
                plans[alg] = None
                print("%s: %s: %s" % (tag, alg, err.splitlines()[-1] if err else "failed"),
                      file=sys.stderr)
        rows = [(alg, plans[alg]) for alg in a.algorithms if alg in plans]
        if a.frontier > 0:
            fr = base + ".frontier.json"
            ok, err = self.step("frontier", [a.remat, "frontier", prof], fr)
            if ok:
                pts = load(fr)["points"]
                k = min(a.frontier, len(pts))
                picks = sorted({round(j * (len(pts) - 1) / max(k - 1, 1)) for j in range(k)})
                for j in picks:
                    out = "%s.frontier%d.plan.json" % (base, j)
                    dump(pts[j]["plan"], out)
                    rows.append(("frontier %d/%d" % (j + 1, len(pts)), out))
            else:
                self.failures.append("%s: frontier: %s" % (tag, err))
        results = []
        done = {}  # op list -> result: a frontier end is often a solver's plan
        for name, plan in rows:
            if plan is None:
                results.append({"solver": name, "plan": None, "result": None})
                continue
            pj = load(plan)
            key = json.dumps(pj.get("schedule") or pj.get("checkpoints"))
            if key in done:
                results.append({"solver": name, "plan": load(plan), "result": done[key],
                                "same_as": done[key + "name"]})
                continue
            res = plan.replace(".plan.json", ".result.json")
            print("%s: validating %s" % (tag, name), file=sys.stderr, flush=True)
            ok, err = self.step("validate " + name,
                                [a.worker, "--device", a.device, "--validate-local",
                                 base + ".spec.json", plan, "--profile", prof,
                                 "--repeats", str(a.repeats), "--warmup", str(a.validate_warmup)],
                                res)
            if not ok:
                self.failures.append("%s: %s: validate: %s" % (tag, name, err))
            results.append({"solver": name, "plan": load(plan),
                            "result": load(res) if ok else None})
            if ok:
                done[key] = results[-1]["result"]
                done[key + "name"] = name
        return {"tag": tag, "m": m, "profile": load(prof), "rows": results}

    def check(self, t):
        a = self.a
        for r in t["rows"]:
            res = r["result"]
            if res is None:
                continue
            what = "%s %s" % (t["tag"], r["solver"])
            if a.peak_tolerance is not None and abs(res["relative_error"]) * 100 > a.peak_tolerance:
                self.failures.append("%s: peak error %+.2f%% over %s%%" % (
                    what, 100 * res["relative_error"], a.peak_tolerance))
            if a.time_tolerance is not None:
                te = res.get("step_time_error")
                if te is None or abs(te) * 100 > a.time_tolerance:
                    self.failures.append("%s: step time %.2f ms against %.2f predicted (%s)" % (
                        what, res["step_ms"], res.get("predicted_step_ms", 0),
                        "no step_time_error" if te is None else "%+.1f%%" % (100 * te)))
        if a.check_order:
            fr = [r for r in t["rows"] if r["solver"].startswith("frontier") and r["result"]]
            for i in range(len(fr)):
                for j in range(i + 1, len(fr)):
                    p, q = fr[i]["result"], fr[j]["result"]
                    pp, pq = p["predicted_step_ms"], q["predicted_step_ms"]
                    if abs(pp - pq) <= a.order_gap * max(pp, pq):
                        continue
                    if (pp < pq) != (p["step_ms"] < q["step_ms"]):
                        self.failures.append(
                            "%s: %s and %s predicted %.2f and %.2f ms, measured %.2f and %.2f ms" % (
                                t["tag"], fr[i]["solver"], fr[j]["solver"], pp, pq,
                                p["step_ms"], q["step_ms"]))


def table(tables, a):
    lines = ["| model | solver | ckpts / ops | predicted MB | measured MB | peak error | predicted ms "
             "| measured ms (min-max) | time error | vs sqrt | vs ACG | step vs sqrt | step vs ACG |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for t in tables:
        by = {r["solver"]: r["result"] for r in t["rows"]}
        ref_sqrt = by.get("sqrt") and by["sqrt"]["measured_peak_bytes"]
        ref_acg = by.get("acg") and by["acg"]["measured_peak_bytes"]
        # What the step adds to the weights and the input (docs/accuracy.md):
        # the part of the peak that a plan can change.
        fixed = t["profile"]["input_bytes"] + sum(s["param_bytes"] for s in t["profile"]["stages"])
        for r in t["rows"]:
            res, plan = r["result"], r["plan"]
            name = "%s b%d" % (t["m"]["label"], t["m"]["batch"])
            if res is None:
                lines.append("| %s | %s | - | - | - | - | - | - | - | - | - | - | - |" % (
                    name, r["solver"] + (" (no plan)" if plan is None else " (failed)")))
                continue
            nck = "%d / %d" % (len(plan.get("checkpoints") or []), res.get("n_ops", 0))
            te = res.get("step_time_error")
            solver = r["solver"]
            if r.get("same_as"):
                solver += " (= %s)" % r["same_as"]
            lines.append("| %s | %s | %s | %.3f | %.3f | %+.3f%% | %.1f | %.1f (%.1f-%.1f) | %s | %s | %s | %s | %s |" % (
                name, solver, nck, mb(res["predicted_peak_bytes"]),
                mb(res["measured_peak_bytes"]), 100 * res["relative_error"],
                res.get("predicted_step_ms", 0), res["step_ms"], res.get("step_ms_min", 0),
                res.get("step_ms_max", 0), "-" if te is None else "%+.0f%%" % (100 * te),
                fmt_saving(res["measured_peak_bytes"], ref_sqrt),
                fmt_saving(res["measured_peak_bytes"], ref_acg),
                fmt_saving(res["measured_peak_bytes"] - fixed, ref_sqrt and ref_sqrt - fixed),
                fmt_saving(res["measured_peak_bytes"] - fixed, ref_acg and ref_acg - fixed)))
    return "\n".join(lines) + "\n"


def svg(t, path):
    """Measured peak (MB) against measured step time (ms): a point per
    solver, the frontier points joined in order of predicted time."""
    pts = [(r["solver"], r["result"]["step_ms"], mb(r["result"]["measured_peak_bytes"]))
           for r in t["rows"] if r["result"]]
    if not pts:
        return
    W, H, L, R, T, B = 760, 460, 80, 210, 40, 56
    xs = [p[1] for p in pts]
    ys = [p[2] for p in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    dx = (x1 - x0) or max(x1, 1) * 0.1
    dy = (y1 - y0) or max(y1, 1) * 0.1
    x0, x1 = x0 - 0.08 * dx, x1 + 0.08 * dx
    y0, y1 = y0 - 0.08 * dy, y1 + 0.08 * dy

    def X(v):
        return L + (v - x0) / (x1 - x0) * (W - L - R)

    def Y(v):
        return H - B - (v - y0) / (y1 - y0) * (H - T - B)

    colors = {"store-all": "#444444", "sqrt": "#1f77b4", "acg": "#ff7f0e",
              "paper-cubic": "#2ca02c", "paper-linear": "#17becf", "min-peak": "#d62728",
              "min-time": "#9467bd"}
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">' % (W, H, W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15">%s batch %d (%s): measured peak against step time'
         '</text>' % (L, t["m"]["label"], t["m"]["batch"], t["profile"].get("device", "?"))]
    def decimals(span):
        return max(0, 1 - int(math.floor(math.log10(span / 5))))

    xd, yd = decimals(x1 - x0), decimals(y1 - y0)
    for k in range(6):
        gx = x0 + (x1 - x0) * k / 5
        gy = y0 + (y1 - y0) * k / 5
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (
            X(gx), T, X(gx), H - B))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%.*f</text>' % (
            X(gx), H - B + 16, xd, gx))
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (
            L, Y(gy), W - R, Y(gy)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%.*f</text>' % (
            L - 6, Y(gy) + 4, yd, gy))
    o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>' % (
        L, T, W - L - R, H - T - B))
    o.append('<text x="%d" y="%d" text-anchor="middle">measured step time (ms, median)</text>' % (
        (L + W - R) // 2, H - 14))
    o.append('<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">'
             'measured peak (MB)</text>' % ((T + H - B) // 2))
    fr = sorted([r for r in t["rows"] if r["solver"].startswith("frontier") and r["result"]],
                key=lambda r: r["result"]["predicted_step_ms"])
    if len(fr) >= 2:
        o.append('<polyline fill="none" stroke="#9467bd" stroke-width="1.5" stroke-dasharray="5,3" '
                 'points="%s"/>' % " ".join("%.1f,%.1f" % (
                     X(r["result"]["step_ms"]), Y(mb(r["result"]["measured_peak_bytes"])))
                     for r in fr))
    for r in fr:
        o.append('<circle cx="%.1f" cy="%.1f" r="3" fill="#9467bd" fill-opacity="0.5"/>' % (
            X(r["result"]["step_ms"]), Y(mb(r["result"]["measured_peak_bytes"]))))
    ly = T + 10
    # Largest first: solvers that found the same plan show as rings
    # around one point.
    solvers = [(r, p) for r, p in zip([r for r in t["rows"] if r["result"]], pts)
               if not p[0].startswith("frontier")]
    for k, (r, (name, x, y)) in enumerate(solvers):
        c = colors.get(name, "#000")
        o.append('<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" stroke="white"/>' % (
            X(x), Y(y), 4 + 1.6 * (len(solvers) - 1 - k), c))
        o.append('<circle cx="%d" cy="%d" r="5.5" fill="%s"/>' % (W - R + 16, ly, c))
        o.append('<text x="%d" y="%d">%s%s</text>' % (
            W - R + 26, ly + 4, name, " = " + r["same_as"] if r.get("same_as") else ""))
        ly += 20
    if fr:
        o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#9467bd" stroke-dasharray="5,3"/>' % (
            W - R + 8, ly, W - R + 24, ly))
        o.append('<text x="%d" y="%d">min-time frontier</text>' % (W - R + 26, ly + 4))
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", required=True)
    ap.add_argument("--remat", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="fp32", help="unless a model says dtype=")
    ap.add_argument("--algorithms", default=",".join(SOLVERS),
                    help="comma-separated (default: all seven)")
    ap.add_argument("--out", default="side-by-side")
    ap.add_argument("--warmup", type=int, default=1, help="profile warm-ups (1)")
    ap.add_argument("--profile-repeats", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="measured steps per plan (3)")
    ap.add_argument("--validate-warmup", type=int, default=1)
    ap.add_argument("--frontier", type=int, default=4,
                    help="frontier points run, spread evenly, ends included (4; 0: none)")
    ap.add_argument("--svg-dir")
    ap.add_argument("--markdown", help="write the table here too")
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--peak-tolerance", type=float)
    ap.add_argument("--time-tolerance", type=float)
    ap.add_argument("--check-order", action="store_true")
    ap.add_argument("--order-gap", type=float, default=0.02)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    a.algorithms = [x for x in a.algorithms.split(",") if x]
    os.makedirs(a.out, exist_ok=True)
    b = Bench(a)
    tables = []
    for arg in a.models:
        t = b.model(parse_model(arg))
        if t is None:
            continue
        tables.append(t)
        b.check(t)
        if a.svg_dir:
            os.makedirs(a.svg_dir, exist_ok=True)
            svg(t, os.path.join(a.svg_dir, "side-by-side-%s.svg" % t["tag"]))
    md = table(tables, a)
    sys.stdout.write(md)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)
    for f in b.failures:
        print("FAIL " + f, file=sys.stderr)
    return 1 if b.failures else 0


if __name__ == "__main__":
    sys.exit(main())
