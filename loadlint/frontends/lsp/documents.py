"""Python text documents: findings to diagnostics, quick fixes, noqa and
fix-all edits, and the state the server keeps between requests.

The helpers that turn a finding into LSP objects take the text document the
finding lies in, so notebook cells (each a text document) reuse them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadlint.api import NOQA
from loadlint.frontends.lsp.worker import (
    IN_PROCESS_LIMIT,
    Worker,
    document_findings,
    fixed_in_project,
    fixed_text,
    on_loop,
    project_findings,
)
from loadlint.sources.files import read_source

if TYPE_CHECKING:
    from loadlint.api import Analysis, ProfileCache
    from loadlint.workspace.config import ConfigResolver, Settings
    from loadlint.types import Edit, Finding, Location, Options

SOURCE = "loadlint"
FIX_ALL_KIND = "source.fixAll.loadlint"
#: Seconds without a change before a changed document is linted again.
DEBOUNCE = 0.3
CONFIG_NAMES = frozenset({"pyproject.toml", "loadlint.toml", ".loadlint.toml"})

# The engine's noqa grammar: ``# noqa`` or ``# noqa: A1, B2``.
_NOQA = NOQA


@dataclass
class State:
    """What the server keeps between requests."""

    debounce: float = DEBOUNCE
    #: Push diagnostics (False when the client pulls them itself).
    push: bool = True
    resolver: ConfigResolver | None = None
    profiles: ProfileCache | None = None
    pending: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    #: The last lint of each document: uri -> (what it linted, its result).
    #: Code actions and pulls right after a publish reuse it.
    linted: dict[str, tuple[object, Any]] = field(default_factory=dict)
    #: Notebook uri -> the cell uris that have diagnostics published.
    cells_shown: dict[str, set[str]] = field(default_factory=dict)
    #: Where analyses run, off the event loop.
    worker: Worker = field(default_factory=Worker)

    def reset_config(self) -> None:
        self.resolver = None
        self.linted.clear()

    def settings_for(self, path: str) -> Settings:
        """The settings of the file at ``path`` (configuration read once)."""
        from loadlint.workspace.config import Overrides, ConfigResolver

        if self.resolver is None:
            self.resolver = ConfigResolver(Overrides())
        return self.resolver.for_path(Path(path))

    def options(self, settings: Settings, path: str) -> Options:
        """The options ``settings`` give the document at ``path`` (hardware
        detected once per server, not per change)."""
        from loadlint.api import ProfileCache, options_for

        if self.profiles is None:
            self.profiles = ProfileCache()
        return options_for(settings, path, self.profiles)

    def cancel(self, uri: str) -> None:
        """Drop the debounced lint waiting for ``uri``."""
        pending = self.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()

    def later(self, uri: str, action: Any) -> None:
        """Run ``action()`` once ``uri`` has not changed for ``debounce`` seconds."""
        self.cancel(uri)

        async def run() -> None:
            await asyncio.sleep(self.debounce)
            self.pending.pop(uri, None)
            await self.worker.offload(action)

        self.pending[uri] = asyncio.ensure_future(run())


# -- findings ----------------------------------------------------------------


def path_of(uri: str, untitled: str = "untitled.py") -> str:
    """The file system path of a ``file:`` uri; ``untitled`` for any other."""
    from pygls.uris import to_fs_path

    path = to_fs_path(uri) if uri.startswith("file:") else None
    return path or untitled


@dataclass
class Linted:
    """A text document's last lint.  Its findings are published before their
    fixes are decided (the decision re-analyses the fixed text, more than
    the lint itself costs); ``decided`` is computed on the first request
    for fixes and kept for that text."""

    findings: list[Finding]
    #: What deciding needs: the options and ``api.analyse_document``'s result.
    pending: tuple[Options, Any] | None = None
    #: The findings with only the fixes ``fix`` would apply (withheld ones say why).
    decided: list[Finding] | None = None
    #: The text's analysis: the next text's parse reuses the top-level
    #: statements a change leaves alone.
    analysis: Analysis | None = None


def lint_document(state: State, uri: str, text: str, *, decide: bool = False) -> tuple[list[Finding], Settings]:
    """(findings, settings) for a document; a config problem raises ConfigError.
    The findings' fixes are the decided ones with ``decide``; without, they
    are not to be offered (a fix may yet be withheld)."""
    from loadlint.workspace.discover import is_excluded

    path = path_of(uri)
    settings = state.settings_for(path)
    key = (path, text)
    last = state.linted.get(uri)
    if last is not None and last[0] == key:
        linted = last[1]
    elif uri.startswith("file:") and is_excluded(Path(path), settings):
        return [], settings
    else:
        # The tree of this path's last text (not of a renamed document's) is reused.
        prior = last[1] if last is not None and isinstance(last[1], Linted) else None
        if last is None or prior is None or prior.analysis is None or last[0] != (path, prior.analysis.text):
            prior = None
        linted = _lint(state, uri, text, settings, prior)
        state.linted[uri] = (key, linted)
    if decide and linted.decided is None:
        from loadlint.api import decided_findings

        assert linted.pending is not None
        options, analysed = linted.pending
        if analysed is None:  # analysed in the worker process: decided there too
            decided = state.worker.call(document_findings, text, path, settings, state.profiles, True)
        else:
            decided = decided_findings(text, path, options, analysed=analysed)
        linted.decided, linted.pending = decided, None
    return (linted.decided if decide and linted.decided is not None else linted.findings), settings


def _lint(state: State, uri: str, text: str, settings: Settings, previous: Any) -> Linted:
    path = path_of(uri)
    if uri.startswith("file:") and _saved(path, text):
        # A saved document is checked with its project's facts (other files' callers and loops).
        state.options(settings, path)  # creates the profile cache
        assert state.profiles is not None
        findings = state.worker.call(project_findings, path, settings, state.profiles)
        return Linted(findings, decided=findings)
    from loadlint.api import analyse_document

    options = state.options(settings, path)
    if len(text) > IN_PROCESS_LIMIT:
        return Linted(state.worker.call(document_findings, text, path, settings, state.profiles, False), (options, None))
    analysed = analyse_document(text, path, options, None if previous is None else previous.analysis)
    return Linted(analysed[0], (options, analysed), analysis=analysed[1])


def _saved(path: str, text: str) -> bool:
    try:
        # Guarded: a FIFO or a link to the server's own stdin must not block it.
        return read_source(path).decode("utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False


def lsp_range(doc: Any, start: Location, end: Location) -> Any:
    """The LSP range of 1-based (row, column) locations in ``doc``."""
    from lsprotocol import types

    raw = types.Range(
        start=types.Position(line=start.row - 1, character=start.column - 1),
        end=types.Position(line=end.row - 1, character=end.column - 1),
    )
    # Findings count code points; the client may count UTF-16 units.
    return doc.position_codec.range_to_client_units(doc.lines, raw)


def to_diagnostic(doc: Any, finding: Finding) -> Any:
    """The LSP diagnostic of a finding."""
    from lsprotocol import types

    from loadlint.output.report import rule_url, severity

    url = rule_url(finding.code)
    return types.Diagnostic(
        range=lsp_range(doc, finding.location, finding.end_location),
        message=finding.message,
        severity=types.DiagnosticSeverity.Error if severity(finding.code) == "error" else types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=url) if url else None,
        source=SOURCE,
        # Whether a fix applies is decided only when fixes are asked for.
        data={"name": finding.name},
    )


def config_error(ls: Any, exc: Exception) -> None:
    """Tell the user their configuration is broken (nothing is linted meanwhile)."""
    from lsprotocol import types

    params = types.ShowMessageParams(type=types.MessageType.Error, message=f"loadlint: {exc}")
    on_loop(lambda: ls.window_show_message(params))


def diagnostics(ls: Any, state: State, uri: str) -> list[Any]:
    """The diagnostics of a Python document."""
    from loadlint.workspace.config import ConfigError

    doc = ls.workspace.get_text_document(uri)
    try:
        findings, _ = lint_document(state, uri, doc.source)
    except ConfigError as exc:
        config_error(ls, exc)
        return []
    return [to_diagnostic(doc, f) for f in findings]


def send(ls: Any, uri: str, version: int | None, items: list[Any]) -> None:
    """Push ``items`` as the diagnostics of ``uri``."""
    from lsprotocol import types

    params = types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=items)
    # From the background thread too: messages go out from the event loop, in order.
    on_loop(lambda: ls.text_document_publish_diagnostics(params))


def publish(ls: Any, state: State, uri: str) -> None:
    """Push a document's diagnostics to the client."""
    send(ls, uri, ls.workspace.get_text_document(uri).version, diagnostics(ls, state, uri))


