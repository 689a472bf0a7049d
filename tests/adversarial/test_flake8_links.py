"""The flake8 plugin keeps ``check``'s link rule: flake8 follows a link out
of the project and hands the plugin what it read, the plugin analyses none
of it (a string literal of the outside file would reach a message)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from loadlint.frontends.flake8 import Plugin

SECRET = "sk-live-7f3a9c"
SCRIPT = f"from torch.utils.data import DataLoader\n\n\ndef main(ds):\n    return DataLoader(ds, {SECRET!r})\n"


def _layout(tmp_path: Path) -> Path:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / ".git").mkdir(parents=True)
    outside.mkdir()
    (outside / "train.py").write_text(SCRIPT)
    (repo / "train_out.py").symlink_to(outside / "train.py")
    (repo / "inside.py").write_text(SCRIPT)
    (repo / "linked_in.py").symlink_to("inside.py")
    return repo


def _run(repo: Path, name: str) -> list[tuple[int, int, str]]:
    lines = (repo / name).read_text().splitlines(keepends=True)
    return [(row, column, message.split()[0]) for row, column, message, _ in Plugin(None, lines, f"./{name}").run()]


def test_a_link_out_of_the_project_is_not_analysed(tmp_path, monkeypatch):
    repo = _layout(tmp_path)
    monkeypatch.chdir(repo)
    assert _run(repo, "train_out.py") == []
    # A link within the project, and the same text as a file of its own, are.
    assert [code for _, _, code in _run(repo, "linked_in.py") if code == "LL005"] == ["LL005"]
    assert [code for _, _, code in _run(repo, "inside.py") if code == "LL005"] == ["LL005"]


def test_flake8_prints_nothing_of_the_outside_file(tmp_path):
    repo = _layout(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    proc = subprocess.run([str(Path(sys.executable).with_name("flake8")), "-j", "1", "--select", "LL005", "."],
                          cwd=repo, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1, proc.stderr
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines()) == ["./inside.py", "./linked_in.py"]
    assert "train_out" not in proc.stdout
