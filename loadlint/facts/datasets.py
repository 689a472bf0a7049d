"""Dataset classes: what a loader's dataset is (a local class, an iterable
dataset, a dataset held in memory), and what its methods do that matters to
workers (random generators created before the workers, ``get_worker_info()``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from loadlint.cst.walk import find_all
from loadlint.facts.cursor import Provider
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import ClassFacts, FunctionFacts, NameFacts
from loadlint.facts.resolve import MISSING, Scope, canonical, dotted_name, follow_name

ITERABLE_BASES = {
    "torch.utils.data.IterableDataset",
    "torch.utils.data.IterDataPipe",
    "torch.utils.data.datapipes.datapipe.IterDataPipe",
    "datasets.IterableDataset",
    "webdataset.WebDataset",
}
#: DataPipes shard themselves (``sharding_filter``).
DATAPIPE_BASES = ("torch.utils.data.IterDataPipe", "torch.utils.data.datapipes.datapipe.IterDataPipe")
_MAP_BASES = {"torch.utils.data.Dataset", "torch.utils.data.TensorDataset"}
_RNG_CALLS = {
    "numpy.random.default_rng",
    "numpy.random.RandomState",
    "numpy.random.Generator",
    "random.Random",
    "torch.Generator",
}
#: The methods whose code decides whether a local dataset is held in memory.
_MEMORY_METHODS = ("__init__", "__getitem__", "__getitems__")
_ON_THE_FLY = frozenset({"set_transform", "with_transform"})
#: The methods a worker process runs.
WORKER_METHODS = ("__init__", "__getitem__", "__getitems__", "__iter__")


@dataclass
class DatasetFacts:
    """What Dataset methods do that matters once workers copy them."""

    #: Module-level names bound to a random generator instance.
    module_rngs: set[str] = field(default_factory=set)
    #: ``self.<attr>`` generators each ``__init__`` creates.
    rng_attrs: dict[FunctionFacts, set[str]] = field(default_factory=dict)
    #: ``self.<attr>`` names each method reads.
    self_attrs: dict[FunctionFacts, set[str]] = field(default_factory=dict)
    #: Functions that call ``get_worker_info()`` (or shard by node).
    worker_info_callers: set[FunctionFacts] = field(default_factory=set)
    #: The calls of each ``__init__``/``__getitem__``/``__getitems__``, with
    #: their qualified callee (None when not an import).
    method_calls: dict[FunctionFacts, list[tuple[str | None, cst.Call]]] = field(default_factory=dict)
    #: What each function returns (None for a bare ``return``): a dataset or
    #: a worker function that a helper builds.
    returns: dict[FunctionFacts, list[cst.BaseExpression | None]] = field(default_factory=dict)
    #: Calls of plain names that are not imports, by name, with their scope:
    #: the call sites of this module's helpers.
    name_calls: dict[str, list[tuple[cst.Call, Scope]]] = field(default_factory=dict)
    #: ``self.<attr> = value`` in methods, by (class name, attribute); the
    #: value is None when the assignment is not a plain one.
    attr_values: dict[tuple[str, str], list[tuple[FunctionFacts, cst.BaseExpression | None]]] = field(
        default_factory=dict
    )
    #: A Hugging Face dataset transformed item by item as it is read
    #: (``set_transform``/``with_transform``) somewhere in the module.
    transforms_on_the_fly: bool = False
    #: ``in_memory_dataset``'s answers by loader call (kept with it: an id
    #: is not reused while the call lives): the rules ask it again on every
    #: pass over the same facts.
    in_memory: dict[int, tuple[LoaderCall, bool]] = field(default_factory=dict, compare=False, repr=False)


class DatasetProvider(Provider[DatasetFacts]):
    """Records generators, ``self`` reads and worker-info calls."""

    def visit_Assign(self, node: cst.Assign) -> None:
        cursor = self.cursor
        fn = cursor.function
        single = len(node.targets) == 1
        for target in node.targets:
            self._record_attr(target.target, node.value if single else None)
        if type(node.value) is not cst.Call:
            return
        if fn is not None and fn.name != "__init__":
            return
        if cursor.qualify(node.value.func) not in _RNG_CALLS:
            return
        for target in node.targets:
            if fn is None and type(target.target) is cst.Name:
                # ``rng = np.random.default_rng()`` at module level
                self.facts.module_rngs.add(target.target.value)
            elif fn is not None:
                dotted = dotted_name(target.target)
                if dotted and dotted.startswith("self."):
                    self.facts.rng_attrs.setdefault(fn, set()).add(dotted[5:])

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._record_attr(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._record_attr(node.target, None)

    def _record_attr(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        fn = self.cursor.function
        if fn is None or fn.class_name is None:
            return
        if type(target) is cst.Tuple or type(target) is cst.List:
            for element in target.elements:
                self._record_attr(element.value, None)
        elif type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self":
            self.facts.attr_values.setdefault((fn.class_name, target.attr.value), []).append((fn, value))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        fn = self.cursor.function
        if fn is not None and fn.class_name is not None and type(node.value) is cst.Name and node.value.value == "self":
            self.facts.self_attrs.setdefault(fn, set()).add(node.attr.value)

    def visit_Return(self, node: cst.Return) -> None:
        fn = self.cursor.function
        if fn is not None:
            self.facts.returns.setdefault(fn, []).append(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        cursor = self.cursor
        func = node.func
        qualified = cursor.qualified
        if type(func) is cst.Name and qualified is None:
            self.facts.name_calls.setdefault(func.value, []).append((node, cursor.scope))
        elif type(func) is cst.Attribute and func.attr.value in _ON_THE_FLY:
            self.facts.transforms_on_the_fly = True
        fn = cursor.function
        if fn is None:
            return
        if fn.class_name is not None and fn.name in _MEMORY_METHODS:
            self.facts.method_calls.setdefault(fn, []).append((qualified, node))
        if (qualified is not None and qualified.endswith("get_worker_info")) or (
            type(func) is cst.Name and func.value in ("get_worker_info", "split_dataset_by_node")
        ):
            self.facts.worker_info_callers.add(fn)


def helper(names: NameFacts, call: cst.BaseExpression, scope: Scope | None) -> FunctionFacts | None:
    """The plain function of this module (not a method) that a call calls."""
    if type(call) is not cst.Call or type(call.func) is not cst.Name or scope is None:
        return None
    definition = names.definition(call.func.value, scope)
    if isinstance(definition, FunctionFacts) and definition.class_name is None:
        return definition
    return None


def passed_for(
    names: NameFacts, facts: DatasetFacts, name: str, scope: Scope
) -> list[tuple[cst.BaseExpression, Scope]]:
    """What the calls of this module pass for ``name`` when it is a parameter
    of the plain function whose scope ``scope`` is (by position or keyword;
    a call that hides it behind ``*args``/``**kwargs`` passes nothing known)."""
    found = scope.lookup(name)
    if found is None or found[0].kind != "function":
        return []
    fn = next((f for f in names.functions if f.scope is found[0] and f.class_name is None), None)
    if fn is None or len(found[1]) != 1:  # a parameter the function rebinds is not what was passed
        return []
    params = fn.node.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    if name not in positional and name not in (p.name.value for p in params.kwonly_params):
        return []
    keyword_ok = name not in (p.name.value for p in params.posonly_params)
    out = []
    for call, call_scope in facts.name_calls.get(fn.name, ()):
        if names.definition(fn.name, call_scope) is not fn:
            continue
        position = 0
        for arg in call.args:
            if arg.star:
                break
            if arg.keyword is not None:
                if keyword_ok and arg.keyword.value == name:
                    out.append((arg.value, call_scope))
                continue
            if position < len(positional) and positional[position] == name:
                out.append((arg.value, call_scope))
            position += 1
    return out


def dataset_class(names: NameFacts, call: LoaderCall) -> tuple[str | None, ClassFacts | None]:
    """(qualified name, local class facts) of the dataset argument's constructor."""
    expr = call.expr("dataset")
    if expr is None:
        return None, None
    expr, _ = follow_name(expr, call.scope)
    if type(expr) is not cst.Call:
        return None, None
    local = expr.func.value if type(expr.func) is cst.Name else None
    if local is not None and local in names.classes:
        return local, names.classes[local]
    return canonical(names.imports.qualify(expr.func)), None


