"""Loaders whose workers are certainly alive at the same time.

Two shapes are certain, and only they count (a rule that adds up workers
must not guess at lifetimes):

* loaders iterated together by ``zip`` (``for a, b in zip(train, aux)``,
  also under ``enumerate``/``tqdm``): each keeps an iterator, and its
  workers, until the loop ends;
* loaders with ``persistent_workers=True`` bound once to names of the same
  function (or of the module), built outside any loop and each iterated
  there: once iterated, a loader keeps its workers as long as it lives, so
  when the last of them starts its workers the others still have theirs.

A loader reached through another variable, rebuilt in a loop, built by a
helper or kept on ``self`` is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import libcst as cst

from loadlint.facts.iteration import IterationFacts
from loadlint.facts.loaders import LoaderCall, LoaderFacts
from loadlint.facts.names import Key, NameFacts
from loadlint.facts.resolve import Scope, dotted_name, string_value

#: Wrappers that pass the iterable of their first argument through.
_PASS_THROUGH = {"enumerate", "tqdm", "trange", "track"}


@dataclass(frozen=True)
class AliveGroup:
    """Loaders alive together, in source order, and why."""

    calls: tuple[LoaderCall, ...]
    #: The variable each is read through (``train_loader``).
    names: tuple[str, ...]
    #: "zip" or "persistent".
    kind: str


@dataclass
class AliveFacts:
    """What the traversal tells about loaders' lifetimes; the groups are
    made from it and the loader calls as a rule sees them (a simulated fix
    changes a call's arguments, not these)."""

    #: Loader variables whose workers certainly start where they are bound.
    started: set[Key] = field(default_factory=set)
    #: The variables each ``for ... in zip(a, b, ...)`` iterates together.
    zipped: list[list[Key]] = field(default_factory=list)


def collect_alive(module: cst.Module, names: NameFacts, loaders: LoaderFacts, iteration: IterationFacts) -> AliveFacts:
    """The lifetimes facts of a module (none with fewer than two loaders)."""
    if len(loaders.calls) < 2:
        return AliveFacts()
    return AliveFacts(_Started(names, iteration).keys(module), list(_zipped(iteration).values()))


def alive_groups(loaders: LoaderFacts, alive: AliveFacts, persistent: LoaderCall | None = None) -> list[AliveGroup]:
    """Every group of two or more loaders alive at once (each set once);
    with ``persistent``, as if that call had ``persistent_workers=True``."""
    if len(loaders.calls) < 2:
        return []
    owners: dict[Key, LoaderCall | None] = {}
    for call in loaders.calls:
        for key in loaders.keys_of(call):
            owners[key] = call if key not in owners else None  # reached from two calls: unknown
    order = {id(call): index for index, call in enumerate(loaders.calls)}
    groups: list[AliveGroup] = []
    seen: set[frozenset[int]] = set()

    def add(members: dict[int, tuple[LoaderCall, str]], kind: str) -> None:
        ids = frozenset(members)
        if len(ids) < 2 or ids in seen:
            return
        seen.add(ids)
        ordered = sorted(members.values(), key=lambda pair: order[id(pair[0])])
        groups.append(AliveGroup(tuple(c for c, _ in ordered), tuple(n for _, n in ordered), kind))

    for keys in alive.zipped:
        members: dict[int, tuple[LoaderCall, str]] = {}
        for key in keys:
            owner = owners.get(key)
            if owner is None:
                break
            members[id(owner)] = (owner, key[1])
        else:
            add(members, "zip")
    by_scope: dict[int, dict[int, tuple[LoaderCall, str]]] = {}
    for call in loaders.calls:
        if call.key is None:
            continue
        key = call.key
        if key not in alive.started or "." in key[1] or call.loops or owners.get(key) is not call:
            continue
        if call is not persistent and call.value("persistent_workers") is not True:
            continue
        found = call.scope.lookup(key[1])
        if found is None or len(found[1]) != 1:
            continue  # bound again: the first loader may be gone
        by_scope.setdefault(id(found[0]), {})[id(call)] = (call, key[1])
    for members in by_scope.values():
        add(members, "persistent")
    return groups


def _zipped(iteration: IterationFacts) -> dict[int, list[Key]]:
    """For each ``for`` over ``zip(a, b, ...)`` of plain loader variables,
    the keys it iterates."""
    by_loop: dict[int, list[Key]] = {}
    nodes: dict[int, cst.For] = {}
    for it in iteration.iterations:
        by_loop.setdefault(id(it.node), []).append(it.key)
        nodes[id(it.node)] = it.node
    out = {}
    for loop, keys in by_loop.items():
        iterable = nodes[loop].iter
        while type(iterable) is cst.Call and (dotted_name(iterable.func) or "").rpartition(".")[2] in _PASS_THROUGH:
            if not iterable.args:
                break
            iterable = iterable.args[0].value
        if type(iterable) is not cst.Call or dotted_name(iterable.func) != "zip":
            continue
        given = [arg for arg in iterable.args if arg.keyword is None or arg.keyword.value != "strict"]
        plain = all(arg.keyword is None and not arg.star and type(arg.value) in (cst.Name, cst.Attribute) for arg in given)
        if plain and len(keys) == len(given) >= 2:
            out[loop] = keys
    return out


class _Started:
    """Loader variables whose workers certainly start where they are bound:
    a ``for`` over them, or a call passing them to a local function that
    loops over that parameter, in a statement that runs whenever its
    function does (inside loops, ``with`` and ``try`` bodies and the main
    guard; not under another ``if``, an ``except`` or a ``match``)."""

    def __init__(self, names: NameFacts, iteration: IterationFacts) -> None:
        self.names = names
        self.loops: dict[int, Key] = {}
        for it in iteration.iterations:
            self.loops[id(it.node)] = it.key
        self.iterating = {fn.name: (fn, params) for fn, params in iteration.iterated_params.items()
                          if fn.class_name is None and not fn.nested}
        self.found: set[Key] = set()

    def keys(self, module: cst.Module) -> set[Key]:
        self._body(module.body, self.names.module_scope)
        for fn in self.names.functions:
            body = fn.node.body
            self._body(body.body if isinstance(body, cst.IndentedBlock) else (), fn.scope)
        return self.found

    def _body(self, statements: Sequence[cst.BaseStatement], scope: Scope) -> None:
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self._passes(small, scope)
                continue
            if isinstance(statement, cst.For):
                key = self.loops.get(id(statement))
                if key is not None and _iterates(statement):
                    self.found.add(key)
            elif isinstance(statement, cst.If) and not _is_main_guard(statement.test):
                continue
            if isinstance(statement, (cst.For, cst.While, cst.With, cst.If, cst.Try)):
                body = statement.body
                self._body(body.body if isinstance(body, cst.IndentedBlock) else (), scope)

    def _passes(self, small: cst.BaseSmallStatement, scope: Scope) -> None:
        value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
        if type(value) is not cst.Call or type(value.func) is not cst.Name:
            return
        found = self.iterating.get(value.func.value)
        if found is None or self.names.definition(value.func.value, scope) is not found[0]:
            return
        fn, params = found
        for index, arg in enumerate(value.args):
            if arg.star:
                return
            param = arg.keyword.value if arg.keyword is not None else fn.params[index] if index < len(fn.params) else None
            if param in params and type(arg.value) is cst.Name:
                owner = scope.lookup(arg.value.value)
                if owner is not None:
                    self.found.add((id(owner[0]), arg.value.value))


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``if __name__ == "__main__":``"""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    if type(test.comparisons[0].operator) is not cst.Equal:
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return {dotted_name(side) for side in sides} >= {"__name__"} and any(
        type(side) is cst.SimpleString and string_value(side) == "__main__" for side in sides
    )


def _iterates(loop: cst.For) -> bool:
    """The loop's iterable is the loader itself or a pass-through wrapper of it
    (``zip`` and ``chain`` start each loader when reached, not certainly)."""
    iterable = loop.iter
    while type(iterable) is cst.Call and (dotted_name(iterable.func) or "").rpartition(".")[2] in _PASS_THROUGH:
        if not iterable.args:
            return False
        iterable = iterable.args[0].value
    return type(iterable) in (cst.Name, cst.Attribute)
