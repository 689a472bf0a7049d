"""Command-line values: what ``argparse`` (and dataclass parsers such as
``HfArgumentParser``, ``simple_parsing`` and ``tyro``) give a script that is
run without options (options inherited through ``parents=[...]`` included).

A default is the value the script runs with unless the user overrides it, so
the rules may use it, and their messages say where it comes from.  Anything
the parser cannot show statically stays unknown: a required option, an
option without a default, a value read from a file (``parse_json_file``), a
namespace changed after parsing (``args.workers = ...``, ``setattr``,
``vars(args).update``), arguments passed to ``parse_args([...])``.

``finish`` binds the namespaces to the names that hold them
(``Scope.namespaces``), which ``loadlint.facts.resolve.evaluate`` reads; the
module's plain values are exported for the project-wide join.  A change is
kept with its program point (``resolve.Flow``): a read resolves to the
default unless a change may run before it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
import libcst as cst

from loadlint.cst.codegen import code_for_node
from loadlint.facts.cursor import Cursor, Provider
from loadlint.facts.cli_options import parameters, passes, spawned_call
from loadlint.facts.cli_parsers import FRAMEWORK_ARGUMENTS, Parser, Parsers
from loadlint.facts.names import ClassFacts, NameFacts
from loadlint.facts.training_args import TrainingArgumentsCall
from loadlint.facts.resolve import Flow, Namespace, Option, Origin, Point, Scope, evaluate, is_known

_PARSERS = {
    "argparse.ArgumentParser": "argparse",
    "simple_parsing.ArgumentParser": "argparse",
    "transformers.HfArgumentParser": "dataclasses",
    "transformers.hf_argparser.HfArgumentParser": "dataclasses",
}
#: Calls that parse the command line into one dataclass instance.
_DATACLASS_CLI = {"simple_parsing.parse", "tyro.cli"}
#: Process starts whose target receives ``args=``: ``spawn`` prepends the process index.
_SPAWN = {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"}
_PROCESS = {"multiprocessing.Process", "torch.multiprocessing.Process", "multiprocessing.process.Process"}
_ALIASING = {"add_argument_group", "add_mutually_exclusive_group", "add_subparsers", "add_parser"}
_PARSE = {"parse_args", "parse_known_args", "parse_args_into_dataclasses"}
_WORD = re.compile(r"\w+")

#: A binding place: the scope a name is bound in, and the name.
Place = tuple[Scope, str]


@dataclass
class ModuleValues:
    """A module's values as plain data, for the project-wide join: its
    constants, and the options of the parsers its functions build."""

    #: Module-level names bound once to a constant.
    constants: dict[str, object] = field(default_factory=dict)
    #: Function returning a parser -> option dest -> (default, origin text).
    parser_functions: dict[str, dict[str, tuple[object, str]]] = field(default_factory=dict)
    #: Module-level names bound to a parsed namespace -> dest -> (default, origin text).
    namespaces: dict[str, dict[str, tuple[object, str]]] = field(default_factory=dict)
    #: Module-level assignment targets by name (the last one), where an
    #: importer's message says the value comes from.
    targets: dict[str, cst.Name] = field(default_factory=dict)


@dataclass
class CliFacts:
    """Parsers, what they parse into, and the module's exported values."""

    values: ModuleValues = field(default_factory=ModuleValues)
    #: ``TrainingArguments(...)`` calls, whose loaders the Trainer builds.
    training_arguments: list[TrainingArgumentsCall] = field(default_factory=list)
    #: Attributes written anywhere in the module (``<name>.<attribute> = ...``).
    written: set[str] = field(default_factory=set)


@dataclass(eq=False)
class _Parse:
    """A parse call: ``receiver.method()`` or ``simple_parsing.parse(Cls)``."""

    node: cst.Call
    scope: Scope
    method: str
    receiver: cst.BaseExpression | None


