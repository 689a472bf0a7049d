"""DataLoader call sites: each ``DataLoader(...)`` with its arguments mapped
to parameters, the variables it is reachable through, and the facts about
how its workers start (``set_start_method``, ``os.cpu_count()`` calls)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from loadlint.facts.cursor import Cursor, Provider, callee_name
from loadlint.facts.scopes import literal_members, member
from loadlint.facts.names import Key, LoopFrame
from loadlint.cst.walk import find_all
from loadlint.facts.resolve import MISSING, UNKNOWN, Origin, Point, Scope, dotted_name, evaluate, origin, reaches, string_value
from loadlint.facts.signature import DATALOADER, DEFAULTS, POSITIONAL, SUBCLASSES, shared_positional

#: A ``**kwargs`` dict's keys: parameter -> (expression or None when unknown, its scope).
DictArgs = dict[str, tuple[cst.BaseExpression | None, Scope]]

_CPU_COUNT_CALLS = {"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count"}
_START_METHOD_CALLS = ("multiprocessing.set_start_method", "torch.multiprocessing.set_start_method")


#: The changes of one ``**kw`` dict read at their program points, at most.
_MAX_CHANGES = 256


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
    #: The known subclass called (``monai.data.DataLoader``), None for torch's own.
    subclass: str | None = None
    #: Its program point: which bindings of a name passed to it it may see (``resolve.reaching``).
    point: Point | None = None

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
    #: ``for loader in loaders.values()``: the loop variable's key -> the
    #: loaders' keys it takes in turn (every member of the literal a loader).
    spread: dict[Key, set[Key]] = field(default_factory=dict)
    #: Variables whose members may not be what was put in them: changed in
    #: place, handed to a call, or bound more than once.
    unsure: set[Key] = field(default_factory=set)

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
            for alias, targets in self.spread.items():
                if alias not in keys and targets & keys:
                    keys.add(alias)
                    changed = True
        return keys


#: Methods that read a container without changing it.
_READS = frozenset({"values", "items", "keys", "get", "copy", "index", "count"})
#: Wrappers that yield the loader's batches as they are (a progress bar).
_PROGRESS_BARS = frozenset({"tqdm", "track", "progress_bar"})


class LoaderProvider(Provider[LoaderFacts]):
    """Records every DataLoader call and the variables that reach it.

    A loader written in a dict, list or tuple literal (or a loader variable
    put in one) is reached through ``container[<constant>]``: its key is
    the member's (``loaders['train']``).  The container must be bound once
    and never changed, passed to a call or indexed by anything else; when
    it is, ``finish`` forgets its members (what they hold is unknown).
    """

    def __init__(self, cursor: Cursor, facts: LoaderFacts) -> None:
        super().__init__(cursor, facts)
        #: Container key -> (its kind, its members' keys, the scope it is bound in).
        self._containers: dict[Key, tuple[str, list[Key], Scope]] = {}
        #: Keys of containers changed in place or handed to a call, and assignments to each key.
        self._changed: set[Key] = set()
        self._bound: dict[Key, int] = {}
        self._passed: set[Key] = set()
        #: ``holder = Holder(loader)``: (holder's key, class name, slot -> key of what is passed).
        self._holders: list[tuple[Key, str, dict[int | str, Key | int], Scope]] = []
        #: Spread loop variable -> the containers it draws from (None: a literal in the ``for``).
        self._spread_from: dict[Key, list[Key | None]] = {}
        #: ``DataLoader(ds, **kw)`` with ``kw`` resolved as the call saw it:
        #: (the call, the name, the keys it gave, the call's point).
        self._kwargs_reads: list[tuple[LoaderCall, str, list[str], Point | None]] = []

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.cursor.qualified
        self._container_call(node)
        if qualified == DATALOADER or qualified in SUBCLASSES:
            self._record_loader(node, None if qualified == DATALOADER else qualified)
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
            self._assigned(target.target)
        if type(node.value) is cst.Call:
            self._record_prepare_alias(node, node.value)
            if len(node.targets) == 1:
                self._record_holder(self.cursor.key_of(node.targets[0].target), node.value)
        elif len(node.targets) == 1:
            if type(node.value) is cst.IfExp:
                self._record_progress_alias(node.targets[0].target, node.value)
            self._record_container(node.targets[0].target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._assigned(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self._assigned(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._record_spread(node)

    def _assigned(self, target: cst.BaseExpression) -> None:
        """Count a binding of a name or attribute; a member's assignment changes its container."""
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._assigned(element.value)
            return
        if type(target) is cst.StarredElement:
            self._assigned(target.value)
            return
        if type(target) is cst.Subscript:
            key = self.cursor.key_of(target.value)
            if key is not None:
                self._changed.add(key)
            return
        key = self.cursor.key_of(target)
        if key is not None:
            self._bound[key] = self._bound.get(key, 0) + 1

    def _record_container(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``loaders = {"train": DataLoader(...), "val": val_loader}``."""
        members = literal_members(value)
        if members is None or type(target) not in (cst.Name, cst.Attribute):
            return
        key = self.cursor.key_of(target)
        if key is None:
            return
        keys = []
        for index, element in members:
            inner: Key = (key[0], member(key[1], index))
            keys.append(inner)
            if type(element) is cst.Name or type(element) is cst.Attribute:
                source = self.cursor.key_of(element)
                if source is not None:
                    self.facts.aliases[inner] = source
            elif type(element) is cst.Call:
                self._record_holder(inner, element)
        kind = "dict" if type(value) is cst.Dict else "sequence"
        self._containers[key] = (kind, keys, self.cursor.scope)

    def _record_holder(self, base: Key | None, call: cst.Call) -> None:
        """``phase = Phase(loader)`` of a local class: its attributes may hold the loader."""
        if base is None or type(call.func) is not cst.Name or not call.func.value[:1].isupper():
            return
        given: dict[int | str, Key | int] = {}
        for position, arg in enumerate(call.args):
            if arg.star:
                return
            slot = arg.keyword.value if arg.keyword is not None else position
            if type(arg.value) is cst.Call:
                given[slot] = id(arg.value)  # a loader built in the call, recorded after this
                continue
            key = self.cursor.key_of(arg.value) if type(arg.value) in (cst.Name, cst.Attribute, cst.Subscript) else None
            if key is not None:
                given[slot] = key
        if given:
            self._holders.append((base, call.func.value, given, self.cursor.scope))

    def _holder_aliases(self) -> None:
        """``holder.loader`` reaches the loader passed to the local class's
        ``__init__`` that stores it, once, as ``self.loader``; the holder
        bound once, the attribute never assigned from outside."""
        classes = self.cursor.names.classes
        built = {id(call.node): call for call in self.facts.calls if call.key is None}
        for base, name, given, scope in self._holders:
            cls = classes.get(name)
            init = cls.methods.get("__init__") if cls is not None else None
            if cls is None or init is None or self._doubtful_holder(base, scope):
                continue
            params = init.node.params
            names = [p.name.value for p in (*params.posonly_params, *params.params)][1:]
            stored = _stored_params(cls.node, init.node, {*names, *(p.name.value for p in params.kwonly_params)})
            for slot, source in given.items():
                param = names[slot] if isinstance(slot, int) and slot < len(names) else slot
                attrs = stored.get(str(param), [])
                for attr in attrs:
                    key = (base[0], f"{base[1]}.{attr}")
                    if self._bound.get(key):
                        continue
                    if isinstance(source, tuple):
                        self.facts.aliases[key] = source
                    elif source in built and len(attrs) == 1:
                        built[source].key = key

    def _doubtful_holder(self, base: Key, scope: Scope) -> bool:
        if self._bound.get(base, 0) > 1 or base in self._changed or base in self._passed:
            return True
        if "[" in base[1] or "." in base[1]:
            return False  # a member: its container is checked with the others
        found = scope.lookup(base[1])
        return found is not None and len(found[1]) > 1

    def _record_spread(self, node: cst.For) -> None:
        """``for loader in loaders.values()`` (or ``.items()``, or a list of
        loaders): the variable takes each loader in turn."""
        frame = self.cursor.frame
        iterable: cst.BaseExpression = node.iter
        target: cst.BaseExpression = node.target
        method = None
        if type(iterable) is cst.Call and not iterable.args and type(iterable.func) is cst.Attribute:
            method = iterable.func.attr.value
            iterable = iterable.func.value
        if method == "items" and type(target) is cst.Tuple and len(target.elements) == 2:
            target = target.elements[1].value
        elif method not in (None, "values"):
            return
        if type(target) is not cst.Name or frame is None:
            return
        key_of = self.cursor.key_of
        sources: list[Key] = []
        origin: Key | None = None
        members = literal_members(iterable) if method is None else None
        if members is not None and type(iterable) is not cst.Dict:
            for _, element in members:
                found = key_of(element) if type(element) in (cst.Name, cst.Attribute) else None
                if found is None:
                    return
                sources.append(found)
        else:
            origin = key_of(iterable)
            container = self._containers.get(origin) if origin is not None else None
            if container is None or (method is None) != (container[0] == "sequence"):
                return
            sources = list(container[1])
        dest = key_of(target)
        if dest is None or not sources:
            return
        frame.spreads = target.value
        self.facts.spread.setdefault(dest, set()).update(sources)
        self._spread_from.setdefault(dest, []).append(origin)

    def finish(self, module: cst.Module, text: str | None) -> None:
        """Forget members of containers that change, and spreads over anything but loaders."""
        self._kwargs_changed_later()
        self._holder_aliases()
        doubtful = self._changed | self._passed | {key for key, count in self._bound.items() if count > 1}
        self.facts.unsure = doubtful
        for key, (_, _, scope) in self._containers.items():
            if "." not in key[1] and "[" not in key[1]:
                found = scope.lookup(key[1])
                if found is None or len(found[1]) != 1:
                    doubtful.add(key)
        gone = {inner for key in doubtful if key in self._containers for inner in self._containers[key][1]}
        facts = self.facts

        def lost(key: Key) -> bool:
            # A member of a doubtful container, or an attribute of a holder kept there.
            return key in gone or "." in key[1] and any(key[0] == g[0] and key[1].startswith(g[1] + ".") for g in gone)

        for call in facts.calls:
            if call.key is not None and lost(call.key):
                call.key = None
        for inner in [alias for alias in facts.aliases if lost(alias)]:
            facts.aliases.pop(inner, None)
        loaders: set[Key] = set()
        for call in facts.calls:
            loaders |= facts.keys_of(call) if call.key is not None else set()
        for dest, origins in self._spread_from.items():
            sources = facts.spread.get(dest, set())
            if any(o is not None and o in doubtful for o in origins) or not sources <= loaders - set(facts.spread):
                facts.spread.pop(dest, None)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if type(node.target) is cst.Attribute:
            # The annotation's statement is not kept: reports point at the target.
            self._record_attr_assign(node.target, node.target)

    def _container_call(self, node: cst.Call) -> None:
        """A container's method that may change it, or the container handed to a call."""
        func = node.func
        key_of = self.cursor.key_of
        if type(func) is cst.Attribute and func.attr.value not in _READS:
            key = key_of(func.value)
            if key is not None:
                self._changed.add(key)
        for arg in node.args:
            if type(arg.value) is cst.Name or type(arg.value) is cst.Attribute:
                key = key_of(arg.value)
                if key is not None:
                    self._passed.add(key)

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

    def _record_progress_alias(self, target: cst.BaseExpression, value: cst.IfExp) -> None:
        # ``it = tqdm(loader) if is_main_process() else loader`` (NVIDIA's BERT run_squad.py)
        key_of = self.cursor.key_of
        sources = set()
        for branch in (value.body, value.orelse):
            if type(branch) is cst.Call and callee_name(branch.func) in _PROGRESS_BARS and branch.args:
                branch = branch.args[0].value
            sources.add(key_of(branch))
        dest = key_of(target)
        if len(sources) == 1 and dest is not None:
            source = sources.pop()
            if source is not None and source != dest:
                self.facts.aliases[dest] = source

    def _record_loader(self, node: cst.Call, subclass: str | None = None) -> None:
        cursor = self.cursor
        args: dict[str, cst.Arg] = {}
        dict_args: DictArgs = {}
        opaque_kwargs = opaque_positional = False
        position = 0
        # A subclass's positional slots past those it shares with torch's are
        # left unknown: fixes place arguments by torch's slots.
        slots = len(POSITIONAL) if subclass is None else shared_positional(subclass)
        named: list[tuple[str, list[str]]] = []
        for arg in node.args:
            if arg.star == "*":
                opaque_positional = True
            elif arg.star == "**":
                resolved = self._resolve_kwargs_dict(arg.value)
                if resolved is None:
                    opaque_kwargs = True
                else:
                    dict_args.update(resolved)
                    if type(arg.value) is cst.Name:
                        named.append((arg.value.value, list(resolved)))
            elif arg.keyword is not None:
                args[arg.keyword.value] = arg
            else:
                if opaque_positional:
                    continue
                if position < slots:
                    args[POSITIONAL[position]] = arg
                elif subclass is not None:
                    opaque_positional = True
                position += 1
        fn = cursor.function
        call = LoaderCall(
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
            subclass=subclass,
            point=cursor.point(),
        )
        self.facts.calls.append(call)
        if named:
            self._kwargs_reads.extend((call, name, keys, call.point) for name, keys in named)

    def _kwargs_changed_later(self) -> None:
        """A ``**kw`` dict changed after the call, on a path that reaches it
        (later in a loop around both, or in another function), may give the
        call anything: the keys it gave are unknown, and so are the others."""
        for call, name, keys, point in self._kwargs_reads:
            found = call.scope.lookup(name)
            mutations = found[0].dict_mutations.get(name, ()) if found else ()
            if point is None or not mutations:
                continue
            # Past the bound, any change counts (a generated file may change it thousands of times).
            if len(mutations) > _MAX_CHANGES or any(
                m.point is not None and m.point[0] > point[0] and reaches(m.point, point) for m in mutations
            ):
                for key in keys:
                    call.dict_args[key] = (None, call.dict_args[key][1])
                call.opaque_kwargs = True

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
    if type(value) is cst.Call:
        result = _dict_call(value, owner)
    elif type(value) is cst.Dict:
        result = _dict_literal(value, owner, conditional=False)
    else:
        return None
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


def _dict_call(node: cst.Call, scope: Scope) -> DictArgs | None:
    """``dict(batch_size=8, num_workers=4)``: keywords only, the builtin."""
    if type(node.func) is not cst.Name or node.func.value != "dict" or scope.lookup("dict") is not None:
        return None
    if any(arg.keyword is None or arg.star for arg in node.args):
        return None
    return {arg.keyword.value: (arg.value, scope) for arg in node.args if arg.keyword is not None}


def _stored_params(cls: cst.ClassDef, init: cst.FunctionDef, params: set[str]) -> dict[str, list[str]]:
    """Parameter -> the attributes ``__init__`` stores it in, unconditionally
    (``self.loader = loader`` in its body), that nothing else in the class assigns."""
    stored: dict[str, list[str]] = {}
    body = init.body.body if isinstance(init.body, cst.IndentedBlock) else ()
    for statement in body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is not cst.Assign or len(small.targets) != 1 or type(small.value) is not cst.Name:
                continue
            target = small.targets[0].target
            if type(target) is cst.Attribute and dotted_name(target) == f"self.{target.attr.value}" and small.value.value in params:
                stored.setdefault(small.value.value, []).append(target.attr.value)
    assigned: dict[str, int] = {}
    targets: list[cst.CSTNode] = [t.target for node in find_all(cls, cst.Assign) for t in node.targets]
    targets += [node.target for node in find_all(cls, cst.AugAssign)]
    targets += [node.target for node in find_all(cls, cst.AnnAssign)]
    for written in targets:
        for inner in find_all(written, cst.Attribute):
            name = dotted_name(inner)
            if name is not None and name.startswith("self."):
                assigned[name[5:]] = assigned.get(name[5:], 0) + 1
    return {param: [a for a in attrs if assigned.get(a) == 1] for param, attrs in stored.items()}
