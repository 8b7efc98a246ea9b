"""Everything the remat package raises, under one base: RematError.

`except remat.RematError` catches any of them, as requests' RequestException
or httpx's HTTPError do for theirs.  Those that stand for a built-in kind of
error subclass that built-in too, so that code written against the built-in
(`except ValueError` around a plan check) still catches them.

Standard library only: the client imports this module without torch.
"""
import http.client


class RematError(Exception):
    """Anything the remat package raises."""


class TransportError(RematError):
    """No usable answer after the retries: connection refused or reset,
    timeouts, truncated or unparsable bodies."""


class ProblemError(RematError):
    """An RFC 9457 (7807) problem answered by rematd."""

    def __init__(self, status, problem, method="", url=""):
        self.status = status
        self.problem = problem if isinstance(problem, dict) else {}
        p = self.problem
        self.type = p.get("type", "about:blank")
        self.title = p.get("title", http.client.responses.get(status, "error"))
        self.detail = p.get("detail", "")
        self.pointer = p.get("pointer")
        self.instance = p.get("instance")
        self.request_id = p.get("request_id")
        self.method, self.url = method, url
        where = " at %s" % self.pointer if self.pointer else ""
        super().__init__("%s %s: %d %s: %s%s" % (method, url, status, self.title, self.detail, where))


class InfeasibleError(ProblemError):
    """No schedule fits the budget; min_budget_bytes is the least that does."""

    @property
    def min_budget_bytes(self):
        return self.problem.get("min_budget_bytes")


class JobFailed(RematError):
    """A profiling or validation job that ended failed; .job has it."""

    def __init__(self, job):
        self.job = job
        super().__init__("job %s failed: %s" % (job.get("id"), job.get("error", "no reason")))


class JobTimeout(RematError, TimeoutError):
    """A job still not done when Client.wait's timeout ran out."""


class PlanError(RematError, ValueError):
    """A plan that cannot run on the chain it is given."""


class UsageError(RematError, ValueError):
    """An argument remat cannot use (a budget with an algorithm that takes
    none, an engine it does not have, a server URL that is not http(s))."""


class ChainError(RematError, TypeError):
    """What was given as a chain is not one: a block that is not a module,
    or a stage that does not return one tensor."""


class CommandError(RematError, RuntimeError):
    """The `remat` program, which plans without a server, failed or is not
    there."""


class UntraceableError(RematError, TypeError):
    """torch.fx cannot trace the model's forward: .module is the path of the
    module whose forward holds the call (as model.named_modules() names
    it; "" for the model's own forward), .call the file, line and source of
    that call, .cause fx's own message."""

    def __init__(self, module, call, cause, model="the model"):
        self.module, self.call, self.cause = module, call, cause
        where = "%s (in %s)" % (module, model) if module else "%s's own forward" % model
        super().__init__("torch.fx cannot trace %s: %s%s (give remat an nn.Sequential, or "
                         "make this call traceable)" % (where, cause,
                                                        " at " + call if call else ""))
