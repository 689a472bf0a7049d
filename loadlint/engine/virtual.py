"""A fix's effect on a module's facts, without editing its text.

``check`` decides every fix it marks (``loadlint.engine.withhold``): each decision
is a trial of the fixed text, and parsing and collecting a big module again
for every call of it cost far more than the first analysis.  Most of those
fixes set one keyword of a DataLoader call to a literal (``num_workers=8``,
``pin_memory=True``, ``persistent_workers=True``), and the facts of the
fixed module are then the facts as they are with that argument replaced:
the rules can run again on them, parsing and collecting nothing.

Only such changes are simulated, and one more: the run-time worker count
(``num_workers=LOADER_WORKERS``, the constant defined after the imports,
with ``import os`` when the module has no ``os``).  The constant's value is
unknown to every rule, as the name is where it is not bound; the statements
added read nothing of the module and no other statement reads them.  A fix
that removes an argument, writes another expression, adds another import
or statement, or touches a keyword a ``**dict`` also carries, is left to a
real trial.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Iterable

import libcst as cst

from loadlint.rules.shared import RANK_WORKERS_CONSTANT, WORKERS_CONSTANT, WORKERS_NAME

if TYPE_CHECKING:
    from loadlint.facts.collect import ModuleFacts
    from loadlint.rules.base import FixSpec

#: The keywords whose values no fact of the collection pass reads: the rules
#: read them from the call's arguments.
SIMULATED = frozenset({"num_workers", "pin_memory", "persistent_workers", "prefetch_factor"})
_LITERAL = re.compile(r"(?:0|[1-9][0-9]*|True|False|None)\Z")
#: The statements of the run-time worker count a fix may add (``rules.shared.workers_code``).
_WORKER_STATEMENTS = frozenset({*WORKERS_CONSTANT, *RANK_WORKERS_CONSTANT})
#: ``os`` as a name anywhere in the text (a comment or string too), but as an
#: attribute or in ``from os import``: where it is, an added ``import os``
#: could change what the module's own ``os`` means.  (Written to start with
#: the literal, which the engine finds thirty times faster than a lookbehind.)
_OS = re.compile(r"os\b(?<![.\w]os)(?<!from os)")


class Unlocated(Exception):
    """A rule reported a node the analysed text does not hold (one of ``patched``'s)."""


def literal(code: str) -> cst.BaseExpression:
    """The node ``code`` (a ``_LITERAL``) parses to."""
    return cst.Integer(code) if code[0].isdigit() else cst.Name(code)


def patched(info: ModuleFacts, specs: Iterable[FixSpec], text: str | None = None) -> tuple[ModuleFacts, set[int]] | None:
    """``info`` as if ``specs`` were applied, and the ids of the nodes made
    for it (the text holds none: a finding on one needs a real trial); None
    when they cannot be simulated.  ``text``: the module's (without it, a
    fix adding ``import os`` is not simulated)."""
    changes: dict[int, dict[str, str]] = {}
    made: set[int] = set()
    for spec in specs:
        if spec.replace or spec.prepend or spec.hoist or spec.guard or not _simulated_imports(spec.imports, text):
            return None
        for change in spec.calls:
            if change.remove or not change.set:
                return None
            sets = changes.setdefault(id(change.call), {})
            for name, code in change.set.items():
                if name not in SIMULATED or sets.get(name, code) != code:
                    return None
                if not (_LITERAL.match(code) or name == "num_workers" and code == WORKERS_NAME):
                    return None
                sets[name] = code
    calls = []
    for call in info.calls:
        sets = changes.pop(id(call.node), {})
        if not sets:
            calls.append(call)
            continue
        # A bare generator argument must be the only one: a keyword added
        # to ``DataLoader(x for x in y)`` is a syntax error a real trial sees.
        if any(name in call.dict_args for name in sets) or any(
            type(arg.value) is cst.GeneratorExp and not arg.value.lpar for arg in call.node.args
        ):
            return None
        args = dict(call.args)
        for name, code in sets.items():
            old, value = args.get(name), literal(code)
            arg = cst.Arg(value, keyword=cst.Name(name)) if old is None else old.with_changes(value=value)
            args[name] = arg
            made |= {id(arg), id(value), id(arg.keyword)}
        calls.append(replace(call, args=args))
    if changes:  # a call the facts do not know as a DataLoader
        return None
    return replace(info, loaders=replace(info.loaders, calls=calls)), made


def _simulated_imports(added: list[str], text: str | None) -> bool:
    """Whether the statements a fix adds after the imports are the run-time
    worker count's, which no fact of the module reads."""
    for statement in added:
        if statement == "import os":
            if text is None or _OS.search(text):
                return False
        elif statement not in _WORKER_STATEMENTS:
            return False
    return True
