#!/usr/bin/env python3
"""The worker runs libremat's op list, and checks it before anything runs.

On a tiny CPU model (remat-worker --validate-local, cli/remat for plans):
1. A plan's schedule runs op for op: the result counts its ops, and a plan
   that gives only checkpoints runs libremat's schedule of them.
2. A malformed plan fails with a reason naming the op: an op spelled any
   way but the one plans print, an op whose input is not live, a schedule
   that leaves work undone, a stage out of range, bad checkpoints.
3. The check comes before the device is touched: under --cpu-limit 1 (any
   tensor is an out-of-memory) a malformed plan still fails with its own
   reason, while a good plan fails as out of memory.
4. A plan checked against a profile of another model is refused.
5. --trace prints when each phase of a local profile starts, in order.
6. A spec is held to the layer table and the limits rematd holds a request
   to (src/rematx/layers.h) before anything is built.
"""
import copy
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from lib import REMAT, WORKER  # noqa: E402

lib.need(WORKER, REMAT)
here = lib.Run("remat-plan-check-")
tmp, env, check, failures = here.tmp, here.env, here.check, here.failures


def write(name, value):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(value, f)
    return path


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""


SPEC = {"layers": [{"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1},
                   {"type": "relu"}, {"type": "conv2d", "out_channels": 4, "kernel_size": 3},
                   {"type": "relu"}, {"type": "flatten"}, {"type": "linear", "out_features": 10}],
        "input_shape": [3, 8, 8], "batch_size": 2, "dtype": "fp32", "device": "cpu",
        "warmup": 0, "repeats": 1}
spec = write("spec.json", SPEC)
rc, out, err = run([WORKER, "--profile-local", spec])
if not check(rc == 0, "the tiny model's profile (%s)" % err):
    sys.exit(1)
profile = write("profile.json", json.loads(out))
# --trace: a line as each phase starts, in order, seconds not going back.
p = subprocess.run([WORKER, "--profile-local", spec, "--trace"], capture_output=True, text=True,
                   env=env)
trace = [w.split() for w in p.stderr.splitlines() if w.startswith("remat-worker: trace ")]
phases = [" ".join(w[3:5]) for w in trace]
check(p.returncode == 0 and phases == ["start 0/0", "building 0/0"]
      + ["measuring %d/6" % i for i in range(1, 7)] + ["end 0/0"]
      and all(float(a[2]) <= float(b[2]) for a, b in zip(trace, trace[1:]))
      and len(json.loads(p.stdout)["stages"]) == 6,
      "--trace times each phase of a local profile: %s" % phases)
rc, out, err = run([REMAT, "plan", "--algorithm", "sqrt", profile])
check(rc == 0, "remat plan --algorithm sqrt (%s)" % err)
PLAN = json.loads(out)
plan = write("plan.json", PLAN)


def validate(plan_value, *extra):
    return run([WORKER, "--validate-local", spec, write("p.json", plan_value), "--repeats", "1",
                "--warmup", "0"] + list(extra))


# 1. The schedule runs as given; checkpoints alone run libremat's schedule.
rc, out, err = validate(PLAN, "--profile", profile)
res = json.loads(out) if rc == 0 else {}
check(rc == 0 and res["n_ops"] == len(PLAN["schedule"]) and res["max_grad_diff"] == 0,
      "the plan's schedule runs, %d ops, gradients as store-all's (%s)" % (len(PLAN["schedule"]), err))
only_ck = {k: v for k, v in PLAN.items() if k != "schedule"}
rc, out, err = validate(only_ck)
check(rc == 0 and json.loads(out)["n_ops"] == len(PLAN["schedule"]),
      "a plan of checkpoints alone runs libremat's single-level schedule (%s)" % err)

# 2. Malformed plans name what is wrong.
def with_schedule(change):
    p = copy.deepcopy(PLAN)
    change(p["schedule"])
    return p


def respell(s):
    s[0]["op"] = "F_CK"


def kind_key(s):
    s[0]["kind"] = s[0].pop("op")


def swap(s):
    s[1], s[2] = s[2], s[1]


def stage_range(s):
    s[0]["stage"] = 7


bad = [
    (with_schedule(respell), 'schedule[0].op "F_CK" is not one of F_none, F_ck, F_all, loss, B'),
    (with_schedule(kind_key), "schedule[0].op (missing) is not one of"),
    (dict(PLAN, schedule=[[o["op"], o["stage"]] for o in PLAN["schedule"]]),
     'schedule[0] must be an object {"op", "stage"}'),
    (dict(PLAN, schedule={"ops": PLAN["schedule"]}), "schedule must be a non-empty list of ops"),
    (with_schedule(swap), "the schedule cannot run: op 1 ("),
    (dict(PLAN, schedule=PLAN["schedule"][:-1]), "the schedule cannot run: the schedule ends"),
    (with_schedule(stage_range), "schedule[0].stage must be a stage in 1..6"),
    (dict(only_ck, checkpoints=[3, 2]), "checkpoints must ascend strictly within 1..5"),
]
for plan_value, reason in bad:
    rc, out, err = validate(plan_value)
    check(rc != 0 and reason in err, "refused: %s (%s)" % (reason, err))
    # 3. ... before any tensor: one byte of CPU memory is enough to say so.
    rc, out, err = validate(plan_value, "--cpu-limit", "1")
    check(rc != 0 and reason in err, "refused before the device is touched: %s" % err)
rc, out, err = validate(PLAN, "--cpu-limit", "1")
check(rc != 0 and "out of memory" in err, "a good plan under --cpu-limit 1 runs out of memory: %s" % err)

# 4. A profile of another model.
other = json.load(open(profile))
other["stages"] = other["stages"][:-1]
rc, out, err = validate(PLAN, "--profile", write("other.json", other))
check(rc != 0 and "profile: 5 stages, but the model has 6" in err, "another model's profile: %s" % err)

# 6. The layer table and the spec's limits, rematd's own.
for change, reason in [
    (lambda s: s["layers"][0].update(kernel_size=[3, 3]),
     "layers/0/kernel_size: kernel_size must be an integer in 0..1048576"),
    (lambda s: s["layers"][5].pop("out_features"),
     "layers/5/out_features: a linear layer needs out_features"),
    (lambda s: s["layers"].append({"type": "warp_drive"}), "layers/6/type: unknown layer type"),
    (lambda s: s["layers"][1].update(inplace=True),
     "layers/1/inplace: unknown field for a relu layer"),
    (lambda s: s.update(batch_size=65537), "batch_size must be in 1..65536"),
    (lambda s: s.update(input_shape=[3, 8, 1048577]),
     "input_shape must be a list of 1 to 8 integers in 1..1048576"),
]:
    s = copy.deepcopy(SPEC)
    change(s)
    rc, out, err = run([WORKER, "--profile-local", write("bad-spec.json", s)])
    check(rc != 0 and reason in err, "a spec the table refuses: %s (%s)" % (reason, err))

sys.exit(here.finish())
