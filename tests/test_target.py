"""The target is one typed value: ``--target``, ``[tool.loadlint.target]``
and the table ``init`` writes all give a ``Target``, which reaches the
profile the rules read as it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.api import ProfileCache, options_for
from loadlint.frontends.cli import cli
from loadlint.hardware.detect import GIB, TARGET_KEYS, TargetError, parse_target, validate_target
from loadlint.types import Target
from loadlint.workspace.config import ConfigResolver, Overrides

CLEAN_ENV = {"NO_COLOR": None, "FORCE_COLOR": None, "LOADLINT_OUTPUT_FORMAT": None}


def invoke(args: list[str], cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, env=CLEAN_ENV, catch_exceptions=False)
    finally:
        os.chdir(old)


def test_a_target_is_a_hashable_value_with_its_keys_in_the_documented_order() -> None:
    target = parse_target("torch=2.4,shm=8,cpus=16,gpus=2")
    assert target == Target(cpus=16, gpus=2, shm=8 * GIB, torch="2.4")
    assert hash(target) == hash(Target(cpus=16, gpus=2, shm=8 * GIB, torch="2.4"))
    assert target.items() == [("cpus", 16), ("gpus", 2), ("shm", 8 * GIB), ("torch", "2.4")]
    assert target.declared == {"cpus", "gpus", "shm", "torch"}
    assert [key for key, _ in Target(*range(1, 5), "linux", "3.12", "2").items()] == list(TARGET_KEYS)
    assert not Target() and Target(gpus=0)


def test_a_later_target_keeps_the_earlier_ones_other_keys() -> None:
    base = Target(cpus=8, gpus=1, platform="linux")
    assert Target(gpus=4).over(base) == Target(cpus=8, gpus=4, platform="linux")
    assert Target().over(base) == base and base.over(Target()) == base


def test_the_command_line_and_the_configuration_give_the_same_value(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.loadlint.target]\ncpus = 8\ngpus = 1\nmemory = "512M"\n')
    from_config = ConfigResolver(Overrides()).for_path(tmp_path / "train.py").target
    from_flag = parse_target("cpus=8,gpus=1,memory=512M")
    assert from_config == from_flag == validate_target({"memory": "512M", "gpus": 1, "cpus": 8}, "x")
    # A flag's keys over the file's, the file's others kept.
    merged = ConfigResolver(Overrides(target=parse_target("gpus=2"))).for_path(tmp_path / "train.py").target
    assert merged == Target(cpus=8, gpus=2, memory=512 * 2**20)


def test_what_init_writes_reads_back_as_the_target_it_was_given(tmp_path: Path) -> None:
    result = invoke(["init", "--target", "cpus=16,gpus=2,memory=64,platform=linux"], tmp_path)
    assert result.exit_code == 0, result.output
    assert ConfigResolver(Overrides()).for_path(tmp_path / "train.py").target == parse_target(
        "cpus=16,gpus=2,memory=64,platform=linux"
    )


def test_repeated_target_options_merge_a_later_ones_keys_over_an_earlier_ones(tmp_path: Path) -> None:
    result = invoke(["hardware", "--target", "cpus=8", "--target", "gpus=2,cpus=4"], tmp_path)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[:5] == [
        "target (the declared keys only)",
        "usable CPUs:      4",
        "memory total:     not declared",
        "/dev/shm:         not declared",
        "GPUs:             2",
    ]


def test_the_rules_profile_is_built_once_per_target_value(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.loadlint.target]\ncpus = 8\ngpus = 1\n")
    profiles = ProfileCache()
    from_config = ConfigResolver(Overrides()).for_path(tmp_path / "train.py")
    from_flag = ConfigResolver(Overrides(target=parse_target("gpus=1,cpus=8")), isolated=True).for_path(tmp_path / "train.py")
    first = options_for(from_config, "train.py", profiles).profile()
    second = options_for(from_flag, "train.py", profiles).profile()
    assert first is second
    assert (first.usable_cpus, first.gpu_count, first.declared) == (8, 1, frozenset({"cpus", "gpus"}))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cpus=0", "--target: invalid cpus '0' (expected a positive integer"),
        ("ram=4", "--target: unknown key 'ram' (allowed: cpus, gpus, memory, shm, platform, python, torch)"),
        ("cpus=4,cpus=8", "--target: key 'cpus' given twice"),
    ],
)
def test_a_bad_spec_is_refused_with_the_same_message(spec: str, message: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_target(spec)
    assert str(caught.value).startswith(message)
