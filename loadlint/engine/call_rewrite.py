"""A call's arguments rewritten with libcst, its layout kept.

A fix sets, removes or renames keywords of one call (``CallChange``): the
new arguments follow the separators the call already uses (one line, or
one per line with its indentation and trailing comma), a removed
argument's comments stay, and a positional argument before others is set
to its default instead of removed, so that the ones after it keep their
slots.
"""

from __future__ import annotations

from typing import TypeVar, cast

import libcst as cst

from loadlint.rules.base import CallChange
from loadlint.facts.signature import DEFAULTS, POSITIONAL


def _clean_separator(comma: cst.Comma) -> cst.Comma:
    """A separator like ``comma`` but without the comment it may carry."""
    after = comma.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace):
        after = cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(),
            empty_lines=[],
            indent=after.indent,
            last_line=after.last_line,
        )
    return cst.Comma(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=after)


def _separator(call: cst.Call) -> cst.Comma:
    args = call.args
    for arg in reversed(args[:-1]):
        if isinstance(arg.comma, cst.Comma):
            return _clean_separator(arg.comma)
    before = call.whitespace_before_args
    if isinstance(before, cst.ParenthesizedWhitespace):
        return _clean_separator(cst.Comma(whitespace_after=before))
    return cst.Comma(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))


