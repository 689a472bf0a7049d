"""``loadlint lsp``: a language server over stdio (extra ``loadlint[lsp]``).

What an editor gets, following ruff's server:

- diagnostics for Python documents on open, on save, and on change after a
  short pause (typing does not re-lint on every keystroke), pushed with
  ``textDocument/publishDiagnostics`` unless the client pulls them
  (``textDocument/diagnostic``, answered either way);
- the same findings as ``loadlint check``: the configuration of the file's
  project (closest config above the file) with its target hardware;
- per diagnostic, a quick fix (the finding's fix) and "Disable LLnnn for
  this line" (adds or extends a ``# noqa`` comment);
- ``source.fixAll.loadlint``: every safe fix (unsafe ones too when the
  project sets ``unsafe-fixes = true``).

pygls is imported only when the server starts, so ``loadlint check`` never
pays for it and works without the extra.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from loadlint import __version__

if TYPE_CHECKING:
    from loadlint.config import Resolver, Settings
    from loadlint.pipeline import ProfileCache
    from loadlint.types import Edit, Finding, Location, Options

SOURCE = "loadlint"
FIX_ALL_KIND = "source.fixAll.loadlint"
#: Seconds without a change before a changed document is linted again.
DEBOUNCE = 0.3
CONFIG_NAMES = frozenset({"pyproject.toml", "loadlint.toml", ".loadlint.toml"})

# Same grammar as the engine's noqa parser: ``# noqa`` or ``# noqa: A1, B2``.
_NOQA = re.compile(r"#\s*noqa(?::[ \t]*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)


@dataclass
class State:
    """What the server keeps between requests."""

    debounce: float = DEBOUNCE
    #: Push diagnostics (False when the client pulls them itself).
    push: bool = True
    resolver: Resolver | None = None
    profiles: ProfileCache | None = None
    pending: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def reset_config(self) -> None:
        self.resolver = None

    def settings_for(self, path: str) -> Settings:
        """The settings of the file at ``path`` (configuration read once)."""
        from loadlint.config import Overrides, Resolver
        from loadlint.pipeline import ProfileCache

        if self.resolver is None:
            self.resolver = Resolver(Overrides())
        if self.profiles is None:
            self.profiles = ProfileCache()
        return self.resolver.for_path(Path(path))

    def options_for(self, settings: Settings, path: str) -> Options:
        """The options ``settings`` give the document at ``path``."""
        from loadlint.pipeline import ProfileCache, options_for

        if self.profiles is None:
            self.profiles = ProfileCache()
        return options_for(settings, path, self.profiles)


# -- findings ----------------------------------------------------------------


def _path_of(uri: str) -> str:
    from pygls.uris import to_fs_path

    path = to_fs_path(uri) if uri.startswith("file:") else None
    return path or "untitled.py"


def lint_document(state: State, uri: str, text: str) -> tuple[list[Finding], Settings]:
    """(findings, settings) for a document; a config problem raises ConfigError."""
    from loadlint.discover import is_excluded
    from loadlint.pipeline import check_text

    path = _path_of(uri)
    settings = state.settings_for(path)
    if uri.startswith("file:") and is_excluded(Path(path), settings):
        return [], settings
    if uri.startswith("file:") and _saved(path, text):
        # A saved document is checked with its project's facts (other files' callers and loops).
        from loadlint.pipeline import ProfileCache
        from loadlint.project.join import check_in_project
        from loadlint.runner import lazy_cache

        state.profiles = state.profiles or ProfileCache()
        return check_in_project(Path(path), settings, state.profiles, lazy_cache(None)).findings, settings
    return check_text(text, path, state.options_for(settings, path)), settings


def _saved(path: str, text: str) -> bool:
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read() == text
    except (OSError, UnicodeDecodeError):
        return False


def _range(doc: Any, start: Location, end: Location) -> Any:
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

    from loadlint.report import rule_url, severity

    url = rule_url(finding.code)
    return types.Diagnostic(
        range=_range(doc, finding.location, finding.end_location),
        message=finding.message,
        severity=types.DiagnosticSeverity.Error if severity(finding.code) == "error" else types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=url) if url else None,
        source=SOURCE,
        data={"name": finding.name, "fixable": finding.fix is not None},
    )


def _diagnostics(ls: Any, state: State, uri: str) -> list[Any]:
    from lsprotocol import types

    from loadlint.config import ConfigError

    doc = ls.workspace.get_text_document(uri)
    try:
        findings, _ = lint_document(state, uri, doc.source)
    except ConfigError as exc:
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=f"loadlint: {exc}"))
        return []
    return [to_diagnostic(doc, f) for f in findings]


def publish(ls: Any, state: State, uri: str) -> None:
    """Push a document's diagnostics to the client."""
    from lsprotocol import types

    doc = ls.workspace.get_text_document(uri)
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, version=doc.version, diagnostics=_diagnostics(ls, state, uri))
    )