def is_tensor_dataset(names: NameFacts, call: LoaderCall) -> bool:
    """The dataset is a ``TensorDataset`` (in memory)."""
    return dataset_class(names, call)[0] == "torch.utils.data.TensorDataset"


def is_iterable_dataset(names: NameFacts, call: LoaderCall) -> bool | None:
    """True/False when the dataset's kind is known, None when it is not."""
    qualified, cls = dataset_class(names, call)
    if cls is not None:
        bases = names.class_bases(cls)
        if bases & ITERABLE_BASES:
            return True
        if bases & _MAP_BASES or "__getitem__" in cls.methods:
            return False
        return None
    if qualified in ITERABLE_BASES:
        return True
    if qualified in _MAP_BASES:
        return False
    return None


# -- datasets held in memory ---------------------------------------------------

#: Constant tensors (``torch.zeros(3, 64, 64)``): built per item, the same
#: tensor for every item stands for the loading left out (a placeholder).
_PLACEHOLDERS = frozenset(f"torch.{name}" for name in ("zeros", "ones", "full", "empty", "eye"))
#: torch calls that draw or compute a tensor from values: per item, the data itself.
_DRAWN = frozenset(
    f"torch.{name}" for name in ("arange", "randn", "rand", "randint", "randperm", "linspace", "tensor", "as_tensor")
)
#: torch calls that build a tensor in memory from sizes, values or options.
TENSOR_FACTORIES = _DRAWN | _PLACEHOLDERS
#: What a ``__getitem__`` may call to compute its item: the drawn tensors,
#: and what combines tensors in memory.
_COMPUTED = _DRAWN | frozenset(f"torch.{name}" for name in ("cat", "stack", "sort", "Generator"))
#: Tensor methods that compute in memory (no storage, no device).
_TENSOR_METHODS = frozenset({
    "item", "tolist", "clone", "unique", "nelement", "numel", "size", "flip", "long", "float", "sum",
    "view", "reshape", "unsqueeze", "squeeze", "contiguous", "manual_seed",
})
#: Other functions that only compute from their arguments.
_PURE_FUNCTIONS = frozenset({"pickle.dumps"})
#: Builtins that compute from their arguments without any I/O.
_PURE_BUILTINS = frozenset({
    "len", "int", "float", "bool", "abs", "min", "max", "round", "slice", "divmod", "isinstance", "hash", "str",
})
#: Builtins that build an in-memory sequence from in-memory arguments.
_SEQUENCE_BUILTINS = frozenset({"range", "list", "tuple"})
#: Packages whose names a ``__getitem__`` may read, in annotations or for
#: constants (its calls are checked apart).
_PURE_MODULES = frozenset({"torch", "numpy", "math", "typing", "collections", "pickle"})
_LITERALS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp)
_MAX_DEPTH = 12


