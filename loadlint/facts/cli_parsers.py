"""The parsers a module builds, and the namespaces they parse into.

``argparse`` parsers (with their groups, subparsers and ``parents=[...]``),
``HfArgumentParser`` and the dataclass parsers (``simple_parsing``,
``tyro``): each parser's options, defaults and dataclasses, recorded as the
facts' walk passes them, become a ``Namespace`` of the values a script run
without options gets.  ``cli_args.CliProvider`` records them and binds the
namespaces to names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from loadlint.facts.cli_options import argparse_option, dataclass_fields, keyword_value
from loadlint.facts.names import ClassFacts, FunctionFacts, NameFacts
from loadlint.facts.resolve import UNKNOWN, Namespace, Option, Origin, Scope, evaluate

#: Hugging Face's own argument classes: the framework reads them, and their
#: values on the command line are the user's business (the rules stay silent).
FRAMEWORK_ARGUMENTS = {
    "transformers.TrainingArguments",
    "transformers.Seq2SeqTrainingArguments",
    "transformers.training_args.TrainingArguments",
    "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
}


@dataclass(eq=False)
class Parser:
    """A parser and what the module adds to it."""

    kind: str
    node: cst.Call
    scope: Scope
    options: list[tuple[cst.Call, Scope]] = field(default_factory=list)
    defaults: list[tuple[cst.Call, Scope]] = field(default_factory=list)
    dataclasses: list[tuple[cst.Call, Scope]] = field(default_factory=list)


class Parsers:
    """A module's parsers, by the call that builds each, and what a parser
    expression or a parse call gives."""

    def __init__(self, names: NameFacts, qualify: Callable[[cst.BaseExpression], str | None]) -> None:
        self.names = names
        self.qualify = qualify
        self.by_call: dict[int, Parser] = {}
        #: A name bound to a parser's group or subparser -> the parser expression, and its scope.
        self.aliases: dict[tuple[int, str], cst.BaseExpression] = {}
        self.alias_scopes: dict[tuple[int, str], Scope] = {}
        #: What each local function returns (a parser, a namespace).
        self.returns: dict[FunctionFacts, list[tuple[cst.BaseExpression, Scope]]] = {}

    def parser_of(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> Parser | None:
        """The parser an expression holds: a name bound to one (or to a group
        or subparser of one), or a local function returning one."""
        if depth > 8:
            return None
        if type(expr) is cst.Call:
            parser = self.by_call.get(id(expr))
            if parser is not None:
                return parser
            fn = self.local_function(expr, scope)
            returns = self.returns.get(fn, []) if fn is not None else []
            if len(returns) == 1:
                return self.parser_of(returns[0][0], returns[0][1], depth + 1)
            return None
        if type(expr) is not cst.Name:
            return None
        found = scope.lookup(expr.value)
        if found is None or len(found[1]) != 1:
            return None
        owner, bindings = found
        alias = self.aliases.get((id(owner), expr.value))
        if alias is not None:
            return self.parser_of(alias, self.alias_scopes[(id(owner), expr.value)], depth + 1)
        value = bindings[0].value
        return self.parser_of(value, owner, depth + 1) if value is not None else None

    def local_function(self, call: cst.Call, scope: Scope) -> FunctionFacts | None:
        if type(call.func) is not cst.Name:
            return None
        definition = self.names.definition(call.func.value, scope)
        return definition if isinstance(definition, FunctionFacts) else None

    def dataclass_result(self, call: cst.Call, scope: Scope) -> list[Namespace] | None:
        if not call.args or call.args[0].keyword is not None:
            return None
        ns = self.dataclass_namespace(call.args[0].value, scope, call)
        return [ns] if ns is not None else None

    def dataclass_namespaces(self, parser: Parser, call: cst.Call) -> list[Namespace] | None:
        if parser.kind != "dataclasses" or not parser.node.args:
            return None
        types = parser.node.args[0].value
        elements = [e.value for e in types.elements] if isinstance(types, (cst.Tuple, cst.List)) else [types]
        out = []
        for element in elements:
            ns = self.dataclass_namespace(element, parser.scope, call)
            if ns is None:
                return None
            out.append(ns)
        return out

    def dataclass_namespace(self, expr: cst.BaseExpression, scope: Scope, call: cst.Call) -> Namespace | None:
        """The fields of a local dataclass with their defaults; a framework's
        own arguments class gives an empty namespace (silence)."""
        qualified = self.qualify(expr)
        if qualified in FRAMEWORK_ARGUMENTS:
            return Namespace()
        if type(expr) is not cst.Name:
            return None
        cls = self.names.definition(expr.value, scope)
        if not isinstance(cls, ClassFacts):
            return None
        ns = Namespace()
        for klass in reversed(self.names.class_hierarchy(cls)):
            ns.options.update(dataclass_fields(klass, self.names.module_scope))
        return ns

    def argparse_namespace(self, parser: Parser, depth: int = 0) -> Namespace | None:
        options: dict[str, Option | Namespace] = {}
        for element in getattr(keyword_value(parser.node, "parents"), "elements", ()) if depth < 8 else ():  # theirs first
            parent = self.parser_of(element.value, parser.scope, 0)
            options.update(getattr(parent and parent.kind == "argparse" and self.argparse_namespace(parent, depth + 1), "options", {}))
        for node, scope in parser.options:
            parsed = argparse_option(node, scope)
            if parsed is None:
                continue
            dest, option = parsed
            # The same dest twice (subparsers) with different defaults: unknown.
            previous = options.get(dest)
            if isinstance(previous, Option) and previous.value != option.value:
                option = Option(UNKNOWN)
            options[dest] = option
        for node, scope in parser.defaults:
            for arg in node.args:
                if arg.star or arg.keyword is None:
                    return None
                key, value = arg.keyword.value, evaluate(arg.value, scope)
                options[key] = Option(value, Origin(f"with the default `{key}={value!r}`", arg.value))
        for node, scope in parser.dataclasses:
            dest_expr = keyword_value(node, "dest")
            name = evaluate(dest_expr, scope) if dest_expr is not None else None
            if not node.args or not isinstance(name, str):
                continue
            inner = self.dataclass_namespace(node.args[0].value, scope, node)
            if inner is not None:
                options[name] = inner
        return Namespace(options)
