"""What a DataLoader argument's expression is, beyond its value: a sampler
certainly or conditionally passed, the start method a
``multiprocessing_context`` names.  Several rules ask; they read the
answers here rather than resolving expressions themselves."""

from __future__ import annotations

import libcst as cst

from loadlint.facts.resolve import Point, Scope, dotted_name, evaluate, follow_name, reaching
from loadlint.facts.values import UNKNOWN


def context_method(expr: cst.BaseExpression, scope: Scope | None) -> object:
    """The start method a ``multiprocessing_context`` argument names, or UNKNOWN."""
    value = evaluate(expr, scope)
    if value is not UNKNOWN:
        return value
    target, owner = follow_name(expr, scope)
    if type(target) is cst.Call and (dotted_name(target.func) or "").endswith("get_context") and target.args:
        return evaluate(target.args[0].value, owner)
    return UNKNOWN


def sampler_presence(expr: cst.BaseExpression | None, scope: Scope | None, _depth: int = 0) -> str | None:
    """"always" when a sampler is certainly passed, "conditional" when one
    branch of a conditional passes one and the other None, else None.

    A call counts only when it constructs something (a capitalised callee):
    a helper function may return None.
    """
    if expr is None or _depth > 5:
        return None
    if evaluate(expr, scope) is None:
        return None
    target, owner = follow_name(expr, scope)
    if type(target) is cst.IfExp:
        branches = (target.body, target.orelse)
        kinds = [sampler_presence(b, owner, _depth + 1) for b in branches]
        if kinds == ["always", "always"]:
            return "always"
        if "always" in kinds and any(evaluate(b, owner) is None for b in branches):
            return "conditional"
        return None
    if isinstance(target, (cst.List, cst.Tuple)) and target.elements:
        return "always"
    if type(target) is cst.Call:
        func = target.func
        callee = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
        if callee[:1].isupper():
            return "always"
    return None


def bound_in_branches(expr: cst.BaseExpression, scope: Scope, point: Point | None, node: cst.Call) -> bool:
    """A name bound to ``node`` and to something else (a sampler chosen in
    branches), ``node`` among the bindings a read at ``point`` may see: one
    bound over before the read is not; the others still make the name's
    value depend on the branch (a fix's guard)."""
    if type(expr) is not cst.Name:
        return False
    found = scope.lookup(expr.value)
    if found is None or len(found[1]) < 2:
        return False
    seen = found[1] if point is None else reaching(found[1], point)
    return any(b.value is node for b in seen)
