"""``loadlint lsp`` driven over stdio by pygls's own LanguageClient: open a
document, receive diagnostics, request code actions, apply the edit, and
receive the empty diagnostic list.  Notebooks (LSP 3.17 notebook sync) too:
diagnostics land on the cell the finding is in, follow edits and cell moves,
quick fixes, "disable for this line" and fix-all edit the right cells, and
closing clears everything."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the language server needs the 'lsp' extra (pygls)")

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

TIMEOUT = 20
FIX_ALL = "source.fixAll.loadlint"

SCRIPT = '''\
import torch
from torch.utils.data import DataLoader


def train(dataset, model):
    loader = DataLoader(dataset, batch_size=32)
    for x in loader:
        model(x.cuda())
'''


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP edits (UTF-16 positions, against the original text) the way
    an editor does: from the end backwards."""
    lines = text.splitlines(keepends=True)

    def offset(pos: types.Position) -> int:
        if pos.line >= len(lines):
            return len(text)
        line = lines[pos.line]
        units = 0
        for i, ch in enumerate(line):
            if units >= pos.character:
                return sum(len(x) for x in lines[: pos.line]) + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return sum(len(x) for x in lines[: pos.line]) + len(line)

    spans = sorted(((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


class Session:
    """A client connected to a fresh server, collecting published diagnostics."""

    def __init__(
        self, root: Path, capabilities: types.ClientCapabilities | None = None, *,
        env: dict[str, str] | None = None, timeout: float = TIMEOUT,
    ) -> None:
        self.root = root
        self.capabilities = capabilities or types.ClientCapabilities()
        #: Variables set for the server, beside this process's.
        self.env = env
        self.timeout = timeout
        self.client = LanguageClient("loadlint-tests", "1")
        self.published: asyncio.Queue = asyncio.Queue()
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(*args):
            self.published.put_nowait(args[-1])

    async def __aenter__(self) -> "Session":
        extra = {} if self.env is None else {"env": {**os.environ, **self.env}}
        await self.client.start_io(sys.executable, "-m", "loadlint", "lsp", "--debounce", "0.05", cwd=str(self.root), **extra)
        self.init = await asyncio.wait_for(
            self.client.initialize_async(
                types.InitializeParams(capabilities=self.capabilities, root_uri=from_fs_path(str(self.root)))
            ),
            TIMEOUT,
        )
        self.client.initialized(types.InitializedParams())
        return self

    async def __aexit__(self, *exc) -> None:
        await asyncio.wait_for(self.client.shutdown_async(None), TIMEOUT)
        self.client.exit(None)
        await asyncio.sleep(0.1)

    def open(self, path: Path, text: str) -> str:
        path.write_text(text, encoding="utf-8")
        uri = from_fs_path(str(path))
        self.versions[uri] = 1
        self.texts[uri] = text
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )
        return uri

    def change(self, uri: str, text: str) -> None:
        self.versions[uri] += 1
        self.texts[uri] = text
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    async def diagnostics(self, uri: str) -> types.PublishDiagnosticsParams:
        while True:
            params = await asyncio.wait_for(self.published.get(), self.timeout)
            if params.uri == uri:
                return params

    async def diagnostics_any(self) -> types.PublishDiagnosticsParams:
        return await asyncio.wait_for(self.published.get(), TIMEOUT)

    async def actions(self, uri: str, rng: types.Range, diagnostics=(), only=None) -> list[types.CodeAction]:
        result = await asyncio.wait_for(
            self.client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=rng,
                    context=types.CodeActionContext(diagnostics=list(diagnostics), only=only),
                )
            ),
            TIMEOUT,
        )
        return list(result or [])

    def apply(self, uri: str, action: types.CodeAction) -> str:
        text = apply_edits(self.texts[uri], list(action.edit.changes[uri]))
        self.change(uri, text)
        return text


