"""Notebook documents (LSP 3.17 notebook sync).

The client sends a notebook's Python cells as text documents of their own
(``vscode-notebook-cell:`` uris in VS Code).  They are checked the way
``loadlint check`` checks an ``.ipynb`` file: the code cells in order as one
module, IPython syntax masked, non-Python cells (``%%bash``...) skipped.
Diagnostics, quick fixes and "disable for this line" land in the cell the
finding is in; fix-all edits every cell it changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadlint.frontends.lsp.documents import (
    FIX_ALL_KIND,
    State,
    config_error,
    finding_actions,
    fix_all,
    noqa_edit,
    overlaps,
    path_of,
    send,
    to_diagnostic,
    wanted,
    whole_text_edit,
)

if TYPE_CHECKING:
    from loadlint.api import Checked

#: The kind VS Code asks for in ``notebook.codeActionsOnSave``.
NOTEBOOK_FIX_ALL_KIND = "notebook.source.fixAll.loadlint"


def sync_options() -> Any:
    """What the server asks to be synced: the Python cells of any notebook."""
    from lsprotocol import types

    # "*": any notebook type (Jupyter's and others' alike).
    return types.NotebookDocumentSyncOptions(
        notebook_selector=[
            types.NotebookDocumentFilterWithCells(notebook="*", cells=[types.NotebookCellLanguage(language="python")])
        ],
        save=True,
    )


def check_notebook(
    ls: Any, state: State, notebook: Any, fix: bool = False, decide: bool = True
) -> tuple[Checked, dict[int, str]]:
    """(the analysis, cell index -> cell uri) of an open notebook; with
    ``fix``, the analysis after the fixes fix-all applies; without
    ``decide``, fixes are not decided (diagnostics: deciding costs a second
    analysis, paid only when a code action is asked for).  A configuration
    problem raises ConfigError."""
    from lsprotocol import types

    from loadlint.workspace.discover import is_excluded
    from loadlint.api import Cell, Checked, analyse_cells
    from loadlint.types import FixRequest

    uris: dict[int, str] = {}
    cells: list[Cell] = []
    for index, cell in enumerate(notebook.cells, 1):
        uris[index] = cell.document
        doc = ls.workspace.get_text_document(cell.document)
        if cell.kind == types.NotebookCellKind.Code and doc.language_id in (None, "python"):
            cells.append(Cell(index, doc.source, as_list=False))
    path = path_of(notebook.uri, "untitled.ipynb")
    settings = state.settings_for(path)
    key = (path, fix, [(c.index, c.source) for c in cells], [uris[c.index] for c in cells])
    slot = decided_slot(notebook.uri) if decide else notebook.uri
    last = state.linted.get(slot)
    if last is not None and last[0] == key:
        return last[1], uris
    if notebook.uri.startswith("file:") and is_excluded(Path(path), settings):
        return Checked(), uris
    request = FixRequest(unsafe=settings.unsafe_fixes, dry_run=True) if fix else None
    checked = analyse_cells(cells, path, state.options(settings, path), request, decide=decide or fix)
    if not fix:
        state.linted[slot] = (key, checked)
    return checked, uris


def decided_slot(uri: str) -> str:
    """Where a notebook's decided analysis is kept beside its diagnostics'."""
    return uri + "#decided"


def cell_diagnostics(ls: Any, state: State, notebook: Any) -> dict[str, list[Any]]:
    """Cell uri -> its diagnostics, for every cell of ``notebook``."""
    from loadlint.workspace.config import ConfigError

    out: dict[str, list[Any]] = {cell.document: [] for cell in notebook.cells}
    try:
        checked, uris = check_notebook(ls, state, notebook, decide=False)
    except ConfigError as exc:
        config_error(ls, exc)
        return out
    for finding in checked.findings:
        uri = uris.get(finding.cell or 0)
        if uri is not None:
            out[uri].append(to_diagnostic(ls.workspace.get_text_document(uri), finding))
    return out


def publish_notebook(ls: Any, state: State, notebook_uri: str) -> None:
    """Push the diagnostics of each cell that has some, and clear those of
    cells that had some (edited away, or the cell left the notebook)."""
    notebook = ls.workspace.get_notebook_document(notebook_uri=notebook_uri)
    if notebook is None:
        return
    shown = state.cells_shown.get(notebook_uri, set())
    now = {uri: items for uri, items in cell_diagnostics(ls, state, notebook).items() if items}
    for uri in sorted(shown - set(now)):
        send(ls, uri, None, [])
    for uri, items in now.items():
        send(ls, uri, ls.workspace.get_text_document(uri).version, items)
    state.cells_shown[notebook_uri] = set(now)


def clear_notebook(ls: Any, state: State, notebook_uri: str, cell_uris: list[str]) -> None:
    """Forget a closed notebook and clear its cells' diagnostics."""
    state.cancel(notebook_uri)
    state.linted.pop(notebook_uri, None)
    state.linted.pop(decided_slot(notebook_uri), None)
    for uri in sorted(state.cells_shown.pop(notebook_uri, set()) | set(cell_uris)):
        send(ls, uri, None, [])


def cell_edits(ls: Any, uris: dict[int, str], changes: dict[int, str]) -> dict[str, list[Any]]:
    """Cell uri -> the edit turning that cell into its new source."""
    return {uris[i]: [whole_text_edit(ls.workspace.get_text_document(uris[i]), new)] for i, new in changes.items()}


def notebook_fix_all(ls: Any, state: State, notebook: Any, kind: str) -> Any:
    """The fix-all action of a notebook (edits in each changed cell); None
    when nothing applies."""
    checked, uris = check_notebook(ls, state, notebook, fix=True)
    changes = checked.changed_cells(checked.text)
    if not checked.applied or not changes:
        return None
    return fix_all(kind, cell_edits(ls, uris, changes))


def cell_code_actions(ls: Any, state: State, notebook: Any, params: Any) -> list[Any]:
    """Quick fixes and noqa actions for a cell's diagnostics in range, and
    the notebook's fix-all."""
    from lsprotocol import types

    from loadlint.workspace.config import ConfigError

    uri = params.text_document.uri
    doc = ls.workspace.get_text_document(uri)
    only = params.context.only
    actions: list[Any] = []
    try:
        checked, uris = check_notebook(ls, state, notebook)
        if wanted(only, (types.CodeActionKind.QuickFix.value,)):
            for finding in checked.findings:
                if uris.get(finding.cell or 0) != uri:
                    continue
                diagnostic = to_diagnostic(doc, finding)
                if overlaps(diagnostic.range, params.range):
                    # A fix may touch another cell too (an added import).
                    fixed = checked.apply(finding.fix.edits) if finding.fix is not None else {}
                    fix_changes = cell_edits(ls, uris, fixed)
                    actions += finding_actions(finding, diagnostic, fix_changes, (uri, noqa_edit(doc, finding)))
        kind = wanted(only, (FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND))
        if kind is not None:
            action = notebook_fix_all(ls, state, notebook, kind)
            if action is not None:
                actions.append(action)
    except ConfigError:
        return []
    return actions
