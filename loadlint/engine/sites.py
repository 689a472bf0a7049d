"""Where a module builds its loaders and where it iterates them, by row:
what ``trace`` maps a run's loader onto, read from the facts ``check``
computes (each call's arguments mapped to torch's parameters as the rules
map them), never from a scan of its own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from loadlint.engine.analysis import Analysis
    from loadlint.facts.collect import ModuleFacts
    from loadlint.facts.loaders import LoaderCall
    from loadlint.facts.resolve import Scope

#: A function by its name, first and last row.
Function = tuple[str, int, int]


@dataclass(frozen=True)
class LoaderSite:
    """A DataLoader call in the source, as a trace event is mapped onto it."""

    path: Path
    row: int
    column: int
    end_row: int
    #: the enclosing function's name, first and last line; None at module level
    function: Function | None
    #: num_workers as ``check`` resolves it (0 when missing), None when unknown
    workers: int | None
    #: pin_memory as ``check`` resolves it (False when missing), None when unknown
    pinned: bool | None
    #: the functions (None: module level) whose loops iterate the loader
    iterated_in: tuple[Function | None, ...]
    #: the module is a script run as the entry point
    entry: bool


def _resolved(call: LoaderCall, name: str, kind: type) -> object:
    """The argument's value (torch's default when absent), None when it
    cannot be known statically, is an overridable default (a command-line
    option's: the run may have been given another) or is not of ``kind``."""
    if call.origin(name) is not None:
        return None
    value = call.effective(name)
    return value if type(value) is kind else None


def _entry(info: ModuleFacts) -> bool:
    """Whether a top-level statement of the module tests its ``__name__``
    (``if __name__ == "__main__":``): a script run as the entry point."""
    return any(type(statement) is cst.If and type(test := statement.test) is cst.Comparison
               and type(test.left) is cst.Name and test.left.value == "__name__" for statement in info.statements)


class _Sites:
    def __init__(self, path: Path, analysis: Analysis) -> None:
        self.path = path
        self.analysis = analysis
        self.info = info = analysis.info
        self.by_scope = {id(fn.scope): fn for fn in info.names.functions}
        self.spans: dict[int, Function] = {}

    def function(self, scope: Scope) -> Function | None:
        """The innermost ``def`` holding ``scope`` (None: the module), by name and rows."""
        fn = self.by_scope.get(id(scope.function))
        if fn is None:
            return None
        span = self.spans.get(id(fn))
        if span is None:
            start, end = self.analysis.positions.range(fn.node)
            span = self.spans[id(fn)] = (fn.name, start.row, end.row)
        return span

    def iterated_in(self, call: LoaderCall) -> tuple[Function | None, ...]:
        """The functions whose loops iterate the loader built by ``call``:
        the call itself, a variable it is reachable through, or a parameter
        of a function this module calls with it."""
        info = self.info
        keys = info.loaders.keys_of(call)
        scopes: list[Scope] = []
        inline = info.iteration.iterated_calls.get(id(call.node))
        if inline is not None:
            scopes.append(inline)
        scopes += [loop.scope for loop in info.iteration.iterations if loop.key in keys]
        for step in info.loops.loader_passes:
            if not keys.intersection(step.passed.values()):
                continue
            # By name, nested functions too: a helper defined inside the caller is the usual case.
            for fn, iterated in info.iteration.iterated_params.items():
                if fn.name != step.callee:
                    continue
                for slot, key in step.passed.items():
                    param = fn.params[slot] if isinstance(slot, int) and slot < len(fn.params) else slot
                    if key in keys and param in iterated:
                        scopes.append(fn.scope)
        return tuple(dict.fromkeys(self.function(scope) for scope in scopes))


def loader_sites(path: Path, analysis: Analysis) -> list[LoaderSite]:
    """Every DataLoader call of the module ``analysis`` holds, read at ``path``."""
    sites = _Sites(path, analysis)
    entry = _entry(analysis.info)
    found = []
    for call in analysis.info.calls:
        start, end = analysis.positions.range(call.node)
        workers, pinned = _resolved(call, "num_workers", int), _resolved(call, "pin_memory", bool)
        found.append(LoaderSite(path, start.row, start.column, end.row, sites.function(call.scope),
                                workers if isinstance(workers, int) else None,
                                pinned if isinstance(pinned, bool) else None, sites.iterated_in(call), entry))
    return found
