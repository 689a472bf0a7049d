"""Step 6a: fix specifications to text edits.

Rules describe fixes declaratively (``FixSpec``).  Here every change to one
call is merged, the call is rebuilt with libcst (``call_rewrite``, matching
its layout: one line, or one argument per line with the same indentation and
trailing-comma style) and rendered in place.  Edits replace only the call's own span, so
everything outside the edited calls and added imports stays byte-identical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from loadlint.cst.codegen import code_for_node
from loadlint.rules.base import MEASURED_MARK, CallChange, FixSpec
from loadlint.sources.source import line_starts
from loadlint.engine.call_rewrite import apply_call_change, merge_changes, replace_inside
from loadlint.engine.positions import Positions
from loadlint.types import Edit, Fix, Location


class FixError(Exception):
    """A fix that cannot be rendered safely; the finding stays unfixed."""


# -- rendering nodes in context ---------------------------------------------

def render(node: cst.BaseExpression, module: cst.Module, indent: str) -> str:
    """``node``'s code as it reads inside a block indented by ``indent``:
    the lines a parenthesized expression continues on carry that indent."""
    if not indent:
        return code_for_node(node, module)
    line = cst.SimpleStatementLine([cst.Expr(node)])
    block = cst.If(test=cst.Name("_"), body=cst.IndentedBlock([line], indent=indent))
    code = code_for_node(block, module)
    newline = module.default_newline
    return code[len("if _:" + newline + indent) : len(code) - len(newline)]


def render_in_place(original: cst.Call, new: cst.Call, positions: Positions) -> tuple[int, int, str]:
    """Render ``new`` where ``original`` stands, inside the indentation of
    the block its statement stands in (multi-line calls depend on it): the
    one ``original`` was located with, so it reads back exactly; where the
    positions do not know it, the nearest lines' indentation that
    reproduces ``original``."""
    start, end, loc, _ = positions.span(original)
    indent = positions.block_indent(original)
    if indent is not None:
        # Located by rendering its statement with this indent: it reads back exactly.
        return start, end, render(new, positions.module, indent)
    old_text = positions.text[start:end]
    candidates: list[str] = []
    row = loc.row
    while row >= 1 and len(candidates) < 8 and loc.row - row < 60:
        line = positions.line_text(row)
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if indent not in candidates:
            candidates.append(indent)
        row -= 1
    if "" not in candidates:
        candidates.append("")
    for indent in candidates:
        if render(original, positions.module, indent) == old_text:
            return start, end, render(new, positions.module, indent)
    raise FixError("cannot reproduce the original layout of the call")


# -- whole fixes --------------------------------------------------------------

_IMPORT_LINE = re.compile(r"^(?:import|from)\s")


@dataclass
class ImportPlan:
    """Where new imports go: after the last top-level import before the
    first compound statement, else after the module docstring, else at the
    top."""

    offset: int
    newline: str


def plan_imports(module: cst.Module, positions: Positions) -> ImportPlan:
    """Where added imports go: after the module's docstring and imports."""
    last_import = None
    first_stmt_after_docstring = None
    for i, stmt in enumerate(module.body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            last_import = stmt
        elif last_import is None and i == 0 and isinstance(stmt, cst.SimpleStatementLine) and isinstance(
            stmt.body[0], cst.Expr
        ) and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            first_stmt_after_docstring = stmt
        elif not isinstance(stmt, cst.SimpleStatementLine):
            # Imports interleaved with simple statements (``sys.path`` set
            # up first) run before the first definition: after the last.
            break
    anchor = last_import or first_stmt_after_docstring
    newline = module.default_newline
    if anchor is None:
        return ImportPlan(0, newline)
    _, end, _, end_loc = positions.span(anchor)
    # Statements own their trailing newline; insert after it.
    starts = line_starts(positions.text)
    offset = starts[end_loc.row] if end_loc.row < len(starts) else len(positions.text)
    if offset == len(positions.text) and not positions.text.endswith(("\n", "\r")):
        return ImportPlan(offset, newline)
    return ImportPlan(offset, newline)


def existing_imports(module: cst.Module) -> set[str]:
    """The import statements the module already has, as code."""
    out = set()
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    out.add(code_for_node(small).strip())
    return out


@dataclass
class Builder:
    """Turns FixSpecs into Fix objects (with edits) for one module."""

    module: cst.Module
    positions: Positions
    _imports: set[str] | None = None
    _plan: ImportPlan | None = None
    _guards: dict[int, Edit] = field(default_factory=dict)

    def build(self, spec: FixSpec) -> Fix:
        return Fix(spec.applicability, spec.message, tuple(self.edits([spec])))

    def edits(self, specs: list[FixSpec]) -> list[Edit]:
        """Edits for several fixes at once, with changes to one call merged."""
        edits: list[Edit] = []
        by_call: dict[int, list[CallChange]] = {}
        order: list[cst.Call] = []
        for spec in specs:
            for change in spec.calls:
                if id(change.call) not in by_call:
                    order.append(change.call)
                by_call.setdefault(id(change.call), []).append(change)
        replaced: dict[int, str] = {}
        for spec in specs:
            for node, code in spec.replace:
                replaced[id(node)] = code
        for call in order:
            merged, pairs = merge_changes(by_call[id(call)])
            new_call = apply_call_change(call, merged, pairs)
            # Replacements inside the call (e.g. os.cpu_count()) are made on
            # the rebuilt call so that the call is edited once.
            new_call = replace_inside(new_call, replaced)
            start, end, code = render_in_place(call, new_call, self.positions)
            edits.append(self._edit(start, end, code))
        # Several findings may ask for the same replacement or insertion
        # (two loaders sharing one ``workers = os.cpu_count()``): once each.
        done_replace: set[int] = set()
        done_prepend: set[tuple[int, str]] = set()
        for spec in specs:
            for node, code in spec.replace:
                if id(node) in done_replace or any(self._inside(node, c) for c in order):
                    continue
                done_replace.add(id(node))
                start, end, _, _ = self.positions.span(node)
                edits.append(self._edit(start, end, code))
            for node, code in spec.prepend:
                if (id(node), code) in done_prepend:
                    continue
                done_prepend.add((id(node), code))
                edits.append(self._prepend(node, code))
            for node, code in spec.hoist:
                if (id(node), code) in done_prepend:
                    continue
                done_prepend.add((id(node), code))
                edits.extend(self._hoist(node, code))
            for node, code in spec.comment:
                edits.append(self._comment(node, code))
            if spec.guard and (id(spec.guard[0]), "guard") not in done_prepend:
                # Every finding of the script asks for the same guard.
                done_prepend.add((id(spec.guard[0]), "guard"))
                edits.append(self._guard(spec.guard))
        imports = []
        for spec in specs:
            for statement in spec.imports:
                if statement not in imports and statement not in self.existing_imports:
                    imports.append(statement)
        if imports:
            plan = self.plan
            text = "".join(f"{s}{plan.newline}" for s in imports)
            if plan.offset == len(self.positions.text) and plan.offset and not self.positions.text.endswith(("\n", "\r")):
                text = plan.newline + text
            edits.append(self._edit(plan.offset, plan.offset, text))
        edits.sort(key=lambda e: (e.start, e.end))
        for a, b in zip(edits, edits[1:]):
            if b.start < a.end:
                raise FixError("overlapping edits")
        return edits

    def _inside(self, node: cst.CSTNode, call: cst.Call) -> bool:
        n_start, n_end, _, _ = self.positions.span(node)
        c_start, c_end, _, _ = self.positions.span(call)
        return c_start <= n_start and n_end <= c_end

    @property
    def existing_imports(self) -> set[str]:
        if self._imports is None:
            self._imports = existing_imports(self.module)
        return self._imports

    @property
    def plan(self) -> ImportPlan:
        if self._plan is None:
            self._plan = plan_imports(self.module, self.positions)
        return self._plan

    def _prepend(self, compound: cst.CSTNode, code: str) -> Edit:
        body = getattr(compound, "body", None)
        if not isinstance(body, cst.IndentedBlock) or not body.body:
            raise FixError("cannot insert into a one-line block")
        first = body.body[0]
        assert isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        start, _, loc, _ = self.positions.span(first)
        line = self.positions.line_text(loc.row)
        indent = line[: loc.column - 1]
        if indent.strip():
            raise FixError("first statement does not start its line")
        # Above the comments and blank lines that lead the first statement:
        # they belong to it, not to the new one.
        row = loc.row - len(first.leading_lines)
        offset = line_starts(self.positions.text)[row - 1] if row < loc.row else start - (loc.column - 1)
        return self._edit(offset, offset, f"{indent}{code}{self.module.default_newline}")

    def _start_with_decorators(self, node: cst.CSTNode) -> tuple[int, Location]:
        first = node.decorators[0] if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.decorators else node
        start, _, loc, _ = self.positions.span(first)
        return start, loc

    def _hoist(self, node: cst.CSTNode, code: str) -> list[Edit]:
        """Insert ``code`` at module level before the top-level statement that
        contains ``node``; a nested ``def`` given as ``node`` is moved, i.e.
        also removed from where it stands."""
        newline = self.module.default_newline
        code = code.replace("\r\n", "\n").replace("\n", newline)
        n_start, n_end, _, _ = self.positions.span(node)
        top = None
        for stmt in self.module.body:
            s_start, _ = self._start_with_decorators(stmt)
            _, s_end, _, _ = self.positions.span(stmt)
            if s_start <= n_start and n_end <= s_end:
                top = stmt
                break
        if top is None:
            raise FixError("cannot find the top-level statement to hoist before")
        if top is node:
            raise FixError("already at module level")
        start, loc = self._start_with_decorators(top)
        if self.positions.line_text(loc.row)[: loc.column - 1].strip():
            raise FixError("the statement does not start its line")
        at = start - (loc.column - 1)
        edits = [self._edit(at, at, code)]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            d_start, d_loc = self._start_with_decorators(node)
            if self.positions.line_text(d_loc.row)[: d_loc.column - 1].strip():
                raise FixError("the definition does not start its line")
            _, _, _, end_loc = self.positions.span(node)
            starts = line_starts(self.positions.text)
            begin = d_start - (d_loc.column - 1)
            stop = starts[end_loc.row] if end_loc.row < len(starts) else len(self.positions.text)
            if self.positions.text[n_end:stop].strip():
                raise FixError("code follows the definition on its last line")
            edits.append(self._edit(begin, stop, ""))
        return edits

    def _guard(self, statements: tuple[cst.BaseStatement, ...]) -> Edit:
        """``statements`` (consecutive, top-level) indented under a main
        guard, with the statements between them a large module's parse
        left out (the text between is parsed again).  Blank and comment
        lines above the first stay above the guard; those between the
        statements move in with them."""
        key = id(statements[0])
        if key in self._guards:  # every finding of a script offers the same guard
            return self._guards[key]
        start, _, loc, _ = self.positions.span(statements[0])
        if self.positions.line_text(loc.row)[: loc.column - 1].strip():
            raise FixError("the first statement does not start its line")
        _, _, _, end_loc = self.positions.span(statements[-1])
        starts = line_starts(self.positions.text)
        begin = start - (loc.column - 1)
        stop = starts[end_loc.row] if end_loc.row < len(starts) else len(self.positions.text)
        region = self.positions.text[begin:stop]
        try:
            parsed = cst.parse_module(region)
        except cst.ParserSyntaxError:
            raise FixError("the statements to guard do not parse on their own") from None
        blank = cst.EmptyLine(indent=False)
        body: list[cst.BaseStatement] = []
        for i, s in enumerate(parsed.body):
            # A blank line would otherwise carry the new indentation as trailing spaces.
            lines = () if i == 0 else [line if line.comment is not None else blank for line in s.leading_lines]
            body.append(s.with_changes(leading_lines=lines))
        guard = cst.If(test=cst.parse_expression('__name__ == "__main__"'), body=cst.IndentedBlock(body))
        code = code_for_node(guard, self.module)
        if not region.endswith(("\n", "\r")):
            code = code.rstrip("\r\n")
        self._guards[key] = edit = self._edit(begin, stop, code)
        return edit

    def _comment(self, node: cst.CSTNode, text: str) -> Edit:
        """``text`` as the trailing comment of the line where ``node`` ends,
        in place of a measured mark already there."""
        _, _, _, end = self.positions.span(node)
        line = self.positions.line_text(end.row)
        begin = line_starts(self.positions.text)[end.row - 1]
        if line.rstrip().endswith("\\"):
            raise FixError("the line continues with a backslash: no room for a comment")
        old = MEASURED_MARK.search(line)
        if old is not None:
            return self._edit(begin + old.start(), begin + old.end(), text)
        return self._edit(begin + len(line.rstrip()), begin + len(line), f"  {text}")

    def _edit(self, start: int, end: int, content: str) -> Edit:
        return Edit(
            content,
            start,
            end,
            self.positions.location_of_offset(start),
            self.positions.location_of_offset(end),
        )


def apply_edits(text: str, edits: list[Edit]) -> str:
    """``text`` with ``edits`` applied; raises FixError when they overlap."""
    out = []
    cursor = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if edit.start < cursor:
            raise FixError("overlapping edits")
        out.append(text[cursor:edit.start])
        out.append(edit.content)
        cursor = edit.end
    out.append(text[cursor:])
    return "".join(out)


def old_offset(edits: list[Edit], offset: int) -> int:
    """Where an offset of the edited text was before ``edits`` (sorted, not
    overlapping); an offset inside inserted text maps to the edit's start."""
    shift = 0
    for edit in edits:
        begin = edit.start + shift
        if offset < begin:
            break
        if offset < begin + len(edit.content):
            return edit.start
        shift += len(edit.content) - (edit.end - edit.start)
    return offset - shift
