"""The package's exceptions: one base, RematError, for everything it raises
(python/remat/_exceptions.py), each also the built-in kind it stands for,
and all of them reachable as remat.<Name>."""
import inspect

import pytest

import remat
from remat import _exceptions


def classes():
    return [c for _, c in inspect.getmembers(_exceptions, inspect.isclass)
            if issubclass(c, BaseException) and c.__module__ == _exceptions.__name__]


def test_one_base_and_exported():
    cs = classes()
    assert len(cs) >= 10
    for c in cs:
        assert issubclass(c, remat.RematError), c
        assert getattr(remat, c.__name__) is c, c
        assert c.__name__ in remat.__all__, c
    # remat.client keeps the names its callers import from it.
    from remat.client import JobFailed, ProblemError
    assert JobFailed is remat.JobFailed and ProblemError is remat.ProblemError


def test_builtin_kinds():
    assert issubclass(remat.PlanError, ValueError)
    assert issubclass(remat.UsageError, ValueError)
    assert issubclass(remat.ChainError, TypeError)
    assert issubclass(remat.CommandError, RuntimeError)
    assert issubclass(remat.JobTimeout, TimeoutError)
    assert issubclass(remat.InfeasibleError, remat.ProblemError)


def test_raised_as_remat_errors():
    with pytest.raises(remat.RematError):
        remat.schedule_of({"schedule": [{"op": "F_x", "stage": 1}]})
    with pytest.raises(remat.UsageError):
        remat.Client("ftp://example")
    with pytest.raises(remat.RematError):
        remat.Client("http://127.0.0.1:1").plan()
    with pytest.raises(remat.ChainError):
        remat.apply([1, 2], {"schedule": []})
