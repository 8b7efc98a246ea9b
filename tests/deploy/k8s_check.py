#!/usr/bin/env python3
"""Checks rendered remat manifests (kubectl kustomize output) the way a
cluster admin would before applying them.

    k8s_check.py RENDERED.yaml REMATD_ENV_NAMES REMATD_FLAGS WORKER_ENV_NAMES

The last three are files of names, one per line: the REMAT_* variables and
--flags rematd's --help lists, and the variables remat-worker reads.

Every pod passes Pod Security "restricted"; no service account token is
mounted; every container has requests and a memory limit; rematd has startup,
liveness and readiness probes with timeouts on the port it listens on, or on
its health listener's (--health-listen) when it has one; ports,
the Service, the workers' server URL and the NetworkPolicy agree; every
environment variable and flag is one the program knows; thread counts fit
the CPUs requested; tokens come from the Secret remat-tokens; the root
filesystem is read-only with a writable /tmp; rematd is one replica,
Recreate; GPU workers need nvidia.com/gpu and roll out without a surge.
Prints one line per failure and exits 1 if there is any.
"""
import math
import re
import sys

import yaml

RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}

failures = []


def fail(what):
    failures.append(what)
    print("FAIL " + what)


def cpu_cores(q):
    q = str(q)
    return int(q[:-1]) / 1000 if q.endswith("m") else float(q)


def mem_bytes(q):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
             "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", str(q))
    if not m or (m.group(2) and m.group(2) not in units):
        raise ValueError("bad quantity %r" % q)
    return int(m.group(1)) * units.get(m.group(2), 1)


def env_map(c):
    return {e["name"]: e for e in c.get("env", [])}


def env_value(c, name):
    e = env_map(c).get(name)
    return None if e is None else e.get("value")


def arg_value(c, flag):
    args = c.get("args", [])
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def check_restricted(name, pod):
    """Pod Security Standards, "restricted" profile (v1.25 and later)."""
    psc = pod.get("securityContext", {})
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(k):
            fail("%s: %s" % (name, k))
    for v in pod.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            fail("%s: volume %s of type %s is not allowed" % (name, v["name"], kinds))
    if pod.get("automountServiceAccountToken") is not False:
        fail("%s: automountServiceAccountToken is not false" % name)
    for c in pod.get("initContainers", []) + pod.get("containers", []):
        cn = "%s/%s" % (name, c["name"])
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            fail(cn + ": privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            fail(cn + ": allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []):
            fail(cn + ": capabilities do not drop ALL")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            fail(cn + ": adds capabilities %s" % caps.get("add"))
        non_root = sc.get("runAsNonRoot", psc.get("runAsNonRoot"))
        if non_root is not True:
            fail(cn + ": runAsNonRoot is not true")
        uid = sc.get("runAsUser", psc.get("runAsUser"))
        if uid is None or uid == 0:
            fail(cn + ": runAsUser is not set to a non-zero uid")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            fail(cn + ": seccompProfile is %s, not RuntimeDefault" % seccomp)
        if sc.get("readOnlyRootFilesystem") is not True:
            fail(cn + ": readOnlyRootFilesystem is not true")
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        if "emptyDir" not in vols.get(mounts.get("/tmp"), {}):
            fail(cn + ": no writable /tmp (an emptyDir) under a read-only root filesystem")
        res = c.get("resources", {})
        for k in ("cpu", "memory"):
            if k not in res.get("requests", {}):
                fail(cn + ": no %s request" % k)
        if "memory" not in res.get("limits", {}):
            fail(cn + ": no memory limit")
        img = c.get("image", "")
        first = img.split("/")[0]
        if "/" not in img or not ("." in first or ":" in first or first == "localhost"):
            fail(cn + ": image %r is not fully qualified" % img)


def check_env_known(cn, c, known):
    for n, e in env_map(c).items():
        if n not in known:
            fail("%s: environment variable %s is not one the program reads" % (cn, n))
        if "value" in e and "valueFrom" in e:
            fail("%s: %s has both value and valueFrom" % (cn, n))


