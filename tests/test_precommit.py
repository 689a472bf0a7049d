"""The pre-commit hooks, run by the real pre-commit: the manifest validates,
and ``pre-commit try-repo`` installs loadlint from this repository (with
pip, without torch) and runs the hooks on a throwaway git repository: the
check hook fails with loadlint's finding, the fix hook fixes the file, and
a second run passes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pre_commit", reason="pre-commit is not installed")

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 600

BAD_SCRIPT = """\
import torch
from torch.utils.data import DataLoader


def train(dataset, model):
    loader = DataLoader(dataset, batch_size=32)
    for x in loader:
        model(x.cuda())
"""

NETWORK_ERRORS = ("Could not find a version", "Failed to establish a new connection", "No matching distribution", "Temporary failure in name resolution")


def pre_commit(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )


def git(*args: str, cwd: Path, env: dict) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT", "VIRTUAL_ENV"))}
    # A user-level pip configuration (an index mirror, say) still applies
    # under the temporary HOME.
    for candidate in (Path.home() / ".config" / "pip" / "pip.conf", Path.home() / ".pip" / "pip.conf"):
        if candidate.is_file() and "PIP_CONFIG_FILE" not in env:
            env["PIP_CONFIG_FILE"] = str(candidate)
    env.update(
        HOME=str(home),
        PRE_COMMIT_HOME=str(home / "pre-commit"),
        XDG_CACHE_HOME=str(home / "cache"),
        GIT_AUTHOR_NAME="loadlint tests",
        GIT_AUTHOR_EMAIL="tests@loadlint.invalid",
        GIT_COMMITTER_NAME="loadlint tests",
        GIT_COMMITTER_EMAIL="tests@loadlint.invalid",
        GIT_CONFIG_NOSYSTEM="1",
        PRE_COMMIT_COLOR="never",
        NO_COLOR="1",
    )
    return env


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory, env) -> Path:
    """This working tree as a one-commit repository: try-repo clones what is
    committed (plus edits to tracked files), and new files must count too."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.skip("the repository is not a git checkout")
    target = tmp_path_factory.mktemp("hook-repo")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    git("init", "-q", cwd=target, env=env)
    git("add", "-A", cwd=target, env=env)
    git("commit", "-q", "-m", "snapshot", cwd=target, env=env)
    return target


def test_manifest_validates(env):
    proc = pre_commit("validate-manifest", str(REPO / ".pre-commit-hooks.yaml"), cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_manifest_declares_both_hooks():
    import yaml  # pre-commit depends on PyYAML

    hooks = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"loadlint", "loadlint-fix"}
    assert hooks["loadlint"]["entry"] == "loadlint check --force-exclude"
    assert hooks["loadlint-fix"]["entry"].startswith("loadlint fix")
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["require_serial"] is True
        assert {"python", "pyi"} <= set(hook["types_or"])
        assert hook["minimum_pre_commit_version"]


@pytest.mark.slow
def test_try_repo_check_then_fix_then_pass(tmp_path, env, hook_repo):
    project = tmp_path / "project"
    project.mkdir()
    git("init", "-q", cwd=project, env=env)
    (project / "train.py").write_text(BAD_SCRIPT, encoding="utf-8")
    # A declared target (output independent of the machine) and a fixed
    # selection (independent of rules added later).
    (project / "pyproject.toml").write_text(
        '[tool.loadlint]\nselect = ["LL201", "LL202"]\n\n[tool.loadlint.target]\ncpus = 4\ngpus = 1\n',
        encoding="utf-8",
    )
    git("add", "-A", cwd=project, env=env)

    # Without a hook id try-repo runs every hook of the manifest, in order, in
    # one environment: building it (pip install of loadlint) is the slow part.
    first = pre_commit("try-repo", str(hook_repo), "--all-files", "--verbose", cwd=project, env=env)
    output = first.stdout + first.stderr
    if first.returncode != 0 and any(marker in output for marker in NETWORK_ERRORS):
        pytest.skip(f"the package index is not reachable: {output.strip().splitlines()[-1]}")
    assert first.returncode == 1, output
    check, _, fix = output.partition("loadlint (fix)")
    assert "- hook id: loadlint\n" in check and "Failed" in check
    assert "train.py:6:14: LL201 [*] `num_workers` is not set" in check
    # pre-commit reports a hook that changed files as failed.
    assert "Failed" in fix and "files were modified by this hook" in fix
    fixed = (project / "train.py").read_text(encoding="utf-8")
    assert "DataLoader(dataset, batch_size=32, num_workers=3, pin_memory=True)" in fixed

    # The second run: the manifest's hooks as they are, run by pre-commit
    # with the loadlint of this environment (a second try-repo would only
    # rebuild the same environment, for minutes).
    import yaml

    hooks = yaml.safe_load((hook_repo / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    local = [{**hook, "language": "system"} for hook in hooks]
    for hook in local:
        hook.pop("minimum_pre_commit_version", None)
    config = project / ".pre-commit-config.yaml"
    config.write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": local}]}), encoding="utf-8")
    git("add", "-A", cwd=project, env=env)
    path_env = {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])}
    again = pre_commit("run", "--all-files", cwd=project, env=path_env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("Passed") == 2


def test_hook_install_does_not_pull_torch():
    # try-repo pip-installs the package itself: torch must stay an extra.
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not [d for d in project["dependencies"] if d.lower().startswith(("torch", "numpy"))]
    assert any(d.startswith("torch") for d in project["optional-dependencies"]["verify"])


def test_readme_snippet_runs_from_a_local_install(tmp_path):
    """The README's configuration (``repo: local``, the loadlint a clone
    installed): no repository URL or tag that does not exist."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    [config] = [block for block in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "pre-commit-config.yaml" in block]
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
