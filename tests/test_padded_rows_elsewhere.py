"""LL201 across modules: pre-tokenized rows and a padding collate built by
another module's functions (accelerate's torch_native_parallelism
examples, ``get_dataset`` and ``create_collate_fn`` from ``utils``) take
the loader's finding back; the golden project is padded_rows_elsewhere."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from loadlint.frontends.cli import cli
from loadlint.project.handles import imported_loaders
from loadlint.project.modules import ModuleResolver
from loadlint.types import Summary

PROJECT = Path(__file__).parent / "fixtures" / "projects" / "padded_rows_elsewhere"
TARGET = "cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.14"


def ll201_rows(folder: Path, command: str = "check", *args: str) -> list[int]:
    old = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(cli, [
            command, "--isolated", "--select", "LL201", "--target", TARGET, "--output-format", "concise", *args, ".",
        ], env={"NO_COLOR": "1", "LOADLINT_CACHE_DIR": None}, catch_exceptions=False)
    finally:
        os.chdir(old)
    return [int(line.split(":")[1]) for line in result.output.splitlines() if ": LL201 " in line]


def copy(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    shutil.copytree(PROJECT, folder)
    return folder


def test_the_loaders_over_helpers_rows_are_taken_back_and_the_near_misses_stay(tmp_path: Path) -> None:
    assert ll201_rows(copy(tmp_path), "check", "--no-cache") == [18, 19, 20]


def test_fix_leaves_the_taken_back_loaders_alone(tmp_path: Path) -> None:
    folder = copy(tmp_path)
    ll201_rows(folder, "fix", "--no-cache")
    train = (folder / "train.py").read_text()
    assert "DataLoader(dataset, batch_size=1, collate_fn=create_collate_fn())" in train
    assert "DataLoader(get_dataset(tokenizer, 512), batch_size=8, collate_fn=pad)" in train
    assert "DataLoader(get_raw_dataset(), batch_size=1, collate_fn=create_collate_fn(), num_workers=" in train


def test_a_helper_that_stops_returning_rows_brings_the_finding_back_through_the_cache(tmp_path: Path) -> None:
    folder = copy(tmp_path)
    cache = ("--cache-dir", str(tmp_path / "cache"))
    assert ll201_rows(folder, "check", *cache) == [18, 19, 20]
    utils = folder / "utils.py"
    utils.write_text(utils.read_text().replace("return packed_dataset.shuffle(seed=42)", "return load_images(seq_len)"))
    # The padded loader's rows are utils' too: both come back.
    assert ll201_rows(folder, "check", *cache) == [15, 16, 18, 19, 20]


def test_a_collate_helper_that_moves_more_than_it_stacks_brings_the_finding_back(tmp_path: Path) -> None:
    folder = copy(tmp_path)
    utils = folder / "utils.py"
    utils.write_text(utils.read_text().replace('"labels": shift_labels}', '"labels": shift_labels.roll(1)}'))
    assert ll201_rows(folder, "check", "--no-cache") == [15, 18, 19, 20]


def test_a_same_named_function_of_the_script_itself_is_not_the_helper(tmp_path: Path) -> None:
    folder = copy(tmp_path)
    train = folder / "train.py"
    # Bound again in the script: the imported name no longer names utils' function alone.
    train.write_text(train.read_text().replace("\n\ndef pad(batch):", "\n\nget_dataset = get_raw_dataset\n\n\ndef pad(batch):"))
    assert ll201_rows(folder, "check", "--no-cache") == [18, 19, 21, 22, 23]  # three lines added above


def summaries(loader: dict[str, Any], helpers: Any) -> tuple[Summary, dict[str, Summary]]:
    own: Summary = {"version": 11, "imports": {}, "functions": {}, "flags": {},  # type: ignore[typeddict-item]
                    "imported_rows": [{"at": 3, **loader}]}
    other: Summary = {"version": 11, "imports": {}, "functions": {}, "flags": {},  # type: ignore[typeddict-item]
                      "padded_rows": helpers}
    return own, {"utils.py": other}


def test_the_join_takes_back_only_what_the_helpers_module_lists(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "utils.py").touch()
    (tmp_path / "train.py").touch()
    path = str(tmp_path / "train.py")

    def joined(loader: dict[str, Any], helpers: Any) -> list[tuple[int, bool, str]]:
        own, others = summaries(loader, helpers)
        found = imported_loaders(path, own, lambda p: others.get(os.path.relpath(p, tmp_path)), ModuleResolver(tmp_path))
        return [(f.at, f.in_memory, os.path.basename(f.module)) for f in found]

    listed = {"rows": ["get_dataset"], "collates": ["create_collate_fn"]}
    both = {"rows": ["utils.get_dataset"], "collates": ["utils.create_collate_fn"]}
    assert joined(both, listed) == [(3, True, "utils.py")]
    assert joined({"rows": ["utils.get_dataset"]}, listed) == [(3, True, "utils.py")]
    # A function listed under the other kind, or not at all, or a module outside the project.
    assert joined({"rows": ["utils.create_collate_fn"]}, listed) == []
    assert joined({"rows": ["utils.get_dataset", "utils.other"]}, listed) == []
    assert joined({"rows": ["datasets.load_dataset"]}, listed) == []
    # Malformed summaries read as nothing listed.
    assert joined(both, {"rows": "get_dataset", "collates": 3}) == []
    assert joined(both, ["get_dataset"]) == []
    assert joined({"rows": "utils.get_dataset"}, listed) == []
    assert joined({}, listed) == []
