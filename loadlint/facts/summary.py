"""A module's facts as a plain, serialisable summary for project analysis.

``summarise`` reads the ``ModuleFacts`` of one traversal (no second walk)
and keeps what another module may need to know: the imports, and for each
function (``"<module>"`` for the module body) its parameters and their
defaults, the loaders it builds from them, what it does with the loaders it
is given (iterates them, ``next(iter(...))`` in a loop, moves their batches),
what it returns, the calls it makes with their argument values, and the
names its import descriptors read (``reads``).

Keys are stable (module-level names, ``Class.method``), values are JSON,
typed in ``loadlint.types`` (``Summary``, ``FunctionSummary``, ``Descriptor``).
A value is a descriptor: ``{"value": 4}``, ``{"cpu_count": true}``,
``{"param": "p"}``, ``{"loader": i}`` (the function's i-th loader),
``{"call": i, "index": j}`` (part of the i-th call's result),
``{"import": "config.WORKERS"}`` (a name imported from another module,
which the join resolves to that module's ``constants``),
``{"sampler": i}`` (the function's i-th ``DistributedSampler``),
``{"options": {"DATA.NUM_WORKERS": {"value": 8, "text": ..., "at": i}}}``
(a module-level config tree's known defaults, among the ``constants``);
``config_files`` lists the YAML files the module reads into names,
``{"device": "cuda"}`` (a device whose kind is known but not its value), or
``{}`` (unknown).  A descriptor may carry a ``"note"`` saying where a
value comes from; other fact sources can add one without changing the
shape.  The module's ``flags`` (``cuda``: CUDA evidence as LL202 reads it;
``set_epoch``; ``frameworks`` that drive the loop; ``start_methods``) say
what the single-file rules already see.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, cast

import libcst as cst

from loadlint.facts.accelerator import device_kind
from loadlint.facts.configs import namespace_options, passed_namespace
from loadlint.facts.calls import CallSite, star_names
from loadlint.cst.codegen import code_for_node
from loadlint.facts.collect import ModuleFacts
from loadlint.facts.counts import positive_count
from loadlint.facts.datasets import imported_dataset_class, in_memory_classes
from loadlint.facts.pretokenized import imported_rows, padded_row_helpers
from loadlint.facts.handles import handle_classes
from loadlint.facts.in_memory import memory_dataset, memory_members
from loadlint.facts.lightning_runs import gpu_runs, lightning_classes
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.iteration import plain_copy
from loadlint.facts.distributed import SamplerCall
from loadlint.facts.names import FunctionFacts
from loadlint.facts.scopes import constant_index, literal_members, member
from loadlint.facts.resolve import MISSING, UNKNOWN, Scope, dotted_name, evaluate, follow_name
from loadlint.types import (
    CallSummary, Descriptor, Flags, FunctionSummary, ImportedDataset, LoaderSummary, SamplerSummary, Summary, Use,
    UseKind,
)

#: Names a node by a number: ``summarise`` keeps no positions (they cost a
#: metadata pass); the numbers are turned into positions, for the few nodes
#: a finding needs, by summarising again with a recording ``RefOf``.
RefOf = Callable[[cst.CSTNode], int]
MODULE = "<module>"
#: The loader arguments project analysis reasons about (absent: torch's default).
_LOADER_SETTINGS = ("num_workers", "persistent_workers", "pin_memory", "multiprocessing_context", "sampler")
#: Bumped when the shape changes, so cached summaries are not misread.
VERSION = 12


def summarise(facts: ModuleFacts, ref_of: RefOf) -> Summary:
    """The serialisable summary of one module's facts."""
    names = facts.names
    imports = dict(names.imports.names)
    imports.update(facts.calls_between.relative)
    imports.update(star_names(facts.calls_between, facts.names.imports.stars, imports))
    module_defs = {name for (owner, name) in names.defs if owner == id(names.module_scope)}
    module_defs |= {name for (owner, name) in names.class_defs if owner == id(names.module_scope)}
    groups = _Groups(facts, imports)
    body = _Function(groups, None, names.module_scope, ref_of).summary(imports, module_defs)
    functions: dict[str, FunctionSummary] = {MODULE: body}
    for fn in names.functions:
        if fn.nested:
            continue
        qual = f"{fn.class_name}.{fn.name}" if fn.class_name else fn.name
        if qual not in functions:
            functions[qual] = _Function(groups, fn, fn.scope, ref_of).summary(imports, module_defs)
    accelerator = facts.accelerator
    flags: Flags = {
        "cuda": accelerator.cuda,
        "cuda_code": bool(accelerator.cuda_code),
        "set_epoch": facts.loops.set_epoch_called,
        "frameworks": bool(facts.launch.frameworks),
        "start_methods": sorted(facts.loaders.start_methods),
        # A loop or iterator at module level outside the main guard: LL013's
        # fix would guard it, which changes what an importer of the module sees.
        "unguarded_starts": any(
            it.at_module_level and not it.in_main_guard for it in facts.iteration.iterations
        ) or any(
            step.at_module_level and not step.in_main_guard for step in facts.iteration.next_iter
        ) or any(
            made.at_module_level and not made.in_main_guard for made in facts.iteration.iter_calls
        ),
    }
    out: Summary = {"version": VERSION, "imports": imports, "functions": functions, "flags": flags}
    if names.class_defs:
        memory = in_memory_classes(names, facts.datasets)
        if memory:
            out["in_memory_classes"] = memory
        handles = handle_classes(names, facts.datasets)
        if handles:
            out["handle_classes"] = handles
    # Every loader, nested functions' too, whose dataset is an imported class
    # (with its workers and start method: LL014 across modules).
    built = [(call, imported_dataset_class(names, call)) for call in facts.loaders.calls]
    datasets: list[ImportedDataset] = []
    for call, name in built:
        if name is not None:
            dataset: ImportedDataset = {"at": ref_of(call.node), "class": name}
            dataset.update(_start(call, facts.loaders.cpu_count_calls))  # type: ignore[typeddict-item]  # workers and context
            datasets.append(dataset)
    if datasets:
        out["imported_datasets"] = datasets
    # Pre-tokenized rows and padding collates built by functions of one
    # module for loaders of another (LL201 across modules).
    helpers = padded_row_helpers(names, facts.datasets)
    if helpers:
        out["padded_rows"] = helpers
    rows = [{"at": ref_of(call.node), **found} for call in facts.loaders.calls
            if (found := imported_rows(names, facts.datasets, call)) is not None]
    if rows:
        out["imported_rows"] = rows
    lightning = lightning_classes(facts)
    if lightning:
        out["lightning_classes"] = lightning
    runs = gpu_runs(facts, imports, module_defs, ref_of)
    if runs:
        out["gpu_runs"] = runs
    constants = _constants(facts, imports, ref_of)
    if constants:
        out["constants"] = constants
    if facts.config_reads:
        out["config_files"] = [
            {"scope": read.scope, "name": read.name, "file": read.file, "kind": read.kind} for read in facts.config_reads
        ]
    return out


