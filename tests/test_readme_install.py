"""The README's install, pre-commit and example instructions are true as
written on a clone: loadlint installs from the clone (it is not on the
package index), the CPU wheel's index is named, and the scripts it runs
exist (its pre-commit configuration is run in tests/test_precommit.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_install_commands_name_the_clone_not_the_index():
    commands = [line for block in _blocks("console") + _blocks("yaml") for line in block.splitlines()]
    installs = [line for line in commands if "pip install" in line]
    assert installs, "the README shows no install command"
    # `pip install loadlint` or 'loadlint[verify]' would ask the index, which has no loadlint.
    assert not [line for line in installs if re.search(r"pip install '?loadlint\b", line)]
    assert "pip install .  " in README and "pip install '.[verify]'" in README


@pytest.mark.parametrize("path", ["README.md", "docs/development.md"])
def test_the_cpu_wheel_index_is_named_beside_the_torch_install(path):
    # The test command runs as written where the index serves the CPU wheel;
    # the page says where to get it elsewhere.
    text = (REPO / path).read_text(encoding="utf-8")
    assert re.search(r"pip install torch==\S+ && pip install -e '\.\[dev\]'", text)
    assert CPU_INDEX in text


def test_verify_examples_exist():
    # The commands shown as run (``$ loadlint verify ...``), not the prose's "your train.py".
    scripts = re.findall(r"^\$ loadlint verify (?:--\S+ \S+ )*(\S+\.py)", README, re.M)
    assert "benchmarks/io_wait.py" in scripts
    assert [s for s in scripts if not (REPO / s).is_file()] == []
