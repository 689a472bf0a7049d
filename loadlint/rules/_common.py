"""Helpers several rules share: the worker suggestion and the hazards that
make turning workers on unsafe."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from loadlint.callsites import ClassFacts, FunctionFacts, LoaderCall, ModuleInfo
from loadlint.hardware import ranks_per_node, suggest_num_workers
from loadlint.resolve import MISSING, UNKNOWN, Scope, dotted_name, evaluate, follow_name
from loadlint.rules.base import Context
from loadlint.types import HardwareProfile


def ranks(ctx: Context) -> int:
    return ranks_per_node(ctx.profile, ctx.distributed)


def suggested_workers(ctx: Context, call: LoaderCall) -> int:
    # Only a batch size written at the call caps the suggestion: the default
    # of 1 says nothing about how heavy a sample is.
    batch = call.value("batch_size")
    batch_size = batch if type(batch) is int and batch > 0 else None
    return suggest_num_workers(ctx.profile, ranks(ctx), batch_size)


def profile_note(ctx: Context) -> str:
    note = ctx.profile.label
    if ctx.distributed and ranks(ctx) > 1:
        note += f", {ranks(ctx)} ranks per node"
    return note


def unpicklable_callable(expr: cst.BaseExpression | None, call: LoaderCall, info: ModuleInfo | None = None) -> str | None:
    """Why a worker callable cannot be pickled for spawn/forkserver workers."""
    problem = callable_problem(expr, call.scope, call, info)
    return problem.why if problem else None


@dataclass
class PickleProblem:
    """Something a worker needs that pickle cannot carry to a spawned process."""

    #: The DataLoader argument it comes through ("collate_fn", "dataset"...).
    param: str
    why: str
    #: The lambda or nested ``def`` that could move to module level.
    movable: cst.Lambda | cst.FunctionDef | None = None
    #: Local names it reads from enclosing functions (moving it would break them).
    captures: frozenset[str] = frozenset()


def _captures(names: set[str], own: set[str], scope: Scope | None) -> frozenset[str]:
    out = set()
    for name in names - own:
        found = scope.lookup(name) if scope is not None else None
        if found is not None and found[0].kind == "function":
            out.add(name)
    return frozenset(out)


def _lambda_problem(node: cst.Lambda, param: str, info: ModuleInfo | None) -> PickleProblem:
    facts = info.lambdas.get(id(node)) if info is not None else None
    captures = _captures(facts.names_used, facts.params, facts.scope) if facts else frozenset({"?"})
    return PickleProblem(param, "is a lambda", node, captures)


def _instance_problem(target: cst.BaseExpression, scope: Scope | None, info: ModuleInfo) -> str | None:
    """``Local()`` where ``Local`` is a class defined inside a function."""
    if isinstance(target, cst.Call) and isinstance(target.func, cst.Name) and scope is not None:
        definition = info.definition(target.func.value, scope)
        if isinstance(definition, ClassFacts) and definition.nested:
            return definition.name
    return None


def callable_problem(
    expr: cst.BaseExpression | None, scope: Scope | None, call: LoaderCall, info: ModuleInfo | None, param: str = ""
) -> PickleProblem | None:
    if expr is None:
        return None
    if isinstance(expr, cst.Lambda):
        return _lambda_problem(expr, param, info)
    target, owner = follow_name(expr, scope)
    if isinstance(target, cst.Lambda):
        return _lambda_problem(target, param, info)
    if isinstance(expr, cst.Name) and scope is not None:
        if info is None:
            found = scope.lookup(expr.value)
            if found is not None and found[0].kind == "function" and found[1][0].value is None:
                return PickleProblem(param, "is defined inside a function")
            return None
        definition = info.definition(expr.value, scope)
        if isinstance(definition, FunctionFacts) and definition.nested:
            outer = definition.scope.parent
            where = f"inside `{outer.name}()`" if outer is not None and outer.kind == "function" else "inside a function"
            movable = None
            if definition.class_name is None and outer is not None and outer.kind == "function":
                movable = definition.node
            own = set(definition.scope.bindings) | {definition.name}
            return PickleProblem(
                param,
                f"is a function defined {where}",
                movable,
                _captures(definition.names_used, own, outer),
            )
        if isinstance(definition, ClassFacts) and definition.nested:
            return PickleProblem(param, f"is `{definition.name}`, a class defined inside a function")
    if info is None:
        return None
    local = _instance_problem(target, owner, info)
    if local:
        return PickleProblem(param, f"is an instance of `{local}`, a class defined inside a function")
    if isinstance(expr, cst.Attribute):
        base = expr.value
        if isinstance(base, cst.Name) and base.value == "self" and call.class_name is not None:
            cls = info.classes.get(call.class_name)
            if cls is not None and cls.nested:
                return PickleProblem(param, f"is a method of `{cls.name}`, a class defined inside a function")
        base_target, base_scope = follow_name(base, scope)
        local = _instance_problem(base_target, base_scope, info)
        if local:
            return PickleProblem(param, f"is a method of `{local}`, a class defined inside a function")
    if isinstance(target, cst.Call) and id(target) in info.calls_with_lambda:
        return PickleProblem(param, "wraps a lambda")
    return None


def dataset_pickle_problem(info: ModuleInfo, call: LoaderCall) -> PickleProblem | None:
    """The dataset (pickled for every spawned worker) carries a lambda, a
    nested function or an instance of a local class."""
    expr = call.expr("dataset")
    if expr is None:
        return None
    target, scope = follow_name(expr, call.scope)
    if not isinstance(target, cst.Call) or scope is None:
        return None
    local = _instance_problem(target, scope, info)
    if local:
        return PickleProblem("dataset", f"is an instance of `{local}`, a class defined inside a function")
    if id(target) in info.calls_with_lambda:
        return PickleProblem("dataset", "is built with a lambda among its arguments")
    for name in sorted(info.call_names.get(id(target), ())):
        bound, _ = follow_name(cst.Name(name), scope)
        if isinstance(bound, cst.Lambda):
            return PickleProblem("dataset", f"is built with `{name}`, a lambda")
        if isinstance(bound, cst.Call) and id(bound) in info.calls_with_lambda:
            return PickleProblem("dataset", f"is built with `{name}`, which holds a lambda")
        definition = info.definition(name, scope)
        if isinstance(definition, FunctionFacts) and definition.nested and definition.class_name is None:
            return PickleProblem("dataset", f"is built with `{name}`, a function defined inside a function")
    return None


def pickle_problems(info: ModuleInfo, call: LoaderCall) -> list[PickleProblem]:
    """LL007's condition, without the worker count and start-method gates."""
    problems = []
    for param in ("collate_fn", "worker_init_fn"):
        arg = call.args.get(param)
        scope = call.scope
        expr = arg.value if arg is not None else None
        if expr is None and param in call.dict_args:
            expr, scope = call.dict_args[param]
        problem = callable_problem(expr, scope, call, info, param)
        if problem is not None:
            problems.append(problem)
    problem = dataset_pickle_problem(info, call)
    if problem is not None:
        problems.append(problem)
    return problems


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in str(text).split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def torch_before_2(profile: HardwareProfile) -> bool:
    version = _version(profile.torch)
    return bool(version) and version < (2,)