def _start(call: LoaderCall, cpu_count_calls: set[int]) -> dict[str, Any]:
    """The loader's worker count (or, positive but no known number, its
    code) and ``multiprocessing_context`` when written as literals (``"?"``
    for a context that is not a string)."""
    out: dict[str, Any] = {}
    workers = call.workers()
    expr = call.expr("num_workers")
    if type(workers) is int:
        out["workers"] = workers
    elif expr is not None and positive_count(expr, call.scope_of("num_workers"), cpu_count_calls):
        out["workers_code"] = code_for_node(expr)
    context = call.value("multiprocessing_context")
    if context is not MISSING:
        out["context"] = context if isinstance(context, str) or context is None else "?"
    return out


def _constants(facts: ModuleFacts, imports: dict[str, str], ref_of: RefOf) -> dict[str, Descriptor]:
    """Module-level names another module may import as values: bound once,
    unconditionally, never declared ``global`` in a function (that adds a
    binding), to a constant, ``os.cpu_count()`` or an imported name."""
    module = facts.names.module_scope
    out: dict[str, Descriptor] = {}
    for name, bindings in module.bindings.items():
        if len(bindings) != 1 or bindings[0].value is None or bindings[0].path:
            continue
        if name in module.namespaces:
            # A config tree (or a parsed namespace) another module reads attributes of.
            options = namespace_options(module.namespaces[name], ref_of)
            if options:
                out[name] = {"options": options}
            continue
        expr = bindings[0].value
        value = evaluate(expr, module)
        if value is not UNKNOWN and jsonable(value):
            described: Descriptor = {"value": value}
        elif type(expr) is cst.Call and id(expr) in facts.loaders.cpu_count_calls:
            described = {"cpu_count": True}
        else:
            qualified = _imported(expr, module, imports)
            if qualified is None:
                continue
            described = {"import": qualified}
        target = facts.cli.values.targets.get(name)
        if target is not None:
            described["at"] = ref_of(target)
        out[name] = described
    return out


