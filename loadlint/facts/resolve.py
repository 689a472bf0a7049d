"""Step 3: names and values.

Our own import table and constant evaluator, used instead of libcst's scope
and qualified-name providers: those build metadata for every node of every
file, which is where TorchFix spends most of its time.  We only need to know
what a handful of names refer to and the value of a few argument expressions.

Values are either a plain Python value or ``UNKNOWN``.  Rules stay silent on
``UNKNOWN``: a false positive costs more trust than a miss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import libcst as cst

from loadlint.types import Descriptor

# The values a resolution gives; rules read them from loadlint.facts.values.
from loadlint.facts.values import MISSING as MISSING
from loadlint.facts.values import UNKNOWN as UNKNOWN
from loadlint.facts.values import Origin as Origin
from loadlint.facts.values import is_known as is_known


def string_value(node: cst.SimpleString) -> Any:
    """``node.evaluated_value``, which compiles the literal (``ast.literal_eval``):
    a string without prefix, backslash or triple quotes is what its quotes hold."""
    value = node.value
    if value[0] in "'\"" and "\\" not in value and value[:3] not in ("'''", '"""'):
        return value[1:-1]
    return node.evaluated_value


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


#: A program point: (its rank in source order, id of its scope, ids of the
#: loops around it in that scope, ids of the if/for/while/try/match blocks
#: around it in that scope, an ``if``'s else branch negated).
Point = tuple[int, int, tuple[int, ...], tuple[int, ...]]


