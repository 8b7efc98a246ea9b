#!/usr/bin/env python3
"""Hostile uploaded models end to end: the real rematd and a real CPU
remat-worker on loopback, each model's job run in the worker's sandbox
(worker/sandbox.c, docs/security.md).  Each hostile job ends as a failed
job whose reason says what stopped it, nothing is written outside the
sandbox's scratch folder, and the worker serves the next job.

1. Controls, outside the sandbox and without the operator check
   (remat-worker --profile-local --unsafe-no-sandbox --unsafe-no-op-check):
   the reader leaks /etc/hostname's first byte as a stage's width, the
   writer creates its file, torch.save writes one.  The same local runs in
   the sandbox, the operator check still off, fail and write nothing: the
   sandbox holds by itself.  With the check on (the default) each is
   refused before it runs, the reason naming the op and the method, and
   the functions on the way when the op is two calls down, in a loop.
2. Through rematd: torch.from_file writing a file, torch.from_file reading
   /etc/hostname (the byte would show in the stage's out_bytes), torch.save,
   torch.jit.fork and wait, an operator of another namespace than aten:: or
   prim:: (_test::leaky_relu, which libtorch registers): each a failed job,
   after one attempt, whose reason names the op and the method and whose
   problem is op-not-allowed (status 422) with op and method; an endless
   loop (killed at --job-timeout, the reason says so), [7] * 2_000_000_000
   and [7] * 300_000_000 (a list of 4.8 GB: over the worker's --cpu-limit of
   1 GB, under this machine's memory: the sandbox's limit stops it), and an
   archive whose code nests parentheses 200,000 deep (SIGSEGV inside
   torch::jit::load: the job fails after 2 attempts naming the signal).
3. While the endless loop runs, its process is looked at from outside:
   it is remat-worker --sandbox-child, with seccomp on and no_new_privs,
   descriptors 0-5 only (3, its job, closed once
   read), and an environment without REMAT_WORKER_TOKEN,
   the cache folder or anything of the worker's but the few it keeps.
4. After them the same worker process profiles a plain uploaded model, and
   the sandbox's scratch folders are gone.
5. The allow-list refuses no honest model: torchvision's resnet18 scripted
   and traced, a U-Net (torch.cat, interpolate) scripted and traced, a
   transformer encoder layer scripted and traced, and a forward with
   torch.no_grad() (a context manager whose __enter__ and __exit__ are
   checked) each profile in the sandbox.  Without torchvision, resnet18 is
   left out and said so.

Skips (77) when torch, rematd or the worker is missing, or when the
worker has no sandbox here (no libseccomp or no Landlock).
"""
import os
import subprocess
import sys
import time
import zipfile

try:
    import torch
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.access("/usr/bin/python3", os.X_OK):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIP: no torch for %s" % sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

lib.need(lib.REMATD, lib.WORKER)
run = lib.Run("remat-hostile-models-")
tmp = run.tmp
scratch_root = os.path.join(tmp, "scratch")
os.mkdir(scratch_root)
run.env["REMAT_WORKER_CACHE_DIR"] = os.path.join(tmp, "cache")
run.env["REMAT_WORKER_TOKEN"] = "hostile-test-token-0123456789"
run.env["TMPDIR"] = scratch_root
# The sanitizer build: ASan's own SIGSEGV handler would turn the parser's
# stack overflow into a report and exit 1; handle_segv=0 lets the signal
# end the process, as it does in a plain build, which is what is tested.
SANITIZED = bool(os.environ.get("REMAT_SANITIZED"))
if SANITIZED:
    run.env["ASAN_OPTIONS"] = run.env.get("ASAN_OPTIONS", "") + ":handle_segv=0"
check, http, wait_job = run.check, run.http, run.wait_job
nn = torch.nn

# The files the hostile models aim at: one to write, one to read.
target = os.path.join(tmp, "written-by-the-model")
TIMEOUT_S = 12


class Reader(nn.Module):
    """Leaks /etc/hostname's first byte as its output's width."""

    def forward(self, x):
        t = torch.from_file("/etc/hostname", shared=False, size=1, dtype=torch.uint8)
        return torch.zeros(x.size(0), int(t[0]))