# -- code actions --------------------------------------------------------------


def noqa_edit(doc: Any, finding: Finding) -> Any:
    """The edit that adds ``finding.code`` to the ``# noqa`` of its line, or
    None where a comment cannot go (a line continued with a backslash)."""
    from lsprotocol import types

    row = finding.location.row - 1
    if row >= len(doc.lines):
        return None
    line = doc.lines[row].rstrip("\r\n")
    if line.rstrip().endswith("\\"):
        return None
    match = _NOQA.search(line) if "#" in line else None
    if match is not None and match.group("codes") is None:
        return None  # a bare noqa already silences everything on the line
    if match is not None:
        column, end, text = match.end("codes"), match.end("codes"), f", {finding.code}"
    else:
        # Trailing whitespace goes away rather than sitting before the comment.
        column, end, text = len(line.rstrip()), len(line), f"  # noqa: {finding.code}"
    raw = types.Range(start=types.Position(line=row, character=column), end=types.Position(line=row, character=end))
    return types.TextEdit(range=doc.position_codec.range_to_client_units(doc.lines, raw), new_text=text)


def overlaps(a: Any, b: Any) -> bool:
    """Whether two LSP ranges share a position (touching counts)."""
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and (
        b.start.line,
        b.start.character,
    ) <= (a.end.line, a.end.character)


