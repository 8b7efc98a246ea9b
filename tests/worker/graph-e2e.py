#!/usr/bin/env python3
"""Uploaded models whose stages the worker finds in the forward's graph
(worker/graph.cpp): the real rematd and a real CPU remat-worker on loopback,
models scripted and traced here with Debian's python3-torch.

1. torchvision's ResNet-18, unchanged (its forward calls torch.flatten
   between avgpool and fc, so it is not a chain of its children), scripted
   and traced: 13 stages, conv1, bn1..relu (the in-place ReLU writes the
   norm's output, so no cut between them), maxpool, layer1.0 ... layer4.1
   (the Sequentials opened, a BasicBlock whole), avgpool, fc (the flatten
   joins it).  Every out_bytes is the size of the eager module's output at
   that place; a min-peak and a sqrt plan validate within the 1% bound with
   store-all's gradients (lib.Run.validate_plans).
2. A small U-Net with torch.cat skips, scripted and traced: the skips cross
   the middle, so the cuts are where one tensor alone crosses: 6 stages,
   named alike either way, the middle one (pool..up) from the first pool to
   the last cat; plans validate.
3. A module that raises RuntimeError("boom") only at batch > 1 (the shape
   check at batch 1 passes): the profile fails with the model's words, in
   the job's error, in the Python client's JobFailed and in the worker's
   log, not the interpreter's "The following operation failed".
4. The time the worker took, for the figures in docs/models.md.

Skips (77) when torch, torchvision, rematd or the worker is missing.
"""
import os
import sys
import time

try:
    import torch
    import torchvision
except ImportError:
    # The pyenv python3 first on PATH has no torch; Debian's has.
    if sys.executable != "/usr/bin/python3" and os.access("/usr/bin/python3", os.X_OK):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIP: no torch/torchvision for %s" % sys.executable)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import lib  # noqa: E402
import remat  # noqa: E402

lib.need(lib.REMATD, lib.WORKER)
run = lib.Run("remat-graph-e2e-")
tmp = run.tmp
run.env["REMAT_WORKER_CACHE_DIR"] = os.path.join(tmp, "cache")
check, http, wait_job = run.check, run.http, run.wait_job
nn = torch.nn


class UNet(nn.Module):
    def __init__(self, c=8):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o),
                                 nn.ReLU(inplace=True))
        self.enc1, self.enc2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 2 * c)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.dec2, self.dec1 = block(4 * c, c), block(2 * c, c)
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up(d2), e1], 1))
        return self.head(d1)


