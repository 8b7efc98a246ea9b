"""remat for PyTorch users: plan activation checkpoints with rematd (or
libremat's rules) and run the plan in a training step.

The client (remat.Client) needs only the standard library; torch is imported
when a model is touched (apply, checkpoint, profile_local).
"""
from ._exceptions import (ChainError, CommandError, InfeasibleError, JobFailed, JobTimeout,
                          PlanError, ProblemError, RematError, TransportError, UntraceableError,
                          UsageError)
from ._plan import check_schedule, schedule_of, single_level_schedule
from .client import Client, Job

__version__ = "0.1.0"

__all__ = ["Client", "Job", "RematError", "ProblemError", "TransportError", "InfeasibleError",
           "JobFailed", "JobTimeout", "PlanError", "UsageError", "ChainError", "CommandError",
           "UntraceableError", "apply", "checkpoint", "profile_local", "stages", "exports",
           "schedule_of",
           "check_schedule", "single_level_schedule", "__version__"]


def apply(blocks, plan, **kw):
    """See remat._apply.apply."""
    from ._apply import apply as _apply
    return _apply(blocks, plan, **kw)


def checkpoint(model, sample_input, **kw):
    """See remat._one.checkpoint."""
    from ._one import checkpoint as _checkpoint
    return _checkpoint(model, sample_input, **kw)


def stages(model, sample_input, trace=None):
    """See remat._graph.stages_of."""
    from ._graph import stages_of
    return stages_of(model, sample_input, trace)


def profile_local(blocks, sample_input, device=None, **kw):
    """See remat._profile.profile_local."""
    from ._profile import profile_local as _profile_local
    return _profile_local(blocks, sample_input, device, **kw)


def exports(plan, names=None):
    """See remat._exports.exports."""
    from ._exports import exports as _exports
    return _exports(plan, names)
