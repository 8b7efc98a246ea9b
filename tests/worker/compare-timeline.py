#!/usr/bin/env python3
"""Sets the measured per-op timeline of a validation (remat-worker
--validate-local ... --timeline) beside the traced rules of
docs/memory-model.md replayed on the same profile and schedule, and prints
the ops where they differ most.  A diagnostic for calibration, not a test.

    compare-timeline.py PROFILE.json PLAN.json RESULT.json [N]
"""
import json
import sys


def traced(p, ops):
    st = p["stages"]
    x = lambda i: p["input_bytes"] if i == 0 else st[i - 1]["out_bytes"]
    L = sum(s["param_bytes"] for s in st) + p["input_bytes"]
    plain, kept, out = {0}, set(), []
    for o, i in ops:
        s = st[i - 1]
        if o in ("F_none", "F_ck"):
            pk = L + s["out_bytes"] + s["fwd_tmp_bytes"]
            L += s["out_bytes"]
            plain.add(i)
            if o == "F_ck":
                kept.add(i - 1)
            elif i >= 2 and (i - 1) in plain and (i - 1) not in kept:
                L -= x(i - 1)
                plain.discard(i - 1)
        elif o == "F_all":
            pk = L + s["saved_bytes"] + s.get("fwd_grad_tmp_bytes", s["fwd_tmp_bytes"])
            L += s["saved_bytes"]
        elif o == "loss":
            pk = L + s["out_bytes"]
            L += s["out_bytes"]
        else:
            g = x(i - 1) if i > 1 else 0
            pk = L + g + s["param_bytes"] + s["bwd_tmp_bytes"] - s.get("bwd_freed_bytes", 0)
            L += g + s["param_bytes"] - s["saved_bytes"] - s["out_bytes"]
            if i >= 2 and (i - 1) in plain:
                L -= x(i - 1)
                plain.discard(i - 1)
                kept.discard(i - 1)
        out.append((pk, L))
    return out


prof = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
res = json.load(open(sys.argv[3]))
top = int(sys.argv[4]) if len(sys.argv) > 4 else 10
tl = res["timeline"]
pred = traced(prof, [(e["op"], e["stage"]) for e in tl])
rows = []
for k, (e, (pk, after)) in enumerate(zip(tl, pred)):
    rows.append((abs(pk - e["peak_bytes"]), k, e["op"], e["stage"], pk, e["peak_bytes"], after,
                 e["after_bytes"]))
print("measured peak %d (op %d), predicted %d (op %d)" % (
    max(e["peak_bytes"] for e in tl), max(range(len(tl)), key=lambda k: tl[k]["peak_bytes"]),
    max(p for p, _ in pred), max(range(len(pred)), key=lambda k: pred[k][0])))
print("%5s %-7s %5s %14s %14s %12s %14s %14s" % ("op#", "op", "stage", "pred peak", "meas peak",
                                                  "diff", "pred after", "meas after"))
for d, k, o, i, pk, mk, pa, ma in sorted(rows, reverse=True)[:top]:
    print("%5d %-7s %5d %14d %14d %+12d %14d %14d" % (k, o, i, pk, mk, pk - mk, pa, ma))
