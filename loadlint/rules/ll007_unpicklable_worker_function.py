from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from loadlint.facts.datasets import helper
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import ClassFacts, FunctionFacts
from loadlint.rules.base import Context, FixSpec, Report, Rule, Scope
from loadlint.rules.shared import code_of, module_spawn_reason, workers_on

#: How many factories deep a worker function is followed (``make()`` returning ``make_inner()``).
_MAX_FACTORY_DEPTH = 4


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
    #: What to do instead, when the rule's general advice does not fit.
    action: str | None = None


def _captures(names: set[str], own: set[str], scope: Scope | None) -> frozenset[str]:
    out = set()
    for name in names - own:
        found = scope.lookup(name) if scope is not None else None
        if found is not None and found[0].kind == "function":
            out.add(name)
    return frozenset(out)


def _lambda_problem(ctx: Context, node: cst.Lambda, param: str) -> PickleProblem:
    facts = ctx.names.lambdas.get(id(node))
    captures = _captures(facts.names_used, facts.params, facts.scope) if facts else frozenset({"?"})
    return PickleProblem(param, "is a lambda", node, captures)


def _instance_problem(ctx: Context, target: cst.BaseExpression, scope: Scope | None) -> str | None:
    """``Local()`` where ``Local`` is a class defined inside a function."""
    if type(target) is cst.Call and type(target.func) is cst.Name and scope is not None:
        definition = ctx.names.definition(target.func.value, scope)
        if isinstance(definition, ClassFacts) and definition.nested:
            return definition.name
    return None


def _nested_definition_problem(ctx: Context, name: str, scope: Scope, param: str) -> PickleProblem | None:
    definition = ctx.names.definition(name, scope)
    if isinstance(definition, FunctionFacts) and definition.nested:
        outer = definition.scope.parent
        where = f"inside `{outer.name}()`" if outer is not None and outer.kind == "function" else "inside a function"
        movable = None
        if definition.class_name is None and outer is not None and outer.kind == "function":
            movable = definition.node
        own = set(definition.scope.bindings) | {definition.name}
        return PickleProblem(param, f"is a function defined {where}", movable, _captures(definition.names_used, own, outer))
    if isinstance(definition, ClassFacts) and definition.nested:
        return PickleProblem(param, f"is `{definition.name}`, a class defined inside a function")
    return None


def _factory_problem(
    ctx: Context, target: cst.BaseExpression, scope: Scope | None, call: LoaderCall, param: str, depth: int
) -> PickleProblem | None:
    """``make_collate()``, a function of this module every ``return`` of
    which gives something that cannot be pickled."""
    factory = helper(ctx.names, target, scope)
    if factory is None or depth >= _MAX_FACTORY_DEPTH:
        return None
    problems = [
        callable_problem(ctx, value, factory.scope, call, param, depth + 1) if value is not None else None
        for value in ctx.datasets.returns.get(factory, ())
    ]
    first = problems[0] if problems and all(problems) else None
    if first is None:
        return None
    action = first.action or (
        f"make `{factory.name}()` return a module-level function (`functools.partial` can carry its settings)"
    )
    return PickleProblem(param, f"is what `{factory.name}()` returns, which {first.why}", action=action)


def callable_problem(
    ctx: Context, expr: cst.BaseExpression | None, scope: Scope | None, call: LoaderCall, param: str = "",
    depth: int = 0,
) -> PickleProblem | None:
    """Why a worker callable (``collate_fn``, ``worker_init_fn``) cannot be
    pickled, also through variables and factories of this module."""
    if expr is None:
        return None
    if type(expr) is cst.Lambda:
        return _lambda_problem(ctx, expr, param)
    target, owner = ctx.follow(expr, scope)
    if type(target) is cst.Lambda:
        return _lambda_problem(ctx, target, param)
    if type(target) is cst.Name and owner is not None:
        problem = _nested_definition_problem(ctx, target.value, owner, param)
        if problem is not None:
            return problem
    problem = _factory_problem(ctx, target, owner, call, param, depth)
    if problem is not None:
        return problem
    local = _instance_problem(ctx, target, owner)
    if local:
        return PickleProblem(param, f"is an instance of `{local}`, a class defined inside a function")
    if type(expr) is cst.Attribute:
        base = expr.value
        if type(base) is cst.Name and base.value == "self" and call.class_name is not None:
            cls = ctx.names.classes.get(call.class_name)
            if cls is not None and cls.nested:
                return PickleProblem(param, f"is a method of `{cls.name}`, a class defined inside a function")
        base_target, base_scope = ctx.follow(base, scope)
        local = _instance_problem(ctx, base_target, base_scope)
        if local:
            return PickleProblem(param, f"is a method of `{local}`, a class defined inside a function")
    if type(target) is cst.Call and id(target) in ctx.names.calls_with_lambda:
        return PickleProblem(param, "wraps a lambda")
    return None


