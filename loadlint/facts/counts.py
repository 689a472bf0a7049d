"""Whether a worker count is at least 1 for every input the program may
get: the test LL204 (a persistent-workers fix) and the project summary (a
loader's workers across modules, LL014) both read."""

from __future__ import annotations

import libcst as cst

from loadlint.facts.resolve import Scope, evaluate, follow_name

_MAX_DEPTH = 8


def positive_count(expr: cst.BaseExpression, scope: Scope | None, cpu_count_calls: set[int], depth: int = 0) -> bool:
    """A positive value (a constant, a command-line or config default),
    ``os.cpu_count()`` (its call's id in ``cpu_count_calls``), ``max`` with a
    positive argument (LL201's ``LOADER_WORKERS``), ``min`` of positive ones,
    or a conditional choosing between positive ones."""
    value = evaluate(expr, scope)
    if type(value) is int:
        return value > 0
    target, owner = follow_name(expr, scope)
    if target is not expr and depth < _MAX_DEPTH:
        return positive_count(target, owner, cpu_count_calls, depth + 1)
    if depth >= _MAX_DEPTH:
        return False
    if type(target) is cst.IfExp:
        return all(positive_count(branch, owner, cpu_count_calls, depth + 1) for branch in (target.body, target.orelse))
    if type(target) is not cst.Call:
        return False
    if id(target) in cpu_count_calls:
        return True
    func, args = target.func, target.args
    if (type(func) is not cst.Name or func.value not in ("max", "min") or not args or any(a.star or a.keyword for a in args)
            or owner is None or owner.lookup(func.value) is not None):
        return False
    signs = [positive_count(arg.value, owner, cpu_count_calls, depth + 1) for arg in args]
    return any(signs) if func.value == "max" else all(signs)
