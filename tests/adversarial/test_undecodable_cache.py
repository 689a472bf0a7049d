"""A file name that is not UTF-8 (lone surrogates once decoded) through
every command that keys the cache on it: ``check`` twice (a store, then a
hit), ``fix`` and ``--add-noqa``."""

from __future__ import annotations

import os
import sys

import pytest

from loadlint.workspace.cache import Cache

LOADER = b"from torch.utils.data import DataLoader\n\n\ndef make(ds):\n    return DataLoader(ds, batch_size=8, prefetch_factor=2)\n"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux only")


@pytest.fixture
def repo(tmp_path):
    (tmp_path / ".git").mkdir()
    with open(os.path.join(os.fsencode(tmp_path), b"undecodable\xff.py"), "wb") as handle:
        handle.write(LOADER)
    return tmp_path


def test_entry_name_of_an_undecodable_name_is_stable_and_distinct():
    name = os.fsdecode(b"/r/undecodable\xff.py")
    first = Cache.entry_name(name, "fp")
    assert first == Cache.entry_name(name, "fp")
    assert first != Cache.entry_name(os.fsdecode(b"/r/undecodable\xfe.py"), "fp")
    # A UTF-8 name keeps the key earlier releases gave it.
    from loadlint.workspace.cache import content_hash

    assert Cache.entry_name("/r/caf\u00e9.py", "fp") == content_hash("/r/caf\u00e9.py\0fp".encode()) + ".json"


def _entries(repo):
    return sorted(p.name for p in (repo / ".loadlint_cache").glob("*/*.json"))


def test_check_stores_then_hits_the_cache(cli, repo):
    first = cli.json("check", ".", "--select", "LL001", ok=(1,))
    assert [(f["code"], f["location"]["row"]) for f in first] == [("LL001", 5)]
    stored = _entries(repo)
    assert len(stored) == 1
    assert cli.json("check", ".", "--select", "LL001", ok=(1,)) == first
    assert _entries(repo) == stored


def test_fix_and_add_noqa_use_the_cache(cli, repo):
    path = os.path.join(os.fsencode(repo), b"undecodable\xff.py")
    cli.run("check", ".", "--select", "LL001", ok=(1,))
    cli.run("fix", ".", "--select", "LL001", ok=(0,))
    with open(path, "rb") as handle:
        assert handle.read() == LOADER.replace(b", prefetch_factor=2", b"")
    with open(path, "wb") as handle:
        handle.write(LOADER)
    cli.run("check", ".", "--select", "LL001", "--add-noqa", ok=(0,))
    with open(path, "rb") as handle:
        assert handle.read().splitlines()[4].endswith(b"  # noqa: LL001")