def _keyword_arg(name: str, code: str) -> cst.Arg:
    return cst.Arg(
        value=cst.parse_expression(code),
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def _is_multiline(ws: cst.BaseParenthesizableWhitespace | cst.MaybeSentinel) -> bool:
    return isinstance(ws, cst.ParenthesizedWhitespace)


def _append_args(call: cst.Call, new: list[cst.Arg]) -> cst.Call:
    if not new:
        return call
    args = list(call.args)
    if not args:
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        built = [a.with_changes(comma=sep) for a in new[:-1]] + [new[-1]]
        return call.with_changes(args=built)
    sep = _separator(call)
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        trailing = last.comma
        after = trailing.whitespace_after
        if isinstance(after, cst.ParenthesizedWhitespace) and isinstance(sep.whitespace_after, cst.ParenthesizedWhitespace):
            # Multi-line with a trailing comma: the old last argument keeps its
            # comma (and any comment); the new ones follow on lines of their own.
            args[-1] = last.with_changes(comma=trailing.with_changes(
                whitespace_after=after.with_changes(last_line=sep.whitespace_after.last_line)))
            closing = cst.Comma(
                whitespace_before=cst.SimpleWhitespace(""),
                whitespace_after=cst.ParenthesizedWhitespace(
                    first_line=cst.TrailingWhitespace(), empty_lines=[], indent=after.indent, last_line=after.last_line
                ),
            )
        else:
            args[-1] = last.with_changes(comma=trailing.with_changes(whitespace_after=cst.SimpleWhitespace(" ")))
            closing = trailing
        built = [a.with_changes(comma=sep) for a in new[:-1]] + [new[-1].with_changes(comma=closing)]
        return call.with_changes(args=[*args, *built])
    tail = last.whitespace_after_arg
    first_sep = sep
    if isinstance(tail, cst.ParenthesizedWhitespace) and _is_multiline(sep.whitespace_after):
        # ``last  # comment`` before a ")" on its own line: the comment stays
        # on the old last argument's line, after the comma it now needs.
        assert isinstance(sep.whitespace_after, cst.ParenthesizedWhitespace)
        first_sep = sep.with_changes(whitespace_after=sep.whitespace_after.with_changes(first_line=tail.first_line))
        tail = tail.with_changes(first_line=cst.TrailingWhitespace())
    args[-1] = last.with_changes(comma=first_sep, whitespace_after_arg=cst.SimpleWhitespace(""))
    built = [a.with_changes(comma=sep) for a in new[:-1]]
    built.append(new[-1].with_changes(whitespace_after_arg=tail))
    return call.with_changes(args=[*args, *built])


def _carried_lines(comma: cst.Comma | cst.MaybeSentinel, indent: cst.SimpleWhitespace) -> list[cst.EmptyLine]:
    """Comments a separator carries (after the comma and on lines of their
    own below it), as own-line comments at ``indent``."""
    if not isinstance(comma, cst.Comma) or not isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        return []
    ws = comma.whitespace_after
    out = []
    if ws.first_line.comment is not None:
        out.append(cst.EmptyLine(indent=True, whitespace=indent, comment=ws.first_line.comment))
    out.extend(ws.empty_lines)
    return out


def _remove_arg(call: cst.Call, index: int) -> cst.Call:
    args = list(call.args)
    removed = args.pop(index)
    if index == len(args) and args:
        # The removed argument was last: its predecessor takes over its
        # trailing comma (or lack of one) and the whitespace before ")".
        prev = args[-1]
        carried = _carried_lines(prev.comma, cst.SimpleWhitespace(""))
        if carried and isinstance(removed.comma, cst.Comma) and _is_multiline(removed.comma.whitespace_after):
            # The predecessor's own comment must not be lost with its comma.
            ws = removed.comma.whitespace_after
            assert isinstance(ws, cst.ParenthesizedWhitespace) and isinstance(prev.comma, cst.Comma)
            prev_ws = prev.comma.whitespace_after
            assert isinstance(prev_ws, cst.ParenthesizedWhitespace)
            keep = [*prev_ws.empty_lines, *_carried_lines(removed.comma, prev_ws.last_line)]
            comma = removed.comma.with_changes(whitespace_after=ws.with_changes(
                first_line=prev_ws.first_line, empty_lines=keep))
            args[-1] = prev.with_changes(comma=comma, whitespace_after_arg=removed.whitespace_after_arg)
        else:
            args[-1] = prev.with_changes(comma=removed.comma, whitespace_after_arg=removed.whitespace_after_arg)
    elif not args:
        return call.with_changes(args=[])
    else:
        # Comments on the removed argument's line stay where it was.
        holder = args[index - 1].comma if index > 0 else call.whitespace_before_args
        after = holder.whitespace_after if isinstance(holder, cst.Comma) else holder
        if isinstance(after, cst.ParenthesizedWhitespace):
            carried = _carried_lines(removed.comma, after.last_line)
            if carried:
                after = after.with_changes(empty_lines=[*after.empty_lines, *carried])
                if isinstance(holder, cst.Comma):
                    args[index - 1] = args[index - 1].with_changes(comma=holder.with_changes(whitespace_after=after))
                else:
                    call = call.with_changes(whitespace_before_args=after)
    return call.with_changes(args=args)


def _rename_arg(arg: cst.Arg, name: str, code: str) -> cst.Arg:
    """``arg`` turned into ``name=code`` in its own slot (layout and comments kept)."""
    return arg.with_changes(
        keyword=cst.Name(name),
        value=cst.parse_expression(code),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def apply_call_change(call: cst.Call, change: CallChange, pairs: dict[str, str] | None = None) -> cst.Call:
    """Apply one (merged) change.  ``pairs`` maps a removed keyword to the new
    one that takes its slot (``shuffle`` -> ``sampler``), so that the new
    argument keeps the old one's place and comment."""
    pairs = dict(pairs or {})
    placed: set[str] = set()
    for name in change.remove:
        i = arg_index(call, name)
        if i is None:
            continue
        arg = call.args[i]
        later_positional = any(a.keyword is None and not a.star for a in call.args[i + 1:])
        partner = pairs.get(name)
        if partner is not None and partner in change.set and arg_index(call, partner) is None and not later_positional:
            call = call.with_changes(args=[*call.args[:i], _rename_arg(arg, partner, change.set[partner]), *call.args[i + 1:]])
            placed.add(partner)
        elif arg.keyword is None and later_positional:
            # Removing a positional argument would shift the ones after it.
            call = call.with_changes(args=[
                *call.args[:i], arg.with_changes(value=cst.parse_expression(repr(DEFAULTS[name]))), *call.args[i + 1:]
            ])
        else:
            call = _remove_arg(call, i)
    new: list[cst.Arg] = []
    for name, code in change.set.items():
        if name in placed:
            continue
        i = arg_index(call, name)
        if i is not None:
            args = list(call.args)
            args[i] = args[i].with_changes(value=cst.parse_expression(code))
            call = call.with_changes(args=args)
        else:
            new.append(_keyword_arg(name, code))
    return _append_args(call, new)


def merge_changes(changes: list[CallChange]) -> tuple[CallChange, dict[str, str]]:
    """One change from several (later values win), and the removed keywords
    each change replaces with a new one of its own."""
    merged = CallChange(changes[0].call)
    removed: list[str] = []
    pairs: dict[str, str] = {}
    for change in changes:
        merged.set.update(change.set)
        removed.extend(r for r in change.remove if r not in removed)
        added = [k for k in change.set if k not in change.remove]
        for old, new in zip((r for r in change.remove if r not in change.set), added):
            pairs.setdefault(old, new)
    merged.remove = tuple(r for r in removed if r not in merged.set)
    return merged, {old: new for old, new in pairs.items() if old in merged.remove}


def arg_index(call: cst.Call, name: str) -> int | None:
    """Index of the argument that binds DataLoader parameter ``name``
    (a keyword, or its positional slot), or None."""
    position = 0
    for i, arg in enumerate(call.args):
        if arg.star:
            if arg.star == "*":
                position = len(POSITIONAL)
            continue
        if arg.keyword is not None:
            if arg.keyword.value == name:
                return i
        else:
            if position < len(POSITIONAL) and POSITIONAL[position] == name:
                return i
            position += 1
    return None


_Node = TypeVar("_Node", bound=cst.CSTNode)


class _Replacer(cst.CSTTransformer):
    def __init__(self, replaced: dict[int, str], originals: dict[int, cst.CSTNode]) -> None:
        self.replaced = replaced

    def on_leave(self, original_node: _Node, updated_node: _Node) -> _Node | cst.RemovalSentinel | cst.FlattenSentinel[_Node]:
        code = self.replaced.get(id(original_node))
        if code is not None and isinstance(original_node, cst.BaseExpression):
            # Any expression may stand where an expression stood.
            return cast(_Node, cst.parse_expression(code))
        return updated_node


def replace_inside(call: cst.Call, replaced: dict[int, str]) -> cst.Call:
    if not replaced:
        return call
    # Nodes kept from the original call are the same objects, so identity
    # works after with_changes().
    result = call.visit(_Replacer(replaced, {}))
    assert isinstance(result, cst.Call)
    return result