# -- code actions --------------------------------------------------------------


def _edit_for(doc: Any, edit: Edit) -> Any:
    from lsprotocol import types

    return types.TextEdit(range=_range(doc, edit.location, edit.end_location), new_text=edit.content)


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
        column, text = match.end("codes"), f", {finding.code}"
    else:
        column, text = len(line.rstrip()), f"  # noqa: {finding.code}"
        # Trailing whitespace goes away rather than sitting before the comment.
        end = len(line)
        raw = types.Range(start=types.Position(line=row, character=column), end=types.Position(line=row, character=end))
        return types.TextEdit(range=doc.position_codec.range_to_client_units(doc.lines, raw), new_text=text)
    raw = types.Range(start=types.Position(line=row, character=column), end=types.Position(line=row, character=column))
    return types.TextEdit(range=doc.position_codec.range_to_client_units(doc.lines, raw), new_text=text)


def _overlaps(a: Any, b: Any) -> bool:
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


def fix_all_action(ls: Any, state: State, uri: str) -> Any:
    """The fix-all code action of a document; None when nothing applies."""
    from lsprotocol import types

    from loadlint.engine import FixFailed
    from loadlint.pipeline import fix_source_text

    doc = ls.workspace.get_text_document(uri)
    path = _path_of(uri)
    settings = state.settings_for(path)
    try:
        fixed, _, applied = fix_source_text(doc.source, path, state.options_for(settings, path), unsafe=settings.unsafe_fixes)
    except FixFailed:
        return None
    if not applied or fixed == doc.source:
        return None
    return types.CodeAction(
        title="loadlint: Fix all auto-fixable problems",
        kind=FIX_ALL_KIND,
        edit=types.WorkspaceEdit(changes={uri: [whole_text_edit(doc, fixed)]}),
    )


def code_actions(ls: Any, state: State, params: Any) -> list[Any]:
    """Quick fixes and noqa actions for the diagnostics a request covers."""
    from lsprotocol import types

    from loadlint.config import ConfigError

    uri = params.text_document.uri
    doc = ls.workspace.get_text_document(uri)
    only = params.context.only
    want_quick = not only or any(types.CodeActionKind.QuickFix.value.startswith(k) or k == "quickfix" for k in only)
    want_fix_all = not only or any(FIX_ALL_KIND.startswith(k) for k in only)
    actions: list[Any] = []
    try:
        findings, settings = lint_document(state, uri, doc.source)
    except ConfigError:
        return []
    if want_quick:
        for finding in findings:
            diagnostic = to_diagnostic(doc, finding)
            if not _overlaps(diagnostic.range, params.range):
                continue
            fix = finding.fix
            # Unsafe fixes are offered too (labelled, never preferred): the user
            # picks one explicitly and sees the edit, unlike fix-all.
            if fix is not None:
                unsafe = " (unsafe)" if fix.applicability == "unsafe" else ""
                actions.append(
                    types.CodeAction(
                        title=f"loadlint ({finding.code}): {fix.message}{unsafe}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        is_preferred=fix.applicability == "safe",
                        edit=types.WorkspaceEdit(changes={uri: [_edit_for(doc, e) for e in fix.edits]}),
                    )
                )
            noqa = noqa_edit(doc, finding)
            if noqa is not None:
                actions.append(
                    types.CodeAction(
                        title=f"loadlint: Disable {finding.code} for this line",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        edit=types.WorkspaceEdit(changes={uri: [noqa]}),
                    )
                )
    if want_fix_all:
        action = fix_all_action(ls, state, uri)
        if action is not None:
            actions.append(action)
    return actions