def _builtin(func: cst.BaseExpression, scope: Scope) -> str | None:
    """The builtin a callee names, when no binding shadows it."""
    if type(func) is cst.Name and scope.lookup(func.value) is None:
        return func.value
    return None


def _pure_call(qualified: str | None, node: cst.Call, scope: Scope, factories: bool = True) -> bool:
    """A call that reads nothing from outside the process: a pure builtin, a
    sequence builtin, ``super().__init__(...)``, a tensor drawn or computed
    from values, a tensor method computing in memory or (with
    ``factories``) a constant tensor factory."""
    name = canonical(qualified)
    if name in _COMPUTED or name in _PURE_FUNCTIONS or (factories and name in _PLACEHOLDERS):
        return True
    builtin = _builtin(node.func, scope)
    if builtin in _PURE_BUILTINS or builtin in _SEQUENCE_BUILTINS or builtin == "super":
        return True
    func = node.func
    if type(func) is cst.Attribute and qualified is None and func.attr.value in _TENSOR_METHODS:
        return True
    return type(func) is cst.Attribute and func.attr.value == "__init__" and type(func.value) is cst.Call and (
        _builtin(func.value.func, scope) == "super"
    )


def _pure(node: cst.CSTNode, names: NameFacts, scope: Scope, depth: int = 0) -> bool:
    """An expression that calls nothing but pure calls (no lambda, no await)."""
    if depth > _MAX_DEPTH or isinstance(node, (cst.Lambda, cst.Await, cst.Yield)):
        return False
    if type(node) is cst.Call and not _pure_call(names.imports.qualify(node.func), node, scope):
        return False
    return all(_pure(child, names, scope, depth + 1) for child in node.children)


