"""A fast traversal of a libcst tree for read-only visitors.

``module.visit(visitor)`` rebuilds every node it passes (libcst's visitors
and transformers share one code path) and walks into every whitespace and
punctuation node; on a 20 kB file that costs as much as parsing it.  This
walker calls the same ``visit_<Node>``, ``leave_<Node>`` and
``visit_<Node>_<field>`` / ``leave_<Node>_<field>`` methods of a
``CSTVisitor``, but only descends into fields that can hold code, and
creates nothing.  A ``visit_<Node>`` returning False skips the children, as
in libcst.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import re
import typing
from typing import Any, Callable, TypeVar

import libcst as cst

from loadlint.cst import gate

Hook = Callable[[Any, cst.CSTNode], Any]
FieldHooks = tuple[tuple[str, Hook | None, Hook | None], ...]

#: Whitespace and punctuation: nodes that carry no code.  The walker never
#: visits them, and refuses a visitor's hooks for them (``check_hooks``).
TRIVIA: tuple[type, ...] = (
    cst.BaseParenthesizableWhitespace, cst.TrailingWhitespace, cst.EmptyLine, cst.Newline, cst.Comment,
    cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace,
    cst.RightCurlyBrace, cst.Comma, cst.Semicolon, cst.Colon, cst.Dot, cst.AssignEqual,
)


def node_types(hint: Any) -> set[type]:
    """The node classes an annotation admits (inside unions, optionals and sequences)."""
    if isinstance(hint, type):
        return {hint} if issubclass(hint, cst.CSTNode) else set()
    if typing.get_origin(hint) is typing.Literal:
        return set()
    found: set[type] = set()
    for arg in typing.get_args(hint):
        found |= node_types(arg)
    return found


@functools.cache
def _fields(node_type: type) -> tuple[str, ...]:
    """The fields of ``node_type`` that can hold code: read from libcst's
    annotations (a node that is not ``TRIVIA``, or a sequence of them)."""
    hints = typing.get_type_hints(node_type)
    return tuple(
        field.name for field in dataclasses.fields(node_type)
        if any(not issubclass(kind, TRIVIA) for kind in node_types(hints[field.name]))
    )


_HOOK = re.compile(r"(?:visit|leave)_([A-Za-z]+)(?:_(\w+))?")


def check_hooks(visitor_type: type) -> None:
    """Refuse a visitor whose hooks name a node the walker never visits
    (whitespace, punctuation) or a field it never enters: they would never
    be called, where libcst's own visit calls them.  libcst's no-op hooks
    (a ``CSTVisitor`` has one for every node) are not the visitor's."""
    for klass in visitor_type.__mro__:
        if klass.__module__.split(".")[0] == "libcst":
            continue
        for name in vars(klass):
            match = _HOOK.fullmatch(name)
            node_type = getattr(cst, match[1], None) if match else None
            if match is None or not isinstance(node_type, type) or not issubclass(node_type, cst.CSTNode):
                continue
            if issubclass(node_type, TRIVIA):
                raise TypeError(f"{visitor_type.__qualname__}.{name}: the walker never visits {match[1]} (whitespace or punctuation)")
            if match[2] is not None and dataclasses.is_dataclass(node_type) and match[2] not in _fields(node_type):
                raise TypeError(f"{visitor_type.__qualname__}.{name}: the walker never enters {match[1]}.{match[2]}")


def _hooks(visitor_type: type, node_type: type) -> tuple[Hook | None, Hook | None, FieldHooks]:
    """A visitor's hooks for a node type (kept in ``_TABLES`` by ``walk``)."""
    name = node_type.__name__
    fields = tuple(
        (field, getattr(visitor_type, f"visit_{name}_{field}", None), getattr(visitor_type, f"leave_{name}_{field}", None))
        for field in _fields(node_type)
    )
    return getattr(visitor_type, f"visit_{name}", None), getattr(visitor_type, f"leave_{name}", None), fields


def walk(node: cst.CSTNode, visitor: object) -> None:
    """Visit ``node`` and its code-bearing descendants in field order.

    ``visitor`` has ``visit_<Node>``-style methods, as a ``CSTVisitor`` does;
    it need not be one (a plain class avoids libcst's no-op hooks).
    """
    visitor_type = type(visitor)
    table = _TABLES.get(visitor_type)
    if table is None:
        check_hooks(visitor_type)
        table = _TABLES[visitor_type] = {}
    if not gate.fast():
        _plain(node, visitor, None)
        return
    _walk(node, visitor, table)


