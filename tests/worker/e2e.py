#!/usr/bin/env python3
"""End to end on loopback: the real rematd and real CPU remat-workers.

1. A worker profiles AlexNet at batch 2; every out_bytes equals the size the
   layer arithmetic gives (computed here, independently of the worker).
2. Validation jobs (min-peak and sqrt plans) meet the 1% bound, with
   gradients equal to store-all's, and report predicted and measured step
   time (the plan's total_ms, the median step and its spread) and the error
   between them, consistent with each other.
3. An impossible model (a conv2d after a flatten) fails with the layer named.
4. kill -9 of the worker mid-job: the job is leased again and finishes.
5. SIGTERM mid-job: the worker gives the job back and exits 0.
6. A worker too small for the model (--cpu-limit): the job fails as out of
   memory, and the same worker then completes the next job.
7. SIGTERM while a lease poll waits on a server that never answers: the
   worker exits 0 at once, not after its 30 s reply timeout (a container
   stop gives it 10 s before SIGKILL).
8. SIGTERM right after a job and at each of the back-off naps that follow
   it: every time the worker exits 0 within its longest nap (1 s) plus a
   margin.
9. SIGTERM while the worker still loads libtorch: the signal waits until the
   worker has its handler (it is blocked from before the libraries'
   initializers), and the worker exits 0 without leasing; as PID 1 of a
   container, a signal it left at its default action was dropped and the
   stop ended in SIGKILL.
10. SIGTERM while a lease poll waits on a name lookup that nobody answers
   (podman's DNS drops queries while a container joins or leaves the
   network): the worker exits 0 within the same bound, not when the lookup
   gives up.  Needs root (a mount namespace for its own resolv.conf).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from lib import finished  # noqa: E402

LEASE_SECONDS = 4
# The worker's longest back-off nap between lease polls (docs/worker.md), and
# how long libcurl may go between two progress calls (the most a lease poll
# runs on after SIGTERM): a stopped worker is gone within that plus a margin
# for a loaded machine.
MAX_NAP_S = 1.0
STOP_BOUND_S = MAX_NAP_S + 2.0

lib.need(lib.REMATD, lib.WORKER)
run = lib.Run("remat-worker-e2e-")
check, http = run.check, run.http


def wait_job(path, until, timeout=180):
    """Polls a job until until(job) is true; returns the job (or the last seen)."""
    return run.wait_job(path, until, timeout)


def reason_of(job):
    r = job.get("reason") or job.get("error") or ""
    return r if isinstance(r, str) else json.dumps(r)


def submit_profile(spec):
    st, job = http("POST", "/v1/profiles", spec)
    if not check(st == 202, "POST /v1/profiles answers 202 (got %s: %s)" % (st, job if st != 202 else job["id"])):
        return None, None
    return "/v1/profiles/" + job["id"], job["id"]


def start_worker(name, extra=()):
    return run.start_worker(name, *extra)


def sigterm(proc, timeout=30):
    """SIGTERM to proc: its exit status (None when it has not ended within
    timeout seconds) and the seconds it took to end."""
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        rc = None
    return rc, time.time() - t0


def alexnet_sizes(batch):
    """out_bytes of each AlexNet stage from the layer arithmetic (fp32)."""
    def conv(h, k, s, p):
        return (h + 2 * p - k) // s + 1
    shapes = []
    h = 224
    h = conv(h, 11, 4, 2); shapes += [(64, h, h)] * 2          # conv1, relu1
    h = conv(h, 3, 2, 0); shapes += [(64, h, h)]               # pool1
    shapes += [(192, h, h)] * 2                                # conv2, relu2
    h = conv(h, 3, 2, 0); shapes += [(192, h, h)]              # pool2
    shapes += [(384, h, h)] * 2 + [(256, h, h)] * 4            # conv3..relu5
    h = conv(h, 3, 2, 0); shapes += [(256, h, h)]              # pool5
    shapes += [(256 * 6 * 6,)] * 2                             # avgpool+flatten, drop6
    shapes += [(4096,)] * 5 + [(1000,)]                        # fc6 relu6 drop7 fc7 relu7 fc8
    out = []
    for s in shapes:
        n = batch * 4
        for d in s:
            n *= d
        out.append(n)
    return out


try:
    run.start_rematd("--lease-seconds", str(LEASE_SECONDS), "--max-attempts", "3")
    w1 = start_worker("w1")

    # 1. AlexNet profile: every out_bytes is the analytic size.
    t0 = time.time()
    path, profile_id = submit_profile({"model": "alexnet", "batch_size": 2, "dtype": "fp32",
                                       "device": "cpu", "warmup": 1, "repeats": 2})
    job = wait_job(path, finished)
    elapsed = time.time() - t0
    if check(job and job["status"] == "done", "alexnet profile job done (%s)" % (job or {}).get("reason")):
        prof = job.get("profile") or job.get("result")
        want = alexnet_sizes(2)
        got = [s["out_bytes"] for s in prof["stages"]]
        check(got == want, "every out_bytes equals the analytic size (%d stages)" % len(got))
        check(prof["input_bytes"] == 2 * 3 * 224 * 224 * 4, "input_bytes is 2x3x224x224x4")
        check(all(s["saved_bytes"] >= s["out_bytes"] for s in prof["stages"]), "saved_bytes >= out_bytes")
        check(prof["device"] == "cpu" and prof["libtorch"] and prof["dtype"] == "fp32",
              "the profile names device, libtorch and dtype")
        print("     alexnet batch 2 profile job, submit to done: %.1f s" % elapsed)

        # 2. Validations meet 1%, gradients as store-all's.
        for alg in ("min-peak", "sqrt"):
            # sqrt's with a timeline: the real worker's per-op entries
            # (their wall times too) must pass rematd's checks.
            st, v = http("POST", "/v1/validations", {"profile_id": profile_id, "algorithm": alg,
                                                     "repeats": 1, "timeline": alg == "sqrt"})
            if not check(st == 202, "POST /v1/validations (%s) answers 202 (%s)" % (alg, st)):
                continue
            v = wait_job("/v1/validations/" + v["id"], finished)
            r = v.get("result") or {}
            check(v["status"] == "done" and abs(r.get("relative_error", 1)) <= 0.01
                  and r.get("max_grad_diff", 1) == 0,
                  "%s validation: predicted %s, measured %s, error %s, grad diff %s" % (
                      alg, r.get("predicted_peak_bytes"), r.get("measured_peak_bytes"),
                      r.get("relative_error"), r.get("max_grad_diff")))
            if alg == "sqrt":
                tl = r.get("timeline") or []
                check(len(tl) == r.get("n_ops") and all(
                    isinstance(e.get("ms"), (int, float)) and e["ms"] >= 0 for e in tl)
                      and max(e["peak_bytes"] for e in tl) == r.get("measured_peak_bytes"),
                      "sqrt timeline: %d entries for %s ops, each with its ms, its most %s "
                      "the measured peak %s" % (len(tl), r.get("n_ops"),
                                                max([e["peak_bytes"] for e in tl] or [None]),
                                                r.get("measured_peak_bytes")))
            # Step time: predicted (the plan's total_ms) beside measured,
            # and the error between them, from the real worker.
            plan = (v.get("spec") or {}).get("plan") or {}
            times = [r.get(k) for k in ("step_ms", "step_ms_min", "step_ms_max",
                                        "predicted_step_ms", "step_time_error")]
            if check(all(isinstance(t, (int, float)) for t in times),
                     "%s validation reports step_ms, its spread, predicted_step_ms and "
                     "step_time_error: %s" % (alg, times)):
                ms, lo, hi, pred, terr = times
                check(pred == plan.get("total_ms") and pred > 0,
                      "%s: predicted_step_ms %s is the plan's total_ms %s" % (
                          alg, pred, plan.get("total_ms")))
                check(0 < lo <= ms <= hi, "%s: 0 < step_ms_min %s <= step_ms %s <= step_ms_max %s" % (
                    alg, lo, ms, hi))
                check(abs(terr - (ms - pred) / pred) <= 1e-9 * (1 + abs(terr)),
                      "%s: step_time_error %s = (step_ms - predicted) / predicted" % (alg, terr))
                print("     %s step: predicted %.1f ms, measured %.1f ms (%.1f..%.1f), error %+.0f%%" % (
                    alg, pred, ms, lo, hi, 100 * terr))

    # 3. A shape mismatch names the layer (rematd may catch it, else the worker).
    bad = {"layers": [{"type": "conv2d", "out_channels": 8, "kernel_size": 3},
                      {"type": "flatten"},
                      {"type": "conv2d", "out_channels": 8, "kernel_size": 3}],
           "input_shape": [3, 8, 8], "batch_size": 2, "dtype": "fp32", "device": "cpu"}
    st, job = http("POST", "/v1/profiles", bad)
    if st == 202:
        job = wait_job("/v1/profiles/" + job["id"], finished)
        reason = reason_of(job)
        check(job["status"] == "failed" and "layers[2]" in reason and "conv2d" in reason,
              "shape mismatch fails naming the layer: %s" % reason)
    else:
        check(st == 400 and "/layers/2" in json.dumps(job), "shape mismatch rejected naming the layer")

    # 4. kill -9 mid-job: leased again, finishes.
    path, _ = submit_profile({"model": "alexnet", "batch_size": 2, "dtype": "fp32", "device": "cpu",
                              "warmup": 1, "repeats": 3})
    job = wait_job(path, lambda j: j["status"] == "running" and (j.get("progress") or {}).get("stage", 0) >= 2
                   or finished(j), timeout=60)
    check(job["status"] == "running", "the job runs with per-stage progress %s" % job.get("progress"))
    w1.kill()
    w1.wait()
    w2 = start_worker("w2")
    job = wait_job(path, finished)
    check(job["status"] == "done" and job["attempts"] >= 2,
          "after kill -9 the job was leased again and finished (attempts %s)" % job["attempts"])

    # 5. SIGTERM mid-job: the job is given back and the worker exits 0.
    path, _ = submit_profile({"model": "alexnet", "batch_size": 4, "dtype": "fp32", "device": "cpu",
                              "warmup": 1, "repeats": 3})
    job = wait_job(path, lambda j: j["status"] == "running" and (j.get("progress") or {}).get("stage", 0) >= 2
                   or finished(j), timeout=60)
    attempts = job["attempts"]
    rc, _ = sigterm(w2)
    check(rc == 0, "SIGTERM: the worker exits 0 (got %s)" % rc)
    st, job = http("GET", path)
    check(job["status"] == "queued" and job["attempts"] <= attempts,
          "SIGTERM: the job is back in the queue without an attempt counted (%s, %s)" % (
              job["status"], job["attempts"]))

    # 6. Out of memory: that job fails with a clear reason; the worker lives on.
    w3 = start_worker("w3", ["--cpu-limit", str(100 * 1000 * 1000)])
    job = wait_job(path, finished)
    reason = reason_of(job)
    check(job["status"] == "failed" and "out of memory" in reason,
          "a model too large for the worker fails as out of memory: %s" % reason)
    small = {"layers": [{"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1},
                        {"type": "relu"}, {"type": "flatten"}, {"type": "linear", "out_features": 10}],
             "input_shape": [3, 8, 8], "batch_size": 2, "dtype": "fp32", "device": "cpu",
             "warmup": 0, "repeats": 1}
    path, _ = submit_profile(small)
    job = wait_job(path, finished)
    check(job["status"] == "done" and w3.poll() is None,
          "after the out-of-memory the same worker completes the next job")

    # 7. A silent server: it accepts the connection (the request lands in
    # the socket) and never answers.  SIGTERM cuts the lease poll short.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        silent.settimeout(60)
        url = "http://127.0.0.1:%d" % silent.getsockname()[1]
        w4 = run.start([lib.WORKER, "--server", url, "--device", "cpu", "--id", "w4"], "w4.log")
        conn, _ = silent.accept()  # the worker's first lease poll
        with conn:
            conn.settimeout(30)
            got = conn.recv(4096)
            rc, took = sigterm(w4)
        log = open(os.path.join(run.tmp, "w4.log")).read()
        check(b"/v1/worker/lease" in got and rc == 0 and took < 5 and "stopped" in log,
              "SIGTERM during a lease poll nobody answers: exit %s in %.1f s, log ends %r"
              % (rc, took, log.strip().splitlines()[-1:]))

    # 8. SIGTERM right after a job, and inside each back-off nap after it
    # (polls at 0, 0.1, 0.3, 0.7, 1.5, 2.5 s after the job, naps between).
    # Each job goes to a new worker of its own: w3 stops first.
    sigterm(w3)
    slow = []
    for i, delay in enumerate((0.0, 0.05, 0.2, 0.5, 1.0, 2.0)):
        name = "w8-%d" % i
        w = start_worker(name)
        shape = dict(small, input_shape=[3, 8, 9 + i])  # a new spec: a real job, not a cached profile
        path, _ = submit_profile(shape)
        job = run.wait_job(path, finished, timeout=180, every=0.02) if path else None
        time.sleep(delay)
        rc, took = sigterm(w)
        log = open(os.path.join(run.tmp, name + ".log")).read()
        if not (job and job["status"] == "done" and "complete" in log and rc == 0
                and took < STOP_BOUND_S and log.rstrip().endswith("stopped")):
            slow.append("%.2f s after the job: %s, exit %s in %.2f s" % (
                delay, (job or {}).get("status"), rc, took))
        print("     SIGTERM %.2f s after a job: exit %s in %.2f s" % (delay, rc, took))
    check(not slow, "SIGTERM after a job and in each back-off nap: exit 0 within %.0f s, 6 of 6 (%s)"
          % (STOP_BOUND_S, slow))

    # 9. SIGTERM while libtorch loads: blocked until main has its handler.
    w = start_worker("w9")
    w9_log = os.path.join(run.tmp, "w9.log")
    blocked = False
    t_end = time.time() + 60
    while (not blocked and w.poll() is None and time.time() < t_end
           and "serving" not in open(w9_log).read()):
        try:
            with open("/proc/%d/status" % w.pid) as f:
                sig_blk = [ln for ln in f if ln.startswith("SigBlk:")]
            blocked = bool(sig_blk) and int(sig_blk[0].split()[1], 16) & (1 << (signal.SIGTERM - 1)) != 0
        except (OSError, ValueError):
            pass
        if not blocked:
            time.sleep(0.001)
    starting = "serving" not in open(w9_log).read()
    rc, took = sigterm(w, timeout=60)
    log = open(w9_log).read()
    check(blocked and starting and rc == 0 and log.rstrip().endswith("stopped") and "leased" not in log,
          "SIGTERM while the worker loads libtorch (SIGTERM blocked: %s, before 'serving': %s): "
          "exit %s in %.1f s, log ends %r" % (blocked, starting, rc, took, log.strip().splitlines()[-1:]))

    # 10. A name lookup nobody answers: a UDP socket that takes the queries
    # and never replies is the worker's only name server (its own
    # resolv.conf in a mount namespace); glibc would wait RES_OPTIONS'
    # 30 s for it.
    if (os.geteuid() != 0 or shutil.which("unshare") is None or not os.path.exists("/etc/resolv.conf")
            or subprocess.run(["unshare", "--mount", "true"], stderr=subprocess.DEVNULL).returncode != 0):
        print("skipped: 10. a stalled name lookup: needs root, unshare(1) and a mount namespace")
    else:
        ns_ip = "127.83.%d.%d" % (os.getpid() % 250 + 1, (os.getpid() >> 8) % 250 + 1)
        queries = []
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as dns:
            dns.bind((ns_ip, 53))
            dns.settimeout(0.2)

            def take():
                while not dns_done.is_set():
                    try:
                        queries.append(dns.recvfrom(512)[0])
                    except OSError:
                        pass
            dns_done = threading.Event()
            taker = threading.Thread(target=take, daemon=True)
            taker.start()
            resolv = os.path.join(run.tmp, "resolv.conf")
            with open(resolv, "w") as f:
                f.write("nameserver %s\n" % ns_ip)
            env = dict(run.env, RES_OPTIONS="timeout:30 attempts:1")
            w10 = subprocess.Popen(
                ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', resolv,
                 lib.WORKER, "--server", "http://remat-silent-dns:8080", "--device", "cpu", "--id", "w10"],
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(run.tmp, "w10.log"), "w"), env=env)
            run.procs.append(w10)
            t_end = time.time() + 30  # the first lease poll comes once libtorch is loaded
            while not any(b"remat-silent-dns" in q for q in queries) and w10.poll() is None \
                    and time.time() < t_end:
                time.sleep(0.01)
            asked = any(b"remat-silent-dns" in q for q in queries)
            # A worker still polling without a query seen: hosts in
            # nsswitch.conf does not go to resolv.conf's name server here
            # (systemd-resolved, say), and there is nothing to test.
            unasked = not asked and w10.poll() is None
            time.sleep(0.2)
            rc, took = sigterm(w10, timeout=60)
            dns_done.set()
            taker.join()
        log = open(os.path.join(run.tmp, "w10.log")).read()
        if unasked:
            print("skipped: 10. the worker's name lookups never reached resolv.conf's name server")
        else:
            check(asked and rc == 0 and took < STOP_BOUND_S and log.rstrip().endswith("stopped"),
                  "SIGTERM while a lease poll waits on a silent name server (asked: %s): exit %s in %.2f s "
                  "(under %.0f s), log ends %r" % (asked, rc, took, STOP_BOUND_S,
                                                 log.strip().splitlines()[-1:]))
finally:
    status = run.finish()
sys.exit(status)
