"""The worker formula is written once (``loadlint.hardware.workers``): the
function, the code a fix writes, LL201's message, ``loadlint hardware`` and
the suggestion for a declared target agree on every machine."""

from __future__ import annotations

import io
import re
import tokenize
import types
from pathlib import Path

import pytest

from loadlint.engine.analysis import analyse
from loadlint.engine.decision import fix_text
from loadlint.hardware.detect import suggest_num_workers
from loadlint.hardware.present import format_profile
from loadlint.hardware.workers import FORMULA, SMALL_MACHINE_CPUS, run_time_cpus, shared_code, workers_for
from loadlint.rules.shared import RANK_WORKERS_CONSTANT, WORKERS_CONSTANT
from loadlint.types import HardwareProfile, Options

PACKAGE = Path(__file__).resolve().parent.parent / "loadlint"
CPUS = range(1, 129)


def fake_os(cpus: int, ranks: int | None = None, *, process_cpu_count: bool = True) -> types.SimpleNamespace:
    """An ``os`` where the script runs on ``cpus`` CPUs under torchrun's ``ranks``."""
    environ = {} if ranks is None else {"LOCAL_WORLD_SIZE": str(ranks)}
    fake = types.SimpleNamespace(cpu_count=lambda: cpus, environ=environ)
    if process_cpu_count:
        fake.process_cpu_count = lambda: cpus
    return fake


def run_statements(statements: tuple[str, ...] | list[str], os_module: types.SimpleNamespace) -> int:
    namespace: dict[str, object] = {"os": os_module}
    exec("\n".join(statements), namespace)
    value = namespace["LOADER_WORKERS"]
    assert type(value) is int
    return value


def test_the_formula_keeps_a_cpu_except_on_small_machines() -> None:
    assert [workers_for(n) for n in range(1, 6)] == [1, 2, 2, 3, 4]
    assert [workers_for(16, ranks) for ranks in (1, 2, 4, 8, 16, 32)] == [15, 7, 3, 1, 1, 1]
    assert workers_for(2, 2) == workers_for(1, 4) == 1
    assert SMALL_MACHINE_CPUS == 2


@pytest.mark.parametrize("ranks", [1, 2, 3, 8])
def test_the_source_formula_is_the_function(ranks: int) -> None:
    for cpus in CPUS:
        per_rank = "cpus" if ranks == 1 else "cpus // ranks"
        code = FORMULA.format(per_rank=per_rank, cpus="cpus")
        assert eval(code, {}, {"cpus": cpus, "ranks": ranks}) == workers_for(cpus, ranks), (cpus, ranks)


@pytest.mark.parametrize("process_cpu_count", [True, False])
def test_the_written_constants_evaluate_to_the_function(process_cpu_count: bool) -> None:
    for cpus in CPUS:
        single = run_statements(WORKERS_CONSTANT, fake_os(cpus, process_cpu_count=process_cpu_count))
        assert single == workers_for(cpus)
        assert run_statements(RANK_WORKERS_CONSTANT, fake_os(cpus)) == workers_for(cpus)
        for ranks in (1, 2, 4, 8):
            assert run_statements(RANK_WORKERS_CONSTANT, fake_os(cpus, ranks)) == workers_for(cpus, ranks)


def test_loaders_alive_together_share_the_count_and_never_get_none() -> None:
    assert [workers_for(8, share=k) for k in (1, 2, 3, 7, 8, 9)] == [7, 3, 2, 1, 1, 1]
    assert [workers_for(2, share=k) for k in (1, 2, 3)] == [2, 1, 1]
    assert workers_for(16, 2, share=2) == 3
    for cpus in CPUS:
        for share in (2, 3, 4):
            # The parts add up to no more than one loader alone gets, unless each is down to one worker.
            part = workers_for(cpus, share=share)
            assert part >= 1 and (part * share <= workers_for(cpus) or part == 1), (cpus, share)


@pytest.mark.parametrize("share", [1, 2, 3, 5])
def test_the_shared_code_evaluates_to_the_function(share: int) -> None:
    assert shared_code("LOADER_WORKERS", 1) == "LOADER_WORKERS"
    for cpus in CPUS:
        single = (*WORKERS_CONSTANT, f"LOADER_WORKERS = {shared_code('LOADER_WORKERS', share)}")
        assert run_statements(single, fake_os(cpus)) == workers_for(cpus, share=share), (cpus, share)
        for ranks in (2, 8):
            spread = (*RANK_WORKERS_CONSTANT, f"LOADER_WORKERS = {shared_code('LOADER_WORKERS', share)}")
            assert run_statements(spread, fake_os(cpus, ranks)) == workers_for(cpus, ranks, share), (cpus, ranks)


def test_a_declared_target_suggests_the_function() -> None:
    for cpus in CPUS:
        profile = HardwareProfile(usable_cpus=cpus, declared=frozenset({"cpus"}))
        assert suggest_num_workers(profile) == workers_for(cpus)
        assert suggest_num_workers(profile, 8) == workers_for(cpus, 8)
        assert suggest_num_workers(profile, 2, share=3) == workers_for(cpus, 2, 3)


