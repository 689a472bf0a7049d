"""Without a declared target, the answer depends only on the code and the
configuration: check and fix over every fixture, golden project and example
give the same findings (file, line, column, code) and the same fixed bytes on
1, 2, 8 and 64 CPUs, with or without GPUs, whatever the memory and /dev/shm.

Each machine is simulated in this process: the CPU probes of ``os`` and of
``loadlint.hardware.cpus``, and ``hardware.detect.detect`` itself, so that a
rule reaching for this machine by any road sees the simulated one.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from loadlint.api import Overrides, check_paths
from loadlint.hardware import cpus as cpus_module
from loadlint.hardware import detect as detect_module
from loadlint.hardware.detect import GIB
from loadlint.types import GPU, FixRequest, HardwareProfile, Target

REPO = Path(__file__).resolve().parent.parent
#: Every fixture (rule fixtures, golden projects, notebooks) and every example.
TREES = [*sorted(p for p in (REPO / "tests" / "fixtures").iterdir() if p.is_dir()), REPO / "examples"]
#: Every rule, off-by-default ones included.
ALL = Overrides(select=("ALL",))


@dataclass(frozen=True)
class Machine:
    cpus: int
    gpus: int
    memory_gib: float
    shm_gib: float

    def profile(self) -> HardwareProfile:
        return HardwareProfile(
            usable_cpus=self.cpus, logical_cpus=self.cpus, physical_cores=max(1, self.cpus // 2),
            affinity_cpus=self.cpus, memory_total=int(self.memory_gib * GIB),
            memory_available=int(self.memory_gib * GIB) // 2, shm_bytes=int(self.shm_gib * GIB),
            gpus=tuple(GPU("NVIDIA H100", 80 * GIB) for _ in range(self.gpus)), gpu_count=self.gpus,
        )


MACHINES = [
    Machine(cpus=1, gpus=0, memory_gib=2, shm_gib=0.0625),  # a CI container with docker's 64 MiB /dev/shm
    Machine(cpus=2, gpus=0, memory_gib=8, shm_gib=1),
    Machine(cpus=8, gpus=1, memory_gib=64, shm_gib=16),
    Machine(cpus=64, gpus=8, memory_gib=1024, shm_gib=256),
]

Answer = tuple[frozenset[tuple[str, int, int, str]], dict[str, str | None], frozenset[tuple[str, int, int, str]]]


def simulate(monkeypatch: pytest.MonkeyPatch, machine: Machine) -> None:
    n = machine.cpus
    monkeypatch.setattr(os, "cpu_count", lambda: n)
    monkeypatch.setattr(os, "process_cpu_count", lambda: n, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)), raising=False)
    monkeypatch.setattr(cpus_module, "cgroup_cpu_quota", lambda root=None: None)
    monkeypatch.setattr(detect_module, "detect", lambda *args, **kwargs: machine.profile())


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The trees copied out of the repository: under ``tests/`` every file is
    a test, where the performance rules are off."""
    root = tmp_path_factory.mktemp("trees")
    for tree in TREES:
        shutil.copytree(tree, root / tree.name)
    return [root / tree.name for tree in TREES]


def answer(trees: list[Path]) -> Answer:
    """(check's findings, each file's fixed text, the findings left after the fix)."""
    base = trees[0].parent

    def located(results: list) -> frozenset[tuple[str, int, int, str]]:
        return frozenset(
            (os.path.relpath(f.path, base), f.location.row, f.location.column, f.code)
            for result in results for f in result.findings
        )

    checked = check_paths(trees, ALL)
    fixed = check_paths(trees, ALL, fix=FixRequest(unsafe=True, dry_run=True))
    texts = {os.path.relpath(r.path, base): r.fixed for r in fixed.results if r.fixed is not None or r.error}
    errors = {path: text for path, text in texts.items() if text is None}
    assert not errors, errors
    return located(checked.results), texts, located(fixed.results)


@pytest.mark.slow
def test_no_target_gives_one_answer_on_every_machine(monkeypatch: pytest.MonkeyPatch, trees: list[Path]) -> None:
    answers = []
    for machine in MACHINES:
        with monkeypatch.context() as patch:
            simulate(patch, machine)
            assert detect_module.detect().usable_cpus == machine.cpus
            answers.append((machine, answer(trees)))
    first_machine, first = answers[0]
    findings, texts, left = first
    # The trees hold findings and fixes for the comparison to mean something.
    assert len(findings) > 100 and len(texts) > 20
    for machine, (other_findings, other_texts, other_left) in answers[1:]:
        assert sorted(findings ^ other_findings) == [], (first_machine, machine)
        assert sorted(left ^ other_left) == [], (first_machine, machine)
        changed = sorted(p for p in texts.keys() | other_texts.keys() if texts.get(p) != other_texts.get(p))
        assert changed == [], (first_machine, machine)


def test_the_simulation_reaches_a_target_of_detect(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The same simulation changes the answer once the project opts in to this machine.
    (tmp_path / "pyproject.toml").write_text('[tool.loadlint]\ntarget = "detect"\n')
    (tmp_path / "m.py").write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=4)\n")
    codes = []
    for machine in (MACHINES[0], MACHINES[3]):
        with monkeypatch.context() as patch:
            simulate(patch, machine)
            codes.append(sorted(f.code for r in check_paths([tmp_path]).results for f in r.findings))
    # 4 workers on 1 CPU, and docker's 64 MiB /dev/shm: this machine judged, as asked.
    assert codes == [["LL203", "LL209"], []]
    (tmp_path / "pyproject.toml").write_text("[tool.loadlint]\n")
    for machine in (MACHINES[0], MACHINES[3]):
        with monkeypatch.context() as patch:
            simulate(patch, machine)
            assert [f.code for r in check_paths([tmp_path]).results for f in r.findings] == []


def test_the_rules_profile_never_probes_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    def probe(*args: object, **kwargs: object) -> HardwareProfile:
        raise AssertionError("the rules' profile probed this machine")

    monkeypatch.setattr(detect_module, "detect", probe)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    monkeypatch.setattr(os, "process_cpu_count", lambda: 6, raising=False)
    bare = detect_module.rules_profile(Target())
    assert (bare.declared, bare.here_cpus, bare.gpu_count, bare.memory_total, bare.shm_bytes) == (frozenset(), 6, None, None, None)
    partial = detect_module.rules_profile(Target(gpus=8))
    assert (partial.declared, partial.here_cpus, partial.gpu_count, partial.shm_bytes) == (frozenset({"gpus"}), 6, 8, None)
    assert partial.label == "target: ? CPUs, 8 GPUs"
    # A declared CPU count leaves nothing of this machine, not even the hint.
    assert detect_module.rules_profile(Target(cpus=8)).here_cpus is None


def test_detect_declares_this_machine_and_pairs_beside_it_override() -> None:
    here = Machine(cpus=3, gpus=0, memory_gib=8, shm_gib=1).profile
    assert detect_module.parse_target("detect", detector=here) == Target(
        cpus=3, gpus=0, memory=8 * GIB, shm=GIB, platform="linux", python="3.11",
    )
    assert detect_module.parse_target("detect, gpus=8", detector=here).gpus == 8
    assert detect_module.parse_target("cpus=16,DETECT", detector=here).cpus == 16
