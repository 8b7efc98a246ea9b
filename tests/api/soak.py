"""soak.py - the traffic and the faults of tests/api/soak.sh, for a given
time, against one rematd on loopback:

- plan clients: POST /v1/plans with every quick algorithm and small
  min-time tables, some with an Idempotency-Key (and its replay);
- a job client: profile jobs (small layer lists, now and then ResNet-18)
  run by rematd's supervised CPU worker, and validations of done profiles;
  it keeps a few jobs waiting, not an ever longer queue;
- idle connections (from 127.0.0.2) and slowloris clients trickling their
  headers (from 127.0.0.3), each reopened when rematd cuts it;
- faults: the worker killed (SIGKILL) every --kill-every seconds, and one
  disk-full episode (RLIMIT_FSIZE of rematd lowered, then raised);
- probes: /healthz every half second (it must answer 200 within 5 s
  throughout, the disk-full episode included), /readyz every 2 s, and
  rematd's RSS and open descriptors every 5 s.

Every acknowledged write (a plan's 201 with its body, a job's 202) is
written to OUT/acked-plans and OUT/acked-jobs, checked after a kill -9 and
a restart by `soak.py verify PORT OUT`; the figures go to OUT/summary.json."""
import http.client
import json
import os
import random
import resource
import signal
import socket
import sys
import threading
import time



def verify(port, out):
    """After the restart: every acknowledged plan reads back byte for byte,
    every acknowledged job exists.  One kept-alive connection: a curl per
    plan would take minutes for a ten-minute soak's plans."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(path):
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()

    plans = lost = jobs = jlost = 0
    p = os.path.join(out, "acked-plans")
    for pid_ in (open(p).read().split() if os.path.exists(p) else []):
        plans += 1
        st, data = get("/v1/plans/" + pid_)
        if st != 200 or data != open(os.path.join(out, "plan-" + pid_), "rb").read():
            lost += 1
            if lost <= 3:
                print("  plan lost or changed: %s (%d)" % (pid_, st))
    j = os.path.join(out, "acked-jobs")
    states = {}
    for line in (open(j).read().splitlines() if os.path.exists(j) else []):
        jid, kind = line.split()
        jobs += 1
        st, data = get("/v1/%ss/%s" % (kind, jid))
        if st != 200:
            jlost += 1
            if jlost <= 3:
                print("  job lost: %s (%d)" % (jid, st))
        else:
            s_ = json.loads(data)["status"]
            states[s_] = states.get(s_, 0) + 1
    print("after kill -9 and restart: %d acknowledged plans, %d lost; %d acknowledged jobs, %d lost;"
          " jobs now %s" % (plans, lost, jobs, jlost, json.dumps(states, sort_keys=True)))
    return 0 if plans > 0 and jobs > 0 and lost == 0 and jlost == 0 else 1


if sys.argv[1] == "verify":
    sys.exit(verify(int(sys.argv[2]), sys.argv[3]))
port, pid, seconds, out = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
kill_every = float(sys.argv[5]) if len(sys.argv) > 5 else 60.0
stop = threading.Event()
lock = threading.Lock()
t_start = time.time()
stats = {}  # "route status" -> count
errors = []  # unexpected answers
disk = {"full": False, "start": None, "end": None}


def count(key):
    with lock:
        stats[key] = stats.get(key, 0) + 1


def error(msg):
    with lock:
        if len(errors) < 50:
            errors.append("%.1f s: %s" % (time.time() - t_start, msg))


def call(method, path, body=None, headers=None, timeout=60):
    """(status, body bytes, headers dict), or (0, b"", {}) on a transport error."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        return r.status, data, {k.lower(): v for k, v in r.getheaders()}
    except (OSError, http.client.HTTPException):
        return 0, b"", {}
    finally:
        c.close()


def profile(n, seed):
    rnd = random.Random(seed)
    st = []
    for i in range(n):
        out_b = rnd.randint(1, 64) << 16
        st.append({"name": "s%d" % i, "out_bytes": out_b,
                   "saved_bytes": out_b * rnd.randint(1, 3), "fwd_tmp_bytes": rnd.randint(0, 8) << 16,
                   "bwd_tmp_bytes": rnd.randint(0, 8) << 17, "param_bytes": rnd.randint(0, 4) << 16,
                   "fwd_ms": rnd.randint(1, 40) / 4.0, "bwd_ms": rnd.randint(1, 80) / 4.0})
    return {"format": "remat.profile/v1", "input_bytes": 1 << 20, "stages": st}