def _imported(expr: cst.BaseExpression, scope: Scope, imports: dict[str, str]) -> str | None:
    """``config.WORKERS`` for ``WORKERS`` (``from config import WORKERS``) or
    ``cfg.WORKERS`` (``import config as cfg``), read where the import is the
    name's only binding."""
    dotted = dotted_name(expr)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    found = scope.lookup(head)
    if head not in imports or found is None or found[0].kind != "module" or len(found[1]) != 1 or found[1][0].value is not None:
        return None
    return imports[head] + ("." + rest if rest else "")


class _Groups:
    """The module's facts grouped by the function they belong to, once."""

    def __init__(self, facts: ModuleFacts, imports: dict[str, str]) -> None:
        self.facts = facts
        self.imports = imports
        self.loaders: dict[int, list[Any]] = {}
        for call in facts.loaders.calls:
            self.loaders.setdefault(id(call.scope.function), []).append(call)
        self.sites: dict[int, list[CallSite]] = {}
        for site in facts.calls_between.sites:
            self.sites.setdefault(id(site.function), []).append(site)
        self.samplers: dict[int, list[SamplerCall]] = {}
        for sampler in facts.launch.samplers:
            self.samplers.setdefault(id(sampler.scope.function), []).append(sampler)
        self.by_key: dict[int, list[tuple[UseKind, Any]]] = {}
        iteration = facts.iteration
        items: list[tuple[UseKind, Any]] = [("iter", it) for it in iteration.iterations]
        items += [("next_iter", step) for step in iteration.next_iter]
        items += [("iter_call", call) for call in iteration.iter_calls]
        items += [("transfer", t) for t in iteration.transfers]
        for kind, item in items:
            self.by_key.setdefault(item.key[0], []).append((kind, item))
        #: The summarised functions by scope (a module-level loader used in one
        #: of them is used when the walk enters it).
        self.function_of: dict[int, str] = {
            id(fn.scope): f"{fn.class_name}.{fn.name}" if fn.class_name else fn.name
            for fn in facts.names.functions if not fn.nested
        }


#: Expressions a device's kind is looked for in (``torch.device(...)``, a name
#: bound to one, ``"cuda" if ... else "cpu"``, ``args.device``).
#: Checked by exact type: ``isinstance`` against libcst's (abstract) classes is slow.
_DEVICE_EXPRESSIONS = frozenset({cst.Name, cst.Call, cst.Attribute, cst.IfExp, cst.FormattedString})


#: The keys of a function's summary in the order its JSON has always had.
FUNCTION_KEYS = ("params", "at", "defaults", "has_default", "loaders", "samplers", "calls", "uses", "returns", "reads")


def _in_order(summary: FunctionSummary) -> FunctionSummary:
    """``summary`` with its keys in ``FUNCTION_KEYS``' order (the cache's
    JSON stays byte for byte what it was)."""
    ordered = {key: summary[key] for key in FUNCTION_KEYS if key in summary}  # type: ignore[literal-required]
    return cast(FunctionSummary, ordered)


def jsonable(value: Any) -> bool:
    return value is None or type(value) in (int, float, str, bool)


