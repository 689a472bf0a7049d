"""Node constructors for the parser: libcst's, less their per-node cost.

The native parser builds every node by calling its class; each class's
dataclass ``__init__`` stores the fields with ``object.__setattr__`` (a
frozen class refuses plain assignment) and calls ``__post_init__``, which
validates the node.  The parser's output is valid by construction: these
constructors store each field straight through its slot, which a frozen
dataclass cannot do (a tenth of the parse), and validate the node only when
``CHECKS`` says so for the thread building it (skipping it during a parse
saves a sixth).  Outside a parse, and in any other thread, they validate
every node, as libcst's do.

They are made from the classes themselves (fields, defaults, default
factories), so a libcst release that changes a node changes its constructor
too.  A class this cannot reproduce exactly (fields outside ``__init__``,
keyword-only or slot-less fields, its own ``__post_init__``, an ``__init__``
not made by dataclasses) keeps libcst's.  ``slicing.prepare`` makes them
once per process; ``slicing.fast_nodes`` installs them only while loadlint
parses (a run installs them once: swapping classes' constructors at every
parse made the interpreter drop what it had learnt about those classes each
time, a tenth of a run).
"""

from __future__ import annotations

import dataclasses
import threading
import types
from typing import Any, Callable

#: (class, libcst's ``__init__``, the fast one) for each node class.
Constructors = list[tuple[type, Callable[..., None], Callable[..., None]]]


class _Checks(threading.local):
    """Which nodes the constructors validate in this thread: every node (as
    libcst's do), or while the thread parses none, or only names.  Per
    thread: a node another thread builds meanwhile is still checked."""

    nodes = True
    names = True


CHECKS = _Checks()


def constructors(cst: Any) -> Constructors:
    """The fast constructors of the node classes ``cst`` (libcst) exports;
    they check what ``CHECKS`` says."""
    base = cst.CSTNode
    namespace: dict[str, Any] = {"_STATE": CHECKS}
    sources: list[str] = []
    classes: list[type] = []
    for name in sorted(getattr(cst, "__all__", dir(cst))):
        cls = getattr(cst, name, None)
        if not isinstance(cls, type) or base not in cls.__mro__ or cls in classes:
            continue
        # A name may be checked while others are not: when its text is not ASCII (``slicing.parser_nodes``).
        source = _source(cls, base, f"_{len(classes)}", namespace, flag="names" if cls is cst.Name else "nodes")
        if source is not None:
            sources.append(source)
            classes.append(cls)
    # One compile for all: a compile per class cost more than the import of the rules.
    exec(compile("\n".join(sources), "<loadlint node constructors>", "exec"), namespace)
    made: Constructors = []
    for i, cls in enumerate(classes):
        fast = namespace[f"_{i}"]
        original = vars(cls)["__init__"]
        # What introspection reads (a strategy built from the signature's types, a help text) is libcst's.
        fast.__name__, fast.__qualname__, fast.__module__ = "__init__", original.__qualname__, original.__module__
        fast.__doc__, fast.__annotations__ = original.__doc__, dict(original.__annotations__)
        made.append((cls, original, fast))
    return made


def install(made: Constructors, fast: bool) -> None:
    """The fast constructors in place (``fast``), or libcst's."""
    for cls, original, quick in made:
        cls.__init__ = quick if fast else original  # type: ignore[misc]


def _source(cls: type, base: type, name: str, namespace: dict[str, Any], flag: str) -> str | None:
    """The definition of ``cls``'s fast constructor, as ``name``; the values
    it reads are added to ``namespace``; it calls ``__post_init__`` as
    libcst's does when ``CHECKS``'s ``flag`` is true in the building thread.  None: libcst's is kept."""
    original = vars(cls).get("__init__")
    if not dataclasses.is_dataclass(cls) or not isinstance(original, types.FunctionType):
        return None
    if cls.__post_init__ is not base.__post_init__:  # type: ignore[attr-defined]
        return None
    fields = dataclasses.fields(cls)
    code = original.__code__
    names = tuple(f.name for f in fields)
    if any(not f.init for f in fields) or code.co_kwonlyargcount or code.co_varnames[: code.co_argcount] != ("self", *names):
        return None
    # Each parameter's default as libcst's constructor has it: for a default
    # factory, the marker its constructor replaces by a call of the factory
    # (passed explicitly too, as a caller reading the signature may do).
    defaults = dict(zip(reversed(code.co_varnames[: code.co_argcount]), reversed(original.__defaults__ or ())))
    values: dict[str, Any] = {}
    params, body = [], []
    for i, field in enumerate(fields):
        slot = next((vars(k)[field.name] for k in cls.__mro__ if isinstance(vars(k).get(field.name), types.MemberDescriptorType)), None)
        if slot is None:
            return None
        values[f"{name}_set{i}"] = slot.__set__
        if field.default is not dataclasses.MISSING:
            values[f"{name}_default{i}"] = field.default
            params.append(f"{field.name}={name}_default{i}")
        elif field.default_factory is not dataclasses.MISSING:
            if field.name not in defaults:
                return None
            values[f"{name}_factory{i}"] = field.default_factory
            values[f"{name}_marker{i}"] = defaults[field.name]
            params.append(f"{field.name}={name}_marker{i}")
            body.append(f"    if {field.name} is {name}_marker{i}:\n        {field.name} = {name}_factory{i}()")
        else:
            params.append(field.name)
        body.append(f"    {name}_set{i}(self, {field.name})")
    body.append(f"    if _STATE.{flag}:\n        self.__post_init__()")
    namespace.update(values)
    return f"def {name}(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"]) + "\n"
