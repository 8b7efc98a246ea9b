#!/usr/bin/env python3
"""The container images, built and run with rootful podman.

1. A Debian 12 slim base made locally from Debian's archive
   (deploy/make-base.sh; kept between runs), then deploy/Dockerfile.rematd and
   deploy/Dockerfile.worker-cpu built on it, tagged localhost/remat/...:test.
   Sizes are printed; rematd's image must stay under 100 MB.
2. rematd and a CPU worker on a private podman network, rematd's port
   published on 127.0.0.1 only, both with read-only root filesystems, no
   capabilities and tokens; the store on a named volume.
3. Through the published port: health and readiness (and podman's own
   health check, run inside the container), a profile job done by the
   worker container, a plan from it, a validation of the plan done by the
   worker.
4. A worker with a wrong token exits 78 instead of retrying for ever; a
   worker stopped while it starts ends at once (0 or 143, never 137).
5. `podman stop` of both: exit status 0, no warning or error in rematd's log.
6. A new rematd container on the same volume answers the plan, byte for byte.

Containers, the network and the volume are removed at the end; images are
kept so that the next run is warm (layer cache).  Exits 77 ("skipped: why")
when podman cannot build and run images here: not root, no podman, runc or
mmdebstrap, or no apt sources, or REMAT_SKIP_CONTAINERS=1 is set.  Run by
tests/run-all after distcheck:

    top_srcdir=. python3 tests/deploy/podman.py
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SRC = os.path.abspath(os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), "..", "..")))
TAG = os.environ.get("REMAT_TEST_TAG", "test")
BASE = "localhost/remat/debian:bookworm-slim"
RMATD_IMG = "localhost/remat/rematd:" + TAG
WORKER_IMG = "localhost/remat/remat-worker-cpu:" + TAG
NAME = "remat-test-%d" % os.getpid()
TOKEN = "client-" + os.urandom(8).hex()
WORKER_TOKEN = "worker-" + os.urandom(8).hex()
REMATD_MAX_BYTES = 100 * 1000 * 1000

failures = []
times = {}


def skip(why):
    print("skipped: " + why)
    sys.exit(77)


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def podman(*args, check_rc=True, nice=False, capture=True, timeout=900):
    cmd = (["nice", "-n", "10"] if nice else []) + ["podman"] + list(args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.STDOUT if capture else None, text=True, timeout=timeout)
    if check_rc and p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, (p.stdout or "")[-4000:]))
    return p


# ---- can podman build and run here? ----
if os.environ.get("REMAT_SKIP_CONTAINERS", "0") not in ("", "0"):
    skip("REMAT_SKIP_CONTAINERS is set")
if os.geteuid() != 0:
    skip("rootful podman needs root (this runs as uid %d)" % os.geteuid())
for prog in ("podman", "runc", "mmdebstrap"):
    if shutil.which(prog) is None and not os.path.exists("/usr/sbin/" + prog):
        skip("%s is not installed (apt-get install podman runc mmdebstrap)" % prog)
if not any(os.path.exists(f) for f in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list")):
    skip("no apt sources file to make the Debian base image from")

tmp = tempfile.mkdtemp(prefix="remat-podman-")
# runc (crun fails on hybrid cgroups) and ulimits a VM allows (podman's
# default nofile of 1048576 is refused without CAP_SYS_RESOURCE).
conf = os.path.join(tmp, "containers.conf")
with open(conf, "w") as f:
    f.write('[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
            '[engine]\nruntime = "runc"\n')
os.environ["CONTAINERS_CONF"] = conf
if podman("info", check_rc=False).returncode != 0:
    skip("podman info fails here")


def http(port, method, path, body=None, token=TOKEN, raw=False):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method,
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
            return r.status, text if raw else (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, text if raw else json.loads(text)
        except ValueError:
            return e.code, None
    except (urllib.error.URLError, ConnectionError, OSError):
        return -1, None


def wait_for(fn, timeout, step=0.3):
    t_end = time.time() + timeout
    v = fn()
    while not v and time.time() < t_end:
        time.sleep(step)
        v = fn()
    return v


def image_bytes(img):
    return int(podman("image", "inspect", "--format", "{{.Size}}", img).stdout.strip())


# podman 4.3 does not read --health-cmd as a JSON exec array (it splits it
# on blanks); a plain string is CMD-SHELL, run by /bin/sh (dash, no
# /dev/tcp), hence bash -c around a script without single quotes.
HEALTH = ('bash -c \'exec 3<>/dev/tcp/127.0.0.1/8080 && printf "GET /healthz HTTP/1.0\\r\\n\\r\\n" >&3 '
          '&& head -n 1 <&3 | grep -q " 200 "\'')


def run_rematd(name):
    podman("run", "-d", "--name", name, "--network", NAME, "--network-alias", "rematd",
           "-p", "127.0.0.1::8080", "-v", NAME + ":/var/lib/remat",
           "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
           "-e", "REMAT_TOKEN=" + TOKEN, "-e", "REMAT_WORKER_TOKEN=" + WORKER_TOKEN,
           "--health-cmd", HEALTH, "--health-interval", "disable",
           RMATD_IMG, "--lease-seconds", "10")
    out = podman("port", name, "8080/tcp").stdout.strip().splitlines()[0]
    return int(out.rsplit(":", 1)[1])


def run_worker(name, token, server="http://rematd:8080"):
    podman("run", "-d", "--name", name, "--network", NAME,
           "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
           "-e", "REMAT_SERVER=" + server, "-e", "REMAT_WORKER_TOKEN=" + token,
           WORKER_IMG, "--id", name)


def state(name):
    p = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name, check_rc=False)
    return p.stdout.strip().split() if p.returncode == 0 else ["gone", "-1"]


def wait_job(port, path, timeout=300):
    def done():
        st, job = http(port, "GET", path)
        return job if st == 200 and job and job.get("status") in ("done", "failed") else None
    return wait_for(done, timeout, 0.5)


def compose_test(spec):
    proj = NAME.replace("-", "") + "c"
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        cport = so.getsockname()[1]
    env = dict(os.environ, REMAT_TAG=TAG, REMAT_PORT=str(cport), REMAT_TOKEN=TOKEN,
               REMAT_WORKER_TOKEN=WORKER_TOKEN)
    files = ["-f", os.path.join(SRC, "deploy", "compose.yaml")]

    def compose(*args):
        return subprocess.run(["podman-compose"] + files + ["-p", proj] + list(args), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    t0 = time.time()
    try:
        p = compose("up", "-d")
        if not check(p.returncode == 0, "podman-compose up -d (exit %d)" % p.returncode):
            print(p.stdout[-3000:])
            return
        ready = wait_for(lambda: http(cport, "GET", "/readyz", token=None)[0] == 200, 60)
        check(ready, "compose: rematd ready on 127.0.0.1:%d (%.1f s)" % (cport, time.time() - t0))
        st, job = http(cport, "POST", "/v1/profiles", spec)
        job = wait_job(cport, "/v1/profiles/%s" % (job or {}).get("id")) if st == 202 else None
        check(job is not None and job["status"] == "done",
              "compose: the worker-cpu service profiled a model (%s)" % (job or {}).get("status"))
        # A training container joins the compose network and asks rematd by
        # name, with the client token (bash's /dev/tcp: the rematd image has
        # no HTTP client).
        ask = ('exec 3<>/dev/tcp/rematd/8080 && printf "GET /v1/profiles/%s HTTP/1.0\\r\\n'
               'Authorization: Bearer %s\\r\\n\\r\\n" >&3 && head -n 1 <&3'
               % ((job or {}).get("id"), TOKEN))
        p = podman("run", "--rm", "--network", proj + "_default", "--entrypoint", "bash", RMATD_IMG,
                   "-c", ask, check_rc=False)
        check(p.returncode == 0 and " 200 " in p.stdout,
              "compose: a training container on %s_default reaches http://rematd:8080 (%s)"
              % (proj, p.stdout.strip()[:60]))
        t0 = time.time()
        p = compose("stop")
        took = time.time() - t0
        codes = [state(proj + "_" + svc + "_1")[1] for svc in ("rematd", "worker-cpu")]
        # Between jobs both end in a second or two: under 10 s (podman's
        # default grace, which compose.yaml's 30 s would hide) catches a
        # stop that only SIGKILL ends.
        if not check(p.returncode == 0 and codes == ["0", "0"] and took < 10,
                     "podman-compose stop: rematd and the worker exit %s (%.1f s, under 10 s)"
                     % (codes, took)):
            # The worker's whole log first, with podman's timestamps, and
            # only the end of rematd's: CI keeps the head and the tail of a
            # long output and cuts its middle.
            print(p.stdout[-1500:])
            print("--- podman logs -t %s_worker-cpu_1" % proj)
            print(podman("logs", "-t", proj + "_worker-cpu_1", check_rc=False).stdout[-6000:])
            print("--- podman logs -t %s_rematd_1 (its last 20 lines)" % proj)
            tail = podman("logs", "-t", proj + "_rematd_1", check_rc=False).stdout.splitlines()[-20:]
            print("\n".join(ln[:400] for ln in tail))
        log = podman("logs", proj + "_rematd_1", check_rc=False).stdout
        bad = [ln for ln in log.splitlines() if '"level":"error"' in ln.replace(" ", "")]
        check(not bad and "stopped" in log, "compose: rematd's log has no error and ends 'stopped' (%s)" % bad[:3])
    finally:
        compose("down", "-v")
        podman("volume", "rm", "-f", proj + "_remat-data", check_rc=False)


containers = []
standalone_failures = None  # how many checks had failed when the compose step began
t_all = time.time()
try:
    # 1. Images.
    t0 = time.time()
    subprocess.run(["nice", "-n", "10", "sh", os.path.join(SRC, "deploy", "make-base.sh"), BASE], check=True)
    times["base image"] = time.time() - t0
    for img, dockerfile in ((RMATD_IMG, "Dockerfile.rematd"), (WORKER_IMG, "Dockerfile.worker-cpu")):
        t0 = time.time()
        p = podman("build", "--pull=never", "--layers", "-q", "-f", os.path.join(SRC, "deploy", dockerfile),
                   "--build-arg", "DEBIAN_IMAGE=" + BASE, "-t", img, SRC, nice=True, check_rc=False,
                   timeout=1800)
        times[dockerfile] = time.time() - t0
        if not check(p.returncode == 0, "podman build -f deploy/%s (%.0f s)" % (dockerfile, times[dockerfile])):
            print(p.stdout[-6000:])
            raise RuntimeError("image build failed")
    rb, wb = image_bytes(RMATD_IMG), image_bytes(WORKER_IMG)
    check(rb < REMATD_MAX_BYTES, "rematd image: %.1f MB (under %d MB)" % (rb / 1e6, REMATD_MAX_BYTES / 1e6))
    print("     CPU worker image: %.1f MB; base %.1f MB" % (wb / 1e6, image_bytes(BASE) / 1e6))
    for img, prog, arg in ((RMATD_IMG, "/usr/bin/rematd", "--version"),
                           (WORKER_IMG, "/usr/bin/remat-worker", "--help")):
        p = podman("run", "--rm", "--entrypoint", prog, img, arg, check_rc=False)
        check(p.returncode == 0 and p.stdout.strip() != "",
              "%s in %s runs (%s: exit %d)" % (prog, img, arg, p.returncode))

    # 2. Network, volume, rematd, worker.
    podman("network", "create", NAME)
    podman("volume", "create", NAME)
    t0 = time.time()
    containers.append(NAME + "-rematd")
    port = run_rematd(NAME + "-rematd")
    ready = wait_for(lambda: http(port, "GET", "/readyz", token=None)[0] == 200, 60)
    check(ready, "rematd ready on 127.0.0.1:%d (%.1f s)" % (port, time.time() - t0))
    check(http(port, "GET", "/healthz", token=None)[0] == 200, "GET /healthz answers 200")
    hc = podman("healthcheck", "run", NAME + "-rematd", check_rc=False)
    check(hc.returncode == 0, "podman healthcheck run: healthy (%s)" % hc.stdout.strip())
    check(http(port, "GET", "/v1/models", token="wrong")[0] == 401, "a wrong client token is refused (401)")
    containers.append(NAME + "-worker")
    run_worker(NAME + "-worker", WORKER_TOKEN)

    # 3. A profile job, a plan, a validation.
    spec = {"layers": [{"type": "conv2d", "out_channels": 8, "kernel_size": 3, "padding": 1},
                       {"type": "relu"},
                       {"type": "conv2d", "out_channels": 8, "kernel_size": 3, "padding": 1},
                       {"type": "relu"}, {"type": "flatten"}, {"type": "linear", "out_features": 10}],
            "input_shape": [3, 16, 16], "batch_size": 2, "dtype": "fp32", "device": "cpu",
            "warmup": 0, "repeats": 1}
    t0 = time.time()
    st, job = http(port, "POST", "/v1/profiles", spec)
    check(st == 202, "POST /v1/profiles answers 202 (%s)" % st)
    job = wait_job(port, "/v1/profiles/%s" % (job or {}).get("id")) if st == 202 else None
    ok = check(job is not None and job["status"] == "done",
               "the worker container profiled the model (%s, %.1f s)" % ((job or {}).get("status"), time.time() - t0))
    times["profile job"] = time.time() - t0
    plan = None
    if ok:
        prof = job.get("profile") or job.get("result") or {}
        check(len(prof.get("stages", [])) == 6 and prof.get("device") == "cpu",
              "the profile has 6 stages measured on cpu")
        st, plan = http(port, "POST", "/v1/plans", {"profile_id": job["id"], "algorithm": "min-peak"})
        check(st == 201 and plan and plan.get("peak_bytes", 0) > 0,
              "POST /v1/plans from the profile answers 201 (peak %s bytes)" % (plan or {}).get("peak_bytes"))
        t0 = time.time()
        st, v = http(port, "POST", "/v1/validations", {"profile_id": job["id"], "plan_id": (plan or {}).get("id"),
                                                       "repeats": 1})
        check(st == 202, "POST /v1/validations answers 202 (%s)" % st)
        v = wait_job(port, "/v1/validations/%s" % (v or {}).get("id")) if st == 202 else None
        r = (v or {}).get("result") or {}
        check(v is not None and v["status"] == "done" and abs(r.get("relative_error", 1)) <= 0.01,
              "the worker container validated the plan: predicted %s, measured %s bytes (%.1f s)" % (
                  r.get("predicted_peak_bytes"), r.get("measured_peak_bytes"), time.time() - t0))

    # 4. A worker with a wrong token stops instead of idling.
    containers.append(NAME + "-badworker")
    run_worker(NAME + "-badworker", "not-the-token")
    s = wait_for(lambda: state(NAME + "-badworker")[0] == "exited", 60)
    ec = state(NAME + "-badworker")[1]
    log = podman("logs", NAME + "-badworker", check_rc=False).stdout
    check(s and ec == "78" and "REMAT_WORKER_TOKEN" in log,
          "a worker with a wrong token exits 78 naming REMAT_WORKER_TOKEN (exit %s)" % ec)

    # 4b. A worker stopped while it starts (the dynamic loader still
    # mapping libtorch, then its first lease poll) ends at SIGTERM: exit 0
    # (its handler ran) or 143 (killed by SIGTERM before it had one), never
    # 137 after the grace period.  tini is PID 1 in the image, for a PID 1
    # drops signals it has no handler for.
    for k, delay in enumerate((0.0, 0.1, 0.25, 0.5, 1.0)):
        c = NAME + "-early%d" % k
        containers.append(c)
        run_worker(c, WORKER_TOKEN)
        time.sleep(delay)
        t0 = time.time()
        podman("stop", "-t", "10", c)
        took = time.time() - t0
        ec = state(c)[1]
        check(ec in ("0", "143") and took < 5,
              "podman stop %.2f s after start: exit %s in %.1f s (0 or 143, under 5 s)"
              % (delay, ec, took))

    # 5. podman stop: both exit 0, rematd's log clean.
    for c in (NAME + "-worker", NAME + "-rematd"):
        t0 = time.time()
        podman("stop", "-t", "30", c)
        ec = state(c)[1]
        check(ec == "0", "podman stop %s: exit %s (%.1f s)" % (c[len(NAME) + 1:], ec, time.time() - t0))
    log = podman("logs", NAME + "-rematd").stdout
    bad = [ln for ln in log.splitlines() if '"level":"error"' in ln.replace(" ", "")
           or '"level":"warn"' in ln.replace(" ", "")]
    check(not bad and "stopped" in log, "rematd's log has no warning or error and ends 'stopped' (%s)" % bad[:3])

    # 6. A new rematd on the same volume has the plan.
    if plan:
        containers.append(NAME + "-rematd2")
        port = run_rematd(NAME + "-rematd2")
        wait_for(lambda: http(port, "GET", "/readyz", token=None)[0] == 200, 60)
        st, again = http(port, "GET", "/v1/plans/" + plan["id"])
        check(st == 200 and again == plan, "a new rematd on the same volume answers the plan unchanged (%s)" % st)
        podman("stop", "-t", "30", NAME + "-rematd2")

    # 7. deploy/compose.yaml: rematd and a CPU worker by podman-compose, a
    # job done through the published port, a training container on the
    # compose network reaching rematd by name, and `down` leaving a clean
    # log.
    standalone_failures = len(failures)
    if shutil.which("podman-compose") is None:
        print("skipped: deploy/compose.yaml: podman-compose is not installed (apt-get install podman-compose)")
    else:
        compose_test(spec)
except Exception as e:  # noqa: BLE001 - every failure is reported with the logs below
    failures.append(str(e))
    print("FAIL " + str(e))
finally:
    # The containers of steps 2-6 only when one of those steps failed: the
    # compose step prints its own, and they would push it into the middle
    # of the output, which CI cuts.
    if failures if standalone_failures is None else failures[:standalone_failures]:
        for c in containers:
            print("--- podman logs %s" % c)
            print(podman("logs", c, check_rc=False).stdout[-3000:])
    for c in containers:
        podman("rm", "-f", "-t", "0", c, check_rc=False)
    podman("network", "rm", "-f", NAME, check_rc=False)
    podman("volume", "rm", "-f", NAME, check_rc=False)
    shutil.rmtree(tmp, ignore_errors=True)

times["total"] = time.time() - t_all
print("     times: " + ", ".join("%s %.0f s" % kv for kv in times.items()))
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