# -- the server ----------------------------------------------------------------


def create_server(debounce: float = DEBOUNCE) -> Any:
    """The pygls server with loadlint's handlers."""
    from lsprotocol import types
    from pygls.lsp.server import LanguageServer

    server = LanguageServer("loadlint", __version__)
    state = State(debounce=debounce)

    def is_python(uri: str, language_id: str | None = None) -> bool:
        if language_id is not None:
            return language_id == "python"
        return uri.endswith((".py", ".pyi"))

    @server.feature(types.INITIALIZE)
    def initialize(ls: Any, params: types.InitializeParams) -> None:
        text = params.capabilities.text_document
        # A client that pulls would otherwise show every finding twice.
        state.push = not (text is not None and text.diagnostic is not None)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: Any, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        if state.push and is_python(doc.uri, doc.language_id):
            publish(ls, state, doc.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: Any, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        if not state.push or not is_python(uri, ls.workspace.get_text_document(uri).language_id):
            return
        pending = state.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()

        async def later() -> None:
            await asyncio.sleep(state.debounce)
            state.pending.pop(uri, None)
            publish(ls, state, uri)

        state.pending[uri] = asyncio.ensure_future(later())

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    async def did_save(ls: Any, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri.rsplit("/", 1)[-1] in CONFIG_NAMES:
            config_changed(ls)
            return
        pending = state.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        if state.push and is_python(uri, ls.workspace.get_text_document(uri).language_id):
            publish(ls, state, uri)
            # A saved module may change what its project's other files are told.
            for other in list(ls.workspace.text_documents):
                if other != uri and is_python(other, ls.workspace.get_text_document(other).language_id):
                    publish(ls, state, other)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: Any, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        pending = state.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        if state.push:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls: Any, params: types.DidChangeWatchedFilesParams) -> None:
        if any(change.uri.rsplit("/", 1)[-1] in CONFIG_NAMES for change in params.changes):
            config_changed(ls)

    def config_changed(ls: Any) -> None:
        state.reset_config()
        if state.push:
            for uri, doc in list(ls.workspace.text_documents.items()):
                if is_python(uri, doc.language_id):
                    publish(ls, state, uri)
        else:
            try:
                ls.workspace_diagnostic_refresh(None)
            except Exception:  # the client may not support refresh requests
                pass

    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=False, workspace_diagnostics=False),
    )
    def pull(ls: Any, params: types.DocumentDiagnosticParams) -> Any:
        uri = params.text_document.uri
        items = _diagnostics(ls, state, uri) if is_python(uri, ls.workspace.get_text_document(uri).language_id) else []
        return types.RelatedFullDocumentDiagnosticReport(items=items)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=False),
    )
    def code_action(ls: Any, params: types.CodeActionParams) -> Any:
        return code_actions(ls, state, params)

    return server


@click.command("lsp")
@click.option("--debounce", type=float, default=DEBOUNCE, show_default=True, help="Seconds to wait after a change before linting.")
def command(debounce: float) -> None:
    """Run the language server over stdio (needs the 'lsp' extra)."""
    try:
        server = create_server(debounce)
    except ImportError as exc:
        click.echo(f"loadlint: error: 'loadlint lsp' needs the 'lsp' extra: pip install 'loadlint[lsp]' ({exc})", err=True)
        raise SystemExit(2) from None
    server.start_io()