def _context_method(expr: cst.BaseExpression, scope: Scope | None) -> object:
    """The start method a ``multiprocessing_context`` argument names, or UNKNOWN."""
    value = evaluate(expr, scope)
    if value is not UNKNOWN:
        return value
    target, owner = follow_name(expr, scope)
    if isinstance(target, cst.Call) and (dotted_name(target.func) or "").endswith("get_context") and target.args:
        return evaluate(target.args[0].value, owner)
    return UNKNOWN


def spawn_reason(profile: HardwareProfile, call: LoaderCall | None = None, info: ModuleInfo | None = None) -> str | None:
    """Why worker processes may start with spawn or forkserver (which pickle
    everything the workers need); None when they certainly fork.

    The one place that decides the start method: LL007 and the notebook rule
    read it.  Without a declared platform and Python the answer is the
    portable one (they may spawn): the same script runs on a laptop, and
    Python 3.14 made forkserver Linux's default.
    """
    if call is not None:
        expr = call.expr("multiprocessing_context")
        if expr is not None:
            scope = call.scope
            entry = call.dict_args.get("multiprocessing_context")
            if "multiprocessing_context" not in call.args and entry is not None:
                scope = entry[1]
            method = _context_method(expr, scope)
            if method == "fork":
                return None
            if method in ("spawn", "forkserver"):
                return f'`multiprocessing_context="{method}"`'
    if info is not None and info.start_methods:
        spawning = sorted(info.start_methods & {"spawn", "forkserver"})
        if spawning:
            return f'`set_start_method("{spawning[0]}")`'
        if info.start_methods == {"fork"}:
            return None
    declared = profile.declared
    if "platform" not in declared:
        return "no target platform is declared, and macOS and Windows spawn workers"
    if profile.platform in ("macos", "windows"):
        return f"the target platform is {profile.platform}, where workers are spawned"
    if profile.platform != "linux":
        return None
    if "python" not in declared:
        return "no target Python is declared, and from 3.14 Linux starts workers with forkserver"
    if _version(profile.python) >= (3, 14):
        return f"Python {profile.python} on Linux starts workers with forkserver"
    return None


