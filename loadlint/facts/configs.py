"""Config objects: the defaults a yacs ``CfgNode`` tree, a dataclass
config or ``OmegaConf.create({...})`` holds, read where a loader takes them
(``cfg.DATA.NUM_WORKERS``, ``cfg.num_workers``); and the YAML files a module
reads into names (Hydra, ``OmegaConf.load``), whose values project analysis
binds (``bind_files``).

A default is what the script runs with unless the user overrides it (a
config file merged in, a command-line list): as with ``argparse`` defaults
(``loadlint.facts.cli_args``), the rules may use it and their messages say
where it comes from.  What stays unknown:

* an attribute assigned anywhere else in the module (``cfg.DATA.NUM_WORKERS
  = args.workers``, ``self.num_workers = ...`` in ``__post_init__``), or
  named as a literal key (``merge_from_list(["DATA.NUM_WORKERS", "2"])``);
* a tree built from a dict (``CN({...})``) or under a condition, a field
  without a default, a module that calls ``setattr`` or writes ``__dict__``;
* a parameter annotated with a dataclass when the module constructs that
  class with arguments anywhere.

``bind_configs`` runs after the traversal and before the command-line
provider binds its namespaces, so a config passed as an argument
(``main(cfg)``) flows into the parameter the same way a parsed namespace does.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import libcst as cst

from loadlint.facts.calls import CallSite
from loadlint.facts.names import ClassFacts, FunctionFacts, NameFacts
from loadlint.facts.resolve import UNKNOWN, Namespace, Option, Origin, Scope, dotted_name, evaluate
from loadlint.types import Descriptor

#: The classes whose instances are yacs-style trees of attributes.
CFG_NODES = frozenset({"yacs.config.CfgNode", "fvcore.common.config.CfgNode"})
_DATACLASS = frozenset({"dataclasses.dataclass", "pydantic.dataclasses.dataclass"})
#: ``x.attr = ...`` (augmented too), anywhere in the text.
_ATTR_WRITE = re.compile(r"\.[ \t]*(\w+)[ \t]*(?::[^=\n.:]{0,60})?(?:\*\*|//|>>|<<|[-+*/%@&|^])?=(?!=)")
_OPAQUE = re.compile(r"\bsetattr\s*\(|\.__dict__\b")
_MAX_DEPTH = 8


_OMEGACONF = frozenset({"omegaconf.OmegaConf", "omegaconf"})
_HYDRA = frozenset({"hydra", "hydra.main"})
_CREATE = "omegaconf.OmegaConf.create"
_LOAD = "omegaconf.OmegaConf.load"
#: The key of ``analyse``'s bindings that carries the YAML files' values.
CONFIG_FILES = "<config files>"


@dataclass(frozen=True)
class ConfigRead:
    """A YAML file a module reads into a name: Hydra's primary config into
    the first parameter of an ``@hydra.main`` function, or
    ``OmegaConf.load("config.yaml")`` bound to a name.  Project analysis
    reads the file (``loadlint.project.config_files``)."""

    #: ``"<module>"`` or the top-level function the name is bound in.
    scope: str
    name: str
    #: As written: relative to the script's folder for Hydra, to the
    #: folder the script runs from for ``OmegaConf.load``.
    file: str
    #: "hydra" or "load".
    kind: str


def bind_configs(module: cst.Module, names: NameFacts, text: str | None) -> list[ConfigRead]:
    """Give every name bound once to a config object its tree of defaults
    (``Scope.namespaces``, which ``resolve.evaluate`` reads); the YAML files
    the module reads into names, for project analysis."""
    imported = set(names.imports.names.values())
    omega = bool(imported & (_OMEGACONF | _HYDRA))
    if not (imported & CFG_NODES or imported & _DATACLASS or omega):
        return []
    code = module.code if text is None else text
    if _OPAQUE.search(code):
        return []
    binder = _Binder(module, names, code)
    binder.roots()
    binder.bind_names()
    binder.bind_annotations()
    return binder.reads() if omega else []


def bind_files(names: NameFacts, sites: list[CallSite], given: Mapping[str, Mapping[str, Any]]) -> None:
    """Bind the values project analysis read from YAML files
    (``"main\0cfg" -> {"data.num_workers": {"value": 8, "text": ...}}``)
    to the names that hold them, where each is bound once; and to the
    parameter of a local function every call of the module passes it to
    (``train(cfg)``)."""
    _bind_files(names, given)
    for _ in range(3):
        for fn in names.functions:
            if fn.nested or fn.class_name is not None:
                continue
            calls = [site for site in sites if site.callee == fn.name and names.definition(fn.name, site.scope) is fn]
            for index, param in enumerate(fn.params):
                if param in fn.scope.namespaces or len(fn.scope.bindings.get(param, ())) != 1:
                    continue
                passed = {id(ns): ns for ns in (_passed(site, index, param) for site in calls)}
                if calls and len(passed) == 1 and None not in [_passed(site, index, param) for site in calls]:
                    found = next(iter(passed.values()))
                    if found is not None:
                        fn.scope.namespaces[param] = found


def _passed(site: CallSite, index: int, param: str) -> Namespace | None:
    """The namespace a call passes as the parameter: a name holding one."""
    position = 0
    for arg in site.node.args:
        if arg.star:
            return None
        if (arg.keyword is None and position == index) or (arg.keyword is not None and arg.keyword.value == param):
            if type(arg.value) is not cst.Name:
                return None
            found = site.scope.lookup(arg.value.value)
            return found[0].namespaces.get(arg.value.value) if found is not None and len(found[1]) == 1 else None
        if arg.keyword is None:
            position += 1
    return None


def _bind_files(names: NameFacts, given: Mapping[str, Mapping[str, Any]]) -> None:
    for place, options in given.items():
        scope_name, _, name = place.partition("\0")
        scope = names.module_scope if scope_name == "<module>" else next(
            (fn.scope for fn in names.functions if fn.name == scope_name and not fn.nested and fn.class_name is None),
            None,
        )
        if scope is None or len(scope.bindings.get(name, ())) != 1 or name in scope.namespaces:
            continue
        ns = Namespace()
        for dotted, described in options.items():
            *parents, leaf = dotted.split(".")
            parent = _walk_creating(ns, parents)
            if parent is not None and "value" in described:
                parent.options[leaf] = Option(described["value"], Origin(f"with {described.get('text')}"))
        scope.namespaces[name] = ns


def _walk_creating(ns: Namespace, parts: list[str]) -> Namespace | None:
    for part in parts:
        inner = ns.options.setdefault(part, Namespace())
        if not isinstance(inner, Namespace):
            return None
        ns = inner
    return ns


class _Binder:
    def __init__(self, module: cst.Module, names: NameFacts, code: str) -> None:
        self.module = module
        self.names = names
        self.code = code
        self.scope = names.module_scope
        self._writes: dict[str, int] | None = None
        self._dataclasses: dict[int, Namespace | None] = {}

    # -- yacs trees --------------------------------------------------------------

    def roots(self) -> None:
        """``_C = CN()`` and the module-level assignments under it."""
        trees: dict[str, Namespace] = {}
        defined: dict[tuple[str, ...], int] = {}
        leaves: list[tuple[Namespace, str, tuple[str, ...], cst.BaseExpression]] = []
        for statement in self.module.body:
            if type(statement) is not cst.SimpleStatementLine:
                continue
            for small in statement.body:
                if type(small) is not cst.Assign or len(small.targets) != 1:
                    continue
                target, value = small.targets[0].target, small.value
                if type(target) is cst.Name:
                    if self._is_node(value) and len(self.scope.bindings.get(target.value, ())) == 1:
                        trees[target.value] = Namespace()
                    continue
                path = _path(target)
                if path is None or path[0] not in trees:
                    continue
                defined[path] = defined.get(path, 0) + 1
                parent = _walk(trees[path[0]], path[1:-1])
                if parent is None:
                    continue
                if self._is_node(value):
                    parent.options.setdefault(path[-1], Namespace())
                else:
                    leaves.append((parent, path[-1], path, value))
        for parent, leaf, path, value in leaves:
            dotted = ".".join(path)
            if defined[path] > 1 or self._rewritten(path, defined):
                parent.options[leaf] = Option(UNKNOWN)
                continue
            found = evaluate(value, self.scope)
            parent.options[leaf] = Option(found, Origin(f"with the default `{dotted} = {found!r}`", value))
        self.scope.namespaces.update(trees)

    def _is_node(self, value: cst.BaseExpression) -> bool:
        """``CN()`` or ``CN(new_allowed=True)``: an empty tree."""
        if type(value) is not cst.Call or self.names.imports.qualify(value.func) not in CFG_NODES:
            return False
        return all(arg.keyword is not None and not arg.star and arg.keyword.value == "new_allowed" for arg in value.args)

    def _writes_of(self, leaf: str) -> int:
        if self._writes is None:
            self._writes = {}
            for match in _ATTR_WRITE.finditer(self.code):
                self._writes[match.group(1)] = self._writes.get(match.group(1), 0) + 1
        return self._writes.get(leaf, 0)

    def _rewritten(self, path: tuple[str, ...], defined: dict[tuple[str, ...], int]) -> bool:
        """Whether the module assigns the attribute, or a node above it,
        more often than the tree's own definitions do, or names its key in
        a string."""
        for end in range(2, len(path) + 1):
            suffix = path[1:end]
            writes = len(re.findall(write_pattern(suffix), self.code))
            if writes > sum(n for p, n in defined.items() if p[-len(suffix):] == suffix):
                return True
        # ``data = cfg.DATA; data.NUM_WORKERS = 2``: the leaf through another name.
        aliased = len(re.findall(alias_pattern(path[-1]), self.code))
        if aliased > sum(n for p, n in defined.items() if len(p) == 2 and p[-1] == path[-1]):
            return True
        return re.search(key_pattern(path[1:]), self.code) is not None

    # -- names bound to a config --------------------------------------------------

    def bind_names(self) -> None:
        """``cfg = _C.clone()``, ``cfg = get_cfg_defaults()``, ``cfg = DataConfig()``,
        ``data = cfg.DATA``: twice, as a name may be bound from one below it."""
        scopes = [self.scope, *(fn.scope for fn in self.names.functions)]
        for _ in range(2):
            for scope in scopes:
                for name, bindings in scope.bindings.items():
                    if name in scope.namespaces or len(bindings) != 1 or bindings[0].value is None:
                        continue
                    found = self.config_of(bindings[0].value, scope, 0)
                    if found is not None:
                        scope.namespaces[name] = found

    def config_of(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> Namespace | None:
        """The config tree an expression holds, or None."""
        if depth > _MAX_DEPTH:
            return None
        if type(expr) is cst.Name:
            found = scope.lookup(expr.value)
            if found is None or len(found[1]) != 1:
                return None
            owner, bindings = found
            if expr.value in owner.namespaces:
                return owner.namespaces[expr.value]
            value = bindings[0].value
            return self.config_of(value, owner, depth + 1) if value is not None else None
        if type(expr) is cst.Attribute:
            inner = self.config_of(expr.value, scope, depth + 1)
            item = inner.options.get(expr.attr.value) if inner is not None else None
            return item if isinstance(item, Namespace) else None
        if type(expr) is not cst.Call:
            return None
        func = expr.func
        if type(func) is cst.Attribute and func.attr.value == "clone" and not expr.args:
            return self.config_of(func.value, scope, depth + 1)
        if self.names.imports.qualify(func) == _CREATE:
            given = expr.args[0].value if len(expr.args) == 1 and expr.args[0].keyword is None else None
            return self._mapping(given, scope, ()) if type(given) is cst.Dict and not expr.args[0].star else None
        if type(func) is not cst.Name:
            return None
        definition = self.names.definition(func.value, scope)
        if isinstance(definition, ClassFacts):
            return self._constructed(definition, expr, scope)
        if isinstance(definition, FunctionFacts) and not definition.class_name and not expr.args:
            returns = list(_returns(definition.node.body))
            if len(returns) == 1 and returns[0] is not None:
                return self.config_of(returns[0], definition.scope, depth + 1)
        return None

    def _mapping(self, node: cst.Dict, scope: Scope, prefix: tuple[str, ...]) -> Namespace | None:
        """``OmegaConf.create({"data": {"num_workers": 8}})``: string keys only."""
        ns = Namespace()
        for element in node.elements:
            if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
                return None  # ``**other`` may set any key
            key = evaluate(element.key, None)
            if not isinstance(key, str) or key in ns.options:
                return None
            path = (*prefix, key)
            if type(element.value) is cst.Dict:
                inner = self._mapping(element.value, scope, path) if len(path) < _MAX_DEPTH else None
                if inner is None:
                    return None
                ns.options[key] = inner
            elif self._rewritten(("", *path), {}):
                ns.options[key] = Option(UNKNOWN)
            else:
                value = evaluate(element.value, scope)
                ns.options[key] = Option(value, Origin(f"with the default `{'.'.join(path)}: {value!r}`", element.value))
        return ns

    # -- YAML files -----------------------------------------------------------------

    def reads(self) -> list[ConfigRead]:
        out = []
        for fn in self.names.functions:
            if fn.nested or fn.class_name is not None or not fn.params:
                continue
            for decorator in fn.node.decorators:
                node = decorator.decorator
                if type(node) is not cst.Call or self.names.imports.qualify(node.func) != "hydra.main":
                    continue
                folder = evaluate(_keyword(node, "config_path"), self.scope)
                name = evaluate(_keyword(node, "config_name"), self.scope)
                if isinstance(folder, str) and isinstance(name, str) and name and ":" not in folder + name:
                    name = name if name.endswith((".yaml", ".yml")) else name + ".yaml"
                    if len(fn.scope.bindings.get(fn.params[0], ())) == 1:
                        out.append(ConfigRead(fn.name, fn.params[0], posixpath.join(folder, name), "hydra"))
        scopes = [("<module>", self.scope)] + [
            (fn.name, fn.scope) for fn in self.names.functions if not fn.nested and fn.class_name is None
        ]
        for scope_name, scope in scopes:
            for name, bindings in scope.bindings.items():
                value = bindings[0].value if len(bindings) == 1 else None
                if type(value) is not cst.Call or self.names.imports.qualify(value.func) != _LOAD:
                    continue
                file = evaluate(value.args[0].value, self.scope) if len(value.args) == 1 else None
                if isinstance(file, str) and file.endswith((".yaml", ".yml")) and value.args[0].keyword is None:
                    out.append(ConfigRead(scope_name, name, file, "load"))
        return out

    # -- dataclasses ----------------------------------------------------------------

    def _constructed(self, cls: ClassFacts, call: cst.Call, scope: Scope) -> Namespace | None:
        """``DataConfig(...)``: the fields' defaults, with keywords given replaced."""
        base = self.dataclass_fields(cls)
        if base is None:
            return None
        given: dict[str, Option | Namespace] = {}
        for arg in call.args:
            if arg.star or arg.keyword is None:
                return None
            inner = self.config_of(arg.value, scope, 1)
            given[arg.keyword.value] = inner if inner is not None else Option(evaluate(arg.value, scope))
        return Namespace({**base.options, **given}) if given else base

    def dataclass_fields(self, cls: ClassFacts, depth: int = 0) -> Namespace | None:
        """A local dataclass's fields with their defaults; None for another class."""
        key = id(cls)
        if key in self._dataclasses:
            return self._dataclasses[key]
        self._dataclasses[key] = None  # a class that holds itself stays unknown
        hierarchy = self.names.class_hierarchy(cls)
        if depth > _MAX_DEPTH or not all(self._is_dataclass(klass) for klass in hierarchy):
            return None
        ns = Namespace()
        for klass in reversed(hierarchy):
            for name, default in _fields(klass):
                ns.options[name] = self._field(klass, name, default, depth)
        self._dataclasses[key] = ns
        return ns

    def _field(self, cls: ClassFacts, name: str, default: cst.BaseExpression | None, depth: int) -> Option | Namespace:
        written = self._writes_of(name) > 0
        if default is None:
            return Option(UNKNOWN)
        if type(default) is cst.Call and type(default.func) is cst.Name and default.func.value == "field":
            factory = _keyword(default, "default_factory")
            if factory is not None and type(factory) is cst.Name:
                nested = self.names.definition(factory.value, self.scope)
                inner = self.dataclass_fields(nested, depth + 1) if isinstance(nested, ClassFacts) else None
                return inner if inner is not None else Option(UNKNOWN)
            default = _keyword(default, "default")
            if default is None:
                return Option(UNKNOWN)
        if type(default) is cst.Call:
            inner = self.config_of(default, self.scope, 1)
            return inner if inner is not None and not written else Option(UNKNOWN)
        value = evaluate(default, self.scope)
        return Option(value, Origin(f"with the default `{cls.name}.{name} = {value!r}`", default), written)

    def _is_dataclass(self, cls: ClassFacts) -> bool:
        if cls.nested:
            return False
        for decorator in cls.node.decorators:
            node = decorator.decorator
            if type(node) is cst.Call:
                if any(arg.keyword is not None and arg.keyword.value == "init" for arg in node.args):
                    return False
                node = node.func
            if self.names.imports.qualify(node) in _DATACLASS:
                return True
        return False

    def bind_annotations(self) -> None:
        """``def build(cfg: DataConfig)``: the defaults, where the module makes
        the class with its defaults (``DataConfig()``, ``default_factory``)
        and never with arguments."""
        for fn in self.names.functions:
            params = fn.node.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                name = param.name.value
                annotation = param.annotation.annotation if param.annotation is not None else None
                if type(annotation) is not cst.Name or name in fn.scope.namespaces:
                    continue
                if len(fn.scope.bindings.get(name, ())) != 1:
                    continue
                cls = self.names.definition(annotation.value, self.scope)
                if not isinstance(cls, ClassFacts):
                    continue
                name_re = re.escape(cls.name)
                if re.search(rf"\b{name_re}\s*\(\s*[^)\s]", self.code):
                    continue  # made with arguments somewhere: the parameter may hold any
                if not re.search(rf"\b{name_re}\s*\(\s*\)|default_factory\s*=\s*{name_re}\b", self.code):
                    continue  # never made here with its defaults: another module may make it otherwise
                ns = self.dataclass_fields(cls)
                if ns is not None:
                    fn.scope.namespaces[name] = ns