class CliProvider(Provider[CliFacts]):
    """Records parsers, their options and the parse calls; ``finish`` binds namespaces."""

    binds_names = True

    def __init__(self, cursor: Cursor, facts: CliFacts) -> None:
        super().__init__(cursor, facts)
        self._names: NameFacts = cursor.names
        self.parsers = Parsers(cursor.names, cursor.qualify)
        self._members: list[tuple[str, cst.BaseExpression, cst.Call, Scope]] = []
        self._parses: dict[int, _Parse] = {}
        self._assigns: list[tuple[cst.BaseExpression, cst.BaseExpression, Scope]] = []
        self._calls: dict[str, list[tuple[cst.Call, Scope]]] = {}
        #: Attribute (any receiver) or name -> the points where it changes.
        self._changed_attrs: dict[str, list[Point]] = {}
        self._changed_names: dict[str, list[tuple[int | None, Point]]] = {}
        self._reads: dict[int, Point] = {}
        #: Attributes an assignment statement writes, recorded as it ends.
        self._pending: list[str] = []
        #: ``vars(x)`` calls read by a constant key (``vars(args)["workers"]``): reads, not changes.
        self._vars_reads: set[int] = set()
        self._parsed: set[int] = set()
        self._module = cst.Module([])
        self._code: str | None = None
        self._words: Counter[str] | None = None

    # -- traversal ------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        cursor = self.cursor
        qualified = cursor.qualified
        func = node.func
        if qualified in _SPAWN or qualified in _PROCESS:
            spawned = spawned_call(node, qualified in _SPAWN)
            if spawned is not None and type(spawned.func) is cst.Name:
                self._calls.setdefault(spawned.func.value, []).append((spawned, cursor.scope))
        if qualified in FRAMEWORK_ARGUMENTS:
            self._record_training_arguments(node, qualified)
        elif qualified in _PARSERS:
            self.parsers.by_call[id(node)] = Parser(_PARSERS[qualified], node, cursor.scope)
        elif qualified in _DATACLASS_CLI:
            self._parses[id(node)] = _Parse(node, cursor.scope, qualified, None)
        elif type(func) is cst.Name:
            if func.value in ("setattr", "vars") and node.args and type(node.args[0].value) is cst.Name:
                if id(node) not in self._vars_reads:
                    self._name_changed(node.args[0].value.value)
            elif node.args:
                self._calls.setdefault(func.value, []).append((node, cursor.scope))
        if type(func) is not cst.Attribute:
            return
        method = func.attr.value
        if method in ("add_argument", "set_defaults", "add_arguments"):
            self._members.append((method, func.value, node, cursor.scope))
        elif method in _PARSE:
            self._parses[id(node)] = _Parse(node, cursor.scope, method, func.value)
        elif method in _ALIASING:
            for target in cursor.pending_targets.get(id(node), ()):
                place = self._place(target)
                if place is not None:
                    self.parsers.aliases[(id(place[0]), place[1])] = func.value
                    self.parsers.alias_scopes[(id(place[0]), place[1])] = cursor.scope

    def _record_training_arguments(self, node: cst.Call, qualified: str) -> None:
        args: dict[str, cst.Arg] = {}
        opaque = False
        for index, arg in enumerate(node.args):
            if arg.star or (arg.keyword is None and index > 0):
                opaque = True
            elif arg.keyword is not None:
                args[arg.keyword.value] = arg
        name = qualified.rpartition(".")[2]
        self.facts.training_arguments.append(TrainingArgumentsCall(node, self.cursor.scope, name, args, opaque))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._assigned(target.target)
            self._assigns.append((target.target, node.value, self.cursor.scope))
            self._module_target(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assigned(node.target)
        self._module_target(node.target)

    def _module_target(self, target: cst.BaseExpression) -> None:
        if type(target) is cst.Name and self.cursor.scope is self._names.module_scope:
            self.facts.values.targets[target.value] = target

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._assigned(node.target)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._flush()

    def leave_AnnAssign(self, original_node: cst.AnnAssign) -> None:
        self._flush()

    def leave_AugAssign(self, original_node: cst.AugAssign) -> None:
        self._flush()

    def _flush(self) -> None:
        # An assignment changes the attribute once its statement has run.
        if self._pending:
            point = self._point()
            for attr in self._pending:
                self._changed_attrs.setdefault(attr, []).append(point)
            self._pending.clear()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if type(node.value) is cst.Name:
            if node.attr.value == "__dict__":
                self._name_changed(node.value.value)
            else:
                self._reads[id(node)] = self._point()

    def visit_Subscript(self, node: cst.Subscript) -> None:
        value = node.value
        if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == "vars":
            self._vars_reads.add(id(value))
            self._reads[id(node)] = self._point()

    def _name_changed(self, name: str) -> None:
        # Kept with the scope the name is bound in (None: not known yet, any).
        found = self.cursor.scope.lookup(name)
        self._changed_names.setdefault(name, []).append((id(found[0]) if found else None, self._point()))

    def _point(self) -> Point:
        return self.cursor.point()

    def visit_Return(self, node: cst.Return) -> None:
        fn = self.cursor.function
        if fn is not None and node.value is not None:
            self.parsers.returns.setdefault(fn, []).append((node.value, self.cursor.scope))

    def _assigned(self, target: cst.BaseExpression) -> None:
        # ``args.workers = 8``, ``cfg.data.workers = 8`` anywhere: that attribute's default is not what runs.
        if type(target) is cst.Attribute:
            self._pending.append(target.attr.value)
        elif type(target) is cst.Tuple or type(target) is cst.List:
            for element in target.elements:
                self._assigned(element.value)

    def _place(self, target: cst.BaseExpression) -> Place | None:
        if type(target) is not cst.Name:
            return None
        found = self.cursor.scope.lookup(target.value)
        return (found[0] if found else self.cursor.scope.function, target.value)

    # -- after the traversal ----------------------------------------------------

    def finish(self, module: cst.Module, text: str | None = None) -> None:
        """Bind every parsed namespace to the names that hold it; ``text`` is
        the module's source (printed from the tree when not given)."""
        self._module, self._code = module, text
        self.facts.written = set(self._changed_attrs)
        for method, receiver, node, scope in self._members:
            parser = self.parsers.parser_of(receiver, scope, 0)
            if parser is None:
                continue
            {"add_argument": parser.options, "set_defaults": parser.defaults,
             "add_arguments": parser.dataclasses}[method].append((node, scope))
        # Twice: a function that returns a namespace may be defined below its use.
        for _ in range(2):
            for target, value, scope in self._assigns:
                self._bind(target, value, scope)
        self._flow_intoparameters()
        self._config_flows()
        self._parameter_defaults()
        self._export()

    def _result(self, value: cst.BaseExpression, scope: Scope, depth: int = 0) -> list[Namespace] | None:
        """What an expression evaluates to: one namespace, or the tuple a
        parse call returns (a list of namespaces); None when unknown."""
        if depth > 8:
            return None
        if type(value) is cst.Subscript and type(value.value) is cst.Call and len(value.slice) == 1:
            index = value.slice[0].slice
            inner = self._result(value.value, scope, depth + 1)
            if inner is not None and type(index) is cst.Index and evaluate(index.value, None) == 0:
                return inner[:1]
            return None
        if type(value) is cst.Name:
            found = scope.lookup(value.value)
            if found is None or len(found[1]) != 1:
                return None
            # A parsed one is bound with its own changes (``_bind``), which the new name's add to.
            ns = found[0].namespaces.get(value.value)
            if ns is not None and ns.flow is None and any(
                    o is None or o == id(found[0]) for o, _ in self._changed_names.get(value.value, ())):
                return None
            return [ns] if ns is not None else None
        if type(value) is not cst.Call:
            return None
        parse = self._parses.get(id(value))
        if parse is None:
            fn = self.parsers.local_function(value, scope)
            returns = self.parsers.returns.get(fn, []) if fn is not None else []
            return self._result(returns[0][0], returns[0][1], depth + 1) if len(returns) == 1 else None
        if parse.receiver is None:
            return self._made(self.parsers.dataclass_result(value, scope))
        # Arguments given to the parse call replace the command line.
        if value.args:
            return None
        parser = self.parsers.parser_of(parse.receiver, parse.scope, 0)
        if parser is None:
            return None
        if parse.method == "parse_args_into_dataclasses":
            return self._made(self.parsers.dataclass_namespaces(parser, value))
        if parser.kind != "argparse":
            return None
        ns = self.parsers.argparse_namespace(parser)
        return self._made([ns] if ns is not None else None)

    def _made(self, result: list[Namespace] | None) -> list[Namespace] | None:
        """Namespaces a parse call makes: their reads follow the flow."""
        self._parsed.update(id(ns) for ns in result or ())
        return result

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression, scope: Scope) -> None:
        result = self._result(value, scope)
        if result is None:
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            parse = self._parses.get(id(value)) if type(value) is cst.Call else None
            into = parse is not None and parse.method == "parse_args_into_dataclasses"
            targets = [e.value for e in target.elements]
            if into and len(targets) != len(result):
                return
            pairs = list(zip(targets, result)) if into else [(targets[0], result[0])]
        elif len(result) == 1:
            pairs = [(target, result[0])]
        else:
            return
        for name_node, ns in pairs:
            if type(name_node) is cst.Name:
                found = scope.lookup(name_node.value)
                owner = found[0] if found else scope.function
                whole = [p for o, p in self._changed_names.get(name_node.value, ()) if o is None or o == id(owner)]
                if id(ns) in self._parsed or ns.flow is not None:
                    before = ns.flow.whole if ns.flow is not None else []
                    ns = Namespace(ns.options, Flow([*before, *whole], self._changed_attrs, self._reads))
                elif whole:
                    continue  # a config tree changed as a whole: unknown
                owner.namespaces[name_node.value] = ns

    def _flow_intoparameters(self) -> None:
        """``main(args)``: a parameter every call in the module passes the
        same namespace to holds that namespace."""
        for _ in range(3):
            for fn in self._names.functions:
                if fn.class_name is not None:
                    continue
                calls = [(c, s) for c, s in self._calls.get(fn.name, ()) if self.parsers.local_function(c, s) is fn]
                if not calls:
                    continue
                for index, param in enumerate(fn.params):
                    if param in fn.scope.namespaces or param in self._changed_names:
                        continue
                    passed = {id(ns): ns for ns in (self._passed(c, s, index, param) for c, s in calls)
                              if ns is not None}
                    complete = all(self._passed(c, s, index, param) is not None for c, s in calls)
                    if complete and len(passed) == 1:
                        fn.scope.namespaces[param] = next(iter(passed.values()))

    def _config_flows(self) -> None:
        """``cfg = DataConfig()`` in a function: a fresh object each call, so
        its attributes are read at their program point as a parsed
        namespace's are (a write after the read does not change it)."""
        for fn in self._names.functions:
            scope = fn.scope
            for name, ns in list(scope.namespaces.items()):
                bindings = scope.bindings.get(name, ())
                if ns.flow is not None or id(ns) in self._parsed or len(bindings) != 1:
                    continue
                value = bindings[0].value
                if type(value) is not cst.Call or type(value.func) is not cst.Name:
                    continue
                if not isinstance(self._names.definition(value.func.value, scope), ClassFacts):
                    continue
                whole = [p for o, p in self._changed_names.get(name, ()) if o is None or o == id(scope)]
                scope.namespaces[name] = Namespace(ns.options, Flow(whole, self._changed_attrs, self._reads))

    def _parameter_defaults(self) -> None:
        """``def build(ds, workers=4)`` that every call in the module leaves
        ``workers`` out of: inside it, ``workers`` is 4."""
        for fn in self._names.functions:
            calls = [(c, s) for c, s in self._calls.get(fn.name, ()) if self.parsers.local_function(c, s) is fn]
            # Only a function the module calls, and never refers to otherwise (the def names it once).
            if fn.class_name is not None or not calls or not any(p.default for p in parameters(fn)):
                continue
            # The def and the calls are the only mentions (a function passed around is called elsewhere too).
            if self._mentions()[fn.name] != len(calls) + 1:
                continue
            if any(arg.star for call, _ in calls for arg in call.args):
                continue
            params = fn.node.params
            positional = [*params.posonly_params, *params.params]
            for index, param in enumerate([*positional, *params.kwonly_params]):
                if param.default is None:
                    continue
                name = param.name.value
                at = index if index < len(positional) else None
                if any(passes(call, at, name) for call, _ in calls):
                    continue
                value = evaluate(param.default, fn.scope.parent)
                text = f"with the default `{name}={_code(param.default)}` of `{fn.name}()`"
                fn.scope.defaults[name] = Option(value, Origin(text, param.default))

    def _mentions(self) -> Counter[str]:
        """How often each word occurs in the source (comments and strings
        included: an over-count only keeps a default unknown)."""
        if self._words is None:
            self._words = Counter(_WORD.findall(self._source()))
        return self._words

    def _source(self) -> str:
        if self._code is None:
            self._code = self._module.code
        return self._code

    def _passed(self, call: cst.Call, scope: Scope, index: int, param: str) -> Namespace | None:
        position = 0
        for arg in call.args:
            if arg.star:
                return None
            if (arg.keyword is None and position == index) or (arg.keyword is not None and arg.keyword.value == param):
                result = self._result(arg.value, scope)
                return result[0] if result is not None and len(result) == 1 else None
            if arg.keyword is None:
                position += 1
        return None

    def _export(self) -> None:
        values = self.facts.values
        module = self._names.module_scope
        for name, bindings in module.bindings.items():
            if len(bindings) == 1 and bindings[0].value is not None and type(bindings[0].value) is not cst.Call:
                value = evaluate(bindings[0].value, module)
                if is_known(value) and type(value) in (int, float, str, bool, type(None)):
                    values.constants[name] = value
        for name, ns in module.namespaces.items():
            # Another module's read has no point here: any change counts.
            if ns.flow is None or not ns.flow.whole:
                values.namespaces[name] = {k: v for k, v in _plain(ns).items() if k not in self._changed_attrs}
        for fn, returns in self.parsers.returns.items():
            if fn.nested or fn.class_name is not None or len(returns) != 1:
                continue
            parser = self.parsers.parser_of(returns[0][0], returns[0][1], 0)
            built = self.parsers.argparse_namespace(parser) if parser is not None and parser.kind == "argparse" else None
            if built is not None:
                values.parser_functions[fn.name] = {k: v for k, v in _plain(built).items() if k not in self._changed_attrs}


def _code(node: cst.BaseExpression) -> str:
    return code_for_node(node)


def _plain(ns: Namespace) -> dict[str, tuple[object, str]]:
    return {
        name: (option.value, option.origin.text)
        for name, option in ns.options.items()
        if isinstance(option, Option) and is_known(option.value) and option.origin is not None and not option.written
    }