def main():
    rendered, env_file, flag_file, worker_env_file = sys.argv[1:5]
    docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
    rematd_env = set(open(env_file).read().split())
    rematd_flags = set(open(flag_file).read().split())
    worker_env = set(open(worker_env_file).read().split())
    by = {}
    for d in docs:
        by.setdefault(d["kind"], {})[d["metadata"]["name"]] = d

    deps = by.get("Deployment", {})
    for n, d in deps.items():
        check_restricted("Deployment " + n, d["spec"]["template"]["spec"])
        sel = d["spec"]["selector"]["matchLabels"]
        labels = d["spec"]["template"]["metadata"]["labels"]
        if any(labels.get(k) != v for k, v in sel.items()):
            fail("Deployment %s: the selector does not match the pod labels" % n)

    # rematd
    r = deps.get("rematd")
    if r is None:
        fail("no Deployment rematd")
        return
    rs = r["spec"]
    pod = rs["template"]["spec"]
    c = pod["containers"][0]
    cn = "rematd/" + c["name"]
    # A PostgreSQL store (docs/deploy.md): REMAT_STORE from a Secret.
    store = env_map(c).get("REMAT_STORE", {})
    shared = "secretKeyRef" in store.get("valueFrom", {})
    if shared:
        # Replicas sharing the database: several, a rollout that takes one
        # down only once its replacement is ready, drains one at a time.
        if rs.get("replicas", 1) < 2:
            fail("rematd: %s replica on a shared store: a rollout is an outage" % rs.get("replicas", 1))
        ru = rs.get("strategy", {})
        if ru.get("type", "RollingUpdate") != "RollingUpdate" or \
                ru.get("rollingUpdate", {}).get("maxUnavailable") not in (0, "0", "0%"):
            fail("rematd: a rolling update with maxUnavailable 0 is wanted on a shared store: %s" % ru)
        rl = rs["template"]["metadata"]["labels"]
        if not any(all(rl.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items())
                   for pdb in by.get("PodDisruptionBudget", {}).values()):
            fail("rematd: no PodDisruptionBudget for the replicas")
        if "PGPASSWORD" in env_map(c) and "secretKeyRef" not in env_map(c)["PGPASSWORD"].get("valueFrom", {}):
            fail("rematd: PGPASSWORD is not from a Secret")
    else:
        if rs.get("replicas") != 1:
            fail("rematd: replicas is %s; SQLite has one writer" % rs.get("replicas"))
        if rs.get("strategy", {}).get("type") != "Recreate":
            fail("rematd: strategy is not Recreate (two pods would share the store)")
    check_env_known(cn, c, rematd_env | {"REMAT_TOKEN", "REMAT_WORKER_TOKEN", "PGPASSWORD"})
    for a in c.get("args", []):
        if a.startswith("--") and a.split("=", 1)[0] not in rematd_flags:
            fail("%s: flag %s is not one rematd knows" % (cn, a))
    listen = arg_value(c, "--listen") or env_value(c, "REMAT_LISTEN")
    m = re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[^:]+):(\d+)", listen or "")
    if not m or m.group(1) in ("127.0.0.1", "localhost", "[::1]"):
        fail("%s: listen address %r is not reachable from other pods" % (cn, listen))
        return
    port = int(m.group(2))
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if port not in ports.values():
        fail("%s: listens on %d but declares ports %s" % (cn, port, ports))
    # With a health listener (--health-listen) the probes go there: the
    # main port's connections can all be taken by clients.
    health = arg_value(c, "--health-listen") or env_value(c, "REMAT_HEALTH_LISTEN")
    probe_port = port
    if health:
        hm = re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[^:]+):(\d+)", health)
        if not hm or hm.group(1) in ("127.0.0.1", "localhost", "[::1]"):
            fail("%s: health address %r is not reachable from the kubelet" % (cn, health))
            return
        probe_port = int(hm.group(2))
        if probe_port not in ports.values():
            fail("%s: probes listen on %d but declares ports %s" % (cn, probe_port, ports))
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"),
                        ("readinessProbe", "/readyz")):
        p = c.get(probe)
        if p is None:
            fail("%s: no %s" % (cn, probe))
            continue
        g = p.get("httpGet", {})
        pp = ports.get(g.get("port"), g.get("port"))
        if g.get("path") != path or pp != probe_port:
            fail("%s: %s asks %s on %s, want %s on %d" % (cn, probe, g.get("path"), pp, path,
                                                         probe_port))
        if not 1 <= p.get("timeoutSeconds", 1) or "timeoutSeconds" not in p:
            fail("%s: %s has no timeoutSeconds (the default is 1 s)" % (cn, probe))
    data_dir = arg_value(c, "--data-dir") or env_value(c, "REMAT_DATA_DIR")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    claim = vols.get(mounts.get(data_dir), {}).get("persistentVolumeClaim", {}).get("claimName")
    if not shared and claim not in by.get("PersistentVolumeClaim", {}):
        fail("%s: the data directory %s is not on a PersistentVolumeClaim of these manifests" % (cn, data_dir))
    if shared and mounts.get(data_dir) not in vols:
        fail("%s: the data directory %s (model copies) is not a volume" % (cn, data_dir))
    if pod.get("securityContext", {}).get("fsGroup") is None:
        fail("%s: no fsGroup: the volume would not be writable by the non-root user" % cn)
    for t in ("REMAT_THREADS", "REMAT_PLAN_THREADS", "REMAT_MAX_CONNECTIONS"):
        if env_value(c, t) is None:
            fail("%s: %s is not set (rematd would size itself from the node)" % (cn, t))
    req_cpu = cpu_cores(c["resources"]["requests"]["cpu"])
    plan_threads = int(env_value(c, "REMAT_PLAN_THREADS") or 0)
    if plan_threads == 0 or plan_threads > math.ceil(req_cpu):
        fail("%s: %d planning threads on %s requested CPUs" % (cn, plan_threads, req_cpu))
    secrets = {(e["name"], e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
               for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
    secrets -= {("REMAT_STORE", "remat-postgresql", "uri"), ("PGPASSWORD", "remat-postgresql", "password")}
    if secrets != {("REMAT_TOKEN", "remat-tokens", "token"),
                   ("REMAT_WORKER_TOKEN", "remat-tokens", "worker-token")}:
        fail("%s: tokens are not REMAT_TOKEN and REMAT_WORKER_TOKEN from remat-tokens: %s" % (cn, secrets))

    # The Service in front of rematd.
    svc = by.get("Service", {}).get("rematd")
    if svc is None:
        fail("no Service rematd")
        return
    rlabels = rs["template"]["metadata"]["labels"]
    if any(rlabels.get(k) != v for k, v in svc["spec"]["selector"].items()):
        fail("Service rematd does not select rematd's pods")
    sp = svc["spec"]["ports"][0]
    tp = ports.get(sp.get("targetPort"), sp.get("targetPort"))
    if tp != port:
        fail("Service rematd targets %s, rematd listens on %d" % (tp, port))

    # Workers.
    w = deps.get("remat-worker")
    if w is None:
        fail("no Deployment remat-worker")
        return
    wpod = w["spec"]["template"]["spec"]
    wc = wpod["containers"][0]
    wn = "remat-worker/" + wc["name"]
    check_env_known(wn, wc, worker_env | {"OMP_NUM_THREADS", "POD_NAME"})
    server = env_value(wc, "REMAT_SERVER") or arg_value(wc, "--server")
    want = "http://%s:%d" % (svc["metadata"]["name"], sp["port"])
    if server != want:
        fail("%s: REMAT_SERVER is %s, the Service is %s" % (wn, server, want))
    wsecrets = {(e["name"], e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
                for e in wc.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
    if wsecrets != {("REMAT_WORKER_TOKEN", "remat-tokens", "worker-token")}:
        fail("%s: the worker must get the worker token only: %s" % (wn, wsecrets))
    device = env_value(wc, "REMAT_DEVICE") or arg_value(wc, "--device") or "cpu"
    wres = wc["resources"]
    if device == "cpu":
        lim = wres.get("limits", {})
        if "cpu" not in lim or env_value(wc, "OMP_NUM_THREADS") != str(int(cpu_cores(lim["cpu"]))):
            fail("%s: OMP_NUM_THREADS %s is not the CPU limit %s" % (wn, env_value(wc, "OMP_NUM_THREADS"),
                                                                   lim.get("cpu")))
        cl = env_value(wc, "REMAT_CPU_LIMIT_BYTES")
        if cl is None or not 0 < int(cl) < mem_bytes(lim["memory"]):
            fail("%s: REMAT_CPU_LIMIT_BYTES %s is not under the memory limit %s" % (wn, cl, lim["memory"]))
        if "nvidia.com/gpu" in lim:
            fail("%s: a CPU worker asks for a GPU" % wn)
    elif device.startswith("cuda"):
        if wres.get("limits", {}).get("nvidia.com/gpu") != 1:
            fail("%s: a CUDA worker without limits nvidia.com/gpu: 1" % wn)
        if "nvidia.com/gpu.present" in (wpod.get("nodeSelector") or {}):
            fail("%s: nodeSelector nvidia.com/gpu.present is set only by GPU Feature Discovery" % wn)
        ru = w["spec"].get("strategy", {})
        if not (ru.get("type") == "Recreate" or ru.get("rollingUpdate", {}).get("maxSurge") in (0, "0", "0%")):
            fail("%s: a rolling update with a surge pod needs a spare GPU" % wn)
        if "cuda" not in wc["image"]:
            fail("%s: a CUDA device on image %s" % (wn, wc["image"]))
    else:
        fail("%s: unknown device %s" % (wn, device))

    # NetworkPolicy: rematd accepts the workers (and clients) on its port.
    wlabels = w["spec"]["template"]["metadata"]["labels"]
    pols = [p for p in by.get("NetworkPolicy", {}).values()
            if all(rlabels.get(k) == v for k, v in p["spec"]["podSelector"].get("matchLabels", {}).items())]
    if not pols:
        fail("no NetworkPolicy selects rematd")
    for p in pols:
        ok_worker = False
        for rule in p["spec"].get("ingress", []):
            pports = {x.get("port") for x in rule.get("ports", [])}
            for f in rule.get("from", []):
                ml = f.get("podSelector", {}).get("matchLabels", {})
                if ml and all(wlabels.get(k) == v for k, v in ml.items()) and (not pports or port in pports):
                    ok_worker = True
        if not ok_worker:
            fail("NetworkPolicy %s does not let the workers reach port %d" % (p["metadata"]["name"], port))

    for n, pdb in by.get("PodDisruptionBudget", {}).items():
        ml = pdb["spec"]["selector"]["matchLabels"]
        targets = [d for d in deps.values()
                   if all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in ml.items())]
        if not targets:
            fail("PodDisruptionBudget %s selects no pod" % n)
        for d in targets:
            if d["spec"].get("replicas", 1) == 1 and pdb["spec"].get("minAvailable") not in (None, 0):
                fail("PodDisruptionBudget %s: minAvailable on one replica blocks every drain" % n)


main()
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
