"""remat.Client: rematd's HTTP API from Python, standard library only.

Every problem+json answer becomes a ProblemError carrying the problem's
type, title, status, detail and JSON pointer.  Connection failures, timeouts,
truncated bodies, 429, 503 and other 5xx answers are retried with exponential
backoff (honouring Retry-After) when the call is idempotent: GETs always,
POSTs because each carries an Idempotency-Key that rematd replays.

Redirects are never followed (rematd sends none): a 3xx is a TransportError,
so the bearer token never goes to another origin.  `timeout` bounds each
attempt as a whole, from the connect to the body's last byte, however slowly
a server trickles its answer.
"""
import http.client
import json
import os
import random
import socket
import sys
import threading
import time
import urllib.parse
import uuid

from ._exceptions import (  # noqa: F401 (names the client's callers import from here)
    InfeasibleError, JobFailed, JobTimeout, ProblemError, RematError, TransportError, UsageError)

# Answers larger than this are refused (a plan of 100,000 stages is ~5 MB).
MAX_BODY_BYTES = 256 << 20


def _member(obj, key, kind, what):
    """obj[key] when it is of the kind an answer must have; else the answer
    is malformed: a TransportError naming what is missing."""
    v = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(v, kind):
        raise TransportError("%s: the answer has no %s %r" % (what, kind.__name__, key))
    return v


def _hf_config(cfg):
    """A Hugging Face config as rematd takes it: a dict as it is; a path (a
    str or os.PathLike: config.json, or the folder holding it) read; a
    transformers PretrainedConfig through its to_dict().  None stays None."""
    if cfg is None or isinstance(cfg, dict):
        return cfg
    if hasattr(cfg, "to_dict"):
        return cfg.to_dict()
    if isinstance(cfg, (str, os.PathLike)):
        path = os.fspath(cfg)
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        with open(path, encoding="utf-8") as f:
            v = json.load(f)
        if not isinstance(v, dict):
            raise UsageError("%s: a config.json holds an object" % path)
        return v
    raise UsageError("hf_config: a dict, a path to config.json, or a PretrainedConfig")


def _problem_error(status, body, method, url):
    cls = InfeasibleError if isinstance(body, dict) and \
        body.get("type") == "/problems/infeasible" else ProblemError
    return cls(status, body, method, url)


class Job(dict):
    """A job as rematd answers it (a dict), with the client that can poll it."""

    def __init__(self, client, data):
        super().__init__(data)
        self._client = client

    @property
    def done(self):
        return self.get("status") in ("done", "failed")

    def refresh(self):
        link = _member(_member(self, "links", dict, "job"), "self", str, "job links")
        fresh = self._client._json("GET", link)
        self.clear()
        self.update(fresh)
        return self

    def wait(self, timeout=600.0, progress=None, poll=0.2):
        return self._client.wait(self, timeout=timeout, progress=progress, poll=poll)


def _progress_line(job):
    pr = job.get("progress") or {}
    if pr.get("stages"):
        return "%s %s: %s stage %d/%d" % (job.get("kind", "job"), job.get("id", "")[:8],
                                           pr.get("activity") or pr.get("phase") or job.get("status"),
                                           pr.get("stage", 0),
                                           pr["stages"])
    return "%s %s: %s" % (job.get("kind", "job"), job.get("id", "")[:8], job.get("status"))


class _Display:
    """Progress on a terminal (one line rewritten) or in a notebook (a line
    per change); nothing elsewhere."""

    def __init__(self, mode):
        self.fn = mode if callable(mode) else None
        if mode is None:
            tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
            mode = tty or "ipykernel" in sys.modules
        self.on = bool(mode)
        self.tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self.last = None

    def show(self, job):
        if self.fn is not None:
            self.fn(job)
            return
        if not self.on:
            return
        line = _progress_line(job)
        if line == self.last:
            return
        self.last = line
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def end(self):
        if self.on and self.tty and self.fn is None and self.last is not None:
            sys.stderr.write("\n")
            sys.stderr.flush()