@pytest.fixture
def project(tmp_path: Path) -> Path:
    # The project's own config: its target and selection (which also keeps
    # the scenario independent of rules added later).
    (tmp_path / "pyproject.toml").write_text(
        '[tool.loadlint]\nselect = ["LL201", "LL202"]\n\n[tool.loadlint.target]\ncpus = 4\ngpus = 1\n',
        encoding="utf-8",
    )
    return tmp_path


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def test_quick_fixes_until_clean(project):
    async def scenario():
        async with Session(project) as s:
            caps = s.init.capabilities
            assert FIX_ALL in caps.code_action_provider.code_action_kinds
            assert caps.diagnostic_provider.identifier == "loadlint"
            uri = s.open(project / "train.py", SCRIPT)
            published = await s.diagnostics(uri)
            assert published.version == 1
            by_code = {d.code: d for d in published.diagnostics}
            assert sorted(by_code) == ["LL201", "LL202"]
            ll201 = by_code["LL201"]
            assert ll201.source == "loadlint"
            assert ll201.code_description.href.endswith("/LL201.md")
            assert ll201.severity == types.DiagnosticSeverity.Warning
            # The same range as the command line's 6:14-6:48 (1-based, end exclusive).
            assert (ll201.range.start.line, ll201.range.start.character) == (5, 13)
            assert (ll201.range.end.line, ll201.range.end.character) == (5, 47)
            # The project's target reached the rule.
            assert "num_workers=3" in ll201.message and "target: 4 CPUs" in ll201.message

            actions = await s.actions(uri, ll201.range, [ll201])
            titles = [a.title for a in actions]
            assert "loadlint (LL201): Set `num_workers=3`" in titles
            assert "loadlint: Disable LL201 for this line" in titles
            fix = next(a for a in actions if a.title == "loadlint (LL201): Set `num_workers=3`")
            assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
            assert [d.code for d in fix.diagnostics] == ["LL201"]
            text = s.apply(uri, fix)
            assert "DataLoader(dataset, batch_size=32, num_workers=3)" in text

            after = await s.diagnostics(uri)
            assert after.version == 2
            assert [d.code for d in after.diagnostics] == ["LL202"]
            ll202 = after.diagnostics[0]
            actions = await s.actions(uri, ll202.range, [ll202])
            fix = next(a for a in actions if a.title.startswith("loadlint (LL202)"))
            text = s.apply(uri, fix)
            assert "num_workers=3, pin_memory=True" in text
            final = await s.diagnostics(uri)
            assert list(final.diagnostics) == []
            # Nothing left to offer.
            assert await s.actions(uri, ll202.range) == []

    run(scenario())


def test_fix_all_and_pull_diagnostics(project):
    async def scenario():
        async with Session(project) as s:
            uri = s.open(project / "train.py", SCRIPT)
            await s.diagnostics(uri)
            # Typing: three quick changes are linted once, at the last version.
            for suffix in ("#", "# a", "# ab"):
                s.change(uri, SCRIPT + suffix + "\n")
            debounced = await s.diagnostics(uri)
            assert debounced.version == 4
            await asyncio.sleep(0.3)
            assert s.published.empty()
            s.change(uri, SCRIPT)
            await s.diagnostics(uri)
            pulled = await asyncio.wait_for(
                s.client.text_document_diagnostic_async(
                    types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
                ),
                TIMEOUT,
            )
            assert sorted(d.code for d in pulled.items) == ["LL201", "LL202"]
            whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
            actions = await s.actions(uri, whole, only=[FIX_ALL])
            assert [a.kind for a in actions] == [FIX_ALL]
            text = s.apply(uri, actions[0])
            assert "DataLoader(dataset, batch_size=32, num_workers=3, pin_memory=True)" in text
            # Only the changed line is replaced.
            assert actions[0].edit.changes[uri][0].range.start.line == 5
            assert list((await s.diagnostics(uri)).diagnostics) == []
            pulled = await asyncio.wait_for(
                s.client.text_document_diagnostic_async(
                    types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
                ),
                TIMEOUT,
            )
            assert list(pulled.items) == []

    run(scenario())


NOQA_CASES = [
    ("    loader = DataLoader(dataset, batch_size=32)", "    loader = DataLoader(dataset, batch_size=32)  # noqa: LL201"),
    (
        "    loader = DataLoader(dataset, batch_size=32)  # noqa: LL202",
        "    loader = DataLoader(dataset, batch_size=32)  # noqa: LL202, LL201",
    ),
    (
        "    loader = DataLoader(dataset, batch_size=32)  # noqa:LL202,LL999  # keep me",
        "    loader = DataLoader(dataset, batch_size=32)  # noqa:LL202,LL999, LL201  # keep me",
    ),
    (
        "    loader = DataLoader(dataset, batch_size=32)  # the loader   ",
        "    loader = DataLoader(dataset, batch_size=32)  # the loader  # noqa: LL201",
    ),
]