def whole_text_edit(doc: Any, new_text: str) -> Any:
    """One edit turning the document into ``new_text``: the changed lines only,
    so the cursor and folds elsewhere stay put."""
    from lsprotocol import types

    old = doc.lines
    new = new_text.splitlines(keepends=True)
    start = 0
    while start < len(old) and start < len(new) and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    if end_old == len(old) and old and not old[-1].endswith(("\n", "\r")):
        end = types.Position(line=len(old) - 1, character=len(old[-1]))
    else:
        end = types.Position(line=end_old, character=0)
    raw = types.Range(start=types.Position(line=start, character=0), end=end)
    # A position past the last line maps to (line count, 0): the end of a
    # document that ends with a newline.
    rng = doc.position_codec.range_to_client_units(doc.lines, raw)
    return types.TextEdit(range=rng, new_text="".join(new[start:end_new]))


def wanted(only: list[str] | None, kinds: tuple[str, ...]) -> str | None:
    """The first of ``kinds`` a code action request asks for (``only``), if any."""
    if not only:
        return kinds[0]
    return next((kind for kind in kinds if any(kind.startswith(k) for k in only)), None)


def fix_all(kind: str, changes: dict[str, list[Any]]) -> Any:
    """The fix-all code action making ``changes`` (uri -> edits)."""
    from lsprotocol import types

    return types.CodeAction(
        title="loadlint: Fix all auto-fixable problems", kind=kind, edit=types.WorkspaceEdit(changes=changes)
    )