class Writer(nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def forward(self, x):
        t = torch.from_file(self.path, shared=True, size=4)
        t.fill_(1.0)
        return x + t.sum()


class Saver(nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def forward(self, x):
        torch.save(x, self.path)
        return x


class Forker(nn.Module):
    def forward(self, x):
        fut = torch.jit.fork(torch.neg, x)
        return torch.jit.wait(fut)


class OtherNamespace(nn.Module):
    """An operator libtorch registers outside aten:: and prim::."""

    def forward(self, x):
        return torch.ops._test.leaky_relu(x)


def inner_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.from_file("/etc/hostname", shared=False, size=1, dtype=torch.uint8).float() + x


def outer_fn(x: torch.Tensor) -> torch.Tensor:
    for _ in range(2):
        if x.sum() > 1e9:
            x = inner_fn(x)
    return x


class DeepCall(nn.Module):
    """The op two functions down, in a loop's if."""

    def forward(self, x):
        return outer_fn(x)


class NoGrad(nn.Module):
    def forward(self, x):
        with torch.no_grad():
            y = x * 2
        return x + y


class Loop(nn.Module):
    def forward(self, x):
        n = 0
        while n >= 0:
            n = n + 1
        return x


class BigList(nn.Module):
    def forward(self, x):
        big = [7] * 2_000_000_000
        return x + len(big)


class LargeList(nn.Module):
    def forward(self, x):
        big = [7] * 300_000_000
        return x + len(big)


class Tail(nn.Module):
    def forward(self, x):
        return x


def chain(stage):
    return nn.Sequential(nn.Linear(4, 4), stage)


def save(module, name):
    path = os.path.join(tmp, name + ".pt")
    torch.jit.script(module).save(path)
    return path


def deep_archive():
    """A Tail chain whose code nests parentheses 200,000 deep: libtorch's
    recursive-descent parser runs out of stack inside torch::jit::load."""
    src = save(chain(Tail()), "tail")
    dst = os.path.join(tmp, "deep.pt")
    n = 200_000
    changed = 0
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zo:
        for info in zi.infolist():
            data = zi.read(info.filename)
            if info.filename.endswith("code/__torch__.py") and b"return x\n" in data:
                data = data.replace(b"return x\n", b"return " + b"(" * n + b"x" + b")" * n + b"\n")
                changed += 1
            zo.writestr(info, data)
    check(changed == 1, "the deep archive's code was rewritten")
    return dst


def upload(path):
    st, m = http("POST", "/v1/models", raw=open(path, "rb").read())
    check(st == 201, "upload %s: 201 (got %s)" % (os.path.basename(path), st))
    return m["id"] if st in (200, 201) else None


def profile(model_id):
    st, job = http("POST", "/v1/profiles", {"model_id": model_id, "input": {"shape": [4]},
                                            "batch_size": 2, "device": "cpu", "warmup": 1,
                                            "repeats": 1})
    if not check(st == 202, "POST /v1/profiles on %s: 202 (got %s)" % (model_id, st)):
        return None
    return wait_job("/v1/profiles/" + job["id"], timeout=300)


def local(path, *flags, shape=(4,)):
    """remat-worker --profile-local on the archive: (exit status, stdout, stderr)."""
    spec = os.path.join(tmp, "local-spec.json")
    with open(spec, "w") as f:
        f.write('{"model_path": "%s", "input": {"shape": %s}, "batch_size": 2, '
                '"warmup": 0, "repeats": 1}' % (path, list(shape)))
    p = subprocess.run([lib.WORKER, "--profile-local", spec, "--device", "cpu"] + list(flags),
                       env=run.env, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def children_of(pid):
    """The pids whose parent is pid."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def look_at_child(worker_pid, seen):
    """While the endless loop runs: the sandboxed process as /proc shows it,
    the latest look kept (the first may come before the sandbox is on)."""
    for pid in children_of(worker_pid):
        try:
            cmd = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")
            env = open("/proc/%d/environ" % pid, "rb").read().split(b"\0")
            status = open("/proc/%d/status" % pid).read()
            fds = sorted(int(f) for f in os.listdir("/proc/%d/fd" % pid))
        except OSError:
            continue
        if b"--sandbox-child" not in cmd or "\nState:\tZ" in status or not fds:
            continue
        seen.update(pid=pid, cmd=cmd, env=[e.decode() for e in env if e], status=status, fds=fds)


def refused(err, op):
    """Whether a reason is the allow-list's refusal of op in the chain's stage 1."""
    return ("the model calls %s in method forward of submodule '1'" % op) in err \
        and "operator allow-list" in err


hostname = open("/etc/hostname", "rb").read()
NO_CHECK = "--unsafe-no-op-check"
try:
    # 1. The controls: unconfined, the models do what they are written to.
    reader = save(chain(Reader()), "reader")
    writer = save(chain(Writer(target)), "writer")
    saver = save(chain(Saver(target)), "saver")
    rc, out, err = local(reader, "--unsafe-no-sandbox", NO_CHECK)
    check(rc == 0 and ('"out_bytes": %d' % (2 * hostname[0] * 4)) in out,
          "control: unconfined, the reader leaks /etc/hostname's first byte %d as out_bytes (%s)"
          % (hostname[0], err.strip()[-200:]))
    for path, what in ((writer, "torch.from_file"), (saver, "torch.save")):
        rc, out, err = local(path, "--unsafe-no-sandbox", NO_CHECK)
        check(os.path.exists(target), "control: unconfined, %s creates %s" % (what, target))
        if os.path.exists(target):
            os.unlink(target)
    # ... and in the sandbox they cannot, even with the operator check off.
    rc, out, err = local(reader, NO_CHECK)
    if "no sandbox" in err:
        print("SKIP: this worker has no sandbox here: %s" % err.strip())
        sys.exit(77)
    check(rc != 0 and "/etc/hostname" in err and "ermission denied" in err,
          "local, sandboxed, no op check: the reader fails on /etc/hostname: %s"
          % err.strip()[-300:])
    rc, out, err = local(writer, NO_CHECK)
    check(rc != 0 and not os.path.exists(target),
          "local, sandboxed, no op check: torch.from_file fails and writes nothing: %s"
          % err.strip()[-300:])
    # libtorch's save does not look at whether its file opened: the job
    # goes on, and nothing is written.
    rc, out, err = local(saver, NO_CHECK)
    check(not os.path.exists(target),
          "local, sandboxed, no op check: torch.save writes nothing (exit %d)" % rc)
    # With the check (the default), sandboxed or not, they are refused
    # before anything runs.
    for path, op, flags in ((reader, "aten::from_file", ()), (writer, "aten::from_file", ()),
                            (saver, "aten::save", ()),
                            (saver, "aten::save", ("--unsafe-no-sandbox",))):
        rc, out, err = local(path, *flags)
        check(rc != 0 and refused(err, op) and not os.path.exists(target),
              "local%s: %s refused before it runs, nothing written: %s"
              % (", unconfined" if flags else "", op, err.strip()[-300:]))
    rc, out, err = local(save(chain(DeepCall()), "deepcall"))
    check(rc != 0 and ("the model calls aten::from_file in method forward of submodule '1' "
                       "(via function outer_fn, function inner_fn)") in err,
          "local: an op two functions down, in a loop's if, refused naming the path: %s"
          % err.strip()[-300:])
    st = subprocess.run([lib.WORKER, "--server", "http://127.0.0.1:1", NO_CHECK],
                        env=run.env, capture_output=True, text=True, timeout=60)
    check(st.returncode == 2 and "--profile-local" in st.stderr,
          "a serving worker refuses --unsafe-no-op-check: %s" % st.stderr.strip())

    # 2. Through rematd.
    # rematd keeps its own temporary folder: only the worker's is watched.
    run.env.pop("TMPDIR")
    run.start_rematd()
    run.env["TMPDIR"] = scratch_root
    worker = run.start_worker("worker", "--job-timeout", str(TIMEOUT_S), "--cpu-limit",
                              str(1_000_000_000))
    ids = {name: upload(path) for name, path in [
        ("reader", reader), ("writer", writer), ("loop", save(chain(Loop()), "loop")),
        ("biglist", save(chain(BigList()), "biglist")),
        ("largelist", save(chain(LargeList()), "largelist")), ("deep", deep_archive()),
        ("saver", saver), ("forker", save(chain(Forker()), "forker")),
        ("namespace", save(chain(OtherNamespace()), "namespace")),
        ("plain", save(chain(Tail()), "plain"))]}

    for name, op in (("writer", "aten::from_file"), ("reader", "aten::from_file"),
                     ("saver", "aten::save"), ("forker", "prim::fork"),
                     ("namespace", "_test::leaky_relu")):
        job = profile(ids[name])
        err = (job or {}).get("error", "")
        prob = (job or {}).get("problem") or {}
        check(job and job["status"] == "failed" and refused(err, op) and job["attempts"] == 1
              and "profile" not in job and not os.path.exists(target),
              "%s (%s): failed after 1 attempt, refused by name, nothing written: %s"
              % (name, op, err))
        check(prob.get("type", "").endswith("/problems/op-not-allowed")
              and prob.get("status") == 422 and prob.get("op") == op
              and prob.get("method") == "forward" and prob.get("submodule") == "1"
              and prob.get("detail") == err,
              "%s: the job's problem is op-not-allowed, 422, op %s, method forward of "
              "submodule 1: %s" % (name, op, prob))

    # The endless loop, and the sandboxed process seen from outside meanwhile.
    seen = {}
    t0 = time.time()
    st, j = http("POST", "/v1/profiles", {"model_id": ids["loop"], "input": {"shape": [4]},
                                          "batch_size": 2, "device": "cpu"})
    job = wait_job("/v1/profiles/" + j["id"], timeout=120,
                   seen=lambda _: look_at_child(worker.pid, seen)) if st == 202 else None
    took = time.time() - t0
    err = (job or {}).get("error", "")
    check(job and job["status"] == "failed" and "time limit of %d s" % TIMEOUT_S in err
          and "--job-timeout" in err and TIMEOUT_S <= took < TIMEOUT_S + 30,
          "an endless loop: killed at --job-timeout %d s (took %.1f s): %s" % (TIMEOUT_S, took, err))
    if check(seen, "the sandboxed process was seen while the loop ran"):
        env_names = sorted(e.split("=", 1)[0] for e in seen["env"])
        check(not any("hostile-test-token" in e or "REMAT_" in e for e in seen["env"]),
              "its environment has no token and no REMAT_ variable: %s" % env_names)
        check(set(env_names) <= {"HOME", "TMPDIR", "LD_LIBRARY_PATH", "OMP_NUM_THREADS",
                                 "MKL_NUM_THREADS", "ASAN_OPTIONS", "UBSAN_OPTIONS",
                                 "LSAN_OPTIONS", "CUDA_VISIBLE_DEVICES"},
              "its environment is the few variables the sandbox keeps: %s" % env_names)
        check("Seccomp:\t2" in seen["status"] and "NoNewPrivs:\t1" in seen["status"],
              "seccomp filter on and no_new_privs set (/proc/%d/status)" % seen["pid"])
        # 3, the job, is closed once read.
        check(set(seen["fds"]) <= {0, 1, 2, 3, 4, 5} and {4, 5} <= set(seen["fds"]),
              "it holds descriptors 0-5 only, not the worker's: %s" % seen["fds"])

    for name, want in (("biglist", "out of memory"), ("largelist", "out of memory")):
        t0 = time.time()
        job = profile(ids[name])
        err = (job or {}).get("error", "")
        said = want in err and "--cpu-limit" in err
        if SANITIZED and not said:
            # ASan's operator new reports a refused allocation and exits 1
            # whatever allocator_may_return_null says: the child's report,
            # in the worker's log, is the out-of-memory there.
            wlog = open(os.path.join(tmp, "worker.log"), errors="replace").read()
            said = ("exited with status 1" in err and
                    "AddressSanitizer: allocator is out of memory" in wlog)
        check(job and job["status"] == "failed" and said,
              "%s: failed as out of memory under the sandbox's limit in %.1f s: %s"
              % (name, time.time() - t0, err))

    job = profile(ids["deep"])
    err = (job or {}).get("error", "")
    check(job and job["status"] == "failed" and "SIGSEGV" in err and job.get("attempts") == 2,
          "parentheses 200,000 deep: SIGSEGV in the sandboxed process, failed after %s attempts: "
          "%s" % ((job or {}).get("attempts"), err))

    # 4. The same worker serves on.
    job = profile(ids["plain"])
    check(job and job["status"] == "done" and worker.poll() is None,
          "the same worker process profiles a plain uploaded model after them (%s)"
          % (job or {}).get("error"))
    check(os.listdir(scratch_root) == [], "the scratch folders are gone: %s"
          % os.listdir(scratch_root))
    check(not os.path.exists(target), "nothing was written at %s" % target)

    # 5. Honest models pass the allow-list (and run, in the sandbox).
    import torch.nn.functional as F

    class Down(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.c = nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o),
                                   nn.ReLU(inplace=True))

        def forward(self, x):
            return self.c(x)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.u1 = Down(3, 8), Down(8, 16), Down(16, 8)
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.out = nn.Conv2d(8, 2, 1)

        def forward(self, x):
            a = self.d1(x)
            u = self.up(self.d2(F.max_pool2d(a, 2)))
            u = F.interpolate(u, size=a.shape[2:], mode="bilinear", align_corners=False)
            return self.out(self.u1(torch.cat([a, u], dim=1)))

    img, seq = (3, 32, 32), (5, 32)
    honest = [("unet", UNet(), img),
              ("transformer layer", nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), seq)]
    try:
        import torchvision
        honest.insert(0, ("resnet18", torchvision.models.resnet18(weights=None), img))
    except ImportError:
        print("note: no torchvision here: resnet18 left out")
    for name, module, shape in honest:
        whole = nn.Sequential(module).eval()
        x = torch.randn((1,) + shape)
        for how in ("scripted", "traced"):
            path = os.path.join(tmp, "honest-%s-%s.pt" % (name.replace(" ", "-"), how))
            made = torch.jit.script(whole) if how == "scripted" else \
                torch.jit.trace(whole, x, check_trace=False)
            made.save(path)
            rc, out, err = local(path, shape=shape)
            check(rc == 0 and '"stages"' in out, "%s, %s: accepted and profiled in the sandbox%s"
                  % (name, how, "" if rc == 0 else ": " + err.strip()[-300:]))
    rc, out, err = local(save(chain(NoGrad()), "nograd"))
    check(rc == 0, "with torch.no_grad(): accepted (__enter__ and __exit__ checked)%s"
          % ("" if rc == 0 else ": " + err.strip()[-300:]))
finally:
    status = run.finish()
sys.exit(status)
