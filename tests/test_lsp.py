"""``loadlint lsp`` driven over stdio by pygls's own LanguageClient: open a
document, receive diagnostics, request code actions, apply the edit, and
receive the empty diagnostic list."""

from __future__ import annotations

import asyncio
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

    def __init__(self, root: Path, capabilities: types.ClientCapabilities | None = None) -> None:
        self.root = root
        self.capabilities = capabilities or types.ClientCapabilities()
        self.client = LanguageClient("loadlint-tests", "1")
        self.published: asyncio.Queue = asyncio.Queue()
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(*args):
            self.published.put_nowait(args[-1])

    async def __aenter__(self) -> "Session":
        await self.client.start_io(sys.executable, "-m", "loadlint", "lsp", "--debounce", "0.05", cwd=str(self.root))
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
            params = await asyncio.wait_for(self.published.get(), TIMEOUT)
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
