"""remat.Client against a hostile server: timeouts, 500s and 503s (retried,
with the same Idempotency-Key, honouring Retry-After), truncated and
non-JSON bodies, connection resets, and problem+json errors turned into
exceptions that carry the problem; redirects not followed (the token never
reaches another origin), answers trickled a byte at a time cut off at the
timeout, and answers of the wrong shape raised as RematError."""
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import remat
from remat.client import JobFailed, UsageError

PROBLEM = {"type": "/problems/validation", "title": "Invalid field", "status": 400,
           "detail": "out_bytes must not be negative", "pointer": "/profile/stages/1/out_bytes",
           "instance": "/v1/plans", "request_id": "abc"}


class Hostile:
    """A server answering each request with the next scripted behaviour."""

    def __init__(self, script):
        self.script = list(script)
        self.seen = []
        hostile = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _do(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                hostile.seen.append((self.command, self.path, dict(self.headers), body,
                                     time.monotonic()))
                act = hostile.script.pop(0) if hostile.script else ("json", 200, {"ok": 1})
                kind = act[0]
                if kind == "sleep":
                    time.sleep(act[1])
                    return
                if kind == "trickle":  # headers, or the body, a byte every act[2] s
                    try:
                        if act[1] == "headers":
                            for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n":
                                self.wfile.write(bytes([b]))
                                self.wfile.flush()
                                time.sleep(act[2])
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", "200")
                        self.end_headers()
                        for _ in range(200):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(act[2])
                    except OSError:
                        pass
                    return
                if kind == "reset":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if kind == "truncate":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100")
                    self.end_headers()
                    self.wfile.write(b'{"status": "do')
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, payload = act[1], act[2]
                headers = act[3] if len(act) > 3 else {}
                text = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                ctype = "application/problem+json" if status >= 400 else "application/json"
                self.send_header("Content-Type", headers.pop("Content-Type", ctype))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            do_GET = do_POST = _do

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def hostile():
    servers = []

    def make(script):
        s = Hostile(script)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.close()


def client(url, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 2.0)
    return remat.Client(url, **kw)


def test_problem_becomes_an_exception_with_its_fields(hostile):
    s = hostile([("json", 400, PROBLEM)])
    with pytest.raises(remat.ProblemError) as e:
        client(s.url).plan(profile={"input_bytes": 1, "stages": [{"out_bytes": -1}]})
    err = e.value
    assert (err.status, err.type, err.title, err.detail, err.pointer) == (
        400, "/problems/validation", "Invalid field", "out_bytes must not be negative",
        "/profile/stages/1/out_bytes")
    assert err.problem == PROBLEM
    assert len(s.seen) == 1, "a 400 is not retried"


def test_infeasible_carries_the_least_budget(hostile):
    s = hostile([("json", 422, {"type": "/problems/infeasible", "title": "Infeasible",
                                "status": 422, "detail": "no schedule fits",
                                "min_budget_bytes": 12345})])
    with pytest.raises(remat.InfeasibleError) as e:
        client(s.url).plan(profile={"input_bytes": 1, "stages": [{"out_bytes": 1}]},
                           algorithm="min-time", budget_bytes=10)
    assert e.value.min_budget_bytes == 12345


def test_500_then_success_is_retried_with_one_idempotency_key(hostile):
    s = hostile([("json", 500, {"type": "/problems/internal", "title": "Internal", "status": 500,
                                "detail": "boom"}),
                 ("json", 502, b"<html>bad gateway</html>", {"Content-Type": "text/html"}),
                 ("json", 201, {"id": "p" * 32, "schedule": []})])
    got = client(s.url).plan(profile={"input_bytes": 1, "stages": [{"out_bytes": 1}]})
    assert got["id"] == "p" * 32
    keys = {h.get("Idempotency-Key") for _, _, h, _, _ in s.seen}
    assert len(s.seen) == 3 and len(keys) == 1 and None not in keys
    assert len({b for _, _, _, b, _ in s.seen}) == 1, "the same body every time"


def test_503_honours_retry_after(hostile):
    s = hostile([("json", 503, {"type": "/problems/unavailable", "title": "Unavailable",
                                "status": 503, "detail": "draining"}, {"Retry-After": "1"}),
                 ("json", 200, {"status": "ok"})])
    assert client(s.url).health() == {"status": "ok"}
    assert s.seen[1][4] - s.seen[0][4] >= 0.9


def test_429_is_retried(hostile):
    s = hostile([("json", 429, {"type": "/problems/limit-exceeded", "title": "Too many",
                                "status": 429, "detail": "slow down"}, {"Retry-After": "0"}),
                 ("json", 200, {"models": []})])
    assert client(s.url).models() == []


def test_timeouts_truncation_and_resets_are_retried_then_reported(hostile):
    s = hostile([("sleep", 1.5), ("truncate",), ("reset",), ("json", 200, {"status": "ok"})])
    assert client(s.url, timeout=0.5).health() == {"status": "ok"}
    assert len(s.seen) == 4
    s2 = hostile([("truncate",)] * 3)
    with pytest.raises(remat.TransportError):
        client(s2.url, retries=2).health()
    assert len(s2.seen) == 3


def test_non_json_success_is_a_transport_error(hostile):
    s = hostile([("json", 200, b"not json")] * 2)
    with pytest.raises(remat.TransportError, match="not JSON"):
        client(s.url, retries=1).health()


def test_connection_refused(hostile):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    t0 = time.monotonic()
    with pytest.raises(remat.TransportError):
        client("http://127.0.0.1:%d" % port, retries=3).health()
    assert time.monotonic() - t0 < 5


def test_jobs_wait_with_progress_and_timeout(hostile):
    job = {"id": "j" * 32, "kind": "profile", "status": "queued", "progress": None,
           "links": {"self": "/v1/profiles/" + "j" * 32}}
    running = dict(job, status="running", progress={"stage": 2, "stages": 5,
                                                    "phase": "measuring"})
    done = dict(job, status="done", profile={"input_bytes": 4, "stages": [{"out_bytes": 4}]})
    s = hostile([("json", 202, job), ("json", 200, running), ("json", 200, done)])
    seen = []
    prof = client(s.url).profile(model="alexnet", device="cpu", progress=lambda j: seen.append(j["status"]))
    assert prof["stages"] == [{"out_bytes": 4}] and prof["id"] == "j" * 32
    assert seen == ["queued", "running", "done"]
    s2 = hostile([("json", 202, job)] + [("json", 200, running)] * 50)
    with pytest.raises(TimeoutError):
        client(s2.url).profile(model="alexnet", timeout=0.5, progress=False)
    s3 = hostile([("json", 202, job), ("json", 200, dict(job, status="failed", error="oom"))])
    with pytest.raises(JobFailed, match="oom"):
        client(s3.url).profile(model="alexnet", progress=False)
    s4 = hostile([("json", 202, job)])
    j = client(s4.url).profile(model="alexnet", wait=False)
    assert isinstance(j, remat.Job) and j["status"] == "queued"


def test_profile_of_an_uploaded_model_sends_input_not_input_shape(hostile):
    # rematd refuses input_shape beside model_id (openapi.yaml: an uploaded
    # model takes input); the documented call must still work.
    job = {"id": "k" * 32, "kind": "profile", "status": "done",
           "profile": {"input_bytes": 4, "stages": [{"out_bytes": 4}]}}
    s = hostile([("json", 202, job)])
    client(s.url).profile(model_id="m" * 32, input_shape=[3, 32, 32], batch_size=2,
                          stages=["layer1", "fc"], progress=False)
    spec = json.loads(s.seen[0][3])
    assert spec == {"model_id": "m" * 32, "input": {"shape": [3, 32, 32]}, "batch_size": 2,
                    "stages": ["layer1", "fc"]}
    s2 = hostile([("json", 202, job)])
    client(s2.url).profile(model_id="m" * 32, input={"shape": [8], "dtype": "int64", "high": 50},
                           progress=False)
    assert json.loads(s2.seen[0][3])["input"] == {"shape": [8], "dtype": "int64", "high": 50}
    with pytest.raises(remat.UsageError, match="not both"):
        client(s.url).profile(model_id="m" * 32, input_shape=[3], input={"shape": [3]})
    # Zoo models and layer lists keep input_shape as it is.
    s3 = hostile([("json", 202, job)])
    client(s3.url).profile(layers=[{"type": "relu"}], input_shape=[4], progress=False)
    assert json.loads(s3.seen[0][3])["input_shape"] == [4]


def test_token_is_sent(hostile):
    s = hostile([("json", 200, {"models": []})])
    client(s.url, token="sekrit").models()
    assert s.seen[0][2]["Authorization"] == "Bearer sekrit"


def test_bad_url():
    with pytest.raises(ValueError):
        remat.Client("ftp://x")


def test_redirects_are_not_followed_and_the_token_stays(hostile):
    other = hostile([("json", 200, {"models": []})] * 3)
    for code in (301, 302, 307, 308):
        s = hostile([("json", code, {}, {"Location": other.url + "/v1/models"})])
        with pytest.raises(remat.TransportError, match="%d redirect to %s" % (code, other.url)):
            client(s.url, token="sekrit").models()
        assert len(s.seen) == 1  # not retried either
    assert other.seen == []


def test_timeout_bounds_an_answer_trickled_a_byte_at_a_time(hostile):
    # Each byte comes well within the timeout, the whole answer never does:
    # a per-read timeout would wait 200 x 0.1 s; the call ends at 1 s.
    for where in ("body", "headers"):
        s = hostile([("trickle", where, 0.1)])
        t0 = time.monotonic()
        with pytest.raises(remat.TransportError, match="within the timeout of 1 s"):
            client(s.url, timeout=1.0, retries=0).health()
        assert time.monotonic() - t0 < 8, where


def test_answers_of_the_wrong_shape_are_remat_errors(hostile):
    job = {"id": "j" * 32, "kind": "profile", "status": "done",
           "links": {"self": "/v1/profiles/" + "j" * 32}}
    cases = [
        (lambda c: c.models(), [("json", 200, [1, 2])]),
        (lambda c: c.models(), [("json", 200, {"models": "all of them"})]),
        (lambda c: c.health(), [("json", 200, "ok")]),
        (lambda c: c.profile(model="alexnet", progress=False), [("json", 202, job)]),
        (lambda c: c.validate("p" * 32, progress=False), [("json", 202, dict(job, kind="validation"))]),
    ]
    for call, script in cases:
        s = hostile(script)
        with pytest.raises(remat.RematError):
            call(client(s.url, retries=0))


def test_fits_sends_parallel_and_waits_for_a_fits_job(hostile):
    answer = {"measured_batches": [8], "optimizer": "adamw", "answers": [], "fit_check": [],
              "parallel": {"strategy": "fsdp", "data": 64}}
    job = {"id": "f1", "kind": "fits", "status": "queued", "links": {"self": "/v1/fits/f1"}}
    s = hostile([("json", 200, answer), ("json", 202, job),
                 ("json", 200, dict(job, status="done", result=answer))])
    c = client(s.url)
    got = c.fits(["a100-40gb", 80 << 30], profile_ids=["p8"], optimizer="adamw",
                 parallel={"data": 64, "strategy": "fsdp"}, param_dtype="bfloat16",
                 reduce_dtype="float32")
    assert got == answer
    method, path, _, body, _ = s.seen[0]
    assert (method, path) == ("POST", "/v1/fits")
    assert json.loads(body) == {"memory": ["a100-40gb", 80 << 30], "profile_ids": ["p8"],
                                "optimizer": "adamw",
                                "parallel": {"data": 64, "strategy": "fsdp"},
                                "param_dtype": "bfloat16", "reduce_dtype": "float32"}
    # A model spec not profiled yet: a fits job, polled until its answer.
    got = c.fits(["h100-80gb"], model="gpt", batches=[2, 4], progress=False,
                 parallel={"data": 8, "strategy": "zero1"})
    assert got == answer
    assert [x[1] for x in s.seen[1:]] == ["/v1/fits", "/v1/fits/f1"]
    assert json.loads(s.seen[1][3])["model"] == "gpt"


def test_profile_sends_an_hf_config_from_a_dict_or_a_file(hostile, tmp_path):
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
           "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000}
    job = {"id": "j" * 32, "kind": "profile", "status": "queued",
           "links": {"self": "/v1/profiles/" + "j" * 32}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for given in (cfg, str(tmp_path / "config.json"), tmp_path):
        s = hostile([("json", 202, job)])
        client(s.url).profile(hf_config=given, seq_len=32, device="cpu", wait=False)
        method, path, _, body, _ = s.seen[0]
        assert (method, path) == ("POST", "/v1/profiles")
        assert json.loads(body) == {"hf_config": cfg, "seq_len": 32, "device": "cpu"}
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(UsageError):
        client("http://127.0.0.1:9").profile(hf_config=str(tmp_path / "list.json"), seq_len=8)
    with pytest.raises(UsageError):
        client("http://127.0.0.1:9").profile(hf_config=42, seq_len=8)