def acked_plan(pid_, body):
    with lock:
        with open(os.path.join(out, "acked-plans"), "a") as f:
            f.write(pid_ + "\n")
        with open(os.path.join(out, "plan-" + pid_), "wb") as f:
            f.write(body)


def acked_job(jid, kind):
    with lock:
        with open(os.path.join(out, "acked-jobs"), "a") as f:
            f.write("%s %s\n" % (jid, kind))


def allowed_503(data):
    # queue-full and solve-memory are bounds doing their work; unavailable
    # is the store refusing writes (the disk-full episode and the seconds
    # after it, until a probe write succeeds).
    return any(t in data for t in (b"/problems/queue-full", b"/problems/unavailable",
                                   b"/problems/solve-memory"))


def plan_client(k):
    rnd = random.Random(k)
    algos = ["sqrt", "store-all", "min-peak", "uniform", "paper-linear", "min-time"]
    while not stop.is_set():
        n = rnd.randint(6, 40)
        req = {"profile": profile(n, rnd.randint(0, 1 << 30)), "algorithm": rnd.choice(algos)}
        if req["algorithm"] == "uniform":
            req["segments"] = rnd.randint(1, n)
        if req["algorithm"] == "min-time":
            req["mem_slots"] = 40
        body = json.dumps(req).encode()
        key = "soak-%d-%d" % (k, rnd.randint(0, 1 << 40)) if rnd.random() < 0.2 else None
        tries = 2 if key else 1
        first = None
        for _ in range(tries):
            st, data, h = call("POST", "/v1/plans", body, {"Idempotency-Key": key} if key else None)
            count("plans %d" % st)
            if st == 201:
                d = json.loads(data)
                if first is None:
                    first = d["id"]
                    acked_plan(d["id"], data)
                elif d["id"] != first or h.get("idempotent-replayed") != "true":
                    error("replay of key %s answered plan %s, first %s" % (key, d["id"], first))
            elif st == 503 and allowed_503(data):
                if "retry-after" not in h:
                    error("503 without Retry-After: %r" % data[:200])
            elif st == 422 and b"/problems/infeasible" in data:
                pass
            else:
                error("POST /v1/plans: %d %r" % (st, data[:200]))
        stop.wait(0.02)


LAYERS = [
    {"layers": [{"type": "linear", "out_features": 64}, {"type": "relu"},
                {"type": "linear", "out_features": 32}, {"type": "relu"},
                {"type": "linear", "out_features": 10}], "input_shape": [48]},
    {"layers": [{"type": "conv2d", "out_channels": 8, "kernel_size": 3, "padding": 1},
                {"type": "relu"}, {"type": "flatten"}, {"type": "linear", "out_features": 10}],
     "input_shape": [3, 16, 16]},
]


def job_client():
    rnd = random.Random(99)
    mine = {}  # id -> status
    done_profiles = []
    next_post = 0.0
    while not stop.is_set():
        # The jobs' states (and the done profiles to validate).
        for jid in list(mine):
            if mine[jid] in ("done", "failed"):
                continue
            kind = "profiles" if jid.startswith("p:") else "validations"
            st, data, _ = call("GET", "/v1/%s/%s" % (kind, jid[2:]))
            if st == 200:
                s = json.loads(data)["status"]
                if s != mine[jid]:
                    count("jobs %s" % s)
                mine[jid] = s
                if s == "done" and kind == "profiles":
                    done_profiles.append(jid[2:])
            elif st != 0:
                error("GET job %s: %d %r" % (jid, st, data[:200]))
        waiting = sum(1 for s in mine.values() if s in ("queued", "running"))
        if waiting < 3 and time.time() >= next_post:
            if done_profiles and rnd.random() < 0.4:
                pj = rnd.choice(done_profiles)
                body = {"profile_id": pj, "algorithm": rnd.choice(["sqrt", "min-peak"]), "repeats": 1}
                path, kind = "/v1/validations", "v"
            else:
                if rnd.random() < 0.15:
                    body = {"model": "resnet18", "batch_size": 1, "device": "cpu", "repeats": 1}
                else:
                    body = dict(rnd.choice(LAYERS), batch_size=rnd.choice([2, 4]), device="cpu")
                path, kind = "/v1/profiles", "p"
            st, data, h = call("POST", path, json.dumps(body).encode())
            count("jobs-post %d" % st)
            if st == 202:
                jid = json.loads(data)["id"]
                mine[kind + ":" + jid] = "queued"
                acked_job(jid, "profile" if kind == "p" else "validation")
            elif not (st == 503 and allowed_503(data)):
                error("POST %s: %d %r" % (path, st, data[:200]))
            next_post = time.time() + 2.0
        stop.wait(1.0)
    with lock:
        stats["jobs tracked"] = len(mine)


