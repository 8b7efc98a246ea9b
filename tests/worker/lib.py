"""What the Python tests that run the real programs share: where the built
rematd, remat-worker and remat are, starting rematd and CPU workers on
loopback, HTTP to rematd, polling a job, and the checks' bookkeeping.

Used by tests/worker/*.py, tests/python/conftest.py (the Python package's
tests) and bench/profile-speed.py.  Standard library only: the scripts that
import it run under any python3, torch or not.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BUILD = os.environ.get("top_builddir", ".")
REMATD = os.path.join(BUILD, "api", "rematd")
WORKER = os.path.join(BUILD, "worker", "remat-worker")
REMAT = os.path.join(BUILD, "cli", "remat")


def need(*progs):
    """Skips the script (exit 77, automake's skip) when a program is not built."""
    for prog in progs:
        if not os.access(prog, os.X_OK):
            print("SKIP: %s is not built" % prog)
            sys.exit(77)


def child_env():
    """The environment of the programs started: libtorch keeps memory until
    exit by design, so leak reports would be noise; and an allocation the
    sandbox's memory limit refuses must fail as it does in a plain build
    (NULL, then libtorch's out-of-memory error), not abort the sanitized
    process."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0:allocator_may_return_null=1"
    return env


def finished(job):
    return job["status"] in ("done", "failed")


class Run:
    """A temporary folder, the processes started in it (their stderr in
    <tmp>/<log>), rematd's URL once started, and the checks that failed.
    http_timeout: how long one request may take (the default of http())."""

    def __init__(self, prefix, env=None, http_timeout=60):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.env = env if env is not None else child_env()
        self.http_timeout = http_timeout
        self.procs = []
        self.failures = []
        self.url = None

    def check(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.failures.append(what)
        return cond

    def start(self, args, log):
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(self.tmp, log), "w"), env=self.env)
        self.procs.append(p)
        return p

    def start_rematd(self, *flags, timeout=30):
        """rematd on a free loopback port (--port-file), its data in <tmp>/data;
        waits for the port and sets self.url."""
        port_file = os.path.join(self.tmp, "port")
        p = self.start([REMATD, "--listen", "127.0.0.1:0", "--data-dir",
                        os.path.join(self.tmp, "data"), "--port-file", port_file] + list(flags),
                       "rematd.log")
        t_end = time.time() + timeout
        while time.time() < t_end and p.poll() is None:
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        self.url = "http://127.0.0.1:%s" % open(port_file).read().strip()
        return p

    def start_worker(self, name, *flags):
        """A CPU worker of rematd, its log <tmp>/<name>.log."""
        return self.start([WORKER, "--server", self.url, "--device", "cpu", "--id", name]
                          + list(flags), name + ".log")

    def http(self, method, path, body=None, raw=None, timeout=None):
        """(status, JSON body or None); raw bytes go as application/octet-stream."""
        if timeout is None:
            timeout = self.http_timeout
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        ctype = "application/octet-stream" if raw is not None else "application/json"
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": ctype})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                text = r.read()
                return r.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, None

    def wait_job(self, path, until=finished, timeout=600, every=0.2, seen=None):
        """Polls a job until until(job); returns it (or the last one seen).
        seen(job), when given, is called with each answer."""
        t_end = time.time() + timeout
        job = None
        while time.time() < t_end:
            st, job = self.http("GET", path)
            if st == 200 and seen is not None:
                seen(job)
            if st == 200 and until(job):
                return job
            time.sleep(every)
        return job

    def validate_plans(self, job, label, timeout=600):
        """Runs a min-peak and a sqrt(n) plan of a done profile job on the
        worker (POST /v1/validations) and checks each as the zoo's are
        (tests/worker/e2e.py): done, the peak within 1% of its prediction
        either way, the gradients store-all's exactly; the gap is printed."""
        for alg in ("min-peak", "sqrt"):
            st, v = self.http("POST", "/v1/validations", {"profile_id": job["id"],
                                                          "algorithm": alg, "repeats": 1})
            if not self.check(st == 202, "%s %s validation: 202 (%s %s)"
                              % (label, alg, st, v if st != 202 else v["id"])):
                continue
            v = self.wait_job("/v1/validations/" + v["id"], timeout=timeout)
            r = v.get("result") or {}
            pred, meas = r.get("predicted_peak_bytes"), r.get("measured_peak_bytes")
            gap = (meas - pred) if isinstance(pred, int) and isinstance(meas, int) else None
            err = r.get("relative_error", 1)
            self.check(v["status"] == "done" and r.get("max_grad_diff", 1) == 0
                       and isinstance(gap, int) and abs(gap) <= 0.01 * meas and abs(err) <= 0.01,
                       "%s %s: predicted %s, measured %s bytes (GAP %s bytes, relative error "
                       "%.4f), grad diff %s%s"
                       % (label, alg, pred, meas, gap, err if isinstance(err, float) else -1,
                          r.get("max_grad_diff"),
                          "" if v["status"] == "done" else " (" + str(v.get("error")) + ")"))

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()

    def finish(self):
        """Stops everything, prints the logs when a check failed, and returns
        the exit status."""
        self.stop()
        if self.failures:
            for log in sorted(os.listdir(self.tmp)):
                if log.endswith(".log"):
                    print("--- %s" % log)
                    print(open(os.path.join(self.tmp, log)).read()[-3000:])
        print("%d failures" % len(self.failures))
        return 1 if self.failures else 0
