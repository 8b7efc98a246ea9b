#!/usr/bin/env python3
"""Where a profile's time goes, scripted stages against the zoo's.

Scripts torchvision's ResNet-18 as the zoo cuts it (stem, the eight basic
blocks, head: the same ten stages and the same ops as the zoo's resnet18)
and MobileNetV2 made sequential (22 stages), then profiles, in turns, ROUNDS
times each: the zoo's resnet18, the scripted ResNet-18 and the scripted
MobileNetV2, at batch 2 on CPU with the given warmup and repeats, each by
`remat-worker --profile-local --trace` (the code a profile job runs, without
rematd and the archive's fetch).  The trace's timestamps give the wall time
of building (for a scripted model: torch::jit::load, the schema checks, one
batch-1 run of the chain and of the module's own forward) and of each
stage's measurement; per stage it prints the wall time, that over warmup +
repeats (one repetition: F_none, F_all and B) and the profile's fwd_ms and
bwd_ms.

    top_builddir=build nice -n 19 /usr/bin/python3 bench/profile-speed.py [ROUNDS] [WARMUP] [REPEATS]
"""
import json
import os
import subprocess
import sys
import time

try:
    import torch
    import torchvision
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.access("/usr/bin/python3", os.X_OK):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("no torch/torchvision for %s" % sys.executable)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "worker"))
import lib  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
WARMUP = int(sys.argv[2]) if len(sys.argv) > 2 else 1
REPEATS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
nn = torch.nn

lib.need(lib.WORKER)
run = lib.Run("remat-profile-speed-")


def save(module, name):
    path = os.path.join(run.tmp, name + ".pt")
    torch.jit.script(module).save(path)
    return path


def profile(label, spec):
    spec = dict(spec, batch_size=2, device="cpu", warmup=WARMUP, repeats=REPEATS)
    path = os.path.join(run.tmp, "spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    t0 = time.time()
    p = subprocess.run([lib.WORKER, "--profile-local", path, "--trace"], capture_output=True,
                       text=True, env=run.env)
    total = time.time() - t0
    assert p.returncode == 0, p.stderr
    prof = json.loads(p.stdout)
    marks = []  # (seconds, activity, stage)
    for line in p.stderr.splitlines():
        w = line.split()
        if len(w) == 5 and w[1] == "trace":
            marks.append((float(w[2]), w[3], int(w[4].split("/")[0])))
    n = len(prof["stages"])
    took = {}
    for k in range(len(marks) - 1):
        took[marks[k][1:]] = marks[k + 1][0] - marks[k][0]
    build = took.get(("building", 0), 0.0)
    per_stage = [took.get(("measuring", i + 1), 0.0) for i in range(n)]
    reps = WARMUP + REPEATS
    print("%s: %d stages, process %.1f s: start %.1f, build %.1f, stages %.1f"
          % (label, n, total, total - marks[-1][0], build, sum(per_stage)))
    print("    %-10s %8s %10s %8s %8s" % ("stage", "wall s", "per rep ms", "fwd ms", "bwd ms"))
    for i, s in enumerate(prof["stages"]):
        print("    %-10s %8.2f %10.0f %8.1f %8.1f" % (s.get("name", str(i + 1))[:10], per_stage[i],
                                                     1000 * per_stage[i] / reps, s["fwd_ms"],
                                                     s["bwd_ms"]))
    fb = sum(2 * s["fwd_ms"] + s["bwd_ms"] for s in prof["stages"])
    print("    per repetition: (2 fwd + bwd) summed over the stages %.0f ms, wall %.0f ms"
          % (fb, 1000 * sum(per_stage) / reps))
    return total, build, sum(per_stage)


try:
    torch.manual_seed(0)
    r = torchvision.models.resnet18(weights=None)
    blocks = list(r.layer1) + list(r.layer2) + list(r.layer3) + list(r.layer4)
    r18 = nn.Sequential(nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool), *blocks,
                        nn.Sequential(r.avgpool, nn.Flatten(1), r.fc))
    mb = torchvision.models.mobilenet_v2(weights=None)
    mnv2 = nn.Sequential(*(list(mb.features.children()) +
                           [nn.AdaptiveAvgPool2d(1), nn.Flatten(1), mb.classifier]))
    inp = {"shape": [3, 224, 224]}
    r18_spec = {"model_path": save(r18, "resnet18"), "input": inp}
    mnv2_spec = {"model_path": save(mnv2, "mobilenet_v2"), "input": inp}
    totals = {}
    for k in range(ROUNDS):
        print("--- round %d (load average %.1f)" % (k + 1, os.getloadavg()[0]))
        for label, spec in (("zoo resnet18", {"model": "resnet18"}),
                            ("scripted resnet18", r18_spec),
                            ("scripted mobilenet_v2", mnv2_spec)):
            totals.setdefault(label, []).append(profile(label, spec))
    print("--- per round: process, build, stages (s):")
    for label, ts in totals.items():
        print("    %-22s %s" % (label, "   ".join("%.1f %.1f %.1f" % t for t in ts)))
finally:
    run.stop()
