"""Plans as rematd and `remat plan` print them: reading and checking the op list.

Standard library only.  A plan is the JSON object of a plan answer; what runs is
its `schedule`, a list of ops `{"op": "F_ck"|"F_none"|"F_all"|"loss"|"B",
"stage": i}` over a chain of n stages (stage i is module i-1 of an
nn.Sequential).
"""

from ._exceptions import PlanError

OPS = ("F_none", "F_ck", "F_all", "loss", "B")


def schedule_of(plan):
    """The plan's op list as (op, stage) tuples, checked for spelling."""
    if not isinstance(plan, dict):
        plan = getattr(plan, "json", None)
    if not isinstance(plan, dict) or not isinstance(plan.get("schedule"), list):
        raise PlanError("a plan is the JSON object of a plan answer, with its schedule")
    out = []
    for k, op in enumerate(plan["schedule"]):
        if not isinstance(op, dict) or op.get("op") not in OPS or \
                not isinstance(op.get("stage"), int) or isinstance(op.get("stage"), bool) \
                or op["stage"] < 1:
            raise PlanError("schedule[%d] is not an op: %r" % (k, op))
        out.append((op["op"], op["stage"]))
    return out


def check_schedule(ops, n):
    """Replays the op list on n stages as remat's simulator orders it: every
    value used exists, nothing is made twice, every stage is back-propagated
    once, in order.  Raises PlanError naming the op at fault."""
    have = {0}          # x_i live (plain or as part of a graph)
    graph = set()       # stages with a forward-with-grad graph (x̄_i)
    delta = None        # the stage whose δ is live
    done_loss = False
    for k, (op, i) in enumerate(ops):
        where = "schedule[%d] (%s %d)" % (k, op, i)
        if i > n:
            raise PlanError("%s: the chain has %d stages" % (where, n))
        if op in ("F_none", "F_ck", "F_all"):
            if i - 1 not in have:
                raise PlanError("%s: its input is not live" % where)
            if done_loss and delta is not None and i > delta:
                raise PlanError("%s: stage is already back-propagated" % where)
            have.add(i)
            if op == "F_all":
                graph.add(i)
        elif op == "loss":
            if done_loss or i != n or n not in have:
                raise PlanError("%s: the loss needs x_n once" % where)
            done_loss = True
            delta = n
        else:
            if not done_loss or delta != i or i not in graph:
                raise PlanError("%s: B needs δ_%d and x̄_%d" % (where, i, i))
            graph.discard(i)
            have.discard(i)
            delta = i - 1
    if not done_loss or delta != 0:
        raise PlanError("the schedule leaves stages not back-propagated")
    return True


def stage_count(plan):
    """n: the largest stage the op list names (the loss names n)."""
    ops = schedule_of(plan)
    return max(i for _, i in ops)


def single_level_schedule(checkpoints, n):
    """The op list remat_schedule_from_checkpoints makes (src/schedule.c):
    every segment but the last forward without grad keeping its input, the
    last with grad, then each earlier segment recomputed with grad and
    back-propagated, last to first."""
    ck = list(checkpoints)
    ops = []
    start = 0
    for end in ck:
        ops.append(("F_ck", start + 1))
        ops.extend(("F_none", j) for j in range(start + 2, end + 1))
        start = end
    last = ck[-1] if ck else 0
    ops.extend(("F_all", j) for j in range(last + 1, n + 1))
    ops.append(("loss", n))
    ops.extend(("B", j) for j in range(n, last, -1))
    for k in range(len(ck), 0, -1):
        end = ck[k - 1]
        begin = ck[k - 2] if k >= 2 else 0
        ops.extend(("F_all", j) for j in range(begin + 1, end + 1))
        ops.extend(("B", j) for j in range(end, begin, -1))
    return ops


def checkpoints_of(ops, n):
    """The checkpoints of a single-level op list, or None when the list is not
    exactly the single-level schedule of any checkpoint set."""
    ck = []
    for op, i in ops:
        if op == "F_all" or op == "loss":
            if op == "F_all" and i > 1:
                ck.append(i - 1)
            break
        if op == "F_ck" and i > 1:
            ck.append(i - 1)
    if single_level_schedule(ck, n) != list(ops):
        return None
    return ck


def segments_of(checkpoints, n):
    """Module ranges [start, end) of each segment, as plans' torch_segments."""
    bounds = [0] + list(checkpoints) + [n]
    return [(bounds[k], bounds[k + 1]) for k in range(len(bounds) - 1)]