def write_pattern(parts: tuple[str, ...]) -> str:
    """An assignment (augmented too) to ``<anything>.A.B``, for ``("A", "B")``."""
    chain = r"[ \t]*\.[ \t]*".join(re.escape(part) for part in parts)
    return rf"\.[ \t]*{chain}[ \t]*(?::[^=\n.:]{0,60})?(?:\*\*|//|>>|<<|[-+*/%@&|^])?=(?!=)"


def alias_pattern(leaf: str) -> str:
    """An assignment to ``name.LEAF`` where ``name`` is a bare name (it may
    hold a node of the tree); ``x.TEST.LEAF`` names another node."""
    return rf"(?<![\w.])[A-Za-z_]\w*[ \t]*\.[ \t]*{re.escape(leaf)}[ \t]*(?::[^=\n.:]{0,60})?(?:\*\*|//|>>|<<|[-+*/%@&|^])?=(?!=)"


def key_pattern(parts: tuple[str, ...]) -> str:
    """The dotted key ``"A.B"`` in a string (``merge_from_list(["A.B", "2"])``)."""
    return rf"['\"]{re.escape('.'.join(parts))}['\"]"


def _path(node: cst.BaseExpression) -> tuple[str, ...] | None:
    dotted = dotted_name(node)
    return tuple(dotted.split(".")) if dotted is not None else None


