"""Command-line options and calls, read from the source: an
``add_argument`` call's destination and default, a dataclass body's fields
and their defaults, the parameters a call gives, the call a process start
makes."""

from __future__ import annotations

import libcst as cst

from loadlint.facts.names import ClassFacts, FunctionFacts
from loadlint.facts.resolve import UNKNOWN, Namespace, Option, Origin, Scope, evaluate

_CONVERT = {"int": int, "float": float, "str": str}


def keyword_value(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def argparse_option(call: cst.Call, scope: Scope) -> tuple[str, Option] | None:
    """(dest, default) of one ``add_argument`` call."""
    flags = [evaluate(a.value, scope) for a in call.args if a.keyword is None and not a.star]
    if not flags or not all(isinstance(f, str) for f in flags):
        return None
    long = [f for f in flags if f.startswith("--")]
    flag = long[0] if long else flags[0]
    dest_expr = keyword_value(call, "dest")
    dest = evaluate(dest_expr, scope) if dest_expr is not None else flag.lstrip("-").replace("-", "_")
    if not isinstance(dest, str):
        return None
    action = evaluate(keyword_value(call, "action"), scope) if keyword_value(call, "action") is not None else "store"
    default_expr = keyword_value(call, "default")
    if not flag.startswith("-") or evaluate(keyword_value(call, "required"), scope) is True:
        return dest, Option(UNKNOWN)
    if action in ("store_true", "store_false") and default_expr is None:
        value = action == "store_false"
        return dest, Option(value, Origin(f"without `{flag}`"))
    if action != "store" or default_expr is None:
        return dest, Option(UNKNOWN)
    value = evaluate(default_expr, scope)
    type_expr = keyword_value(call, "type")
    if isinstance(value, str) and type_expr is not None:
        # argparse converts a string default with ``type``.
        convert = _CONVERT.get(type_expr.value) if type(type_expr) is cst.Name else None
        try:
            value = convert(value) if convert is not None else UNKNOWN
        except ValueError:
            value = UNKNOWN
    return dest, Option(value, Origin(f"with the default `{flag} {value}`", default_expr))


def dataclass_fields(cls: ClassFacts, scope: Scope) -> dict[str, Option | Namespace]:
    """Field name -> default of a dataclass body (``x: int = 4``,
    ``x: int = field(default=4)``); a field without one is unknown."""
    out: dict[str, Option | Namespace] = {}
    body = cls.node.body
    statements = body.body if type(body) is cst.IndentedBlock else ()
    for statement in statements:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is not cst.AnnAssign or type(small.target) is not cst.Name:
                continue
            name, default = small.target.value, small.value
            if type(default) is cst.Call and type(default.func) is cst.Name and default.func.value == "field":
                default = keyword_value(default, "default")
            if default is None:
                out[name] = Option(UNKNOWN)
                continue
            value = evaluate(default, scope)
            out[name] = Option(value, Origin(f"with the default `{cls.name}.{name} = {value!r}`", default))
    return out


def parameters(fn: FunctionFacts) -> list[cst.Param]:
    params = fn.node.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def passes(call: cst.Call, index: int | None, name: str) -> bool:
    """The call gives the parameter at ``index`` (positional) or named ``name``."""
    positional = sum(1 for arg in call.args if arg.keyword is None)
    return (index is not None and index < positional) or any(
        arg.keyword is not None and arg.keyword.value == name for arg in call.args
    )


def spawned_call(node: cst.Call, spawn: bool) -> cst.Call | None:
    """The call a process start makes, as if written: the target's
    parameters receive what ``args=`` passes (``mp.spawn``'s first one is
    the process index); None when the target or what it gets is not plain."""
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    target = keyword_value(node, "fn" if spawn else "target")
    given = keyword_value(node, "args")
    if spawn:
        target = target if target is not None else (positional[0] if positional else None)
        given = given if given is not None else (positional[1] if len(positional) > 1 else None)
    if type(target) is not cst.Name or any(a.star for a in node.args) or keyword_value(node, "kwargs") is not None:
        return None
    if given is not None and not (isinstance(given, (cst.Tuple, cst.List))
                                  and all(type(e) is cst.Element for e in given.elements)):
        return None
    args = [cst.Arg(cst.Integer("0"))] if spawn else []
    args += [cst.Arg(e.value) for e in getattr(given, "elements", ())]
    return cst.Call(func=cst.Name(target.value), args=args)