def in_memory_value(expr: cst.BaseExpression, scope: Scope, names: NameFacts, depth: int = 0) -> bool:
    """The expression is a value held in memory: a literal, a list, tuple or
    set of such values (or a comprehension over them), ``range(...)``, or a
    tensor built by a torch factory.  A name counts when it is bound once, to
    such a value; anything else (a parameter, a call result) does not."""
    if depth > _MAX_DEPTH:
        return False
    if type(expr) is cst.Name:
        target, owner = follow_name(expr, scope)
        if target is expr or owner is None:
            return expr.value in ("True", "False", "None")
        return in_memory_value(target, owner, names, depth + 1)
    if isinstance(expr, _LITERALS):
        return True
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return all(
            in_memory_value(e.value.value if type(e.value) is cst.StarredElement else e.value, scope, names, depth + 1)
            for e in expr.elements
        )
    if type(expr) is cst.Dict:
        return all(
            type(e) is cst.DictElement and in_memory_value(e.key, scope, names, depth + 1)
            and in_memory_value(e.value, scope, names, depth + 1)
            for e in expr.elements
        )
    if isinstance(expr, _COMPREHENSIONS):
        clauses: list[cst.CompFor] = []
        clause: cst.CompFor | None = expr.for_in
        while clause is not None:
            clauses.append(clause)
            clause = clause.inner_for_in
        # The loop variables are bound in the comprehension: its element is
        # judged by what it calls, its sources by what they are.
        return _pure(expr.elt, names, scope) and all(
            in_memory_value(c.iter, scope, names, depth + 1) and all(_pure(i, names, scope) for i in c.ifs)
            for c in clauses
        )
    if type(expr) is cst.IfExp:
        return all(in_memory_value(e, scope, names, depth + 1) for e in (expr.body, expr.orelse))
    if type(expr) is cst.Subscript:
        # A part of a value in memory (``perm[:n]``) is in memory.
        return in_memory_value(expr.value, scope, names, depth + 1) and all(
            _pure(element, names, scope) for element in expr.slice
        )
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
        parts = [expr.left, expr.right] if isinstance(expr, cst.BinaryOperation) else [expr.expression]
        return all(in_memory_value(p, scope, names, depth + 1) for p in parts)
    if type(expr) is cst.Call:
        return _in_memory_call(expr, scope, names, depth)
    return False


def _in_memory_call(call: cst.Call, scope: Scope, names: NameFacts, depth: int) -> bool:
    qualified = canonical(names.imports.qualify(call.func))
    if qualified in TENSOR_FACTORIES or _builtin(call.func, scope) == "range":
        # Sizes, values and options: whatever they are, the result is in memory.
        return all(_pure(arg.value, names, scope) for arg in call.args)
    if _builtin(call.func, scope) in ("list", "tuple"):
        return len(call.args) <= 1 and all(in_memory_value(a.value, scope, names, depth + 1) for a in call.args)
    return False


def _calls_only_pure(fn: FunctionFacts, facts: DatasetFacts, factories: bool) -> bool:
    calls = facts.method_calls.get(fn, ())
    cached = set() if factories else _cached_calls(fn)
    return all(_pure_call(qualified, node, fn.scope, factories or id(node) in cached) for qualified, node in calls)


def _cached_calls(fn: FunctionFacts) -> set[int]:
    """Calls whose result the method stores on its first run only (``if
    self.x is None: self.x = torch.randn(...)``, composer's test datasets):
    built once, like in ``__init__``."""
    out = set()
    for node in find_all(fn.node, cst.If):
        test = node.test
        if not (type(test) is cst.Comparison and len(test.comparisons) == 1
                and type(test.comparisons[0].operator) is cst.Is and type(test.comparisons[0].comparator) is cst.Name
                and test.comparisons[0].comparator.value == "None"):
            continue
        attr = dotted_name(test.left)
        for assign in find_all(node.body, cst.Assign) if attr and attr.startswith("self.") else ():
            if len(assign.targets) == 1 and dotted_name(assign.targets[0].target) == attr and type(assign.value) is cst.Call:
                out.add(id(assign.value))
    return out