def test_disable_for_this_line(project):
    # One server for every case: starting one costs seconds.
    async def scenario():
        async with Session(project) as s:
            for i, (line, expected) in enumerate(NOQA_CASES):
                source = SCRIPT.replace("    loader = DataLoader(dataset, batch_size=32)", line)
                uri = s.open(project / f"train{i}.py", source)
                published = await s.diagnostics(uri)
                ll201 = next(d for d in published.diagnostics if d.code == "LL201")
                actions = await s.actions(uri, ll201.range, [ll201])
                disable = next(a for a in actions if a.title == "loadlint: Disable LL201 for this line")
                text = s.apply(uri, disable)
                assert text.splitlines()[5] == expected, line
                after = await s.diagnostics(uri)
                assert "LL201" not in [d.code for d in after.diagnostics]

    run(scenario())


def test_utf16_columns_and_pull_mode(project):
    # A client that pulls gets no pushed diagnostics (no duplicates), and
    # positions count UTF-16 units: the emoji is two of them.
    source = SCRIPT.replace("    loader = DataLoader(", '    loader = {"🚀": DataLoader(').replace(
        "batch_size=32)\n", "batch_size=32)}\n"
    )
    capabilities = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(diagnostic=types.DiagnosticClientCapabilities())
    )

    async def scenario():
        async with Session(project, capabilities) as s:
            uri = s.open(project / "train.py", source)
            pulled = await asyncio.wait_for(
                s.client.text_document_diagnostic_async(
                    types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
                ),
                TIMEOUT,
            )
            ll201 = next(d for d in pulled.items if d.code == "LL201")
            line = source.splitlines()[5]
            assert ll201.range.start.character == len(line[: line.index("DataLoader")].encode("utf-16-le")) // 2
            await asyncio.sleep(0.3)
            assert s.published.empty()

    run(scenario())


def test_config_of_the_files_project(tmp_path):
    # Two projects side by side: each file gets its own project's settings.
    for name, ignore in (("a", "LL202"), ("b", "LL201")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "loadlint.toml").write_text(
            f'select = ["LL201", "LL202"]\nignore = ["{ignore}"]\n[target]\ncpus = 4\ngpus = 1\n'
        )

    async def scenario():
        async with Session(tmp_path) as s:
            uri_a = s.open(tmp_path / "a" / "train.py", SCRIPT)
            codes_a = [d.code for d in (await s.diagnostics(uri_a)).diagnostics]
            uri_b = s.open(tmp_path / "b" / "train.py", SCRIPT)
            codes_b = [d.code for d in (await s.diagnostics(uri_b)).diagnostics]
            assert codes_a == ["LL201"] and codes_b == ["LL202"]
            # Saving a changed config re-lints the open documents.
            (tmp_path / "a" / "loadlint.toml").write_text('select = ["LL202"]\nignore = ["LL202"]\n')
            s.client.text_document_did_save(
                types.DidSaveTextDocumentParams(
                    text_document=types.TextDocumentIdentifier(uri=from_fs_path(str(tmp_path / "a" / "loadlint.toml")))
                )
            )
            seen = {}
            while len(seen) < 2:
                params = await s.diagnostics_any()
                seen[params.uri] = [d.code for d in params.diagnostics]
            assert seen == {uri_a: [], uri_b: ["LL202"]}

    run(scenario())


# -- notebooks ------------------------------------------------------------------

NOTEBOOK_FIX_ALL = "notebook.source.fixAll.loadlint"
CAPABILITIES = types.ClientCapabilities(
    notebook_document=types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities()
    )
)

#: (kind, language, source) of each cell: the loader sits in cell 3, under a
#: cell magic; a shell line, a markdown cell and a %%bash cell are skipped.
CELLS = [
    ("markdown", "markdown", "# Training\n\nDataLoader( in prose\n"),
    # The dataset comes from a module: spawned workers can import it (LL201's fix is offered).
    ("code", "python", "!pip install torch\nimport torch\nfrom torch.utils.data import DataLoader\nfrom data import ds\n"),
    ("code", "python", "%%time\nloader = DataLoader(ds, batch_size=32)\nfor x in loader:\n    model(x.cuda())"),
    ("code", "python", "%%bash\necho 'DataLoader(ds)'\n"),
]
LOADER = "loader = DataLoader(ds, batch_size=32)"


