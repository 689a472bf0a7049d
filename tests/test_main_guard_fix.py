"""LL013's fix: the script's worker-starting code indented under the main
guard, or withheld with the reason where a worker could miss something."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loadlint.engine.decision import fix_text
from loadlint.engine.pipeline import check_bytes
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.types import FixRequest, Options

SPAWN = resolve_profile(parse_target("cpus=4,gpus=0,platform=macos,python=3.12"))
OPTIONS = Options(frozenset({"LL013"}), lambda: SPAWN)


def findings(text: str) -> list:
    return [f for f in check_bytes(textwrap.dedent(text).encode(), "train.py", OPTIONS).findings if f.code == "LL013"]


def fixed(text: str) -> str:
    return fix_text(textwrap.dedent(text), "train.py", OPTIONS, unsafe=True)[0]


LOOP = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(torch.arange(8), num_workers=2)
for batch in loader:
    print(batch)
"""


def test_the_fix_is_unsafe_and_guards_the_tail() -> None:
    [finding] = findings(LOOP)
    assert finding.fix is not None and finding.fix.applicability == "unsafe"
    assert finding.fix.message == (
        'Indent the module-level code that starts the workers under `if __name__ == "__main__":` '
        "(unsafe: a module that imports this script no longer runs that code)"
    )
    assert fixed(LOOP) == (
        "import torch\nfrom torch.utils.data import DataLoader\n\n"
        'if __name__ == "__main__":\n    loader = DataLoader(torch.arange(8), num_workers=2)\n'
        "    for batch in loader:\n        print(batch)\n"
    )


def test_safe_mode_leaves_the_script() -> None:
    assert fix_text(LOOP, "train.py", OPTIONS, unsafe=False)[0] == LOOP


def test_several_findings_share_one_guard() -> None:
    text = LOOP + "first = next(iter(loader))\n"
    assert len(findings(text)) == 2
    out = fixed(text)
    assert out.count("__main__") == 1 and out.endswith("    first = next(iter(loader))\n")
    assert findings(out) == [] and fixed(out) == out


WITHHELD = {
    "definition-below": (
        LOOP + "\n\ndef summary():\n    return 1\n",
        "no fix: `def summary` is defined below the code that starts the workers; under the guard it would be "
        "hidden from the workers, which re-import the script and may need it; move the definitions above that "
        "code first",
    ),
    "global-read-by-a-worker": (
        "import torch\nfrom torch.utils.data import DataLoader, Dataset\n\n"
        "class Data(Dataset):\n    def __len__(self):\n        return 8\n\n"
        "    def __getitem__(self, i):\n        return i * scale\n\n"
        "loader = DataLoader(Data(), num_workers=2)\nfor scale in (1, 2):\n    for batch in loader:\n        pass\n",
        "no fix: `Data.__getitem__` reads the global `scale`, which the code to guard binds; a worker re-imports "
        "the script without running that code, and would not have it",
    ),
    "guard-elsewhere": (
        LOOP + '\nif __name__ == "__main__":\n    print("done")\n',
        'no fix: the script already has an `if __name__ == "__main__":` block; move this code into it (or into a '
        "function it calls)",
    ),
    "start-method-left-outside": (
        "import multiprocessing\nimport torch\nfrom torch.utils.data import DataLoader\n\n"
        'multiprocessing.set_start_method("spawn")\n\ndef double(batch):\n    return batch * 2\n\n' + LOOP.split("\n\n")[1],
        "no fix: `set_start_method(...)` stays outside the guard (definitions or globals that functions read come "
        'between): every worker would run it again and fail ("context has already been set")',
    ),
}


@pytest.mark.parametrize("case", sorted(WITHHELD))
def test_withheld_with_the_reason(case: str) -> None:
    text, reason = WITHHELD[case]
    found = findings(text)
    assert found and all(f.fix is None and f.fix_withheld == reason for f in found)
    result = check_bytes(text.encode(), "train.py", OPTIONS, FixRequest(unsafe=True, dry_run=True))
    assert result.fixed is None and result.applied == {}