def _reads_module_data(fn: FunctionFacts, names: NameFacts) -> bool:
    """The method reads a module-level name that may not be in memory (a
    memory map, a lazy table, an imported object)."""
    # ``names_used`` also holds attribute names (``self.config``): only the
    # names read as names count here.
    fields = {id(n.attr) for n in find_all(fn.node, cst.Attribute)}
    fields.update(id(a.keyword) for a in find_all(fn.node, cst.Arg) if a.keyword is not None)
    read = {n.value for n in find_all(fn.node, cst.Name) if id(n) not in fields}
    for name in fn.names_used & read:
        found = fn.scope.lookup(name)
        if found is None or found[0].kind != "module":
            continue
        imported = names.imports.names.get(name)
        if imported is not None and imported.split(".", 1)[0] in _PURE_MODULES:
            continue
        target, owner = follow_name(cst.Name(name), fn.scope)
        if owner is None or not in_memory_value(target, owner, names):
            return True
    return False


def _attribute_in_memory(attr: str, hierarchy: list[ClassFacts], facts: DatasetFacts, names: NameFacts) -> bool:
    assignments = [a for klass in hierarchy for a in facts.attr_values.get((klass.name, attr), ())]
    if not any(fn.name == "__init__" for fn, _ in assignments):
        return False
    return all(value is not None and in_memory_value(value, fn.scope, names) for fn, value in assignments)


def _set_in_init_only(attr: str, hierarchy: list[ClassFacts], facts: DatasetFacts) -> bool:
    assignments = [a for klass in hierarchy for a in facts.attr_values.get((klass.name, attr), ())]
    return bool(assignments) and all(method.name == "__init__" for method, _ in assignments)


def _passed_through(fn: FunctionFacts, attr: str, hierarchy: list[ClassFacts], facts: DatasetFacts) -> bool:
    """``self.<attr>``, set in ``__init__`` only, is only handed on as it is:
    returned, put in a literal or a subscript (``example["prompt"] =
    self.prompt``) or passed to a call (checked apart), never indexed,
    called, read into or bound to a name.  Whatever it holds, reading it
    does no work."""
    if not _set_in_init_only(attr, hierarchy, facts):
        return False
    root = fn.node
    handed = {id(n.value) for n in find_all(root, cst.Return)}
    handed.update(id(n.value) for n in find_all(root, cst.Element))
    handed.update(id(n.value) for n in find_all(root, cst.DictElement))
    handed.update(id(n.value) for n in find_all(root, cst.Arg))
    handed.update(id(n.value) for n in find_all(fn.node, cst.Assign)
                  if len(n.targets) == 1 and type(n.targets[0].target) is cst.Subscript)
    return all(
        id(node) in handed for node in find_all(fn.node, cst.Attribute)
        if node.attr.value == attr and type(node.value) is cst.Name and node.value.value == "self"
    )


def _loops(fn: FunctionFacts) -> bool:
    """A loop statement in the method is work per item of a size the
    analysis cannot bound (``for k in range(self.work)``, rejection
    sampling in ``while True``): workers share it."""
    return bool(find_all(fn.node, cst.For) or find_all(fn.node, cst.While))


def _rebuilds_state(fn: FunctionFacts) -> bool:
    """The method stores a computed value on ``self`` on every read: work
    beside the item, not the item itself (its first read only, as
    ``_cached_calls`` reads it, is fine)."""
    cached = _cached_calls(fn)
    for node in find_all(fn.node, cst.Assign):
        if any((dotted_name(t.target) or "").startswith("self.") for t in node.targets) and (
            type(node.value) is cst.Call and id(node.value) not in cached
        ):
            return True
    return False