class NotebookSession(Session):
    """A session that also opens and edits notebooks."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, CAPABILITIES)
        self.notebook_version = 0

    def open_notebook(self, path: Path, cells=CELLS) -> tuple[str, list[str]]:
        uri = from_fs_path(str(path))
        cell_uris = [f"vscode-notebook-cell:{path}#C{i}" for i in range(len(cells))]
        self.notebook_version = 1
        for cell_uri, (_, _, text) in zip(cell_uris, cells):
            self.versions[cell_uri] = 1
            self.texts[cell_uri] = text
        self.client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=uri,
                    notebook_type="jupyter-notebook",
                    version=1,
                    cells=[
                        types.NotebookCell(
                            kind=types.NotebookCellKind.Code if kind == "code" else types.NotebookCellKind.Markup,
                            document=cell_uri,
                        )
                        for cell_uri, (kind, _, _) in zip(cell_uris, cells)
                    ],
                ),
                cell_text_documents=[
                    types.TextDocumentItem(uri=cell_uri, language_id=language, version=1, text=text)
                    for cell_uri, (_, language, text) in zip(cell_uris, cells)
                ],
            )
        )
        return uri, cell_uris

    def notebook_change(self, uri: str, **cells) -> None:
        self.notebook_version += 1
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(uri=uri, version=self.notebook_version),
                change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(**cells)),
            )
        )

    def edit_cell(self, uri: str, cell_uri: str, text: str) -> None:
        """Replace a cell's text, as an incremental change over the whole old text."""
        old = self.texts[cell_uri]
        lines = old.splitlines(keepends=True) or [""]
        end = types.Position(line=len(lines) - 1, character=len(lines[-1]))
        if lines[-1].endswith("\n"):
            end = types.Position(line=len(lines), character=0)
        self.versions[cell_uri] += 1
        self.texts[cell_uri] = text
        change = types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=0, character=0), end=end), text=text
        )
        self.notebook_change(
            uri,
            text_content=[
                types.NotebookDocumentCellContentChanges(
                    document=types.VersionedTextDocumentIdentifier(uri=cell_uri, version=self.versions[cell_uri]),
                    changes=[change],
                )
            ],
        )

    def apply_cells(self, uri: str, action: types.CodeAction) -> None:
        for cell_uri, edits in action.edit.changes.items():
            self.edit_cell(uri, cell_uri, apply_edits(self.texts[cell_uri], list(edits)))

    async def published_for(self, *uris: str) -> dict[str, list[types.Diagnostic]]:
        """The diagnostics published for each of ``uris`` (waiting for all)."""
        seen: dict[str, list[types.Diagnostic]] = {}
        while not set(uris) <= set(seen):
            params = await self.diagnostics_any()
            seen[params.uri] = list(params.diagnostics)
        return seen

    async def quiet(self) -> None:
        """Nothing more is published (the debounce has long passed)."""
        await asyncio.sleep(0.3)
        assert self.published.empty()


def span(diagnostic: types.Diagnostic) -> tuple[int, int, int, int]:
    r = diagnostic.range
    return r.start.line, r.start.character, r.end.line, r.end.character