def _walk(ns: Namespace, parts: tuple[str, ...]) -> Namespace | None:
    item: Option | Namespace | None = ns
    for part in parts:
        item = item.options.get(part) if isinstance(item, Namespace) else None
    return item if isinstance(item, Namespace) else None


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _fields(cls: ClassFacts) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """(name, default expression or None) of each annotated field of a class body."""
    body = cls.node.body
    for statement in body.body if type(body) is cst.IndentedBlock else ():
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is cst.AnnAssign and type(small.target) is cst.Name:
                annotation = dotted_name(small.annotation.annotation) or ""
                if annotation.rpartition(".")[2] != "ClassVar":
                    yield small.target.value, small.value


def _returns(body: cst.BaseSuite) -> Iterator[cst.BaseExpression | None]:
    """The values of a function body's ``return`` statements (nested
    functions and classes left out)."""
    statements = body.body if type(body) is cst.IndentedBlock else ()
    for statement in statements:
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                if type(small) is cst.Return:
                    yield small.value
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        elif isinstance(statement, cst.BaseCompoundStatement):
            yield from _returns(statement.body)
            for part in _else_parts(statement):
                yield from _returns(part)


def _else_parts(statement: cst.BaseCompoundStatement) -> Iterator[cst.BaseSuite]:
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:
        yield orelse.body
        orelse = getattr(orelse, "orelse", None) if type(orelse) is cst.If else None
    for handler in getattr(statement, "handlers", ()):
        yield handler.body
    final = getattr(statement, "finalbody", None)
    if final is not None:
        yield final.body


