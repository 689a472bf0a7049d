"""DataLoader call sites: each ``DataLoader(...)`` with its arguments mapped
to parameters, the variables it is reachable through, and the facts about
how its workers start (``set_start_method``, ``os.cpu_count()`` calls)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from loadlint.facts.cursor import Provider
from loadlint.facts.names import Key, LoopFrame
from loadlint.facts.resolve import MISSING, UNKNOWN, Origin, Scope, evaluate, origin, string_value
from loadlint.facts.signature import DATALOADER, DEFAULTS, POSITIONAL

#: A ``**kwargs`` dict's keys: parameter -> (expression or None when unknown, its scope).
DictArgs = dict[str, tuple[cst.BaseExpression | None, Scope]]

_CPU_COUNT_CALLS = {"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count"}
_START_METHOD_CALLS = ("multiprocessing.set_start_method", "torch.multiprocessing.set_start_method")


@dataclass(eq=False)
class LoaderCall:
    """One ``DataLoader(...)`` construction, arguments mapped to parameters."""

    node: cst.Call
    scope: Scope
    args: dict[str, cst.Arg]
    #: Keys resolved from ``**name`` dicts: parameter -> expression (None = unknown value).
    dict_args: DictArgs
    #: An unresolved ``**kwargs`` or ``*args`` may hide any argument.
    opaque_kwargs: bool
    opaque_positional: bool
    key: Key | None
    loops: tuple[LoopFrame, ...]
    function: str | None
    class_name: str | None
    returned_from: str | None
    #: Built under ``if __name__ == "__main__":`` (spawned workers skip it).
    in_main_guard: bool = False

    def expr(self, name: str) -> cst.BaseExpression | None:
        arg = self.args.get(name)
        if arg is not None:
            return arg.value
        entry = self.dict_args.get(name)
        return entry[0] if entry else None

    def scope_of(self, name: str) -> Scope:
        """The scope ``expr(name)`` is read in: the call's for an argument
        written in it; for a key of a ``**dict``, the scope of the function
        whose dict literal (or ``.update``, or ``d["key"] = ...``) gave it."""
        entry = None if name in self.args else self.dict_args.get(name)
        return self.scope if entry is None else entry[1]

    def origin(self, name: str) -> Origin | None:
        """Where the argument's value comes from when it is an overridable
        default (``num_workers=args.workers``), else None."""
        return origin(self.expr(name), self.scope_of(name))

    def value(self, name: str) -> Any:
        """The argument's value, MISSING when certainly absent, else UNKNOWN."""
        arg = self.args.get(name)
        if arg is not None:
            return evaluate(arg.value, self.scope)
        entry = self.dict_args.get(name)
        if entry is not None:
            return UNKNOWN if entry[0] is None else evaluate(entry[0], entry[1])
        if self.opaque_kwargs or (self.opaque_positional and name in POSITIONAL):
            return UNKNOWN
        return MISSING

    def effective(self, name: str) -> Any:
        """Like value(), with a missing argument replaced by torch's default."""
        value = self.value(name)
        return DEFAULTS[name] if value is MISSING else value

    def workers(self) -> Any:
        return self.effective("num_workers")


@dataclass
class AttrAssignment:
    """``<loader>.attr = ...``: the target, the loader key, and the statement."""

    target: cst.Attribute
    key: Key
    attr: str
    statement: cst.CSTNode


@dataclass
class LoaderFacts:
    """The DataLoader calls of a module and what reaches them."""

    calls: list[LoaderCall] = field(default_factory=list)
    #: ``a, loader = accelerator.prepare(m, loader)``: new key -> the key it aliases.
    aliases: dict[Key, Key] = field(default_factory=dict)
    attr_assignments: list[AttrAssignment] = field(default_factory=list)
    #: ids of ``os.cpu_count()``-like calls.
    cpu_count_calls: set[int] = field(default_factory=set)
    #: Start methods passed to ``set_start_method`` in this module.
    start_methods: set[str] = field(default_factory=set)

    def keys_of(self, call: LoaderCall) -> set[Key]:
        """Every key through which the loader is reachable (aliases included)."""
        if call.key is None:
            return set()
        keys = {call.key}
        changed = True
        while changed:
            changed = False
            for alias, target in self.aliases.items():
                if target in keys and alias not in keys:
                    keys.add(alias)
                    changed = True
        return keys


