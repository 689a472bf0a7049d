"""``loadlint lsp``: a language server over stdio (extra ``loadlint[lsp]``).

What an editor gets, following ruff's server:

- diagnostics for Python documents and for the Python cells of notebooks
  (LSP 3.17 notebook sync; the cells are checked as one module, as
  ``loadlint check`` checks an ``.ipynb`` file) on open, on save, and on
  change after a short pause (typing does not re-lint on every keystroke),
  pushed with ``textDocument/publishDiagnostics`` unless the client pulls
  them (``textDocument/diagnostic``, answered either way);
- the same findings as ``loadlint check``: the configuration of the file's
  project (closest config above the file) with its target hardware;
- per diagnostic, a quick fix (the finding's fix) and "Disable LLnnn for
  this line" (adds or extends a ``# noqa`` comment);
- ``source.fixAll.loadlint`` (and, on a notebook,
  ``notebook.source.fixAll.loadlint``): every safe fix (unsafe ones too
  when the project sets ``unsafe-fixes = true``).

pygls is imported only when the server starts, so ``loadlint check`` never
pays for it and works without the extra.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import click

from loadlint import __version__
from loadlint.frontends.lsp.documents import (
    CONFIG_NAMES,
    DEBOUNCE,
    FIX_ALL_KIND,
    SOURCE,
    State,
    code_actions,
    diagnostics,
    publish,
    send,
)
from loadlint.frontends.lsp.notebooks import (
    NOTEBOOK_FIX_ALL_KIND,
    cell_code_actions,
    cell_diagnostics,
    clear_notebook,
    decided_slot,
    publish_notebook,
    sync_options,
)
from loadlint.frontends.lsp.worker import Stopped, on_loop
from loadlint.api import prepare, stop_project_phases

T = TypeVar("T")


def create_server(debounce: float = DEBOUNCE) -> Any:
    """The pygls server with loadlint's handlers."""
    from lsprotocol import types
    from pygls.lsp.server import LanguageServer

    server = LanguageServer("loadlint", __version__, notebook_document_sync=sync_options())
    state = State(debounce=debounce)

    async def work(action: Callable[[], T]) -> T | None:
        """``action()`` off the event loop (see ``worker``); None once shutting down."""
        try:
            return await state.worker.offload(action)
        except Stopped:
            return None

    def is_python(uri: str, language_id: str | None = None) -> bool:
        if language_id is not None:
            return language_id == "python"
        return uri.endswith((".py", ".pyi"))

    @server.feature(types.INITIALIZE)
    def initialize(ls: Any, params: types.InitializeParams) -> None:
        text = params.capabilities.text_document
        # A client that pulls would otherwise show every finding twice.
        state.push = not (text is not None and text.diagnostic is not None)
        # The parser's constructors and the walkers are made now, not in the first request that needs them.
        prepare()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: Any, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        if state.push and is_python(doc.uri, doc.language_id):
            await work(lambda: publish(ls, state, doc.uri))

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: Any, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        if state.push and is_python(uri, ls.workspace.get_text_document(uri).language_id):
            state.later(uri, lambda: publish(ls, state, uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    async def did_save(ls: Any, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri.rsplit("/", 1)[-1] in CONFIG_NAMES:
            await work(lambda: config_changed(ls))
            return
        state.cancel(uri)
        if state.push and is_python(uri, ls.workspace.get_text_document(uri).language_id):
            await work(lambda: saved(ls, uri))

    def saved(ls: Any, uri: str) -> None:
        # A saved module may change what its project's other files are told.
        state.linted.clear()
        publish(ls, state, uri)
        cells = {cell.document for nb in ls.workspace.notebook_documents.values() for cell in nb.cells}
        for other, doc in list(ls.workspace.text_documents.items()):
            if other != uri and other not in cells and is_python(other, doc.language_id):
                publish(ls, state, other)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: Any, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        state.cancel(uri)
        state.linted.pop(uri, None)
        if state.push:
            send(ls, uri, None, [])

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    async def notebook_did_open(ls: Any, params: types.DidOpenNotebookDocumentParams) -> None:
        if state.push:
            await work(lambda: publish_notebook(ls, state, params.notebook_document.uri))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    async def notebook_did_change(ls: Any, params: types.DidChangeNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        if state.push:
            state.later(uri, lambda: publish_notebook(ls, state, uri))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    async def notebook_did_save(ls: Any, params: types.DidSaveNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        state.cancel(uri)
        if state.push:
            await work(lambda: publish_notebook(ls, state, uri))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    async def notebook_did_close(ls: Any, params: types.DidCloseNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        cells = [doc.uri for doc in params.cell_text_documents]
        if state.push:
            clear_notebook(ls, state, uri, cells)
        else:
            state.cancel(uri)
            state.linted.pop(uri, None)
            state.linted.pop(decided_slot(uri), None)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def watched_files(ls: Any, params: types.DidChangeWatchedFilesParams) -> None:
        if any(change.uri.rsplit("/", 1)[-1] in CONFIG_NAMES for change in params.changes):
            await work(lambda: config_changed(ls))

    def config_changed(ls: Any) -> None:
        state.reset_config()
        if state.push:
            notebooks = list(ls.workspace.notebook_documents)
            cells = {cell.document for uri in notebooks for cell in ls.workspace.notebook_documents[uri].cells}
            for uri, doc in list(ls.workspace.text_documents.items()):
                if uri not in cells and is_python(uri, doc.language_id):
                    publish(ls, state, uri)
            for uri in notebooks:
                publish_notebook(ls, state, uri)
        else:
            def refresh() -> None:
                try:
                    ls.workspace_diagnostic_refresh(None)
                except Exception:  # the client may not support refresh requests
                    pass

            on_loop(refresh)

    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=False, workspace_diagnostics=False),
    )
    async def pull(ls: Any, params: types.DocumentDiagnosticParams) -> Any:
        return await work(lambda: pulled(ls, params))

    def pulled(ls: Any, params: types.DocumentDiagnosticParams) -> Any:
        uri = params.text_document.uri
        notebook = ls.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            items = cell_diagnostics(ls, state, notebook).get(uri, [])
        elif is_python(uri, ls.workspace.get_text_document(uri).language_id):
            items = diagnostics(ls, state, uri)
        else:
            items = []
        return types.RelatedFullDocumentDiagnosticReport(items=items)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND], resolve_provider=False
        ),
    )
    async def code_action(ls: Any, params: types.CodeActionParams) -> Any:
        return await work(lambda: actions(ls, params))

    def actions(ls: Any, params: types.CodeActionParams) -> Any:
        uri = params.text_document.uri
        # A request for the notebook itself (not one of its cells) gets its fix-all.
        notebook = ls.workspace.get_notebook_document(cell_uri=uri) or ls.workspace.get_notebook_document(notebook_uri=uri)
        if notebook is not None:
            return cell_code_actions(ls, state, notebook, params)
        return code_actions(ls, state, params)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: Any, params: Any) -> None:
        # Answered at once: a project phase in this process stops at its
        # next step, the worker process is killed mid-analysis.
        stop_project_phases()
        state.worker.stop()

    @server.feature(types.EXIT)
    def exit_(ls: Any, params: Any) -> None:
        # Without a shutdown first too: the process exits without waiting for the worker.
        state.worker.stop()

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