def test_a_global_only_the_main_process_reads_is_guarded_too() -> None:
    # `train` reads `model`, but the workers never run `train`... the rule
    # cannot know that: only the names no function reads move under the guard.
    text = (
        "import torch\nfrom torch.utils.data import DataLoader\n\nSCALE = 2\n\n"
        "def scaled(batch):\n    return [b * SCALE for b in batch]\n\n"
        "loader = DataLoader(list(range(8)), num_workers=2, collate_fn=scaled)\n"
        "for batch in loader:\n    print(batch)\n"
    )
    out = fixed(text)
    assert "\nSCALE = 2\n" in out and '\nif __name__ == "__main__":\n    loader = DataLoader(' in out


def test_notebooks_get_no_finding_and_so_no_fix() -> None:
    # LL012 speaks for notebooks: the cells are not re-imported.
    result = check_bytes(LOOP.encode(), "train.ipynb", OPTIONS)
    assert [f for f in result.findings if f.code == "LL013"] == []


def test_another_fix_does_not_pull_the_guard_in() -> None:
    # Adding workers would introduce LL013; its fix reshapes the script, so
    # LL201's fix stays withheld rather than guarding the script as a side effect.
    text = LOOP.replace(", num_workers=2", "").replace("torch.arange(8)", "ImageFolder(\"data\")").replace(
        "import torch\n", "from torchvision.datasets import ImageFolder\n")
    options = Options(frozenset({"LL201"}), lambda: SPAWN)
    result = check_bytes(text.encode(), "train.py", options, FixRequest(unsafe=True, dry_run=True))
    [finding] = [f for f in result.findings if f.code == "LL201"]
    assert result.fixed is None
    assert finding.fix_withheld is not None and "would introduce LL013" in finding.fix_withheld


SCRIPT = """\
import multiprocessing
import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.tensor([float(SCALE * i * i)])


SCALE = 2
{start}
loader = DataLoader(Squares(), batch_size=4, num_workers=2{context})
total = 0.0
for batch in loader:
    total += float(batch.sum())
print("total", total)
"""


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_the_fixed_script_runs_where_the_original_crashes(tmp_path: Path, method: str) -> None:
    pytest.importorskip("torch")
    if method == "spawn":
        text = SCRIPT.format(start='multiprocessing.set_start_method("spawn")', context="")
    else:
        text = SCRIPT.format(start="", context=', multiprocessing_context="forkserver"')
    path = tmp_path / "train.py"

    def run(source: str) -> subprocess.CompletedProcess[str]:
        path.write_text(source)
        return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)

    before = run(text)
    assert before.returncode != 0
    # An unguarded `set_start_method` fails first in the worker that runs it again.
    assert ("context has already been set" if method == "spawn" else
            "An attempt has been made to start a new process before the") in before.stderr
    out = fixed(text)
    assert findings(out) == [] and fixed(out) == out
    after = run(out)
    assert after.returncode == 0, after.stderr
    assert after.stdout == f"total {2.0 * sum(i * i for i in range(16))}\n"


def _project(tmp_path: Path, imported: bool) -> Path:
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "train.py").write_text(LOOP)
    if imported:
        (tmp_path / "evaluate.py").write_text("from train import loader\n\nprint(len(loader))\n")
    return tmp_path


def _cli(folder: Path, *args: str) -> str:
    import os

    from click.testing import CliRunner

    from loadlint.frontends.cli import cli

    old = os.getcwd()
    os.chdir(folder)
    try:
        return CliRunner().invoke(
            cli, [*args, "--isolated", "--no-cache", "--select", "LL013", "--target", "cpus=4,gpus=0,platform=macos,python=3.12",
                  "--output-format", "json", "train.py"],
            env={"NO_COLOR": "1", "LOADLINT_CACHE_DIR": None}, catch_exceptions=False,
        ).output
    finally:
        os.chdir(old)


