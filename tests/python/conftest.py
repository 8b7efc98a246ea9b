"""Fixtures of the remat Python package's tests: the built `remat` program
(plans), and a real rematd with a real CPU remat-worker on loopback."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

TOP_SRC = os.environ.get("top_srcdir") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
TOP_BUILD = os.environ.get("top_builddir") or os.path.join(TOP_SRC, "build")
# The programs and the server harness are tests/worker/lib.py's, which
# finds them under top_builddir.
os.environ["top_builddir"] = TOP_BUILD
sys.path.insert(0, os.path.join(TOP_SRC, "python"))
sys.path.insert(0, os.path.join(TOP_SRC, "tests", "worker"))
import lib  # noqa: E402
import remat  # noqa: E402
from chains import CHAINS  # noqa: E402

CLI, REMATD, WORKER = lib.REMAT, lib.REMATD, lib.WORKER


def plan_cli(profile, algorithm, budget=None, segments=None):
    """A plan from the built `remat plan` (libremat, as rematd plans)."""
    if not os.access(CLI, os.X_OK):
        pytest.skip("cli/remat is not built")
    args = [CLI, "plan", "--algorithm", algorithm]
    if budget is not None:
        args += ["--budget", str(budget)]
    if segments is not None:
        args += ["--segments", str(segments)]
    r = subprocess.run(args + ["-"], input=json.dumps(profile).encode(), capture_output=True)
    if r.returncode != 0:
        return None, r.stderr.decode()
    return json.loads(r.stdout), None


@pytest.fixture(scope="session")
def cli():
    return plan_cli


class Server(lib.Run):
    """rematd (leases of 10 s) and CPU workers, in a folder of their own."""

    def __init__(self, workers):
        super().__init__("remat-py-")
        self.start_rematd("--lease-seconds", "10")
        for k in range(workers):
            self.start_worker("py%d" % k)


@pytest.fixture(scope="session")
def server():
    """rematd on a free loopback port with one CPU worker."""
    for prog in (REMATD, WORKER):
        if not os.access(prog, os.X_OK):
            pytest.skip("%s is not built" % prog)
    s = Server(workers=1)
    yield s
    s.stop()
    shutil.rmtree(s.tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def plans(cli):
    """Per chain: its profile (measured here) and plans of every kind."""
    out = {}
    for name, (make, inp) in CHAINS.items():
        torch.manual_seed(0)
        prof = remat.profile_local(make(), inp(), warmup=0, repeats=1, model=name)
        got = []
        for alg, kw in (("store-all", {}), ("sqrt", {}), ("uniform", {"segments": 3}),
                        ("min-peak", {})):
            p, err = cli(prof, alg, **kw)
            assert p is not None, err
            got.append(("%s %s" % (name, alg), p))
        # Every module its own segment: the per-module and Megatron shape.
        p, err = cli(prof, "uniform", segments=len(prof["stages"]))
        assert p is not None, err
        got.append(("%s uniform-n" % name, p))
        top = got[0][1]["peak_bytes"]
        for frac in (0.45, 0.55, 0.65, 0.75, 0.85):
            p, _ = cli(prof, "min-time", budget=int(top * frac))
            if p is not None:
                got.append(("%s min-time %.2f" % (name, frac), p))
        out[name] = (prof, got)
    # Measured chains this small rarely need a multi-level schedule; sizes
    # where activations dominate and vary give nested ones for the executor.
    prof, got = out["deep"]
    syn = {"format": "remat.profile/v1", "input_bytes": 1000,
           "stages": [{"out_bytes": 1000 * (1 + i % 3), "saved_bytes": 2000 * (1 + i % 3),
                       "fwd_ms": 1.0 + i % 4, "bwd_ms": 2.0 + i % 4}
                      for i in range(len(prof["stages"]))]}
    top, _ = cli(syn, "store-all")
    for frac in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
        p, err = cli(syn, "min-time", budget=int(top["peak_bytes"] * frac))
        assert p is not None, err
        got.append(("deep synthetic min-time %.1f" % frac, p))
    return out


def all_plans(plans):
    for name, (prof, got) in plans.items():
        for label, p in got:
            yield name, label, p
