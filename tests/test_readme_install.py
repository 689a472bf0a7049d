"""The README's install, pre-commit and example instructions are true as
written on a clone: loadlint installs from the clone (it is not on the
package index), the CPU wheel's index is named, the pre-commit
configuration runs as given, and the scripts it runs exist."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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
def test_every_torch_install_names_the_cpu_wheel_index(path):
    text = (REPO / path).read_text(encoding="utf-8")
    torch_installs = [line for line in text.splitlines() if re.search(r"pip install torch\b", line)]
    assert torch_installs
    assert all(CPU_INDEX in line for line in torch_installs), torch_installs


def test_verify_examples_exist():
    # The commands shown as run (``$ loadlint verify ...``), not the prose's "your train.py".
    scripts = re.findall(r"^\$ loadlint verify (?:--\S+ \S+ )*(\S+\.py)", README, re.M)
    assert "benchmarks/io_wait.py" in scripts
    assert [s for s in scripts if not (REPO / s).is_file()] == []


def test_precommit_snippet_runs_from_a_local_install(tmp_path):
    pytest.importorskip("pre_commit", reason="pre-commit is not installed")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    [config] = [block for block in _blocks("yaml") if "pre-commit-config.yaml" in block]
    assert "repo: local" in config and "rev:" not in config
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(
        HOME=str(tmp_path), PRE_COMMIT_HOME=str(tmp_path / "cache"), GIT_CONFIG_NOSYSTEM="1", NO_COLOR="1",
        PRE_COMMIT_COLOR="never", PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, env=env, check=True)
    (project / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
    (project / "pyproject.toml").write_text('[tool.loadlint]\nselect = ["LL201"]\n\n[tool.loadlint.target]\ncpus = 4\ngpus = 1\n')
    (project / "train.py").write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=4)\n")
    subprocess.run(["git", "add", "-A"], cwd=project, env=env, check=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=project, env=env,
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "loadlint" in proc.stdout and "Failed" in proc.stdout
    assert "train.py:2:10: LL201 [*] `num_workers` is not set" in proc.stdout
