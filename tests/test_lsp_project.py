"""The language server with project facts: a saved buffer is checked with
the rest of its project, and saving a dependency refreshes the findings of
the open documents that depend on it (the factory's LL204 follows the loop
in engine.py), over stdio with pygls's LanguageClient as test_lsp.py does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the language server needs the 'lsp' extra (pygls)")

from lsprotocol import types  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402
from tests.test_lsp import Session as EditorSession  # noqa: E402

TIMEOUT = 30

DATA_SETUP = '''\
from torch.utils.data import DataLoader


def create_dataloaders(train_data, batch_size, num_workers=4):
    return DataLoader(train_data, batch_size=batch_size, shuffle=True, num_workers=num_workers)
'''

EPOCHS = '''\
def train(loader, epochs):
    for epoch in range(epochs):
        for batch in loader:
            pass
'''

ONCE = '''\
def train(loader, epochs):
    for batch in loader:
        pass
'''

TRAIN = '''\
import data_setup
import engine

from data import dataset

if __name__ == "__main__":
    engine.train(data_setup.create_dataloaders(dataset, 32), 5)
'''


class Session(EditorSession):
    """test_lsp's session with a cache folder of its own, and files saved as an editor saves them."""

    def __init__(self, root: Path, cache: Path) -> None:
        super().__init__(root, env={"LOADLINT_CACHE_DIR": str(cache)}, timeout=TIMEOUT)

    def open_file(self, path: Path) -> str:
        return self.open(path, path.read_text(encoding="utf-8"))

    def edit_and_save(self, path: Path, text: str) -> None:
        """What an editor does: the buffer changes, the file is written, didSave."""
        uri = from_fs_path(str(path))
        self.change(uri, text)
        path.write_text(text, encoding="utf-8")
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))

    async def codes(self, uri: str) -> list[str]:
        """The codes of the next diagnostics published for ``uri``."""
        return sorted(str(d.code) for d in (await self.diagnostics(uri)).diagnostics)


def test_saving_a_dependency_refreshes_the_factorys_findings(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.loadlint]\nselect = ["LL204"]\n\n[tool.loadlint.target]\ncpus = 8\ngpus = 1\n', encoding="utf-8"
    )
    (project / "data_setup.py").write_text(DATA_SETUP, encoding="utf-8")
    (project / "engine.py").write_text(EPOCHS, encoding="utf-8")
    (project / "train.py").write_text(TRAIN, encoding="utf-8")

    async def scenario() -> None:
        async with Session(project, tmp_path / "cache") as s:
            factory = s.open_file(project / "data_setup.py")
            # Saved and iterated every epoch by engine.train: the project's finding.
            assert await s.codes(factory) == ["LL204"]
            s.open_file(project / "engine.py")
            # The loop now runs once: the factory's finding goes on save.
            s.edit_and_save(project / "engine.py", ONCE)
            assert await s.codes(factory) == []
            # And comes back when the epoch loop does.
            s.edit_and_save(project / "engine.py", EPOCHS)
            assert await s.codes(factory) == ["LL204"]

    asyncio.run(asyncio.wait_for(scenario(), 120))


PINNING_FACTORY = '''\
from torch.utils.data import DataLoader


def create_dataloaders(train_data, batch_size):
    return DataLoader(train_data, batch_size=batch_size, num_workers=2, pin_memory=True, persistent_workers=True)
'''

TRANSFERS = '''\
def train(loader, model, device, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            model(x)
'''

CUDA_TRAIN = '''\
import torch

import data_setup
import engine
from data import dataset

if __name__ == "__main__":
    device = torch.device("cuda")
    model = torch.nn.Linear(3, 2).to(device)
    engine.train(data_setup.create_dataloaders(dataset, 32), model, device, 5)
'''


def test_fix_all_of_a_saved_document_applies_its_project_findings_fixes(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.loadlint]\nselect = ["LL205"]\n\n[tool.loadlint.target]\ncpus = 8\ngpus = 1\n', encoding="utf-8"
    )
    (project / "data_setup.py").write_text(PINNING_FACTORY, encoding="utf-8")
    (project / "engine.py").write_text(TRANSFERS, encoding="utf-8")
    (project / "train.py").write_text(CUDA_TRAIN, encoding="utf-8")

    async def scenario() -> None:
        async with Session(project, tmp_path / "cache") as s:
            uri = s.open_file(project / "engine.py")
            # The loader is pinned in another module: project findings, with their fix.
            assert await s.codes(uri) == ["LL205", "LL205"]
            whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
            actions = await s.actions(uri, whole, only=["source.fixAll.loadlint"])
            assert [a.kind for a in actions] == ["source.fixAll.loadlint"]
            text = s.apply(uri, actions[0])
            assert text == TRANSFERS.replace("x.to(device), y.to(device)", "x.to(device, non_blocking=True), y.to(device, non_blocking=True)")
            # Nothing was written: the editor applies the edit.
            assert (project / "engine.py").read_text(encoding="utf-8") == TRANSFERS

    asyncio.run(asyncio.wait_for(scenario(), 120))