class LoaderProvider(Provider[LoaderFacts]):
    """Records every DataLoader call and the variables that reach it."""

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.cursor.qualified
        if qualified == DATALOADER:
            self._record_loader(node)
        elif qualified in _CPU_COUNT_CALLS:
            self.facts.cpu_count_calls.add(id(node))
        elif qualified in _START_METHOD_CALLS and node.args:
            method = evaluate(node.args[0].value, self.cursor.scope)
            if isinstance(method, str):
                self.facts.start_methods.add(method)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if type(target.target) is cst.Attribute:
                self._record_attr_assign(target.target, node)
        if type(node.value) is cst.Call:
            self._record_prepare_alias(node, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if type(node.target) is cst.Attribute:
            # The annotation's statement is not kept: reports point at the target.
            self._record_attr_assign(node.target, node.target)

    def _record_attr_assign(self, target: cst.Attribute, statement: cst.CSTNode) -> None:
        key = self.cursor.key_of(target.value)
        if key is not None:
            self.facts.attr_assignments.append(AttrAssignment(target, key, target.attr.value, statement))

    def _record_prepare_alias(self, node: cst.Assign, call: cst.Call) -> None:
        # ``model, opt, loader = accelerator.prepare(model, opt, loader)``
        if not (type(call.func) is cst.Attribute and call.func.attr.value in ("prepare", "prepare_data_loader")):
            return
        key_of = self.cursor.key_of
        sources = [key_of(a.value) if a.keyword is None and not a.star else None for a in call.args]
        for target in node.targets:
            t = target.target
            dests = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
            if len(dests) != len(sources):
                continue
            for dest, source in zip(dests, sources):
                dest_key = key_of(dest)
                if dest_key is not None and source is not None and dest_key != source:
                    self.facts.aliases[dest_key] = source

    def _record_loader(self, node: cst.Call) -> None:
        cursor = self.cursor
        args: dict[str, cst.Arg] = {}
        dict_args: DictArgs = {}
        opaque_kwargs = opaque_positional = False
        position = 0
        for arg in node.args:
            if arg.star == "*":
                opaque_positional = True
            elif arg.star == "**":
                resolved = self._resolve_kwargs_dict(arg.value)
                if resolved is None:
                    opaque_kwargs = True
                else:
                    dict_args.update(resolved)
            elif arg.keyword is not None:
                args[arg.keyword.value] = arg
            else:
                if opaque_positional:
                    continue
                if position < len(POSITIONAL):
                    args[POSITIONAL[position]] = arg
                position += 1
        fn = cursor.function
        self.facts.calls.append(
            LoaderCall(
                node=node,
                scope=cursor.scope,
                args=args,
                dict_args=dict_args,
                opaque_kwargs=opaque_kwargs,
                opaque_positional=opaque_positional,
                key=cursor.target_key(node),
                loops=tuple(cursor.loops),
                function=fn.name if fn else None,
                class_name=fn.class_name if fn else None,
                returned_from=fn.name if fn and id(node) in cursor.pending_return else None,
                in_main_guard=cursor.main_guard_depth > 0,
            )
        )

    def _resolve_kwargs_dict(self, node: cst.BaseExpression) -> DictArgs | None:
        """Key-by-key contents of ``**name``, or None when it cannot be known.

        ``name`` must be bound once to a dict literal in this function and
        changed only by ``.update(<dict literal or such a name>)`` and
        ``name["key"] = value`` before the call.  A change made under a
        condition the call is not under makes that key's value unknown (it
        may or may not be there).  What else is opaque, and what is not
        seen, is written for rule authors in docs/rule-authors.md.
        """
        cursor = self.cursor
        if type(node) is cst.Dict:
            return _dict_literal(node, cursor.scope, conditional=False)
        if type(node) is not cst.Name:
            return None
        return _resolve_dict_name(node.value, cursor.scope, tuple(cursor.path), cursor.order, 0)


def _resolve_dict_name(name: str, scope: Scope, path: tuple[int, ...], order: int, depth: int) -> DictArgs | None:
    found = scope.lookup(name)
    if found is None or depth > 5:
        return None
    owner, bindings = found
    if owner.kind != "function" or len(bindings) != 1:
        return None
    value = bindings[0].value
    if type(value) is not cst.Dict:
        return None
    result = _dict_literal(value, owner, conditional=False)
    if result is None:
        return None
    for mutation in owner.dict_mutations.get(name, ()):
        if mutation.order > order:
            continue
        conditional = mutation.path != path[: len(mutation.path)]
        if mutation.kind == "other":
            return None
        if mutation.kind == "setitem" and mutation.key is not None:
            result[mutation.key] = (None if conditional else mutation.value, owner)
            continue
        extra: DictArgs | None = None
        if type(mutation.value) is cst.Dict:
            extra = _dict_literal(mutation.value, owner, conditional)
        elif type(mutation.value) is cst.Name:
            extra = _resolve_dict_name(mutation.value.value, owner, mutation.path, mutation.order, depth + 1)
            if extra is not None and conditional:
                extra = {k: (None, s) for k, (_, s) in extra.items()}
        if extra is None:
            return None
        result.update(extra)
    return result


def _dict_literal(node: cst.Dict, scope: Scope, conditional: bool) -> DictArgs | None:
    out: DictArgs = {}
    for element in node.elements:
        if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
            return None
        out[str(string_value(element.key))] = (None if conditional else element.value, scope)
    return out