def namespace_options(ns: Namespace, ref_of: Callable[[cst.CSTNode], int], prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """A tree's known defaults as plain data for another module: dotted
    attribute path -> value, how a message names it, and where it is."""
    out: dict[str, Any] = {}
    flow = ns.flow
    if flow is not None and flow.whole:
        return out  # changed as a whole: another module's read has no program point here
    for name, item in ns.options.items():
        dotted = f"{prefix}{name}"
        if flow is not None and flow.anywhere(name):
            continue
        if isinstance(item, Namespace):
            if depth < _MAX_DEPTH:
                out.update(namespace_options(item, ref_of, dotted + ".", depth + 1))
            continue
        origin = item.origin
        if origin is None or item.written or not _plain(item.value) or not origin.text.startswith("with "):
            continue
        described: dict[str, Any] = {"value": item.value, "text": origin.text[len("with "):]}
        if origin.node is not None:
            described["at"] = ref_of(origin.node)
        out[dotted] = described
    return out


def _plain(value: object) -> bool:
    return value is None or type(value) in (int, float, str, bool)


def passed_namespace(
    expr: cst.BaseExpression, scope: Scope, is_param: Callable[[str], bool], ref_of: Callable[[cst.CSTNode], int],
    written: set[str],
) -> Descriptor:
    """An argument for another module's function: ``args.n_cpu`` of a
    parameter that this module never writes (the namespace its caller
    passes decides), or a parsed namespace passed whole (its defaults that
    no change touches)."""
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name and is_param(expr.value.value):
        return {"param": expr.value.value, "attribute": expr.attr.value} if expr.attr.value not in written else {}
    if type(expr) is not cst.Name:
        return {}
    found = scope.lookup(expr.value)
    ns = found[0].namespaces.get(expr.value) if found is not None and len(found[1]) == 1 else None
    options = namespace_options(ns, ref_of) if ns is not None and ns.flow is not None else {}
    return {"options": options} if options else {}