def test_diagnostics_per_cell_follow_edits_and_cells(project):
    async def scenario():
        async with NotebookSession(project) as s:
            sync = s.init.capabilities.notebook_document_sync
            assert sync is not None and sync.save
            assert NOTEBOOK_FIX_ALL in s.init.capabilities.code_action_provider.code_action_kinds
            uri, cells = s.open_notebook(project / "train.ipynb")
            first = await s.published_for(cells[2])
            # Only cell 3 has findings: row 2 of the cell (under %%time), the
            # columns of the call as `loadlint check` gives them (1-based 2:10-2:39).
            assert set(first) == {cells[2]}
            assert sorted(d.code for d in first[cells[2]]) == ["LL201", "LL202"]
            assert {span(d) for d in first[cells[2]]} == {(1, 9, 1, 38)}
            assert "num_workers=3" in next(d for d in first[cells[2]] if d.code == "LL201").message
            await s.quiet()
            # Saving lints again at once (no debounce), with the same result.
            s.client.notebook_document_did_save(
                types.DidSaveNotebookDocumentParams(notebook_document=types.NotebookDocumentIdentifier(uri=uri))
            )
            assert (await s.published_for(cells[2])) == first

            # Two lines typed above the loader: the diagnostics move down.
            s.edit_cell(uri, cells[2], "%%time\n# the loader\n\n" + CELLS[2][2].split("\n", 1)[1])
            moved = await s.published_for(cells[2])
            assert {span(d) for d in moved[cells[2]]} == {(3, 9, 3, 38)}

            # A cell inserted before cell 3, with a loader of its own: both cells
            # have their diagnostics, cell 3's where they were.
            new_cell = f"vscode-notebook-cell:{project / 'train.ipynb'}#new"
            s.texts[new_cell] = "early = DataLoader(ds)\n"
            s.versions[new_cell] = 1
            s.notebook_change(
                uri,
                structure=types.NotebookDocumentCellChangeStructure(
                    array=types.NotebookCellArrayChange(
                        start=2, delete_count=0, cells=[types.NotebookCell(kind=types.NotebookCellKind.Code, document=new_cell)]
                    ),
                    did_open=[types.TextDocumentItem(uri=new_cell, language_id="python", version=1, text=s.texts[new_cell])],
                ),
            )
            both = await s.published_for(new_cell, cells[2])
            assert {span(d) for d in both[new_cell]} == {(0, 8, 0, 22)}
            assert {span(d) for d in both[cells[2]]} == {(3, 9, 3, 38)}

            # The cell removed again: its diagnostics are cleared.
            s.notebook_change(
                uri,
                structure=types.NotebookDocumentCellChangeStructure(
                    array=types.NotebookCellArrayChange(start=2, delete_count=1),
                    did_close=[types.TextDocumentIdentifier(uri=new_cell)],
                ),
            )
            removed = await s.published_for(new_cell, cells[2])
            assert removed[new_cell] == [] and len(removed[cells[2]]) == 2

            # Moving the import cell after the loader: the name no longer
            # resolves to torch's DataLoader when the loader runs, as in Jupyter.
            import_cell = types.NotebookCell(kind=types.NotebookCellKind.Code, document=cells[1])
            loader_cell = types.NotebookCell(kind=types.NotebookCellKind.Code, document=cells[2])
            s.notebook_change(
                uri,
                structure=types.NotebookDocumentCellChangeStructure(
                    array=types.NotebookCellArrayChange(start=1, delete_count=2, cells=[loader_cell, import_cell])
                ),
            )
            assert (await s.published_for(cells[2]))[cells[2]] == []

            s.client.notebook_document_did_close(
                types.DidCloseNotebookDocumentParams(
                    notebook_document=types.NotebookDocumentIdentifier(uri=uri),
                    cell_text_documents=[types.TextDocumentIdentifier(uri=c) for c in cells],
                )
            )
            closed = await s.published_for(*cells)
            assert all(items == [] for items in closed.values())

    run(scenario())