def workers_on(call: LoaderCall) -> bool:
    """``num_workers`` resolves to a positive int."""
    value = call.workers()
    return type(value) is int and value > 0


def workers_off(call: LoaderCall) -> bool:
    """``num_workers`` is missing or resolves to 0 (single-process loading)."""
    value = call.workers()
    return type(value) is int and value == 0


def class_hierarchy(info: ModuleInfo, cls: ClassFacts) -> list[ClassFacts]:
    """The class and its local bases, nearest first."""
    out = [cls]
    queue = list(cls.bases)
    while queue and len(out) < 20:
        name = queue.pop(0)
        base = info.classes.get(name)
        if base is not None and base not in out:
            out.append(base)
            queue.extend(base.bases)
    return out


def method_of(info: ModuleInfo, cls: ClassFacts, name: str) -> FunctionFacts | None:
    for klass in class_hierarchy(info, cls):
        if name in klass.methods:
            return klass.methods[name]
    return None


def dataset_class_facts(info: ModuleInfo, call: LoaderCall):
    _, cls = info.dataset_class(call)
    return cls


_WORKER_METHODS = ("__init__", "__getitem__", "__getitems__", "__iter__")


def _callable_facts(info: ModuleInfo, expr: cst.BaseExpression | None, scope: Scope | None):
    if expr is None:
        return None
    target, owner = follow_name(expr, scope)
    if isinstance(target, cst.Lambda):
        return info.lambdas.get(id(target))
    if isinstance(expr, cst.Name) and scope is not None:
        definition = info.definition(expr.value, scope)
        if isinstance(definition, FunctionFacts):
            return definition
    return None


def cuda_in_worker(info: ModuleInfo, call: LoaderCall) -> str | None:
    """LL105's condition without the worker gate: what touches CUDA in a worker."""
    cls = dataset_class_facts(info, call)
    if cls is not None:
        for name in _WORKER_METHODS:
            method = method_of(info, cls, name)
            if method is not None and method.cuda:
                return f"`{cls.name}.{name}`"
    for param in ("collate_fn", "worker_init_fn"):
        facts = _callable_facts(info, call.expr(param), call.scope)
        if facts is not None and facts.cuda:
            return f"`{param}`"
    return None


def dataset_touches_cuda(info: ModuleInfo, call: LoaderCall) -> bool:
    cls = dataset_class_facts(info, call)
    if cls is None:
        return False
    return any(
        method is not None and method.cuda
        for method in (method_of(info, cls, name) for name in _WORKER_METHODS)
    )


_DATAPIPE = ("torch.utils.data.IterDataPipe", "torch.utils.data.datapipes.datapipe.IterDataPipe")


def unsharded_iterable(info: ModuleInfo, call: LoaderCall) -> str | None:
    """LL104's condition without the worker gate: the name of a local
    IterableDataset whose ``__iter__`` never asks which worker it runs in."""
    if call.value("worker_init_fn") is not MISSING:
        return None
    cls = dataset_class_facts(info, call)
    if cls is None or info.is_iterable_dataset(call) is not True:
        return None
    if any(b in _DATAPIPE for b in info.class_bases(cls)):
        return None
    if method_of(info, cls, "__iter__") is None:
        return None
    if any(m.calls_get_worker_info for klass in class_hierarchy(info, cls) for m in klass.methods.values()):
        return None
    return cls.name


