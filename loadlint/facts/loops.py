"""Loops and epochs: which functions are called from inside a loop, which
loaders are passed to them, and ``set_epoch`` calls; joined with the
iteration sites into the loops a loader is iterated once per pass of."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from loadlint.facts.cursor import Provider
from loadlint.facts.iteration import TRANSFER_METHODS, Iteration, IterationFacts
from loadlint.facts.loaders import LoaderCall, LoaderFacts
from loadlint.facts.names import Key, LoopFrame, NameFacts

#: Methods whose calls on ``self`` say nothing about an epoch loop.
_NOT_STEPS = ("set_epoch", "update", "pop", "setdefault", "clear", "popitem", *TRANSFER_METHODS)


@dataclass(eq=False)
class LoaderPass:
    """``callee(..., loader, ...)``: the loaders a call passes, by slot."""

    callee: str
    loops: tuple[LoopFrame, ...]
    #: param index or keyword -> loader key
    passed: dict[int | str, Key]


@dataclass
class LoopFacts:
    """Calls made from loops, loaders passed to functions, ``set_epoch``."""

    set_epoch_called: bool = False
    #: Function name -> loop frames it is called from inside of.
    called_in_loop: dict[str, list[LoopFrame]] = field(default_factory=dict)
    loader_passes: list[LoaderPass] = field(default_factory=list)


class LoopProvider(Provider[LoopFacts]):
    """Records calls made from loops and loaders handed to functions."""

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        loops = self.cursor.loops
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method == "set_epoch":
                self.facts.set_epoch_called = True
            # A function called from inside a loop: ``self._run_epoch(epoch)``
            elif loops and type(func.value) is cst.Name and func.value.value == "self" and method not in _NOT_STEPS:
                self.facts.called_in_loop.setdefault(method, []).append(loops[-1])
        elif type(func) is cst.Name:
            self._record_plain_call(node, func.value)

    def _record_plain_call(self, node: cst.Call, name: str) -> None:
        if name == "next" and node.args and type(node.args[0].value) is cst.Call:
            return  # an iterator step, recorded with the iteration sites
        loops = self.cursor.loops
        if loops:
            self.facts.called_in_loop.setdefault(name, []).append(loops[-1])
        passed: dict[int | str, Key] = {}
        for i, arg in enumerate(node.args):
            if arg.star:
                break
            key = self.cursor.key_of(arg.value) if type(arg.value) in (cst.Name, cst.Subscript) else None
            if key is not None:
                passed[arg.keyword.value if arg.keyword else i] = key
        if passed:
            # A loop taking each loader of a container in turn does not repeat a call given that loader.
            spread = {key[1] for key in passed.values()}
            loops = [frame for frame in loops if frame.spreads is None or frame.spreads not in spread]
            self.facts.loader_passes.append(LoaderPass(name, tuple(loops), passed))


def epoch_uses(
    call: LoaderCall,
    loaders: LoaderFacts,
    loops: LoopFacts,
    iteration: IterationFacts,
    names: NameFacts,
    outlived: bool = False,
) -> list[tuple[LoopFrame, Iteration | None]]:
    """The loops in which this loader is iterated once per pass (epochs).

    ``outlived``: only loops the loader outlives.  A function that builds its
    loader and iterates it, called once per epoch, builds a new loader each
    time: its workers die with it whatever ``persistent_workers`` says."""
    uses: list[tuple[LoopFrame, Iteration | None]] = []
    keys = loaders.keys_of(call)
    if not keys:
        return uses
    for it in iteration.iterations:
        if it.key not in keys:
            continue
        if it.outer:
            uses.append((it.outer[-1], it))
        else:
            if outlived and call.function is not None and it.scope.function.name == call.function:
                continue
            for frame in loops.called_in_loop.get(it.scope.function.name, ()):
                uses.append((frame, None))
    for step in loops.loader_passes:
        if not step.loops:
            continue
        fn = names.function_named(step.callee)
        if fn is None:
            continue
        iterated = iteration.iterated_params.get(fn, set())
        for slot, key in step.passed.items():
            if key not in keys:
                continue
            param = fn.params[slot] if isinstance(slot, int) and slot < len(fn.params) else slot
            if param in iterated:
                uses.append((step.loops[-1], None))
    return uses