@pytest.mark.parametrize("imported", [False, True], ids=["script", "imported"])
def test_a_module_the_project_imports_keeps_its_code_unguarded(tmp_path: Path, imported: bool) -> None:
    import json

    folder = _project(tmp_path, imported)
    [record] = json.loads(_cli(folder, "check"))
    _cli(folder, "fix", "--unsafe-fixes")
    after = (folder / "train.py").read_text()
    if not imported:
        assert record["fix"] is not None and "fix_withheld" not in record
        assert after == fixed(LOOP)
        return
    assert record["fix"] is None
    assert record["fix_withheld"] == (
        "no fix: `evaluate.py` imports this module, and under `if __name__ == \"__main__\":` the code it runs on "
        "import would no longer run there; move that code into a function instead"
    )
    assert after == LOOP


#: A golden project: calls at module level that reach a loop in a function
#: (LL013's project findings); ``fixed/`` holds the scripts the fix changes.
GUARDED_PROJECT = Path(__file__).parent / "fixtures" / "projects" / "guard_reaching_calls"
PROJECT_TARGET = "cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.14"


def _project_cli(folder: Path, *args: str) -> str:
    import os

    from click.testing import CliRunner

    from loadlint.frontends.cli import cli

    old = os.getcwd()
    os.chdir(folder)
    try:
        return CliRunner().invoke(
            cli, [*args, "--isolated", "--no-cache", "--select", "ALL", "--target", PROJECT_TARGET, "."],
            env={"NO_COLOR": "1", "LOADLINT_CACHE_DIR": None}, catch_exceptions=False,
        ).output
    finally:
        os.chdir(old)


def _texts(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}


def test_project_findings_carry_the_guard_or_the_reason(tmp_path: Path) -> None:
    import json
    import shutil

    folder = tmp_path / "project"
    shutil.copytree(GUARDED_PROJECT, folder)
    records = json.loads(_project_cli(folder, "check", "--unsafe-fixes", "--output-format", "json"))
    verdicts = {
        (Path(r["filename"]).name, r["location"]["row"]): (r["fix"]["applicability"] if r["fix"] else r["fix_withheld"])
        for r in records
    }
    assert verdicts == {
        ("below.py", 5): WITHHELD["definition-below"][1].replace("`def summary`", "`def report`"),
        ("cifar.py", 26): "unsafe",
        ("cifar.py", 27): "unsafe",
        ("has_guard.py", 5): WITHHELD["guard-elsewhere"][1],
        ("imported.py", 6): (
            "no fix: `evaluate.py` imports this module, and under `if __name__ == \"__main__\":` the code it runs on "
            "import would no longer run there; move that code into a function instead"
        ),
        ("reads_epoch.py", 13): WITHHELD["global-read-by-a-worker"][1].replace("`Data.__getitem__`", "`train`").replace(
            "`scale`", "`epoch`"),
        ("run.py", 8): "unsafe",
        ("start_method.py", 14): WITHHELD["start-method-left-outside"][1],
    }
    assert all(r["fix"]["message"] == (
        'Indent the module-level code that starts the workers under `if __name__ == "__main__":` '
        "(unsafe: a module that imports this script no longer runs that code)") for r in records if r["fix"])
    original = _texts(folder)
    # --diff shows the guards and writes nothing.
    diff = _project_cli(folder, "fix", "--unsafe-fixes", "--diff")
    assert _texts(folder) == original
    assert diff.count('+if __name__ == "__main__":') == 2 and "--- a/cifar.py" in diff and "--- a/run.py" in diff
    # Safe fixes alone leave every script as it is.
    _project_cli(folder, "fix")
    assert _texts(folder) == original
    out = _project_cli(folder, "fix", "--unsafe-fixes", "--show-fixes", "--output-format", "concise")
    assert "Found 8 problems (3 fixed, 5 remaining: 5 errors, 0 warnings)." in out
    fixed = GUARDED_PROJECT / "fixed"
    expected = dict(original, **{p.name[: -len(".txt")]: p.read_text() for p in fixed.glob("*.txt")})
    assert _texts(folder) == expected
    # One run reached the fixed point: the guarded calls are silent, the withheld ones keep their reasons.
    again = json.loads(_project_cli(folder, "check", "--unsafe-fixes", "--output-format", "json"))
    assert sorted((Path(r["filename"]).name, r["location"]["row"], r["fix_withheld"]) for r in again) == sorted(
        (name, row, verdict) for (name, row), verdict in verdicts.items() if verdict != "unsafe")
    _project_cli(folder, "fix", "--unsafe-fixes")
    assert _texts(folder) == expected