#: visitor type -> node type -> its hooks (``_hooks``): one lookup a node.
_TABLES: dict[type, dict[type, tuple[Hook | None, Hook | None, FieldHooks]]] = {}


def _walk(node: cst.CSTNode, visitor: object, table: dict[type, tuple[Hook | None, Hook | None, FieldHooks]]) -> None:
    hooks = table.get(type(node))
    if hooks is None:
        hooks = table[type(node)] = _hooks(type(visitor), type(node))
    visit, leave, fields = hooks
    if visit is not None and visit(visitor, node) is False:
        if leave is not None:
            leave(visitor, node)
        return
    kinds = _KINDS
    for field, before, after in fields:
        value = getattr(node, field)
        if before is not None:
            before(visitor, node)
        kind = kinds.get(type(value))
        if kind is None:
            kind = _kind(type(value))
        if kind == _NODE:
            _walk(value, visitor, table)
        elif kind == _SEQUENCE:
            for child in value:
                child_kind = kinds.get(type(child))
                if child_kind == _NODE or (child_kind is None and _kind(type(child)) == _NODE):
                    _walk(child, visitor, table)
        if after is not None:
            after(visitor, node)
    if leave is not None:
        leave(visitor, node)


def _plain(node: cst.CSTNode, visitor: object, units: tuple[dict[int, int], list[Unit], str] | None,
           unit: int = -1, flat: bool = False) -> None:
    """``walk`` (``units`` None) or ``walk_units`` for plain libcst: every
    field of every node, read from the node itself, whitespace and
    punctuation left out; the hooks looked up at each node, as libcst's
    visitor does.  The fast walkers must find what this finds."""
    if units is not None and unit >= 0:
        units[0][id(node)] = unit
    key = (type(visitor), type(node))
    hooks = _PLAIN.get(key)
    if hooks is None:
        # Every field of the node, as libcst's visitor passes each (looked up once per pair of types).
        name = type(node).__name__
        hooks = _PLAIN[key] = (getattr(type(visitor), f"visit_{name}", None), getattr(type(visitor), f"leave_{name}", None),
                               tuple((f.name, getattr(type(visitor), f"visit_{name}_{f.name}", None),
                                      getattr(type(visitor), f"leave_{name}_{f.name}", None)) for f in dataclasses.fields(node)))
    visit, leave, fields = hooks
    if visit is not None and visit(visitor, node) is False:
        if leave is not None:
            leave(visitor, node)
        return
    # An indented block's statements are units (not in a match statement's cases).
    own = units is not None and (type(node) is cst.Module or type(node) is _INDENTED and not flat)
    flat = flat or type(node) is _MATCH
    for field, before, after in fields:
        if before is not None:
            before(visitor, node)
        value = getattr(node, field)
        if own and field == "body":
            assert units is not None
            indents = () if type(node) is cst.Module else units[1][unit][1] + (
                units[2] if node.indent is None else node.indent,)  # type: ignore[attr-defined]
            for child in value:
                units[1].append((child, indents))
                _plain(child, visitor, units, len(units[1]) - 1, False)
        else:
            for child in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(child, cst.CSTNode) and not isinstance(child, TRIVIA):
                    _plain(child, visitor, units, unit, flat)
        if after is not None:
            after(visitor, node)
    if leave is not None:
        leave(visitor, node)


#: (visitor type, node type) -> its hooks, for ``_plain``.
_PLAIN: dict[tuple[type, type], tuple[Hook | None, Hook | None, FieldHooks]] = {}


def walk_units(module: cst.Module, visitor: object) -> tuple[dict[int, int], list[Unit]]:
    """``walk(module, visitor)``, and ``statement_units(module)`` from the
    same traversal: each node's unit is known where the walk passes it, so
    a pass that needs both pays for one.  Where a hook skips a node's
    children, they are missing from the map (``Positions`` then walks the
    module itself)."""
    visitor_type = type(visitor)
    walkers = _UNIT_WALKERS.get(visitor_type)
    if walkers is None:
        walkers = _UNIT_WALKERS[visitor_type] = _UnitWalkers(visitor_type)
    owner: dict[int, int] = {}
    units: list[Unit] = []
    state = (units, module.default_indent)
    if not gate.fast():
        _plain(module, visitor, (owner, units, module.default_indent))
        return owner, units
    visit, leave, fields = walkers.module_hooks
    if visit is None or visit(visitor, module) is not False:
        for field, before, after in fields:
            if before is not None:
                before(visitor, module)
            if field == "body":
                for stmt in module.body:
                    units.append((stmt, ()))
                    walkers[type(stmt)](stmt, visitor, len(units) - 1, False, owner, state)
            if after is not None:
                after(visitor, module)
    if leave is not None:
        leave(visitor, module)
    return owner, units