def test_quick_fix_disable_and_fix_all_edit_the_right_cells(project):
    async def scenario():
        async with NotebookSession(project) as s:
            uri, cells = s.open_notebook(project / "train.ipynb")
            diagnostics = (await s.published_for(cells[2]))[cells[2]]
            ll201 = next(d for d in diagnostics if d.code == "LL201")
            actions = await s.actions(cells[2], ll201.range, [ll201])
            titles = [a.title for a in actions]
            assert "loadlint (LL201): Set `num_workers=3`" in titles
            assert "loadlint: Disable LL201 for this line" in titles
            fix = next(a for a in actions if a.title == "loadlint (LL201): Set `num_workers=3`")
            assert list(fix.edit.changes) == [cells[2]] and fix.is_preferred
            s.apply_cells(uri, fix)
            assert "DataLoader(ds, batch_size=32, num_workers=3)" in s.texts[cells[2]]
            # The magic line and the rest of the cell are untouched.
            assert s.texts[cells[2]].startswith("%%time\n") and s.texts[cells[2]].endswith("model(x.cuda())")
            after = (await s.published_for(cells[2]))[cells[2]]
            assert [d.code for d in after] == ["LL202"]

            # A pulled report for a cell gives the same.
            pulled = await asyncio.wait_for(
                s.client.text_document_diagnostic_async(
                    types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=cells[2]))
                ),
                TIMEOUT,
            )
            assert [d.code for d in pulled.items] == ["LL202"]

            disable = next(
                a for a in await s.actions(cells[2], after[0].range, after) if a.title == "loadlint: Disable LL202 for this line"
            )
            assert list(disable.edit.changes) == [cells[2]]
            s.apply_cells(uri, disable)
            assert s.texts[cells[2]].splitlines()[1].endswith("num_workers=3)  # noqa: LL202")
            assert (await s.published_for(cells[2]))[cells[2]] == []

            # Fix-all over a notebook with loaders in two cells: one action,
            # an edit for each cell.
            two = [*CELLS, ("code", "python", "val = DataLoader(ds)\n")]
            uri2, cells2 = s.open_notebook(project / "two.ipynb", two)
            await s.published_for(cells2[2], cells2[4])
            whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
            actions = await s.actions(cells2[4], whole, only=[FIX_ALL])
            assert [a.kind for a in actions] == [FIX_ALL]
            assert set(actions[0].edit.changes) == {cells2[2], cells2[4]}
            notebook_kind = await s.actions(cells2[4], whole, only=["notebook.source.fixAll"])
            assert [a.kind for a in notebook_kind] == [NOTEBOOK_FIX_ALL]
            # Asked on the notebook's own uri: the same fix-all, nothing else.
            on_notebook = await s.actions(uri2, whole)
            assert [a.kind for a in on_notebook] == [FIX_ALL]
            assert on_notebook[0].edit.changes == actions[0].edit.changes
            s.apply_cells(uri2, actions[0])
            assert s.texts[cells2[4]] == "val = DataLoader(ds, num_workers=3, pin_memory=True)\n"
            assert "DataLoader(ds, batch_size=32, num_workers=3, pin_memory=True)" in s.texts[cells2[2]]
            cleared = await s.published_for(cells2[2], cells2[4])
            assert cleared == {cells2[2]: [], cells2[4]: []}
            assert await s.actions(cells2[4], whole, only=[FIX_ALL]) == []

    run(scenario())


def test_diagnostics_come_before_the_fix_decision_and_withheld_fixes_are_never_offered(monkeypatch):
    """Publishing does not decide fixes (that re-analyses the fixed text);
    the first code action request does, once per text, and offers only the
    fixes the decision keeps: the quickstart's `num_workers` fixes would
    introduce LL013 under forkserver and are not offered."""
    from types import SimpleNamespace

    from pygls.workspace import Workspace

    from loadlint import api
    from loadlint.engine import analysis as engine
    from loadlint.hardware.detect import parse_target, resolve_profile
    from loadlint.frontends.lsp import documents
    from loadlint.rules import CODES
    from loadlint.types import Options

    text = (Path(__file__).parent / "fixtures" / "fix" / "quickstart_no_main_guard.in.py").read_text(encoding="utf-8")
    profile = resolve_profile(parse_target("cpus=4,gpus=1,platform=linux,python=3.14"))
    options = Options(frozenset(CODES), lambda: profile)
    state = documents.State()
    monkeypatch.setattr(state, "options", lambda settings, path: options)
    decided = api.decided_findings
    calls: list[str] = []
    monkeypatch.setattr(api, "decided_findings", lambda *a, **k: calls.append(a[0]) or decided(*a, **k))
    workspace = Workspace(None)
    uri = "untitled:train.py"
    workspace.put_text_document(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    ls = SimpleNamespace(workspace=workspace)

    shown = documents.diagnostics(ls, state, uri)
    assert calls == [] and shown and all(d.data == {"name": d.data["name"]} for d in shown)
    expected = decided(text, "train.py", options)
    withheld = [f for f in expected if f.fix_withheld is not None]
    assert withheld and all("would introduce LL013" in f.fix_withheld for f in withheld)
    assert [(d.code, d.message) for d in shown] == [(f.code, f.message) for f in expected]

    everything = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=len(text.splitlines()), character=0))
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=everything,
        context=types.CodeActionContext(diagnostics=shown, only=[types.CodeActionKind.QuickFix]),
    )
    offered = [a.title for a in documents.code_actions(ls, state, params) if "Disable" not in a.title]
    assert calls == [text]
    kept = [f"loadlint ({f.code}): {f.fix.message}" for f in expected if f.fix is not None]
    assert kept and sorted(t.removesuffix(" (unsafe)") for t in offered) == sorted(kept)
    # Undecided, the withheld findings had fixes: the decision is what keeps them out.
    undecided = engine.analyse(text, "train.py", options)[0]
    assert sum(f.fix is not None for f in undecided) > len(kept)
    # Asked again for the same text: decided once.
    documents.code_actions(ls, state, params)
    assert calls == [text]
    # A change is published without deciding, parsing again only the statement it changes.
    before = state.linted[uri][1].analysis.module.body
    changed = text.replace("test_dataloader = DataLoader(test_data,", "test_dataloader = DataLoader(test_data, shuffle=True,")
    assert changed != text
    workspace.put_text_document(types.TextDocumentItem(uri=uri, language_id="python", version=2, text=changed))
    again = documents.diagnostics(ls, state, uri)
    assert calls == [text]
    after = state.linted[uri][1].analysis.module.body
    assert len(after) == len(before) and sum(a is not b for a, b in zip(before, after)) == 1
    fresh = documents.State()
    monkeypatch.setattr(fresh, "options", lambda settings, path: options)
    assert again == documents.diagnostics(ls, fresh, uri) and fresh.linted[uri][1].analysis.module.body[0] is not after[0]