def dataset_pickle_problem(ctx: Context, call: LoaderCall) -> PickleProblem | None:
    """The dataset (pickled for every spawned worker) carries a lambda, a
    nested function or an instance of a local class."""
    expr = call.expr("dataset")
    if expr is None:
        return None
    target, scope = ctx.follow(expr, call.scope)
    if type(target) is not cst.Call or scope is None:
        return None
    local = _instance_problem(ctx, target, scope)
    if local:
        return PickleProblem("dataset", f"is an instance of `{local}`, a class defined inside a function")
    names = ctx.names
    if id(target) in names.calls_with_lambda:
        return PickleProblem("dataset", "is built with a lambda among its arguments")
    for name in sorted(names.call_names.get(id(target), ())):
        bound, _ = ctx.follow(cst.Name(name), scope)
        if type(bound) is cst.Lambda:
            return PickleProblem("dataset", f"is built with `{name}`, a lambda")
        if type(bound) is cst.Call and id(bound) in names.calls_with_lambda:
            return PickleProblem("dataset", f"is built with `{name}`, which holds a lambda")
        definition = names.definition(name, scope)
        if isinstance(definition, FunctionFacts) and definition.nested and definition.class_name is None:
            return PickleProblem("dataset", f"is built with `{name}`, a function defined inside a function")
    return None


def pickle_problems(ctx: Context, call: LoaderCall) -> list[PickleProblem]:
    """LL007's condition, without the worker count and start-method gates."""
    problems = []
    for param in ("collate_fn", "worker_init_fn"):
        problem = callable_problem(ctx, call.expr(param), call.scope_of(param), call, param)
        if problem is not None:
            problems.append(problem)
    problem = dataset_pickle_problem(ctx, call)
    if problem is not None:
        problems.append(problem)
    return problems


def _subject(call: LoaderCall, param: str) -> str:
    """How a message names what a problem comes through: the variable the
    call passes as its dataset (``train_dataset``), not the parameter."""
    if param != "dataset":
        return f"`{param}`"
    expr = call.expr("dataset")
    return f"`{expr.value}`" if type(expr) is cst.Name else "the dataset"