_DRAW_METHODS = ("__getitem__", "__getitems__", "__iter__")


def shared_rng(info: ModuleInfo, call: LoaderCall) -> tuple[str, str] | None:
    """LL103's condition without the worker gate: (method, generator) when the
    Dataset draws from one generator instance created before the workers."""
    if call.value("worker_init_fn") is not MISSING:
        return None
    cls = dataset_class_facts(info, call)
    if cls is None:
        return None
    hierarchy = class_hierarchy(info, cls)
    attrs = set()
    for klass in hierarchy:
        init = klass.methods.get("__init__")
        if init is not None:
            attrs |= init.rng_attrs
    for name in _DRAW_METHODS:
        method = method_of(info, cls, name)
        if method is None or method.calls_get_worker_info:
            continue
        used = sorted(method.self_attrs_used & attrs)
        if used:
            return f"{cls.name}.{name}", f"self.{used[0]}"
        used = sorted(method.names_used & info.module_rngs)
        if used:
            return f"{cls.name}.{name}", used[0]
    return None


def worker_hazards(ctx: Context, call: LoaderCall) -> list[str]:
    """Reasons why starting workers at this call may crash or corrupt data:
    the conditions of LL007, LL012, LL103, LL104 and LL105 without their
    worker gate, so that LL201's fix is unsafe exactly where those rules would fire
    after it."""
    info = ctx.info
    reasons = []
    problems = pickle_problems(info, call)
    if problems:
        why = spawn_reason(ctx.profile, call, info)
        if why is not None:
            for problem in problems:
                reasons.append(f"`{problem.param}` {problem.why} (cannot be pickled for spawned workers: {why})")
    if ctx.is_notebook:
        from loadlint.rules.ll012_notebook_worker_code import notebook_hazards

        reasons.extend(notebook_hazards(ctx, call))
    where = cuda_in_worker(info, call)
    if where:
        reasons.append(f"{where} uses CUDA (workers cannot initialise CUDA after fork)")
    name = unsharded_iterable(info, call)
    if name:
        reasons.append(f"the IterableDataset `{name}` does not shard by worker (every worker would yield every sample)")
    rng = shared_rng(info, call)
    if rng:
        reasons.append(f"`{rng[0]}` draws from `{rng[1]}` (every worker would repeat the same random numbers)")
    return reasons


def is_truthy(value: object) -> bool | None:
    """Python truthiness of a known value; None when unknown."""
    from loadlint.resolve import MISSING, UNKNOWN

    if value is UNKNOWN or value is MISSING:
        return None
    return bool(value)


__all__ = [
    "PickleProblem",
    "class_hierarchy",
    "cuda_in_worker",
    "dataset_touches_cuda",
    "pickle_problems",
    "shared_rng",
    "spawn_reason",
    "torch_before_2",
    "unsharded_iterable",
    "workers_on",
    "evaluate",
    "is_truthy",
    "profile_note",
    "ranks",
    "suggested_workers",
    "unpicklable_callable",
    "worker_hazards",
]


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
    if isinstance(target, cst.IfExp):
        branches = (target.body, target.orelse)
        kinds = [sampler_presence(b, owner, _depth + 1) for b in branches]
        if kinds == ["always", "always"]:
            return "always"
        if "always" in kinds and any(evaluate(b, owner) is None for b in branches):
            return "conditional"
        return None
    if isinstance(target, (cst.List, cst.Tuple)) and target.elements:
        return "always"
    if isinstance(target, cst.Call):
        func = target.func
        callee = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if callee[:1].isupper():
            return "always"
    return None


def written_in_call(call: LoaderCall, name: str) -> bool:
    """The argument is written in the call itself (so a fix can edit it),
    not carried by a resolved ``**dict``."""
    return name in call.args


def code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def workers_text(call: LoaderCall) -> str:
    """How the call's worker count reads in a message."""
    return "without `num_workers`" if call.value("num_workers") is MISSING else f"with `num_workers={call.workers()!r}`"


def value_text(call: LoaderCall, name: str) -> str:
    expr = call.expr(name)
    return f"`{name}={code_of(expr)}`" if expr is not None else f"`{name}`"
