"""The cache folder is never trusted to be what it seems (see also
tests/adversarial/test_untrusted_repository.py, through the command line)."""

from __future__ import annotations

import os

import pytest

from loadlint import __version__
from loadlint.workspace.cache import Cache


def test_cache_dir_with_missing_parents_is_made(tmp_path):
    cache = Cache(tmp_path / "a" / "b" / "cache", stamp="s")
    cache.store("x.py", "f", "d", None, [])
    assert cache.writable
    assert (tmp_path / "a" / "b" / "cache" / "CACHEDIR.TAG").is_file()
    assert cache.load("x.py", "f", "d") is not None


def test_link_at_an_entry_is_neither_read_nor_written_through(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("victim")
    folder = tmp_path / "cache" / __version__
    folder.mkdir(parents=True)
    cache = Cache(tmp_path / "cache", stamp="s")
    name = cache.entry_name("x.py", "f")
    (folder / name).symlink_to(outside)
    assert cache.load("x.py", "f", "d") is None
    cache.store("x.py", "f", "d", None, [])
    assert outside.read_text() == "victim"
    assert not (folder / name).is_symlink()  # replaced by the entry itself
    assert cache.load("x.py", "f", "d") is not None


def test_existing_marker_files_are_left_alone(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    (root / ".gitignore").mkdir()  # not a file: creating it must not fail the run
    cache = Cache(root, stamp="s")
    cache.store("x.py", "f", "d", None, [])
    assert cache.writable and (root / ".gitignore").is_dir()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to hand the folder to another user")
def test_folder_of_another_user_is_refused(tmp_path, capsys):
    root = tmp_path / "cache"
    root.mkdir()
    os.chown(root, 65534, 65534)
    cache = Cache(root, stamp="s")
    cache.store("x.py", "f", "d", None, [])
    assert cache.load("x.py", "f", "d") is None
    assert list(root.iterdir()) == []
    assert capsys.readouterr().err == f"loadlint: warning: cache folder {root} is owned by another user; running without a cache\n"