class _Function:
    """Summarises one function (or the module body)."""

    def __init__(self, groups: _Groups, fn: FunctionFacts | None, scope: Scope, ref_of: RefOf) -> None:
        self.groups = groups
        self.facts = groups.facts
        self.fn = fn
        self.scope = scope
        self.ref_of = ref_of
        self.params: list[str] = []
        if fn is not None:
            p = fn.node.params
            self.params = list(fn.params) + [param.name.value for param in p.kwonly_params]
        self.loaders = groups.loaders.get(id(scope), [])
        self.loader_index = {id(c.node): i for i, c in enumerate(self.loaders)}
        self.loader_vars = {c.key[1]: i for i, c in enumerate(self.loaders) if c.key is not None}
        self.samplers = groups.samplers.get(id(scope), [])
        self.sampler_index = {id(c.node): i for i, c in enumerate(self.samplers)}
        self.sampler_vars = {c.key[1]: i for i, c in enumerate(self.samplers) if c.key is not None}
        self.site_targets: dict[str, tuple[int, int | None, int]] = {}
        #: id of a recorded call node -> its index in the summary's calls.
        self.site_index: dict[int, int] = {}
        #: The names its descriptors import (listed in the summary: the join
        #: then finds them without walking every function's summary).
        self.reads: set[str] = set()

    def is_param(self, name: str) -> bool:
        if name not in self.params:
            return False
        found = self.scope.lookup(name)
        return found is not None and found[0] is self.scope and len(found[1]) == 1 and found[1][0].value is None

    def describe(self, expr: cst.BaseExpression | None, scope: Scope, results: bool = True) -> Descriptor:
        """The value descriptor of an expression; ``results``: a name bound
        to a call's result may be described as that result."""
        if expr is None:
            return {}
        if type(expr) is cst.Name and scope is self.scope:
            name = expr.value
            if self.is_param(name):
                return {"param": name}
            if name in self.loader_vars:
                return {"loader": self.loader_vars[name]}
            if name in self.sampler_vars:
                return {"sampler": self.sampler_vars[name]}
            if name in self.site_targets and results:
                # ``device = torch.device("cuda")``: the kind, not the call's result.
                kind = device_kind(expr, scope, self.facts.names.imports)
                if kind is not None:
                    return {"device": kind}
                index, part, length = self.site_targets[name]
                return {"call": index, "index": part} if part is None else {"call": index, "index": part, "of": length}
        if type(expr) is cst.Subscript and scope is self.scope:
            key = _member_key(expr, scope)
            found = self.subject(key) if key is not None else None
            if found is not None:
                return found
        if type(expr) is cst.Call and id(expr) in self.loader_index:
            return {"loader": self.loader_index[id(expr)]}
        if type(expr) is cst.Call and id(expr) in self.sampler_index:
            return {"sampler": self.sampler_index[id(expr)]}
        if type(expr) is cst.Call and id(expr) in self.site_index and results:
            return {"call": self.site_index[id(expr)], "index": None}
        if type(expr) is cst.Lambda:
            # Passed to another module's factory: its workers must pickle it (LL007).
            return {"lambda": True}
        passed = passed_namespace(expr, scope, self.is_param, self.ref_of, self.facts.cli.written) if scope is self.scope else {}
        if passed:
            return passed
        value = evaluate(expr, scope)
        if value is not UNKNOWN and jsonable(value):
            return {"value": value}
        target, owner = follow_name(expr, scope)
        if type(target) is cst.Call and id(target) in self.facts.loaders.cpu_count_calls:
            return {"cpu_count": True}
        if type(expr) in _DEVICE_EXPRESSIONS:
            kind = device_kind(expr, scope, self.facts.names.imports)
            if kind is not None:
                return {"device": kind}
        qualified = _imported(target, owner, self.groups.imports) if owner is not None else None
        if qualified is None:
            return {}
        self.reads.add(qualified)
        return {"import": qualified}

    def summary(self, imports: dict[str, str], module_defs: set[str]) -> FunctionSummary:
        # The nodes are numbered in this order: the name, the calls, the
        # loaders, the samplers, the uses.
        fn = self.fn
        at = self.ref_of(fn.node.name) if fn is not None else None
        defaults: dict[str, Descriptor] = {}
        if fn is not None:
            enclosing = self.scope.parent or self.scope
            p = fn.node.params
            defaults = {
                param.name.value: self.describe(param.default, enclosing)
                for param in (*p.posonly_params, *p.params, *p.kwonly_params)
                if param.default is not None
            }
        # The calls first: a loader argument may be a call's result (a
        # sampler a helper returns), which the calls' summary numbers.
        calls = self._calls(imports, module_defs)
        loaders = [self._loader(call) for call in self.loaders]
        out: FunctionSummary = {"params": self.params, "loaders": loaders, "calls": calls, "uses": [], "reads": []}
        if at is not None:
            out["at"] = at
            out["defaults"] = {k: v for k, v in defaults.items() if v}
            out["has_default"] = sorted(defaults)
        if self.samplers:
            out["samplers"] = [self._sampler(call) for call in self.samplers]
        out["uses"] = self._uses()
        returns = [value for owner, value in self.facts.calls_between.returns if owner is fn and fn is not None]
        if returns:
            last = returns[-1]
            members = self._returned_members(last)
            memory = memory_members(self.facts.names, self.facts.datasets, returns, self.scope)
            if members is not None:
                values = [self.describe(e, self.scope) for _, e in members]
                if type(last) is not cst.Tuple and type(last) is not cst.List:
                    out["returns"] = {"tuple": True, "values": values, "keys": [k for k, _ in members]}
                else:
                    held = memory.pop(len(members), [])
                    out["returns"] = {"tuple": True, "values": [{"memory": True} if i in held else v for i, v in enumerate(values)]}
            else:
                # Held in memory only when every return is, none of them a tuple literal.
                held_whole = all(type(r) not in (cst.Tuple, cst.List) and r is not None and self._memory(r) for r in returns)
                out["returns"] = {"tuple": False, "values": [{"memory": True} if held_whole else self.describe(last, self.scope)]}
            if memory:
                # Unpacked into as many names as one of its other returns has members.
                out["returns"]["unpacked"] = {str(length): held for length, held in sorted(memory.items())}
        out["reads"] = sorted(self.reads)
        return _in_order(out)

    def _returned_members(self, value: cst.BaseExpression) -> list[tuple[Any, cst.BaseExpression]] | None:
        """A returned tuple or list literal's items; a dict literal's (or a
        name's bound once to one here, never changed: its members' keys say)."""
        if type(value) is cst.Tuple or type(value) is cst.List:
            return literal_members(value)
        if type(value) is cst.Name:
            found = self.scope.lookup(value.value)
            if found is None or found[0] is not self.scope or len(found[1]) != 1 or found[1][0].value is None:
                return None
            container = found[1][0].value
            if type(container) is not cst.Dict:
                return None
            members = literal_members(container)
            key = (id(self.scope), value.value)
            # Each member must still be what the literal put there.
            if members is None or any(
                (key[0], member(key[1], k)) not in self._kept_members(v) for k, v in members
            ):
                return None
            return members
        if type(value) is cst.Dict:
            members = literal_members(value)
            return members if members is not None and all(type(k) is str for k, _ in members) else None
        return None

    def _kept_members(self, value: cst.BaseExpression) -> set[tuple[int, str]]:
        """The member keys that still reach ``value`` (a loader call or a variable)."""
        if type(value) is cst.Call and id(value) in self.loader_index:
            key = self.loaders[self.loader_index[id(value)]].key
            return {key} if key is not None else set()
        return {k for k, v in self.facts.loaders.aliases.items() if k[1].endswith("]") and type(value) is cst.Name
                and v[1] == value.value}

    def _loader(self, call: Any) -> LoaderSummary:
        kw = {
            name: arg.value.value
            for name, arg in call.args.items()
            if type(arg.value) is cst.Name and self.is_param(arg.value.value)
        }
        values: dict[str, Descriptor] = {}
        for name in _LOADER_SETTINGS:
            value = call.value(name)
            if value is MISSING:
                continue
            expr = call.expr(name)
            # Only a sampler is taken from a call's result (a helper's); the
            # other settings are described as before the calls were numbered.
            values[name] = self.describe(expr, call.scope, results=name == "sampler") if expr is not None else {}
        out: LoaderSummary = {"at": self.ref_of(call.node), "kw": kw, "values": values, "var": call.key[1] if call.key else None}
        dataset = call.expr("dataset")
        described = self.describe(dataset, call.scope, results=False) if dataset is not None else {}
        if set(described) == {"param"}:
            out["dataset"] = described
        return out

    def _sampler(self, call: SamplerCall) -> SamplerSummary:
        # DistributedSampler(dataset, num_replicas=None, rank=None, shuffle=True, ...)
        positional = [a for a in call.node.args if a.keyword is None and not a.star]
        shuffle = positional[3].value if len(positional) > 3 else None
        for arg in call.node.args:
            if arg.keyword is not None and arg.keyword.value == "shuffle":
                shuffle = arg.value
        out: SamplerSummary = {"at": self.ref_of(call.node)}
        if shuffle is not None:
            out["shuffle"] = self.describe(shuffle, call.scope)
        return out

    def _calls(self, imports: dict[str, str], module_defs: set[str]) -> list[CallSummary]:
        out: list[CallSummary] = []
        for site in self.groups.sites.get(id(self.fn), ()):
            head, _, rest = site.callee.partition(".")
            if head in self.scope.bindings and self.fn is not None:
                continue  # a local variable's method, not a project function
            if head in imports:
                callee = imports[head] + ("." + rest if rest else "")
            elif head in module_defs:
                callee = ":" + site.callee
            else:
                continue
            args: dict[str, Descriptor] = {}
            position = 0
            for arg in site.node.args:
                if arg.star:
                    args["*"] = {}
                    break
                slot = arg.keyword.value if arg.keyword is not None else str(position)
                if arg.keyword is None:
                    position += 1
                args[slot] = {"memory": True} if self._memory(arg.value, site.scope) else self.describe(arg.value, site.scope)
            index = len(out)
            for target in site.targets:
                elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else None
                if elements is None and type(target) is cst.Name:
                    self.site_targets[target.value] = (index, None, 0)
                for i, element in enumerate(elements or ()):
                    if type(element.value) is cst.Name:
                        self.site_targets[element.value.value] = (index, i, len(elements or ()))
            self.site_index[id(site.node)] = index
            out.append({"callee": callee, "at": self.ref_of(site.node), "in_loop": site.in_loop, "guarded": site.in_main_guard, "args": args})
        return out

    def _memory(self, expr: cst.BaseExpression, scope: Scope | None = None) -> bool:
        """A dataset held in memory (``memory_dataset``), passed to or
        returned for another module's loader (LL201)."""
        if type(expr) is not cst.Name and type(expr) is not cst.Call and type(expr) is not cst.Subscript:
            return False
        return memory_dataset(self.facts.names, self.facts.datasets, expr, scope or self.scope)

    def subject(self, key: tuple[int, str], depth: int = 0) -> Descriptor | None:
        """What a loader variable holds: a parameter, a loader built here, a
        call's result; a container's member (``loaders['train']``) through
        the variable put in it, or a member of a call's result."""
        if self.is_param(key[1]):
            return {"param": key[1]}
        if key[1] in self.loader_vars:
            return {"loader": self.loader_vars[key[1]]}
        if key[1] in self.site_targets:
            index, part, _ = self.site_targets[key[1]]
            return {"call": index, "index": part}
        # A container's member or a holder's attribute (``phases['train'].loader``), not ``self.x``.
        if "[" not in key[1] and ("." not in key[1] or key[1].startswith("self.")) or depth > 4:
            return None
        alias = self.facts.loaders.aliases.get(key)
        if alias is not None:
            return self.subject(alias, depth + 1)
        base, _, rest = key[1].partition("[")
        site = self.site_targets.get(base)
        found = self.scope.lookup(base)
        # The call's result must be what the variable holds wherever it is read.
        single = found is not None and found[0] is self.scope and len(found[1]) == 1
        if site is not None and site[1] is None and single and (key[0], base) not in self.facts.loaders.unsure and "[" not in rest[:-1]:
            return {"call": site[0], "index": ast.literal_eval(rest[:-1])}
        return None

    def _uses(self) -> list[Use]:
        """What the function does with loaders it is given or builds."""
        out: list[Use] = []
        subject = self.subject
        for kind, item in self.groups.by_key.get(id(self.scope), ()):
            who = subject(item.key)
            if who is None:
                continue
            use: Use
            if kind == "iter":
                use = {
                    "kind": kind, "of": who, "at": self.ref_of(item.node.iter), "in_loop": bool(item.outer),
                    "guarded": item.in_main_guard,
                }
                inner = item.scope
                if self.fn is None and inner is not self.scope:
                    if id(inner) not in self.groups.function_of:
                        continue  # a nested function's: when it runs is unknown
                    # A module-level loader iterated in a function: a use of the function's frame.
                    use["in_function"] = self.groups.function_of[id(inner)]
                out.append(use)
            elif kind == "next_iter":
                out.append({
                    "kind": kind, "of": who, "at": self.ref_of(item.node), "in_loop": item.in_loop,
                    "guarded": item.in_main_guard,
                })
            elif kind == "iter_call":
                out.append({"kind": kind, "of": who, "at": self.ref_of(item.node), "in_loop": False, "guarded": item.in_main_guard})
            else:
                node = item.node
                plain = plain_copy(node, item.method)
                use = {
                    "kind": kind, "of": who, "at": self.ref_of(node), "method": item.method,
                    "non_blocking": item.non_blocking, "plain": plain,
                }
                if item.method == "to":
                    use["device"] = self.describe(item.device, item.scope)
                out.append(use)
        return out


def _member_key(expr: cst.Subscript, scope: Scope) -> tuple[int, str] | None:
    """The key of ``loaders["train"]`` read in ``scope`` (a name's member only)."""
    index = constant_index(expr)
    if index is None or type(expr.value) is not cst.Name:
        return None
    found = scope.lookup(expr.value.value)
    owner = found[0] if found else scope
    return id(owner), member(expr.value.value, index)


class Numbering:
    """Numbers nodes in the order a summary names them."""

    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def __call__(self, node: cst.CSTNode) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1