SCRIPT = """\
import torch
from torch.utils.data import DataLoader
loader = DataLoader(ds, batch_size=512)
for batch in loader:
    batch.to("cuda")
"""
DISTRIBUTED = """\
import torch.distributed as dist
from torch.utils.data import DataLoader
dist.init_process_group("nccl")
loader = DataLoader(ds, batch_size=512, sampler=sampler)
"""
HINT = re.compile(r"start workers from the usable CPUs at run time \((\d+) on this machine; no target declared\)")


@pytest.mark.parametrize("source", [SCRIPT, DISTRIBUTED], ids=["script", "distributed"])
def test_the_message_prints_what_the_fix_evaluates_to(source: str) -> None:
    # No target: the message's hint is this machine's; the fix's code gives it there.
    for cpus in CPUS:
        profile = HardwareProfile(usable_cpus=1, here_cpus=cpus)
        options = Options(frozenset({"LL201"}), lambda profile=profile: profile)
        findings, _ = analyse(source, "m.py", options)
        (finding,) = findings
        match = HINT.search(finding.message)
        assert match is not None, finding.message
        fixed, _, _ = fix_text(source, "m.py", options, unsafe=False)
        added = [line for line in fixed.splitlines() if line.startswith(("LOADER_CPUS = ", "LOADER_WORKERS = "))]
        assert len(added) == 2
        assert run_statements(added, fake_os(cpus)) == int(match[1]) == workers_for(cpus), cpus


@pytest.mark.parametrize("cpus", [1, 2, 3, 8, 64])
def test_a_declared_target_prints_and_writes_the_same_number(cpus: int) -> None:
    # Linux before 3.14 forks: workers at a script's module level are safe there.
    declared = frozenset({"cpus", "gpus", "platform", "python"})
    profile = HardwareProfile(usable_cpus=cpus, gpu_count=1, platform="linux", python="3.12", declared=declared)
    options = Options(frozenset({"LL201"}), lambda: profile)
    (finding,), _ = analyse(SCRIPT, "m.py", options)
    n = workers_for(cpus)
    assert finding.message.endswith(f"use `num_workers={n}` (target: {cpus} CPU{'s' * (cpus != 1)}, 1 GPU)")
    fixed, _, _ = fix_text(SCRIPT, "m.py", options, unsafe=False)
    assert f"DataLoader(ds, batch_size=512, num_workers={n})" in fixed


def test_hardware_shows_what_the_fix_evaluates_to_here() -> None:
    text = format_profile(HardwareProfile(usable_cpus=run_time_cpus()))
    assert f"LOADER_WORKERS:   {workers_for(run_time_cpus())} here (a fix's run-time count)" in text.splitlines()
    # A declared CPU count: the target's suggestion, no run-time count.
    assert "LOADER_WORKERS" not in format_profile(HardwareProfile(usable_cpus=8, declared=frozenset({"cpus"})))


#: A CPU count with one taken off, always or above a size: the formula
#: again, outside ``hardware.workers``.
SECOND_COPY = re.compile(
    r"(cpu_count\(\)|cpus|cpu|per_rank|usable|CPUS|or1)\)?(//[\w.()]+)?-1\b"
    r"|-\(1if[\w.()]+>[\w.]+else0\)"
)


def code_tokens(path: Path) -> list[tuple[int, str]]:
    """Each line's code without strings and comments, spaces removed."""
    lines: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if token.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER):
            lines[token.start[0]] = lines.get(token.start[0], "") + token.string
    return sorted(lines.items())


def test_no_second_copy_of_the_formula() -> None:
    copies = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "workers.py" or path.parent.name != "hardware"
        for line, text in code_tokens(path)
        if SECOND_COPY.search(text)
    ]
    assert copies == []


def test_the_copy_detector_finds_copies(tmp_path: Path) -> None:
    for code in ("n = max(1, os.cpu_count() - 1)\n", "w = usable_cpus // ranks - 1\n", "w = cpus - 1\n",
                 "w = max(1, (getattr(os, 'process_cpu_count', os.cpu_count)() or 1) - 1)\n",
                 "w = max(1, n // ranks - (1 if n > 2 else 0))\n",
                 "w = max(1, profile.usable_cpus - (1 if profile.usable_cpus > SMALL_MACHINE_CPUS else 0))\n"):
        (tmp_path / "m.py").write_text(code)
        texts = [text for _, text in code_tokens(tmp_path / "m.py")]
        assert any(SECOND_COPY.search(text) for text in texts), code
    (tmp_path / "m.py").write_text("message = 'cpus - 1'  # cpus - 1\n")
    assert not any(SECOND_COPY.search(text) for _, text in code_tokens(tmp_path / "m.py"))


def test_the_copy_detector_sees_the_formula_in_its_home() -> None:
    home = PACKAGE / "hardware" / "workers.py"
    assert [text for _, text in code_tokens(home) if SECOND_COPY.search(text)] == [
        "returnmax(1,max(1,cpus//max(1,ranks)-(1ifcpus>SMALL_MACHINE_CPUSelse0))//max(1,share))"
    ]