class BoomAtBatch(nn.Module):
    """Raises only when the batch is over 1: the worker's batch-1 run of
    the stages passes, the profile's batch 2 does not."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        y = self.a(x)
        if y.size(0) > 1:
            raise RuntimeError("boom at batch " + str(y.size(0)))
        return torch.tanh(self.b(y))


def upload(scripted, name):
    path = os.path.join(tmp, name + ".pt")
    scripted.save(path)
    st, m = http("POST", "/v1/models", raw=open(path, "rb").read())
    check(st == 201, "upload %s: 201 (got %s)" % (name, st))
    return m["id"] if st in (200, 201) else None


def profile(model_id, shape, batch):
    st, job = http("POST", "/v1/profiles", {"model_id": model_id, "input": {"shape": shape},
                                            "batch_size": batch, "device": "cpu",
                                            "warmup": 1, "repeats": 2})
    if not check(st == 202, "POST /v1/profiles on %s: 202 (got %s %s)" % (model_id, st, job)):
        return None
    return wait_job("/v1/profiles/" + job["id"])


def outputs(model, x, paths):
    """out_bytes at each stage's end: the output of the module at each
    path ("<path": its input), from hooks on the eager model (the last call
    of a module called twice)."""
    seen = {}
    mods = dict(model.named_modules())

    def note(p, t):
        seen[p] = t.numel() * t.element_size()
    hooks = [mods[p[1:]].register_forward_pre_hook(lambda m, i, p=p: note(p, i[0]))
             if p.startswith("<") else
             mods[p].register_forward_hook(lambda m, i, o, p=p: note(p, o)) for p in paths]
    with torch.no_grad():
        model.eval()
        model(x)
    for h in hooks:
        h.remove()
    return [seen.get(p) for p in paths]


def case(label, model, make, shape, batch, names, ends):
    """Uploads make(model), profiles it, checks the stages' names and
    out_bytes (ends: the module whose output each stage gives), and
    validates two plans."""
    mid = upload(make(model), label)
    t0 = time.time()
    job = profile(mid, shape, batch)
    secs = time.time() - t0
    if not (job and check(job["status"] == "done", "%s profile done (%s)"
                          % (label, (job or {}).get("error")))):
        return
    stages = job["profile"]["stages"]
    got = [s["name"] for s in stages]
    check(got == names, "%s: %d stages found in the graph, named %s (want %s)"
          % (label, len(got), got, names))
    want = outputs(model, torch.randn([batch] + shape), ends)
    check([s["out_bytes"] for s in stages] == want, "%s: every out_bytes is the eager output's "
          "size at the stage's end %s" % (label, want))
    print("     %s: %d stages, batch %d profile, submit to done: %.1f s"
          % (label, len(stages), batch, secs))
    run.validate_plans(job, label)


try:
    run.start_rematd()
    run.start_worker("worker")
    torch.manual_seed(0)

    # 1. ResNet-18 as torchvision has it.
    r18 = torchvision.models.resnet18()
    x64 = torch.randn(1, 3, 64, 64)
    blocks = ["layer%d.%d" % (i, j) for i in range(1, 5) for j in range(2)]
    r_names = ["conv1", "bn1..relu", "maxpool"] + blocks + ["avgpool", "fc"]
    r_ends = ["conv1", "relu", "maxpool"] + blocks + ["avgpool", "fc"]
    case("resnet18 scripted", r18, torch.jit.script, [3, 64, 64], 2, r_names, r_ends)
    case("resnet18 traced", r18, lambda m: torch.jit.trace(m.eval(), x64), [3, 64, 64], 2,
         r_names, r_ends)

    # 2. A U-Net: the skips cross the middle.
    unet = UNet()
    x32 = torch.randn(1, 3, 32, 32)
    u_names = ["enc1.0", "enc1.1..2", "pool..up", "dec1.0", "dec1.1..2", "head"]
    u_ends = ["enc1.0", "enc1.2", "<dec1.0", "dec1.0", "dec1.2", "head"]
    case("unet scripted", unet, torch.jit.script, [3, 32, 32], 2, u_names, u_ends)
    case("unet traced", unet, lambda m: torch.jit.trace(m.eval(), x32), [3, 32, 32], 2,
         u_names, u_ends)

    # 3. The interpreter's failure carries the model's words everywhere.
    bid = upload(torch.jit.script(BoomAtBatch()), "boom")
    client = remat.Client(run.url)
    try:
        client.profile(model_id=bid, input={"shape": [8]}, batch_size=2, device="cpu",
                       timeout=300)
        check(False, "a model raising at batch 2: the client raises JobFailed")
    except remat.JobFailed as e:
        err = e.job.get("error", "")
        check("RuntimeError: boom at batch 2" in str(e) and "boom at batch 2" in err
              and "The following operation failed" not in err and "stage 2" in err,
              "a model raising at batch 2: the job's error and the client's exception name "
              "the cause and the stage: %s" % e)
    log = open(os.path.join(tmp, "worker.log")).read()
    check("RuntimeError: boom at batch 2" in log,
          "the worker's log has the model's words: %s"
          % [ln for ln in log.splitlines() if "boom" in ln or "failed" in ln][-3:])
finally:
    status = run.finish()
sys.exit(status)
