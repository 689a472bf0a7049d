"""Static analysis never runs the code it reads.

The tree below would, if any of it were imported or executed, write a
marker file, connect to a socket this test listens on, or exit the process
with a code of its own.  check and fix run over it (in it, as the working
folder, too): no marker, no connection, exit code from the findings only.
"""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest

TARGET = "cpus=4,gpus=1"


def payload(marker: Path, port: int, name: str, exit_code: int | None = None) -> str:
    lines = [
        "import os, socket, sys",
        f"open({str(marker)!r} + '.' + {name!r}, 'w').write('ran')",
        "try:",
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall({name.encode()!r})",
        "except OSError:",
        "    pass",
    ]
    if exit_code is not None:
        lines.append(f"sys.exit({exit_code})")
    return "\n".join(lines) + "\n"


LOADER = """
import torch
from torch.utils.data import DataLoader


def loader(dataset):
    return DataLoader(dataset, batch_size=8)


for batch in loader(None):
    batch.cuda()
"""


class Listener:
    """Accepts connections on localhost and records what was sent."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(conn.recv(1024) or b"<connected>")
                except OSError:
                    self.received.append(b"<connected>")

    def close(self) -> list[bytes]:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()
        return self.received


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def hostile_tree(root: Path, marker: Path, port: int) -> list[str]:
    """Modules with side effects at import, each one also constructing a
    DataLoader so the analyser parses it."""
    files = {
        "conftest.py": payload(marker, port, "conftest", 3),
        "setup.py": payload(marker, port, "setup") + "from setuptools import setup\nsetup(name='evil')\n",
        "pkg/__init__.py": payload(marker, port, "init", 4),
        "pkg/train.py": payload(marker, port, "train", 5) + LOADER,
        "pkg/__main__.py": payload(marker, port, "main", 6) + LOADER,
        "sitecustomize.py": payload(marker, port, "sitecustomize"),
        "usercustomize.py": payload(marker, port, "usercustomize"),
        # Shadows of modules loadlint itself imports, in the folder it runs in.
        "click.py": payload(marker, port, "click"),
        "libcst.py": payload(marker, port, "libcst"),
        "difflib.py": payload(marker, port, "difflib"),
        "json.py": payload(marker, port, "json"),
        "tomllib.py": payload(marker, port, "tomllib"),
        "tempfile.py": payload(marker, port, "tempfile"),
        "fnmatch.py": payload(marker, port, "fnmatch"),
        "pathspec.py": payload(marker, port, "pathspec"),
        "psutil.py": payload(marker, port, "psutil"),
        "torch/__init__.py": payload(marker, port, "torch"),
        "data.pth": f"import os; open({str(marker)!r} + '.pth', 'w').write('ran')\n",
        "notebook.ipynb": (
            '{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, '
            '"source": ["import os\\n", "from torch.utils.data import DataLoader\\n", '
            f'"open({str(marker)!r} + \'.ipynb\', \'w\')\\n", "loader = DataLoader(ds)\\n"]}}], '
            '"metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
        ),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".py") and rel not in ("pkg/train.py", "pkg/__main__.py"):
            text += "# DataLoader\nfrom torch.utils.data import DataLoader\nDataLoader(object())\n"
        path.write_text(text)
    return sorted(files)


def markers(marker: Path) -> list[str]:
    return sorted(p.name for p in marker.parent.glob(marker.name + "*"))


@pytest.mark.parametrize("console_script", [False, True], ids=["python-m", "console-script"])
def test_check_and_fix_never_run_the_tree(cli, tmp_path, listener, console_script):
    tree = tmp_path / "tree"
    marker = tmp_path / "marker"
    hostile_tree(tree, marker, listener.port)
    for command in (["check", "--target", TARGET, "."], ["fix", "--target", TARGET, "--unsafe-fixes", "."]):
        proc = cli.run(*command, "--cache-dir", str(tmp_path / "cache"), cwd=tree, console_script=console_script)
        # The code is what the findings decide, never one the tree exits with.
        assert proc.returncode in (0, 1)
        assert markers(marker) == []
    assert b"num_workers=3" in (tree / "pkg" / "train.py").read_bytes()
    proc = cli.run("check", "--target", TARGET, "--output-format", "json", "--no-cache", ".", cwd=tree)
    assert listener.close() == []
    assert markers(marker) == []


def test_stdin_and_diff_never_run_the_source(cli, tmp_path, listener):
    marker = tmp_path / "marker"
    source = (payload(marker, listener.port, "stdin", 7) + LOADER).encode()
    cli.run("check", "--no-cache", "--target", TARGET, "-", stdin=source, cwd=tmp_path)
    cli.run("fix", "--no-cache", "--target", TARGET, "--diff", "-", stdin=source, cwd=tmp_path)
    assert listener.close() == [] and markers(marker) == []


def test_in_process_api_never_imports(tmp_path, listener):
    from loadlint.api import check_paths

    marker = tmp_path / "marker"
    tree = tmp_path / "tree"
    hostile_tree(tree, marker, listener.port)
    before = set(sys.modules)
    run = check_paths([tree], isolated=True)
    assert run.findings
    assert not {"conftest", "setup", "pkg", "pkg.train", "evil"} & (set(sys.modules) - before)
    assert listener.close() == [] and markers(marker) == []


def test_only_verify_executes_and_says_so_first(cli, tmp_path):
    pytest.importorskip("torch")
    marker = tmp_path / "marker"
    (tmp_path / "script.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit(9)\n")
    proc = cli.run("check", "--no-cache", "script.py", ok=(0,))
    assert not marker.exists()
    proc = cli.run("verify", "script.py", ok=(2,), timeout=300)
    first = proc.stderr.decode().splitlines()[0]
    assert first.startswith("loadlint verify: will execute python script.py")
    assert marker.exists()