class _UnitWalkers(dict[type, Callable[..., None]]):
    """Node type -> the function that walks a node of it for ``walk_units``
    (for one visitor type), made when the type is first met.  Each is
    compiled with the type's fields and the visitor's hooks written out:
    the generic loop of ``_walk`` (a lookup per field and per value) was a
    sixth of the facts' traversal.  A value that is not a node gets a
    function that does nothing."""

    def __init__(self, visitor_type: type) -> None:
        super().__init__()
        check_hooks(visitor_type)
        self.visitor_type = visitor_type
        #: The module's own hooks: ``walk_units`` walks its body itself.
        self.module_hooks = _hooks(visitor_type, cst.Module)

    def __missing__(self, node_type: type) -> Callable[..., None]:
        if cst.CSTNode in node_type.__mro__:  # ``issubclass`` against an abstract class is slow
            made = _unit_walker(self, self.visitor_type, node_type)
        elif node_type in (tuple, list):  # where an annotation said a node: walked all the same
            made = functools.partial(_each, self)
        else:
            made = _not_a_node
        self[node_type] = made
        return made


def _each(walkers: _UnitWalkers, value: Any, visitor: object, unit: int, flat: bool, owner: dict[int, int], state: object) -> None:
    for child in value:
        walkers[type(child)](child, visitor, unit, flat, owner, state)


def _not_a_node(value: object, visitor: object, unit: int, flat: bool, owner: dict[int, int], state: object) -> None:
    pass


def _unit_walker(walkers: _UnitWalkers, visitor_type: type, node_type: type) -> Callable[..., None]:
    """The walker of ``node_type`` (see ``_UnitWalkers``): it records the
    node's unit, calls the hooks ``_walk`` would, in the same order, and
    walks each code field's nodes.  An indented block's statements are
    units of their own (but in a match statement, which indents its cases
    itself); a match statement's nodes all belong to its unit."""
    visit, leave, fields = _hooks(visitor_type, node_type)
    namespace: dict[str, Any] = {"W": walkers, "visit": visit, "leave": leave, "SEQUENCES": (tuple, list)}
    shapes = _shapes(node_type)
    flat = "True" if node_type is _MATCH else "flat"
    walk_fields: list[str] = []
    for i, (field, before, after) in enumerate(fields):
        if before is not None:
            namespace[f"before{i}"] = before
            walk_fields.append(f"before{i}(visitor, node)")
        walk_fields.append(f"value = node.{field}")
        one = f"W[type(value)](value, visitor, unit, {flat}, owner, state)"
        each = ["for child in value:", f"    W[type(child)](child, visitor, unit, {flat}, owner, state)"]
        shape = shapes.get(field)
        if shape == _SEQUENCE:
            walk_fields.extend(each)
        elif shape == _NODE:
            walk_fields.append(one)
        else:  # a union of both, or a field whose type could not be read
            walk_fields.extend(["if type(value) in SEQUENCES:", *("    " + line for line in each), "else:", "    " + one])
        if after is not None:
            namespace[f"after{i}"] = after
            walk_fields.append(f"after{i}(visitor, node)")
    lines = ["def walker(node, visitor, unit, flat, owner, state):", "    owner[id(node)] = unit"]
    if visit is not None:
        lines.extend(["    if visit(visitor, node) is False:", *(["        leave(visitor, node)"] if leave is not None else []),
                      "        return"])
    if node_type is _INDENTED:
        own_units: list[str] = []
        for i, (field, before, after) in enumerate(fields):
            if before is not None:
                own_units.append(f"before{i}(visitor, node)")
            if field == "body":
                own_units.extend([
                    "units, default = state",
                    "indent = node.indent",
                    "indents = units[unit][1] + (default if indent is None else indent,)",
                    "for child in node.body:",
                    "    units.append((child, indents))",
                    "    W[type(child)](child, visitor, len(units) - 1, False, owner, state)",
                ])
            if after is not None:
                own_units.append(f"after{i}(visitor, node)")
        lines.extend(["    if not flat:", *("        " + line for line in own_units or ["pass"]), "    else:",
                      *("        " + line for line in walk_fields or ["pass"])])
    else:
        lines.extend("    " + line for line in walk_fields)
    if leave is not None:
        lines.append("    leave(visitor, node)")
    exec(compile("\n".join(lines), f"<loadlint walker of {node_type.__name__}>", "exec"), namespace)
    walker: Callable[..., None] = namespace["walker"]
    return walker