def _setting(fn: FunctionFacts, attr: str, hierarchy: list[ClassFacts], facts: DatasetFacts) -> bool:
    """``self.<attr>``, set in ``__init__`` only, is read as a setting: an
    operand, an argument or an attribute path (``self.config.ndigit``),
    never indexed, called, iterated, returned as the item or read through a
    call.  Whatever object it holds, reading its fields does no loading."""
    if not _set_in_init_only(attr, hierarchy, facts):
        return False
    root = fn.node
    used = {id(n.func) for n in find_all(root, cst.Call)}
    used.update(id(n.value) for n in find_all(root, cst.Subscript))
    used.update(id(n.iter) for n in find_all(root, cst.For))
    used.update(id(n.iter) for n in find_all(root, cst.CompFor))
    prefix = f"self.{attr}"

    def rooted(node: cst.BaseExpression) -> bool:
        dotted = dotted_name(node) or ""
        return dotted.startswith(prefix) and dotted[len(prefix):len(prefix) + 1] in ("", ".")

    # What the item is made of, as it is: a field returned is data, not a setting.
    for ret in find_all(root, cst.Return):
        if ret.value is not None:
            used.add(id(ret.value))
            if isinstance(ret.value, (cst.Tuple, cst.List)):
                used.update(id(e.value) for e in ret.value.elements)
    if any(id(node) in used for node in find_all(root, cst.Attribute) if rooted(node)):
        return False
    # A name bound to it (``ndigit = self.config.ndigit``) is read the same way.
    aliases = {
        t.target.value for n in find_all(root, cst.Assign) if rooted(n.value)
        for t in n.targets if type(t.target) is cst.Name
    }
    receivers = {id(n.value) for n in find_all(root, cst.Attribute)}
    return not any(
        node.value in aliases and (id(node) in used or id(node) in receivers) for node in find_all(root, cst.Name)
    )


def in_memory_class(names: NameFacts, facts: DatasetFacts, cls: ClassFacts) -> bool:
    """A local map-style Dataset whose ``__getitem__`` only indexes containers
    that ``__init__`` builds from in-memory values, reads settings, or
    draws and computes its items (``torch.randint``, ``torch.tensor`` of
    digits): no file, network, decode, constant tensor factory or other
    call (``len``, ``int``, slicing and arithmetic are fine)."""
    hierarchy = names.class_hierarchy(cls)
    local = {klass.name for klass in hierarchy}
    if any(base not in local and base not in ("torch.utils.data.Dataset", "object") for k in hierarchy for base in k.bases):
        return False
    if names.method_of(cls, "__iter__") is not None:
        return False
    getters = [m for m in (names.method_of(cls, n) for n in ("__getitem__", "__getitems__")) if m is not None]
    inits = [k.methods["__init__"] for k in hierarchy if "__init__" in k.methods]
    if not getters or not all(_calls_only_pure(fn, facts, factories=True) for fn in inits):
        return False
    # A constant tensor built per item stands for the loading left out
    # (a placeholder): only ``__init__`` may build them.
    return all(
        _calls_only_pure(fn, facts, factories=False)
        and not _loops(fn)
        and not _rebuilds_state(fn)
        and not _reads_module_data(fn, names)
        and all(_attribute_in_memory(attr, hierarchy, facts, names) or _passed_through(fn, attr, hierarchy, facts)
                or _setting(fn, attr, hierarchy, facts)
                for attr in facts.self_attrs.get(fn, ()))
        for fn in getters
    )


def imported_dataset_class(names: NameFacts, call: LoaderCall) -> str | None:
    """The qualified name of an imported class the loader's dataset is built
    from, with pure arguments and no ``collate_fn``: whether it is held in
    memory is the class's module's to say (project analysis)."""
    collate = call.value("collate_fn")
    expr = call.expr("dataset")
    if (collate is not MISSING and collate is not None) or expr is None:
        return None
    target, scope = follow_name(expr, call.scope)
    qualified, cls = dataset_class(names, call)
    if scope is None or cls is not None or qualified is None or type(target) is not cst.Call:
        return None
    if not all(_pure(arg.value, names, scope) for arg in target.args):
        return None
    return qualified


def in_memory_classes(names: NameFacts, facts: DatasetFacts) -> list[str]:
    """The module-level classes ``in_memory_class`` accepts, by name."""
    module = id(names.module_scope)
    return sorted(
        name for (owner, name), cls in names.class_defs.items()
        if owner == module and names.classes.get(name) is cls and in_memory_class(names, facts, cls)
    )


def held_in_memory(names: NameFacts, facts: DatasetFacts, target: cst.BaseExpression, scope: Scope) -> bool:
    """A value held in memory: ``in_memory_value``, or a local class that
    ``in_memory_class`` accepts built from pure arguments."""
    if type(target) is cst.Call and type(target.func) is cst.Name and target.func.value in names.classes:
        cls = names.classes[target.func.value]
        return all(_pure(arg.value, names, scope) for arg in target.args) and in_memory_class(names, facts, cls)
    return in_memory_value(target, scope, names)
