"""Where a project ends: ``is_inside`` with links and relative folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadlint.sources.boundary import is_inside


def test_a_relative_folder_is_where_the_current_folder_is_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    target = tmp_path / "b" / "f.py"
    target.write_text("")
    monkeypatch.chdir(tmp_path / "a")
    assert not is_inside(str(target), ".")
    monkeypatch.chdir(tmp_path / "b")
    assert is_inside(str(target), ".")


def test_a_link_leading_out_is_outside(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.py").write_text("")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "cfg.py").symlink_to(tmp_path / "outside" / "secret.py")
    assert not is_inside(str(tmp_path / "repo" / "cfg.py"), str(tmp_path / "repo"))
    assert is_inside(str(tmp_path / "repo"), str(tmp_path / "repo"))