def test_notebook_diagnostics_do_not_decide_fixes_and_code_actions_offer_only_kept_ones(monkeypatch):
    """As for scripts: a notebook's diagnostics come from the analysis alone
    (deciding re-analyses the fixed text); a code action request decides,
    once per text, and offers only the fixes the decision keeps."""
    from types import SimpleNamespace

    from pygls.workspace import Workspace

    from loadlint.engine import notebook as nb
    from loadlint.hardware.detect import parse_target, resolve_profile
    from loadlint.frontends.lsp import notebooks
    from loadlint.frontends.lsp.documents import State
    from loadlint.rules import CODES
    from loadlint.types import Options

    cells = [
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n",
        "ds = TensorDataset(torch.zeros(8, 2))\nloader = DataLoader(ds, batch_size=4, num_workers=2)\n",
        "device = torch.device('cuda')\nfor epoch in range(3):\n    for (x,) in loader:\n        x.to(device)\n",
    ]
    profile = resolve_profile(parse_target("cpus=8,gpus=1,platform=linux,python=3.14"))
    options = Options(frozenset(CODES), lambda: profile)
    state = State()
    monkeypatch.setattr(state, "options", lambda settings, path: options)
    decided = nb.decided_findings
    calls: list[str] = []
    monkeypatch.setattr(nb, "decided_findings", lambda *a, **k: calls.append(a[0]) or decided(*a, **k))
    workspace = Workspace(None)
    uris = [f"vscode-notebook-cell:/nb.ipynb#C{i}" for i in range(len(cells))]
    for uri, source in zip(uris, cells):
        workspace.put_text_document(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=source))
    notebook = SimpleNamespace(
        uri="untitled:nb.ipynb",
        cells=[SimpleNamespace(kind=types.NotebookCellKind.Code, document=uri) for uri in uris],
    )
    ls = SimpleNamespace(workspace=workspace)

    shown = notebooks.cell_diagnostics(ls, state, notebook)
    assert calls == []
    codes = sorted(d.code for ds in shown.values() for d in ds)
    assert "LL204" in codes and "LL202" in codes

    everything = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=10, character=0))
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uris[1]), range=everything,
        context=types.CodeActionContext(diagnostics=shown[uris[1]], only=[types.CodeActionKind.QuickFix]),
    )
    offered = sorted(a.title.removesuffix(" (unsafe)") for a in notebooks.cell_code_actions(ls, state, notebook, params) if "Disable" not in a.title)
    assert len(calls) == 1
    notebooks.cell_code_actions(ls, state, notebook, params)
    assert len(calls) == 1  # the same text: decided once
    # Diagnostics again: still the undecided analysis, no new decision.
    assert notebooks.cell_diagnostics(ls, state, notebook) == shown and len(calls) == 1
    kept = nb.analyse_cells([nb.Cell(i, c, as_list=False) for i, c in enumerate(cells, 1)], "nb.ipynb", options).findings
    assert offered == sorted(f"loadlint ({f.code}): {f.fix.message}" for f in kept if f.fix is not None and f.cell == 2)
    assert offered  # the loader's fixes are kept (nothing they would introduce)