def probe():
    worst = 0.0
    fails = 0
    n = 0
    last_ready = 0.0
    ready = {}
    while not stop.is_set():
        t0 = time.time()
        st, data, _ = call("GET", "/healthz", timeout=5)
        took = time.time() - t0
        n += 1
        worst = max(worst, took)
        if st != 200:
            fails += 1
            error("/healthz: %d after %.2f s" % (st, took))
        if t0 - last_ready >= 2.0:
            last_ready = t0
            rs, _, _ = call("GET", "/readyz", timeout=5)
            ready[rs] = ready.get(rs, 0) + 1
        stop.wait(max(0.0, 0.5 - took))
    with lock:
        stats["healthz probes"] = n
        stats["healthz failures"] = fails
        stats["healthz worst s"] = round(worst, 3)
        stats["readyz"] = ready


def proc_sample():
    try:
        rss = 0
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        fds = len(os.listdir("/proc/%d/fd" % pid))
        return rss, fds
    except OSError:
        return None


def sampler():
    samples = []
    while not stop.is_set():
        s = proc_sample()
        if s:
            samples.append([round(time.time() - t_start, 1), s[0], s[1]])
        stop.wait(5.0)
    with open(os.path.join(out, "samples.json"), "w") as f:
        json.dump(samples, f)


def holder(src, slow):
    """One idle (or slowloris) connection, reopened whenever rematd cuts it."""
    cuts = 0
    while not stop.is_set():
        s = socket.socket()
        try:
            s.bind((src, 0))
            s.connect(("127.0.0.1", port))
            if slow:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
            s.settimeout(1.0)
            while not stop.is_set():
                if slow:
                    s.sendall(b"X")
                try:
                    if s.recv(4096) == b"":
                        break
                except socket.timeout:
                    pass
        except OSError:
            pass
        finally:
            s.close()
        cuts += 1
        stop.wait(0.5)
    with lock:
        key = "reopened %s" % ("slowloris" if slow else "idle")
        stats[key] = stats.get(key, 0) + cuts - 1


def workers_of(parent):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    f_ = f.read().rsplit(")", 1)[1].split()
                if int(f_[1]) == parent:
                    kids.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def chaos():
    kills = 0
    next_kill = time.time() + kill_every
    disk_at = t_start + seconds * 0.45
    disk_len = min(30.0, max(5.0, seconds * 0.08))
    hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)[1]
    while not stop.is_set():
        now = time.time()
        if now >= next_kill:
            for w in workers_of(pid):
                try:
                    os.kill(w, signal.SIGKILL)
                    kills += 1
                except OSError:
                    pass
            next_kill = now + kill_every
        if disk["start"] is None and now >= disk_at:
            # Every file rematd writes stops growing: the database, its WAL,
            # the probe file (its log is a pipe).
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (65536, hard))
            disk["full"] = True
            disk["start"] = round(now - t_start, 1)
        if disk["full"] and now >= t_start + disk["start"] + disk_len:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
            disk["full"] = False
            disk["end"] = round(now - t_start, 1)
        stop.wait(0.5)
    if disk["full"]:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
        disk["end"] = round(time.time() - t_start, 1)
    with lock:
        stats["worker kills"] = kills


threads = [threading.Thread(target=plan_client, args=(k,)) for k in range(2)]
threads += [threading.Thread(target=f) for f in (job_client, probe, sampler, chaos)]
threads += [threading.Thread(target=holder, args=("127.0.0.2", False)) for _ in range(40)]
threads += [threading.Thread(target=holder, args=("127.0.0.3", True)) for _ in range(10)]
for t in threads:
    t.start()
while time.time() - t_start < seconds:
    time.sleep(1.0)
    if not os.path.exists("/proc/%d" % pid):
        error("rematd exited during the soak")
        break
stop.set()
for t in threads:
    t.join()
stats["seconds"] = round(time.time() - t_start, 1)
stats["disk-full episode s"] = [disk["start"], disk["end"]]
stats["errors"] = errors
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(stats, f, indent=1, sort_keys=True)
print(json.dumps(stats, indent=1, sort_keys=True))
sys.exit(1 if errors else 0)