def _shapes(node_type: type) -> dict[str, int]:
    """Code field -> ``_SEQUENCE`` where its annotation is a sequence of
    nodes, ``_NODE`` where it holds no sequence; a field missing here may hold
    either (checked as the walk goes)."""
    types = {field.name: field.type for field in dataclasses.fields(node_type)}
    shapes: dict[str, int] = {}
    for field in _fields(node_type):
        hint = types.get(field)
        if hint is None or isinstance(hint, str):  # an annotation left as text: not read
            continue
        if typing.get_origin(hint) in _SEQUENCE_TYPES:
            shapes[field] = _SEQUENCE
        elif not _holds_sequence(hint):
            shapes[field] = _NODE
    return shapes


def _holds_sequence(hint: Any) -> bool:
    return typing.get_origin(hint) in _SEQUENCE_TYPES or any(_holds_sequence(arg) for arg in typing.get_args(hint))


_SEQUENCE_TYPES = (collections.abc.Sequence, tuple, list)
#: visitor type -> its walkers (``walk_units``).
_UNIT_WALKERS: dict[type, _UnitWalkers] = {}


def prepare_walkers(visitor_type: type) -> None:
    """Make the walkers of every libcst node type for ``visitor_type`` now
    (about 40 ms of compiling), where forked workers then share them
    rather than each making the ones it meets."""
    walkers = _UNIT_WALKERS.get(visitor_type)
    if walkers is None:
        walkers = _UNIT_WALKERS[visitor_type] = _UnitWalkers(visitor_type)
    for name in getattr(cst, "__all__", dir(cst)):
        node_type = getattr(cst, name, None)
        if isinstance(node_type, type) and cst.CSTNode in node_type.__mro__ and dataclasses.is_dataclass(node_type):
            walkers[node_type]


_INDENTED, _MATCH = cst.IndentedBlock, cst.Match
_OTHER, _NODE, _SEQUENCE = 0, 1, 2
#: What a field value's type is, cached: ``isinstance`` against libcst's
#: abstract node class is slow.
_KINDS: dict[type, int] = {}


def _kind(value_type: type) -> int:
    kind = _NODE if issubclass(value_type, cst.CSTNode) else _SEQUENCE if value_type in (tuple, list) else _OTHER
    _KINDS[value_type] = kind
    return kind


N = TypeVar("N", bound=cst.CSTNode)
#: kind -> a visitor class collecting nodes of that kind (``find_all``).
_FINDERS: dict[type, type] = {}


def find_all(root: cst.CSTNode, kind: type[N]) -> list[N]:
    """The nodes of ``kind`` (a concrete node class) in ``root``, itself
    included, parents first: what ``libcst.matchers.findall`` finds for a
    node type, without its rebuilding visit (and without importing the
    matchers, slow to import).  Children come in field order, which is
    source order but for a few nodes (an argument's value comes before its
    keyword)."""
    finder = _FINDERS.get(kind)
    if finder is None:
        def visit(self: Any, node: cst.CSTNode) -> None:
            self.found.append(node)

        finder = _FINDERS[kind] = type(f"Find{kind.__name__}", (), {f"visit_{kind.__name__}": visit})
    visitor = finder()
    visitor.found = []
    walk(root, visitor)
    return list(visitor.found)


#: A unit: a statement whose positions are computed together (a top-level
#: statement, or one in an indented block), with the indentation its
#: enclosing blocks give it.
Unit = tuple[cst.BaseStatement, tuple[str, ...]]


def statement_units(module: cst.Module) -> tuple[dict[int, int], list[Unit]]:
    """The ``id`` of each code-bearing node of ``module`` (those ``walk``
    visits) -> the index of the innermost unit holding it, and the units.  A
    finding in a method of a large class then costs the positions of one
    statement, not of the class.  Keyed by ``id``: a node's own hash is a
    Python method, a third of the cost.  ``walk_units`` with no hooks: the
    facts' walk finds the same units as it goes."""
    return walk_units(module, _NO_HOOKS)


class _NoHooks:
    pass


_NO_HOOKS = _NoHooks()