def exclusive(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Two block paths lie in the two branches of one ``if`` (the else
    branch's entry is the negated id): one never runs after the other."""
    for x, y in zip(a, b):
        if x != y:
            return x == -y
    return False


def reaches(change: Point, read: Point) -> bool:
    """A change may have happened when the read runs: it comes first in the
    same scope, outside the other branch of an ``if`` around the read, or
    shares a loop with the read (the next pass), or sits in another scope
    (when it runs is not known).  The one rule for every kind of value:
    namespaces and config objects (``Flow``), ``**kwargs`` dicts, devices
    and samplers (``reaching``)."""
    return change[1] != read[1] or bool(set(change[2]) & set(read[2])) or (
        change[0] < read[0] and not exclusive(change[3], read[3]))


#: Past this many bindings of one name, every binding is kept (the check is
#: linear per read; a generated file may bind a name thousands of times).
MAX_REACHING = 64


def reaching(bindings: list[Binding], read: Point) -> list[Binding]:
    """The bindings of a name that a read at ``read`` may see: those that
    reach it and are not bound over on every path to it (another binding
    after it, before the read, in a block around the read)."""
    if len(bindings) > MAX_REACHING:
        return bindings
    # The last binding before the read that runs on every path to it.
    cut = max((b.point[0] for b in bindings if b.point is not None and b.point[1] == read[1]
               and b.point[0] < read[0] and read[3][: len(b.point[3])] == b.point[3]), default=0)
    return [
        b for b in bindings
        if b.point is None or reaches(b.point, read) and not (b.point[1] == read[1] and b.point[0] < cut)
    ]


@dataclass
class Binding:
    """One binding of a name in a scope.

    ``value`` is the assigned expression for a plain ``name = expr``; None for
    anything else (parameters, loop targets, augmented assignment, imports…),
    which makes the name unresolvable.
    """

    value: cst.BaseExpression | None
    #: Nesting path of the statement (ids of enclosing if/for/while/try blocks).
    path: tuple[int, ...] = ()
    order: int = 0
    #: Where it is made (``reaches``); None: made by the analysis itself.
    point: Point | None = None
    #: ``a, b = build(...)``: the call whose result is unpacked (``value`` stays None).
    unpacks: cst.Call | None = None
    #: An unpacking target's position and the number of targets (``b``: (1, 2)).
    part: tuple[int, int] | None = None
    #: ``a, b = x, y``: the literal's member this name takes (``value`` stays None).
    element: cst.BaseExpression | None = None


@dataclass
class DictMutation:
    kind: str  # "update" | "setitem" | "other"
    value: cst.BaseExpression | None
    key: str | None
    path: tuple[int, ...]
    order: int
    point: Point | None = None


@dataclass(frozen=True)
class Option:
    """One attribute of a parsed namespace: its default value (or UNKNOWN) and origin."""

    value: Any
    origin: Origin | None = None
    #: The module writes the attribute somewhere: known only where a read has
    #: its program point and no write reaches it (``Namespace.flow``).
    written: bool = False


@dataclass(eq=False)
class Namespace:
    """An object whose attributes hold known defaults: an ``argparse``
    namespace, or a dataclass instance a command-line parser fills."""

    options: dict[str, Option | Namespace] = field(default_factory=dict)
    #: Where the object changes after it is made (None: nowhere known).
    flow: Flow | None = None


@dataclass(eq=False)
class Flow:
    """The changes to a value after it is made, for reads resolved at their
    own program point: what is changed after a read does not change what it
    reads; what is changed before it, or in a loop around both, does."""

    #: The value as a whole: ``vars(args)``, ``setattr(args, ...)``, ``args.__dict__``.
    whole: list[Point]
    #: Attribute name -> where ``<name>.<attribute> = ...`` is written (any receiver).
    attrs: dict[str, list[Point]]
    #: id of a read node (``args.workers``, ``vars(args)["workers"]``) -> its point.
    reads: dict[int, Point]

    def changed(self, parts: list[str], read: cst.BaseExpression) -> bool:
        """Whether a change may reach the read of ``parts`` at ``read``."""
        changes = [*self.whole, *(p for part in parts for p in self.attrs.get(part, ()))]
        point = self.reads.get(id(read))
        return bool(changes) if point is None else any(reaches(change, point) for change in changes)

    def anywhere(self, attr: str) -> bool:
        """Whether the value, or the attribute, changes anywhere (a read in another module)."""
        return bool(self.whole or self.attrs.get(attr))


@dataclass(eq=False)
class Scope:
    kind: str  # "module" | "function" | "class"
    parent: Scope | None
    name: str = ""
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    dict_mutations: dict[str, list[DictMutation]] = field(default_factory=dict)
    globals_: set[str] = field(default_factory=set)
    #: Names bound (once) to a parsed namespace, filled after the traversal.
    namespaces: dict[str, Namespace] = field(default_factory=dict)
    #: Parameters whose default every call in the module relies on.
    defaults: dict[str, Option] = field(default_factory=dict)

    def bind(self, name: str, value: cst.BaseExpression | None, path: tuple[int, ...] = (), order: int = 0,
             point: Point | None = None, unpacks: cst.Call | None = None,
             part: tuple[int, int] | None = None, element: cst.BaseExpression | None = None) -> None:
        self.bindings.setdefault(name, []).append(Binding(value, path, order, point, unpacks, part, element))

    def lookup(self, name: str) -> tuple[Scope, list[Binding]] | None:
        """Python's LEGB lookup, skipping class scopes from inner functions."""
        scope: Scope | None = self
        first = True
        while scope is not None:
            if scope.kind != "class" or first:
                if name in scope.bindings and name not in scope.globals_:
                    return scope, scope.bindings[name]
            first = False
            scope = scope.parent
        return None

    @property
    def function(self) -> Scope:
        """The innermost function (or the module) this scope belongs to."""
        scope = self
        while scope.kind == "class" and scope.parent is not None:
            scope = scope.parent
        return scope


def imported_names(node: cst.ImportFrom) -> Iterator[tuple[str, str]]:
    """(local name, imported name) of each alias of ``from m import ...``."""
    if isinstance(node.names, cst.ImportStar):
        return
    for alias in node.names:
        if type(alias.name) is not cst.Name:
            continue
        local = alias.name.value
        if alias.asname is not None and type(alias.asname.name) is cst.Name:
            local = alias.asname.name.value
        yield local, alias.name.value


#: What ``from <module> import *`` binds, for the modules whose names the
#: rules read (torch's ``__all__``); another module's star import is listed
#: in ``ImportTable.stars`` for project analysis.
_STAR_EXPORTS: dict[str, tuple[str, ...]] = {
    "torch.utils.data": (
        "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
        "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
        "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "default_collate", "get_worker_info",
        "random_split",
    ),
}


class ImportTable:
    """Maps local names to fully qualified names, as the imports bind them.

    Bindings are recorded in source order during the single traversal, so a
    later ``class DataLoader`` shadows an earlier import for the code after it.
    """

    __slots__ = ("names", "stars")

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        #: Modules imported with ``*`` whose names are not known here, in order.
        self.stars: list[str] = []

    def add_import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                self.names[alias.asname.name.value] = full
            else:
                # ``import torch.utils.data`` binds ``torch``.
                head = full.split(".", 1)[0]
                self.names[head] = head

    def add_import_from(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module)
        if module is None:
            return
        if type(node.names) is cst.ImportStar:
            exported = _STAR_EXPORTS.get(module)
            if exported is None:
                self.stars.append(module)
            for name in exported or ():
                self.names[name] = f"{module}.{name}"
            return
        for local, name in imported_names(node):
            self.names[local] = f"{module}.{name}"

    def shadow(self, name: str) -> None:
        """A local definition (class, def) replaces an imported name."""
        self.names.pop(name, None)

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The qualified name an expression refers to, if it is an import."""
        return self.qualify_dotted(dotted_name(node))

    def qualify_dotted(self, dotted: str | None) -> str | None:
        """``qualify`` of the expression whose ``dotted_name`` is ``dotted``."""
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self.names.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base


# Canonical names for re-exports: torch exposes the same objects under several
# module paths.
_ALIASES = {
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.utils.data.dataset.TensorDataset": "torch.utils.data.TensorDataset",
    "torch.utils.data.dataset.Dataset": "torch.utils.data.Dataset",
    "torch.utils.data.dataset.IterableDataset": "torch.utils.data.IterableDataset",
    "torch.utils.data.distributed.DistributedSampler": "torch.utils.data.DistributedSampler",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.multiprocessing.spawn.spawn": "torch.multiprocessing.spawn",
    "torch.distributed.distributed_c10d.init_process_group": "torch.distributed.init_process_group",
    # Lightning's Trainer, as its examples import it.
    "lightning.pytorch.trainer.Trainer": "lightning.pytorch.Trainer",
    "lightning.pytorch.trainer.trainer.Trainer": "lightning.pytorch.Trainer",
    "pytorch_lightning.trainer.Trainer": "pytorch_lightning.Trainer",
    "pytorch_lightning.trainer.trainer.Trainer": "pytorch_lightning.Trainer",
}


def canonical(qualified: str | None) -> str | None:
    if qualified is None:
        return None
    return _ALIASES.get(qualified, qualified)


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    cst.Add: lambda a, b: a + b,
    cst.Subtract: lambda a, b: a - b,
    cst.Multiply: lambda a, b: a * b,
    cst.FloorDivide: lambda a, b: a // b,
    cst.Divide: lambda a, b: a / b,
    cst.Modulo: lambda a, b: a % b,
    cst.Power: lambda a, b: a**b if abs(b) < 64 else UNKNOWN,
}


def evaluate(node: cst.BaseExpression | None, scope: Scope | None, _depth: int = 0) -> Any:
    """The value of a constant expression, or UNKNOWN.

    Literals, names bound exactly once to such an expression (in the function
    or at module level), unary minus and simple arithmetic, and a conditional
    expression whose branches agree.
    """
    if node is None or _depth > 20:
        return UNKNOWN
    if type(node) is cst.Integer:
        # libcst evaluates through ast.literal_eval, a compile per number.
        digits = node.value
        plain = digits.isascii() and digits.isdigit() and (digits[0] != "0" or not digits.strip("0"))
        return int(digits) if plain else node.evaluated_value
    if type(node) is cst.Float:
        return node.evaluated_value
    if type(node) is cst.SimpleString:
        try:
            return string_value(node)
        except Exception:  # libcst raises on odd prefixes; treat as unknown
            return UNKNOWN
    if type(node) is cst.ConcatenatedString:
        try:
            value = node.evaluated_value
        except Exception:
            return UNKNOWN
        return UNKNOWN if value is None else value
    if type(node) is cst.Name:
        if node.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.value]
        if scope is None:
            return UNKNOWN
        found = scope.lookup(node.value)
        if found is None:
            return UNKNOWN
        owner, bindings = found
        if len(bindings) == 1 and bindings[0].value is None and node.value in owner.defaults:
            return owner.defaults[node.value].value
        if len(bindings) != 1 or bindings[0].value is None:
            return UNKNOWN
        return evaluate(bindings[0].value, owner, _depth + 1)
    if type(node) is cst.UnaryOperation:
        operand = evaluate(node.expression, scope, _depth + 1)
        if operand is UNKNOWN:
            return UNKNOWN
        try:
            if type(node.operator) is cst.Minus:
                return -operand
            if type(node.operator) is cst.Plus:
                return +operand
            if type(node.operator) is cst.Not:
                return not operand
        except TypeError:
            return UNKNOWN
        return UNKNOWN
    if type(node) is cst.BinaryOperation:
        op = _BINOPS.get(type(node.operator))
        if op is None:
            return UNKNOWN
        left = evaluate(node.left, scope, _depth + 1)
        if left is UNKNOWN:
            return UNKNOWN
        right = evaluate(node.right, scope, _depth + 1)
        if right is UNKNOWN:
            return UNKNOWN
        if not all(type(v) in (int, float) for v in (left, right)):
            return UNKNOWN
        try:
            return op(left, right)
        except (ArithmeticError, ValueError, OverflowError):
            return UNKNOWN
    if type(node) is cst.Attribute or type(node) is cst.Subscript:
        option = option_of(node, scope)
        return UNKNOWN if option is None else option.value
    if type(node) is cst.IfExp:
        body = evaluate(node.body, scope, _depth + 1)
        orelse = evaluate(node.orelse, scope, _depth + 1)
        if body is not UNKNOWN and orelse is not UNKNOWN and type(body) is type(orelse) and body == orelse:
            return body
        return UNKNOWN
    return UNKNOWN


def follow_name(node: cst.BaseExpression, scope: Scope | None, depth: int = 0) -> tuple[cst.BaseExpression, Scope | None]:
    """Follow a name bound exactly once to its expression (for structure, not value)."""
    while type(node) is cst.Name and scope is not None and depth < 10:
        found = scope.lookup(node.value)
        if found is None:
            break
        owner, bindings = found
        if len(bindings) != 1 or bindings[0].value is None:
            break
        node, scope = bindings[0].value, owner
        depth += 1
    return node, scope


def _attribute_path(node: cst.BaseExpression) -> tuple[str, list[str]] | None:
    """``("args", ["data", "workers"])`` for ``args.data.workers`` and
    ``vars(args)["workers"]``; None for anything else."""
    parts: list[str] = []
    while True:
        if type(node) is cst.Attribute:
            parts.append(node.attr.value)
            node = node.value
        elif (
            type(node) is cst.Subscript and len(node.slice) == 1
            and type(node.slice[0].slice) is cst.Index
            and type(node.slice[0].slice.value) is cst.SimpleString
            and type(node.value) is cst.Call and type(node.value.func) is cst.Name
            and node.value.func.value == "vars" and len(node.value.args) == 1
        ):
            parts.append(str(string_value(node.slice[0].slice.value)))
            node = node.value.args[0].value
        else:
            break
    if type(node) is not cst.Name or not parts:
        return None
    return node.value, parts[::-1]


def option_of(node: cst.BaseExpression | None, scope: Scope | None) -> Option | None:
    """The default an attribute read of a parsed namespace gives
    (``args.workers``, ``vars(args)["workers"]``, ``cfg.data.workers``), or
    None.  A name bound once to such a read is followed."""
    if node is None:
        return None
    if type(node) is cst.Name and scope is not None:
        found = scope.lookup(node.value)
        if found is not None and len(found[1]) == 1 and node.value in found[0].defaults:
            return found[0].defaults[node.value]
    node, scope = follow_name(node, scope)
    path = _attribute_path(node)
    if path is None or scope is None:
        return None
    head, parts = path
    found = scope.lookup(head)
    if found is None or len(found[1]) != 1:
        return None
    item: Option | Namespace | None = found[0].namespaces.get(head)
    flow = item.flow if isinstance(item, Namespace) else None
    if flow is not None and flow.changed(parts, node):
        return None
    for part in parts:
        if not isinstance(item, Namespace):
            return None
        item = item.options.get(part)
    if not isinstance(item, Option) or item.written and (flow is None or id(node) not in flow.reads):
        return None
    return item


def origin(node: cst.BaseExpression | None, scope: Scope | None) -> Origin | None:
    """Where the value of an expression comes from, when it is an overridable default."""
    option = option_of(node, scope)
    return option.origin if option is not None and option.value is not UNKNOWN else None


def bind_imported(module: Scope, cpu_count_calls: set[int], given: dict[str, Descriptor]) -> None:
    """Give imported names the values of the project constants they name
    (``{"config.WORKERS": {"value": 16, "note": ...}}``), as a namespace
    default is given: the rules use the value and say where it comes from.
    A name bound more than once (the import, then something else) keeps its
    bindings."""
    for local, descriptor in given.items():
        head, _, attr = local.partition(".")
        found = module.bindings.get(head)
        if found is None or len(found) != 1 or found[0].value is not None:
            continue
        if "." in attr and not descriptor.get("tree"):
            continue  # only a config tree's defaults are read through nested attributes
        note = descriptor.get("note")
        found_origin = Origin(f"with {note}") if note else None
        if "value" in descriptor:
            option = Option(descriptor["value"], found_origin)
            if attr:
                # ``cfg.DATA.NUM_WORKERS`` of an imported config tree: nested namespaces.
                *parents, leaf = attr.split(".")
                ns = module.namespaces.setdefault(head, Namespace())
                for part in parents:
                    inner = ns.options.setdefault(part, Namespace())
                    if not isinstance(inner, Namespace):
                        break
                    ns = inner
                else:
                    ns.options[leaf] = option
            else:
                module.defaults[head] = option
        elif descriptor.get("cpu_count") and not attr:
            node = cst.parse_expression("os.cpu_count()")
            cpu_count_calls.add(id(node))
            module.bindings[head] = [Binding(node)]