class UnpicklableWorkerFunction(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with workers whose `collate_fn` or
    `worker_init_fn` cannot be pickled: a lambda, a function defined inside
    another function (also through a variable, or returned by a factory
    function of the module), or an instance or bound method of a class defined
    inside a function; and for datasets built with such a function among
    their arguments (`transform=transforms.Lambda(lambda x: ...)`, also
    inside a `Compose([...])`).  It reports them when the workers may be
    started with spawn or forkserver:

    - the target platform is macOS or Windows (spawn is the default there);
    - the target is Linux with Python 3.14 or later (the default became
      forkserver);
    - `multiprocessing_context="spawn"` or `"forkserver"`, or
      `set_start_method("spawn")` in the module;
    - the target does not declare `platform` and `python` (the portable
      answer: the same script will run on a laptop or a newer Python).

    It is silent with `multiprocessing_context="fork"`, without workers, and
    when the number of workers cannot be resolved.

    Project analysis follows a lambda passed to a loader factory of another
    module (`make_loader(ds, collate_fn=lambda b: b)`): the finding is on
    the factory's `DataLoader(` line, naming the call, with the worker count
    that call gives.

    ## Why is this bad?
    Spawned workers start a fresh interpreter and receive the dataset, the
    `collate_fn` and the `worker_init_fn` by pickle, which stores functions
    by their importable name.  Lambdas and local functions have none, and the
    first batch fails (after a warning from torch that the start method may
    be the cause):

    ```
    _pickle.PicklingError: Can't pickle <function <lambda> at 0x7f...>: attribute lookup <lambda> on __main__ failed
    AttributeError: Can't pickle local object 'main.<locals>.collate'
    AttributeError: Can't pickle local object 'make_collate.<locals>.collate'
    ```

    (the last one for a function that a factory, `make_collate(pad)`,
    defines and returns).  The code works on Linux with fork, so the crash
    shows up on a colleague's Mac, on Windows, or after moving to Python
    3.14.

    ## Example
    ```python
    def main():
        def collate(batch):
            return torch.stack(batch)

        loader = DataLoader(dataset, batch_size=32, num_workers=4, collate_fn=collate)
    ```

    Use instead:
    ```python
    def collate(batch):
        return torch.stack(batch)


    def main():
        loader = DataLoader(dataset, batch_size=32, num_workers=4, collate_fn=collate)
    ```

    ## Fix safety
    The fix moves the function to module level: a lambda becomes a
    module-level `def` (named after the argument, `_collate_fn`) inserted
    before the top-level statement that contains it, and a nested `def` is
    moved there.  It is offered only when the function reads no local names
    of the enclosing functions (moving it would break them; bind them with
    `functools.partial` instead), and is then safe: the function behaves the
    same wherever it is defined.  Local classes and datasets built with
    lambdas have no fix.

    ## References
    - [PyTorch: Platform-specific behaviors](https://pytorch.org/docs/stable/data.html#platform-specific-behaviors)
    - [pickle: What can be pickled and unpickled?](https://docs.python.org/3/library/pickle.html#what-can-be-pickled-and-unpickled)
    - [Python 3.14: default start method changes](https://docs.python.org/3.14/library/multiprocessing.html#contexts-and-start-methods)
    """

    code = "LL007"
    name = "unpicklable-worker-function"
    category = "crash"
    summary = "a lambda or local function reaches spawned workers (pickling error at the first batch)"
    fix_availability = "sometimes"
    needs_hardware = True
    hazard_order = 1

    def worker_hazards(self, ctx: Context, call: LoaderCall) -> list[str]:
        problems = pickle_problems(ctx, call)
        why = module_spawn_reason(ctx, call) if problems else None
        if why is None:
            return []
        return [f"{_subject(call, p.param)} {p.why} (cannot be pickled for spawned workers: {why})" for p in problems]

    def check(self, ctx: Context) -> Iterator[Report]:
        taken = ctx.names.bound_names()
        for call in ctx.calls:
            if not workers_on(call):
                continue
            problems = pickle_problems(ctx, call)
            if not problems:
                continue
            why = module_spawn_reason(ctx, call)
            if why is None:
                continue
            for problem in problems:
                subject = "the dataset" if problem.param == "dataset" else f"`{problem.param}`"
                action = problem.action or (
                    "build it from module-level functions" if problem.param == "dataset" else "define it at module level"
                )
                message = (
                    f"{subject} {problem.why}: workers started with spawn or forkserver cannot pickle it, so the first "
                    f"batch fails ({why}); {action}"
                )
                yield Report(call.node, message, self._fix(ctx, problem, taken))

    @staticmethod
    def _fix(ctx: Context, problem: PickleProblem, taken: set[str]) -> FixSpec | None:
        node = problem.movable
        if node is None or problem.captures:
            return None
        if isinstance(node, cst.Lambda):
            base = f"_{problem.param}"
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            taken.add(name)
            code = f"def {name}({code_of(node.params)}):\n    return {code_of(node.body)}\n\n\n"
            return FixSpec(
                "safe", f"Move the lambda to a module-level function `{name}`", replace=[(node, name)], hoist=[(node, code)]
            )
        name = node.name.value
        names = ctx.names
        if name in names.module_scope.bindings or name in names.imports.names:
            return None
        outer = next(
            (fn for fn in names.functions if any(stmt is node for stmt in getattr(fn.node.body, "body", ()))), None
        )
        if outer is None or len(outer.node.body.body) < 2:
            return None
        code = code_of(node.with_changes(leading_lines=[])) + "\n\n"
        return FixSpec("safe", f"Move `{name}` to module level", hoist=[(node, code)])