#: The project shapes, run for real: a module-level loader iterated in a
#: function the module-level epoch loop calls (CIFAR), and a loop in a
#: function of another module that a module-level call reaches.
REACHING = {
    "global-loader": {"train.py": """\
import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.tensor([float(i * i)])


trainloader = DataLoader(Squares(), batch_size=4, num_workers=2, multiprocessing_context="{method}")
totals = []


def train(epoch):
    total = 0.0
    for batch in trainloader:
        total += float(batch.sum())
    totals.append(total)


for epoch in range(2):
    train(epoch)
print("totals", totals)
"""},
    "loop-elsewhere": {
        "engine.py": """\
def fit(loader, epochs):
    totals = []
    for epoch in range(epochs):
        total = 0.0
        for batch in loader:
            total += float(batch.sum())
        totals.append(total)
    return totals
""",
        "train.py": """\
import torch
from torch.utils.data import DataLoader, Dataset

import engine


class Squares(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.tensor([float(i * i)])


loader = DataLoader(Squares(), batch_size=4, num_workers=2, multiprocessing_context="{method}")
print("totals", engine.fit(loader, epochs=2))
""",
    },
}


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("shape", sorted(REACHING))
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_the_fixed_project_runs_where_the_original_crashes(tmp_path: Path, method: str, shape: str) -> None:
    import json

    pytest.importorskip("torch")
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "pyproject.toml").touch()
    for name, text in REACHING[shape].items():
        (folder / name).write_text(text.replace("{method}", method))

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "train.py"], capture_output=True, text=True, timeout=120, cwd=folder)

    before = run()
    assert before.returncode != 0
    assert "An attempt has been made to start a new process before the" in before.stderr
    [record] = [r for r in json.loads(_project_cli(folder, "check", "--unsafe-fixes", "--output-format", "json"))
                if r["code"] == "LL013"]
    assert record["fix"]["applicability"] == "unsafe" and record["message"].startswith("this call reaches")
    _project_cli(folder, "fix", "--unsafe-fixes")
    fixed = (folder / "train.py").read_text()
    assert fixed.count('if __name__ == "__main__":') == 1
    assert [r for r in json.loads(_project_cli(folder, "check", "--output-format", "json")) if r["code"] == "LL013"] == []
    after = run()
    assert after.returncode == 0, after.stderr
    assert after.stdout == f"totals {[2.0 * sum(i * i for i in range(16)) / 2] * 2}\n"


def test_workers_held_for_a_script_are_added_once_the_fix_guards_it(tmp_path: Path) -> None:
    # LL201's workers for `test_dataloader` would crash explore.py, which
    # iterates it at module level; once one round guards explore.py, the next
    # adds them: one `fix` reaches the point a second one would.
    import shutil

    folder = tmp_path / "project"
    shutil.copytree(GUARDED_PROJECT.parent / "module_next_iter", folder)
    before = _project_cli(folder, "check", "--unsafe-fixes", "--output-format", "concise")
    assert "data_setup.py:12:23: LL201 `num_workers=0`" in before
    _project_cli(folder, "fix", "--unsafe-fixes")
    assert (folder / "explore.py").read_text().count('if __name__ == "__main__":') == 1
    assert "test_dataloader = DataLoader(test_data, batch_size=batch_size, num_workers=7)" in (
        folder / "data_setup.py").read_text()
    texts = _texts(folder)
    _project_cli(folder, "fix", "--unsafe-fixes")
    assert _texts(folder) == texts
