"""Rendering nodes to code, as libcst does, with less bookkeeping.

libcst's code generation opens a generator-based context manager around
most expressions (``record_syntactic_position``) even when no position is
wanted, and splits every token on line breaks when positions are.  These
states do the same with a reusable context object and a test for a line
break first (rendering a fix's call takes a tenth less); the code and the
positions are libcst's (the tests compare both on real files).  Plain
libcst (``gate``): ``Module.code_for_node`` and its ``PositionProvider``.
"""

from __future__ import annotations

from typing import Any, Mapping, cast

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper
from libcst.metadata.position_provider import PositionProvider, PositionProvidingCodegenState

from loadlint.cst import gate


class _Nothing:
    """A context that records nothing, reused for every node."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NOTHING = _Nothing()


class _PlainState(CodegenState):
    __slots__ = ()

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> Any:
        return _NOTHING


#: An empty module's indentation and line break: what a node alone is rendered with.
_ALONE = cst.Module([])


def code_for_node(node: cst.CSTNode, module: cst.Module = _ALONE) -> str:
    """``module.code_for_node(node)``."""
    if not gate.fast():
        return module.code_for_node(node)
    state = _PlainState(default_indent=module.default_indent, default_newline=module.default_newline)
    node._codegen(state)
    return "".join(state.tokens)


class _Recording:
    """``PositionProvidingCodegenState.record_syntactic_position`` as an object."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: _PositionState, node: cst.CSTNode, start_node: cst.CSTNode | None,
                 end_node: cst.CSTNode | None) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = CodePosition(self.state.line, self.state.column)

    def __exit__(self, *exc: object) -> None:
        state = self.state
        computed = cast(dict[cst.CSTNode, CodeRange], state.provider._computed)
        end = CodePosition(state.line, state.column)
        start = computed[self.start_node].start if self.start_node is not None else self.start
        if self.end_node is not None:
            end = computed[self.end_node].end
        computed[self.node] = CodeRange(start, end)


class _PositionState(PositionProvidingCodegenState):
    __slots__ = ()

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> Any:
        return _Recording(self, node, start_node, end_node)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        if "\n" in value or "\r" in value:
            self._update_position(value)
        else:
            self.column += len(value)


def code_ranges(node: cst.CSTNode, module: cst.Module, indents: tuple[str, ...] = ()) -> Mapping[cst.CSTNode, CodeRange]:
    """libcst's positions (``PositionProvider``) of ``node`` and what it
    holds, rendered from line 1 inside blocks indented by ``indents``.

    The provider is run directly: ``MetadataWrapper.resolve`` also walks the
    whole tree for batchable providers, which doubled the cost.  Plain
    libcst: the whole module's positions, which place ``node`` where it is
    in ``module`` (a caller shifts them by where its statement starts)."""
    if not gate.fast():
        return _module_ranges(module)
    provider = PositionProvider()
    state = _PositionState(
        default_indent=module.default_indent, default_newline=module.default_newline, provider=provider,
        indent_tokens=list(indents),
    )
    node._codegen(state)
    return cast(Mapping[cst.CSTNode, CodeRange], provider._computed)


#: The last module's positions (plain libcst): a file's findings ask for several.
_last: list[tuple[cst.Module, Mapping[cst.CSTNode, CodeRange]]] = []


def _module_ranges(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    if not _last or _last[0][0] is not module:
        # No copy: the positions are looked up by the caller's nodes.
        _last[:] = [(module, MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))]
    return _last[0][1]