class Client:
    """rematd at `url` (http://host:port), with an optional bearer token
    (default: $REMAT_TOKEN).

    timeout: seconds per HTTP attempt; retries: attempts after the first for
    idempotent calls; backoff: the first wait, doubled each time up to
    max_backoff, with jitter, or the server's Retry-After when it gives one."""

    def __init__(self, url=None, token=None, timeout=30.0, retries=5, backoff=0.2,
                 max_backoff=5.0):
        url = url or os.environ.get("REMAT_SERVER") or "http://127.0.0.1:8080"
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise UsageError("url must be http(s)://host[:port], not %r" % url)
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("REMAT_TOKEN")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._split = u

    # -- transport ---------------------------------------------------------

    def _once(self, method, path, data, headers):
        """One attempt, over http.client (no proxies, no redirects followed),
        cut off after self.timeout seconds in all: a timer shuts the socket
        down, which ends a read that a trickling server would keep going."""
        u = self._split
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = cls(u.hostname, u.port, timeout=self.timeout)
        cut = threading.Event()
        held = []  # the socket, kept: the connection drops it once a response has it

        def cut_off():
            cut.set()
            for sock in held:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        timer = threading.Timer(self.timeout, cut_off)
        timer.daemon = True
        timer.start()
        try:
            conn.connect()
            held.append(conn.sock)
            if cut.is_set():
                cut_off()
            base = u.path.rstrip("/")
            conn.request(method, base + path, body=data, headers=headers)
            r = conn.getresponse()
            body = self._read(r)
            if cut.is_set():
                raise socket.timeout("timed out")
            return r.status, dict(r.getheaders()), body
        except (OSError, http.client.HTTPException) as e:
            if cut.is_set():
                raise socket.timeout("no whole answer within the timeout of %g s" % self.timeout)
            raise e
        finally:
            timer.cancel()
            conn.close()

    @staticmethod
    def _read(r):
        length = r.headers.get("Content-Length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
            raise TransportError("answer of %s bytes is over the client's limit" % length)
        body = r.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            raise TransportError("answer over the client's limit of %d bytes" % MAX_BODY_BYTES)
        return body

    def _wait_before(self, attempt, headers):
        ra = (headers or {}).get("Retry-After")
        if ra is not None and ra.strip().isdigit():
            return min(float(ra), max(self.max_backoff, 1.0) * 12)
        d = min(self.max_backoff, self.backoff * (2 ** attempt))
        return d * (0.5 + random.random() / 2)

    def request(self, method, path, body=None, raw=None, content_type="application/json",
                idempotent=None):
        """One call; returns (status, headers, parsed JSON or raw bytes)."""
        headers = {"Accept": "application/json, application/problem+json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif raw is not None:
            data = raw
            headers["Content-Type"] = content_type
        if method == "POST":
            headers["Idempotency-Key"] = uuid.uuid4().hex
            idempotent = True if idempotent is None else idempotent
        elif idempotent is None:
            idempotent = method in ("GET", "HEAD", "PUT", "DELETE")
        attempts = 1 + (self.retries if idempotent else 0)
        last = None
        for attempt in range(attempts):
            rheaders = {}
            try:
                status, rheaders, text = self._once(method, path, data, headers)
            except (http.client.HTTPException, ConnectionError, socket.timeout, TimeoutError,
                    OSError) as e:
                last = TransportError("%s %s: %s" % (method, self.url + path,
                                                     getattr(e, "reason", e)))
            else:
                ctype = {k.lower(): v for k, v in rheaders.items()}.get("content-type", "")
                parsed, bad = None, None
                if text and ("json" in ctype or not ctype):
                    try:
                        parsed = json.loads(text)
                    except ValueError as e:
                        bad = e
                elif text:
                    parsed = text
                if 300 <= status < 400:
                    where = {k.lower(): v for k, v in rheaders.items()}.get("location", "?")
                    raise TransportError("%s %s: %d redirect to %s, not followed (rematd sends "
                                         "none; is the url right?)"
                                         % (method, self.url + path, status, where))
                if status < 400 and bad is None:
                    return status, rheaders, parsed
                if status < 400:
                    last = TransportError("%s %s: %d with a body that is not JSON (%s): "
                                          "truncated?" % (method, self.url + path, status, bad))
                else:
                    err = _problem_error(status, parsed if isinstance(parsed, dict) else
                                         {"detail": (text or b"")[:200].decode("utf-8", "replace")},
                                         method, self.url + path)
                    if not (status in (429, 503) or status >= 500):
                        raise err
                    last = err
            if attempt + 1 < attempts:
                time.sleep(self._wait_before(attempt, {k.title(): v for k, v in rheaders.items()}))
        raise last

    def _json(self, method, path, body=None, **kw):
        """The answer's JSON object; a TransportError when it is not one."""
        out = self.request(method, path, body=body, **kw)[2]
        if not isinstance(out, dict):
            raise TransportError("%s %s: the answer is not a JSON object: %.200r"
                                 % (method, self.url + path, out))
        return out

    # -- the API -----------------------------------------------------------

    def health(self):
        return self._json("GET", "/healthz")

    def models(self):
        """GET /v1/models: the zoo (and uploaded models where rematd has them)."""
        return _member(self._json("GET", "/v1/models"), "models", list, "GET /v1/models")

    def upload_model(self, module_or_path, example_input=None):
        """POST /v1/models with a TorchScript archive: a path, bytes, or a module
        (scripted, or traced with example_input when scripting fails).
        Returns the model's metadata ({id, sha256, bytes, ...})."""
        if isinstance(module_or_path, (bytes, bytearray)):
            data = bytes(module_or_path)
        elif isinstance(module_or_path, (str, os.PathLike)):
            with open(module_or_path, "rb") as f:
                data = f.read()
        else:
            data = _archive_of(module_or_path, example_input)
        return self._json("POST", "/v1/models", raw=data, content_type="application/octet-stream")

    def wait(self, job, timeout=600.0, progress=None, poll=0.2):
        """Polls a job until it is done; returns it, raises JobFailed when it
        failed and TimeoutError past timeout seconds."""
        if not isinstance(job, Job):
            job = Job(self, job)
        disp = _Display(progress)
        t_end = time.monotonic() + timeout
        delay = poll
        try:
            while True:
                disp.show(job)
                if job.done:
                    break
                if time.monotonic() > t_end:
                    raise JobTimeout("job %s still %s after %.0f s" % (job["id"], job["status"],
                                                                        timeout))
                time.sleep(delay)
                delay = min(delay * 1.5, 2.0)
                job.refresh()
        finally:
            disp.end()
        if job.get("status") == "failed":
            raise JobFailed(job)
        return job

    def _submit(self, path, spec, wait, timeout, progress):
        job = Job(self, self._json("POST", path, spec))
        if not wait:
            return job
        return self.wait(job, timeout=timeout, progress=progress)

    def profile(self, model=None, layers=None, model_id=None, batch_size=None, input_shape=None,
                dtype=None, device=None, wait=True, timeout=600.0, progress=None, input=None,
                stages=None, hf_config=None, seq_len=None, **options):
        """Queues a profiling job (a zoo model name, a layer list, an
        uploaded model_id, or hf_config: a Hugging Face config.json as a
        dict or the path of the file, with seq_len); waits for it and
        returns the profile, or returns the Job with wait=False.  An
        uploaded model takes its input as input={"shape": [...], "dtype":
        ..., "high": ...}; input_shape with model_id is the same as
        input={"shape": input_shape}, since rematd takes no input_shape
        beside model_id."""
        if model_id is not None and input_shape is not None:
            if input is not None:
                raise UsageError("profile: input_shape or input with model_id, not both")
            input, input_shape = {"shape": list(input_shape)}, None
        spec = {k: v for k, v in (("model", model), ("layers", layers), ("model_id", model_id),
                                  ("hf_config", _hf_config(hf_config)), ("seq_len", seq_len),
                                  ("batch_size", batch_size), ("input_shape", input_shape),
                                  ("input", input), ("stages", stages),
                                  ("dtype", dtype), ("device", device)) if v is not None}
        spec.update(options)
        job = self._submit("/v1/profiles", spec, wait, timeout, progress)
        if not wait:
            return job
        prof = dict(_member(job, "profile", dict, "a done profiling job"))
        prof.setdefault("id", job.get("id"))
        return prof

    def plan(self, profile=None, profile_id=None, algorithm="min-peak", budget_bytes=None,
             segments=None, model=None, mem_slots=None):
        """POST /v1/plans: the plan (a dict), from an inline profile or a done
        profiling job's id.  No schedule in budget: InfeasibleError, with
        min_budget_bytes."""
        if (profile is None) == (profile_id is None):
            raise UsageError("give exactly one of profile and profile_id")
        body = {"algorithm": algorithm}
        if profile is not None:
            body["profile"] = {k: v for k, v in profile.items() if k != "id"}
        else:
            body["profile_id"] = profile_id
        for k, v in (("budget_bytes", budget_bytes), ("segments", segments), ("model", model),
                     ("mem_slots", mem_slots)):
            if v is not None:
                body[k] = v
        return self._json("POST", "/v1/plans", body)

    def get_plan(self, plan_id):
        return self._json("GET", "/v1/plans/" + plan_id)

    def frontier(self, profile=None, profile_id=None, budgets=None, mem_slots=None):
        """The (peak, time) trade-off: min-time plans from the least budget
        that fits to store-all's peak (or at the given budgets), each point
        {budget_bytes, peak_bytes, total_ms, plan}, Pareto-filtered."""
        base = self.plan(profile=profile, profile_id=profile_id, algorithm="store-all")
        hi = base["peak_bytes"]
        if budgets is None:
            try:
                self.plan(profile=profile, profile_id=profile_id, algorithm="min-time",
                          budget_bytes=1, mem_slots=mem_slots)
                lo = 1
            except InfeasibleError as e:
                lo = e.min_budget_bytes or 1
            budgets = sorted({lo + (hi - lo) * k // 7 for k in range(8)})
        pts = []
        for b in budgets:
            try:
                p = self.plan(profile=profile, profile_id=profile_id, algorithm="min-time",
                              budget_bytes=b, mem_slots=mem_slots)
            except InfeasibleError:
                continue
            pts.append({"budget_bytes": b, "peak_bytes": p["peak_bytes"],
                        "total_ms": p["total_ms"], "plan": p})
        pts.sort(key=lambda q: (q["peak_bytes"], q["total_ms"]))
        out = []
        for q in pts:
            if not out or q["total_ms"] < out[-1]["total_ms"]:
                out.append(q)
        return out

    def fits(self, memory, profiles=None, profile_ids=None, optimizer=None, parallel=None,
             param_dtype=None, reduce_dtype=None, master_weights=None, wait=True,
             timeout=600.0, progress=None, **options):
        """POST /v1/fits: per memory size (bytes or a GPU name) the largest
        batch that fits with its plan, from profiles (inline), profile_ids,
        or a model spec in options (model=..., batches=[...]; hf_config=...,
        seq_len=..., and measure_seq_lens=[64, 128] for a seq_len too long
        to run where it is measured: docs/scheduling.md).  With
        parallel={"data": N, "strategy": "ddp" | "zero1" | "zero2" | "zero3"
        | "fsdp" | "hsdp", "shard_group": M} each answer is one rank's and
        carries its per_rank breakdown (docs/scheduling.md, "Sharded jobs");
        param_dtype, reduce_dtype, master_weights and global_batch (each
        answer's schedule: micro-batch, accumulation, least ranks, scheduler
        requests) go with it, global_batch in options.  Returns the
        answer (a dict); a model spec whose profiles are not cached yet is a
        fits job, waited for (its result returned), or returned with
        wait=False."""
        body = {"memory": list(memory)}
        if profiles is not None:
            body["profiles"] = [{k: v for k, v in p.items() if k != "id"} for p in profiles]
        for k, v in (("profile_ids", profile_ids), ("optimizer", optimizer),
                     ("parallel", parallel), ("param_dtype", param_dtype),
                     ("reduce_dtype", reduce_dtype), ("master_weights", master_weights)):
            if v is not None:
                body[k] = v
        body.update(options)
        status, _, out = self.request("POST", "/v1/fits", body=body)
        if not isinstance(out, dict):
            raise TransportError("POST %s/v1/fits: the answer is not a JSON object: %.200r"
                                 % (self.url, out))
        if status != 202:
            return out
        job = Job(self, out)
        if not wait:
            return job
        job = self.wait(job, timeout=timeout, progress=progress)
        return _member(job, "result", dict, "a done fits job")

    def validate(self, profile_id, plan_id=None, checkpoints=None, algorithm=None, wait=True,
                 timeout=600.0, progress=None, **options):
        """Queues a validation (the plan run on the profile's device); returns
        the result (measured and predicted peak, step times, gradient
        difference), or the Job with wait=False."""
        spec = {"profile_id": profile_id}
        for k, v in (("plan_id", plan_id), ("checkpoints", checkpoints),
                     ("algorithm", algorithm)):
            if v is not None:
                spec[k] = v
        spec.update(options)
        job = self._submit("/v1/validations", spec, wait, timeout, progress)
        return _member(job, "result", dict, "a done validation job") if wait else job


def _archive_of(module, example_input):
    import io

    import torch
    try:
        scripted = torch.jit.script(module)
    except Exception:
        if example_input is None:
            raise
        scripted = torch.jit.trace(module, example_input)
    buf = io.BytesIO()
    torch.jit.save(scripted, buf)
    return buf.getvalue()