def fix_all_action(ls: Any, state: State, uri: str, kind: str = FIX_ALL_KIND) -> Any:
    """The fix-all code action of a document; None when nothing applies.  A
    saved document gets what ``loadlint fix`` would write to it, its
    project findings' fixes included; an unsaved one its own fixes."""
    from loadlint.api import fixed_document

    doc = ls.workspace.get_text_document(uri)
    path = path_of(uri)
    settings = state.settings_for(path)
    if uri.startswith("file:") and _saved(path, doc.source):
        fixed: str | None = _fixed_in_project(state, path, settings)
    elif len(doc.source) > IN_PROCESS_LIMIT:
        state.options(settings, path)  # creates the profile cache
        fixed = state.worker.call(fixed_text, doc.source, path, settings, state.profiles)
    else:
        fixed = fixed_document(doc.source, path, state.options(settings, path), unsafe=settings.unsafe_fixes)
    if fixed is None or fixed == doc.source:
        return None
    return fix_all(kind, {uri: [whole_text_edit(doc, fixed)]})


def _fixed_in_project(state: State, path: str, settings: Settings) -> str | None:
    """The saved file's text after a dry-run ``fix`` of it (its project read
    from disk, nothing written)."""
    state.options(settings, path)  # creates the profile cache
    return state.worker.call(fixed_in_project, path, settings, state.profiles)


def finding_actions(finding: Finding, diagnostic: Any, fix_changes: dict[str, list[Any]] | None, noqa: tuple[str, Any] | None) -> list[Any]:
    """A finding's quick fix (its edits as ``fix_changes``, uri -> edits) and
    its "disable for this line" action (``noqa``: (uri, edit))."""
    from lsprotocol import types

    actions = []
    fix = finding.fix
    # Unsafe fixes are offered too (labelled, never preferred): the user
    # picks one explicitly and sees the edit, unlike fix-all.
    if fix is not None and fix_changes:
        unsafe = " (unsafe)" if fix.applicability == "unsafe" else ""
        actions.append(
            types.CodeAction(
                title=f"loadlint ({finding.code}): {fix.message}{unsafe}",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                is_preferred=fix.applicability == "safe",
                edit=types.WorkspaceEdit(changes=fix_changes),
            )
        )
    if noqa is not None and noqa[1] is not None:
        actions.append(
            types.CodeAction(
                title=f"loadlint: Disable {finding.code} for this line",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                edit=types.WorkspaceEdit(changes={noqa[0]: [noqa[1]]}),
            )
        )
    return actions


def edits_of(doc: Any, edits: tuple[Edit, ...]) -> list[Any]:
    """A fix's edits as LSP text edits in ``doc``."""
    from lsprotocol import types

    return [types.TextEdit(range=lsp_range(doc, e.location, e.end_location), new_text=e.content) for e in edits]


def code_actions(ls: Any, state: State, params: Any) -> list[Any]:
    """Quick fixes and noqa actions for the diagnostics a request covers."""
    from lsprotocol import types

    from loadlint.workspace.config import ConfigError

    uri = params.text_document.uri
    doc = ls.workspace.get_text_document(uri)
    only = params.context.only
    actions: list[Any] = []
    try:
        findings, _ = lint_document(state, uri, doc.source, decide=True)
    except ConfigError:
        return []
    if wanted(only, (types.CodeActionKind.QuickFix.value,)):
        for finding in findings:
            diagnostic = to_diagnostic(doc, finding)
            if overlaps(diagnostic.range, params.range):
                fix_changes = {uri: edits_of(doc, finding.fix.edits)} if finding.fix is not None else None
                actions += finding_actions(finding, diagnostic, fix_changes, (uri, noqa_edit(doc, finding)))
    kind = wanted(only, (FIX_ALL_KIND,))
    if kind is not None:
        action = fix_all_action(ls, state, uri, kind)
        if action is not None:
            actions.append(action)
    return actions
