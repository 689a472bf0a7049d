"""``fix`` never introduces a finding, reaches a fixed point in one run, and
``check`` marks as fixable exactly the fixes ``fix`` applies: a fix that
would introduce a finding is withheld, and the finding says why.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadlint.frontends.cli import cli
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.engine.pipeline import check_bytes
from loadlint.rules import CODES
from loadlint.types import Finding, FixRequest, Options

FIXTURES = Path(__file__).parent / "fixtures"
QUICKSTART = FIXTURES / "fix" / "quickstart_no_main_guard.in.py"
REPLAY = FIXTURES / "fix" / "replay_buffer_live.in.py"
FORKSERVER = "cpus=4,gpus=1,platform=linux,python=3.14"
TARGET_LINE = "# loadlint target: "
ALL = frozenset(CODES)


def options(path: Path, target: str = "cpus=8,gpus=4,memory=64,shm=16,platform=linux,python=3.12") -> Options:
    first = path.read_bytes().decode("utf-8", "replace").splitlines()[0]
    if first.startswith(TARGET_LINE):
        target = first[len(TARGET_LINE):]
    profile = resolve_profile(parse_target(target))
    return Options(ALL, lambda: profile)


def marked(findings: list[Finding], unsafe: bool) -> list[Finding]:
    """The findings ``check`` marks as fixable in this mode."""
    return [f for f in findings if f.fix is not None and (unsafe or f.fix.applicability == "safe")]


def fixtures() -> list[Path]:
    return sorted((FIXTURES / "fix").glob("*.in.py")) + sorted((FIXTURES / "checker").glob("*.py"))


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("path", fixtures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_check_fix_check_agree(path: Path, unsafe: bool) -> None:
    opts = options(path)
    data = path.read_bytes()
    before = check_bytes(data, path.name, opts)
    fixed = check_bytes(data, path.name, opts, FixRequest(unsafe=unsafe, dry_run=True))
    assert fixed.error is None
    new_data = fixed.source.encode(fixed.fixed) if fixed.fixed is not None and fixed.source else data
    after = check_bytes(new_data, path.name, opts)
    # Fixed point: nothing fix would apply is left, and a second run changes nothing.
    assert marked(after.findings, unsafe) == []
    again = check_bytes(new_data, path.name, opts, FixRequest(unsafe=unsafe, dry_run=True))
    assert again.fixed is None
    # What check marked is what fix applied; what it did not mark stays.
    assert sum(fixed.applied.values()) >= len(marked(before.findings, unsafe))
    assert Counter(f.code for f in after.findings) == Counter(f.code for f in fixed.findings)
    # Nothing introduced: no code occurs more often than before.
    grown = Counter(f.code for f in after.findings) - Counter(f.code for f in before.findings)
    assert not grown
    # Every finding left with a fix withheld says why.
    for finding in after.findings:
        if finding.fix is None and finding.fix_withheld is not None:
            assert finding.fix_withheld.startswith("no fix: ")


def test_quickstart_keeps_pin_memory_and_withholds_workers() -> None:
    opts = options(QUICKSTART)
    result = check_bytes(QUICKSTART.read_bytes(), QUICKSTART.name, opts, FixRequest(unsafe=True, dry_run=True))
    assert result.applied == {"LL202": 2, "LL205": 4}
    assert result.fixed is not None and result.fixed.count("pin_memory=True") == 2 and "num_workers" not in result.fixed
    workers = [f for f in result.findings if f.code == "LL201"]
    assert len(workers) == 2
    for finding in workers:
        assert finding.fix is None
        assert finding.fix_withheld is not None
        assert finding.fix_withheld.startswith("no fix: set `num_workers=3` would introduce LL013 (missing-main-guard): ")
        assert "forkserver" in finding.fix_withheld


INDIRECT = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=64)


def train(data):
    for x in data:
        x.to("cuda")


{call}
"""


@pytest.mark.parametrize("guarded", [False, True, "built"], ids=["module-level", "main-guard", "built-in-guard"])
def test_a_loader_a_script_iterates_through_a_function(guarded: bool | str) -> None:
    # LL013 sees only loops written at module level; a worker re-running the
    # module-level call of `train` fails all the same.
    call = 'if __name__ == "__main__":\n    for x in loader:\n        train([x])' if guarded else "train(loader)"
    text = INDIRECT.format(call=call)
    if guarded == "built":
        text = INDIRECT.format(call="").replace("loader = DataLoader(dataset, batch_size=64)\n", "") + (
            'if __name__ == "__main__":\n    loader = DataLoader(dataset, batch_size=64)\n    train(loader)\n'
        )
    opts = Options(frozenset({"LL201"}), lambda: resolve_profile(parse_target(FORKSERVER)))
    [finding] = check_bytes(text.encode(), "script.py", opts).findings
    if guarded:
        assert finding.fix is not None and finding.fix_withheld is None
    else:
        assert finding.fix is None and finding.fix_withheld.startswith("no fix: `loader` is built at the module level")


def test_check_decides_the_same_before_the_fix() -> None:
    result = check_bytes(QUICKSTART.read_bytes(), QUICKSTART.name, options(QUICKSTART))
    kinds = sorted((f.code, f.fix is not None, f.fix_withheld is not None) for f in result.findings if f.code != "LL013")
    assert kinds == [("LL201", False, True)] * 2 + [("LL202", True, False)] * 2


def test_live_replay_buffer_gets_no_worker_count_and_no_fix() -> None:
    result = check_bytes(REPLAY.read_bytes(), REPLAY.name, options(REPLAY), FixRequest(unsafe=True, dry_run=True))
    assert result.fixed is not None and "num_workers" not in result.fixed and "pin_memory=True" in result.fixed
    [finding] = [f for f in result.findings if f.code == "LL201"]
    assert finding.fix is None and finding.fix_withheld is None
    assert "workers would change what is sampled" in finding.message
    assert "each worker would sample its own frozen copy" in finding.message
    assert "use `num_workers=" not in finding.message
    assert not [f for f in result.findings if f.code == "LL104"]


def run(args: list[str]):
    return CliRunner().invoke(cli, [*args, "--target", FORKSERVER, "--isolated"], catch_exceptions=False)


def test_reports_show_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "quickstart.py"
    path.write_bytes(QUICKSTART.read_bytes())
    full = run(["check", "--no-cache", "--select", "LL201,LL202", str(path)]).output
    assert "   = help: no fix: set `num_workers=3` would introduce LL013 (missing-main-guard): " in full
    assert full.endswith("Found 4 problems (0 errors, 4 warnings).\n[*] 2 fixable with --fix.\n")
    records = json.loads(run(["check", "--no-cache", "--output-format", "json", str(path)]).output)
    withheld = [r for r in records if r["code"] == "LL201"]
    assert all(r["fix"] is None and r["fix_withheld"].startswith("no fix: ") for r in withheld)
    assert all("fix_withheld" not in r for r in records if r["code"] != "LL201")
    sarif = json.loads(run(["check", "--no-cache", "--output-format", "sarif", str(path)]).output)
    results = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "LL201"]
    assert all("fixes" not in r and r["properties"]["fix_withheld"].startswith("no fix: ") for r in results)


def test_the_cache_keeps_the_decided_markers(tmp_path: Path) -> None:
    path = tmp_path / "quickstart.py"
    path.write_bytes(QUICKSTART.read_bytes())
    args = ["check", "--cache-dir", str(tmp_path / "cache"), "--output-format", "json", str(path)]
    first = run(args).output
    second = run(args).output  # from the cache
    assert first == second and "fix_withheld" in second


def test_fix_then_check_marks_nothing_fixable(tmp_path: Path) -> None:
    path = tmp_path / "quickstart.py"
    path.write_bytes(QUICKSTART.read_bytes())
    fixed = run(["fix", "--no-cache", "--unsafe-fixes", "--select", "LL201,LL202", str(path)]).output
    assert "Found 4 problems (2 fixed, 2 remaining: 0 errors, 2 warnings).\n" in fixed and "fixable" not in fixed
    checked = run(["check", "--no-cache", "--select", "LL201,LL202", str(path)]).output
    assert "[*]" not in checked and "fixable" not in checked and "help: no fix: " in checked


CONDITIONAL_DDP = """\
import torch
from torch.utils.data import DataLoader


def main(args):
    model = Net()
    if args.distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    loader = DataLoader(dataset, batch_size=32, num_workers=2, pin_memory=True)
    for batch in loader:
        model(batch)
"""


@pytest.mark.parametrize("guarded", [True, False], ids=["conditional", "unconditional"])
def test_distributed_sampler_fix_is_withheld_where_training_is_distributed_only_sometimes(guarded: bool) -> None:
    text = CONDITIONAL_DDP if guarded else CONDITIONAL_DDP.replace("    if args.distributed:\n    ", "")
    opts = Options(frozenset({"LL101"}), lambda: resolve_profile(parse_target(FORKSERVER)))
    result = check_bytes(text.encode(), "train.py", opts, FixRequest(unsafe=True, dry_run=True))
    if not guarded:
        assert result.fixed is not None and "sampler=DistributedSampler(dataset, shuffle=False)" in result.fixed
        return
    assert result.fixed is None and result.applied == {}
    [finding] = result.findings
    assert finding.fix is None
    assert finding.fix_withheld == (
        "no fix: this function trains distributed only `if args.distributed:`, and a `DistributedSampler` fails "
        'without a process group ("Default process group has not been initialized"); pass one under the same '
        "condition, e.g. `sampler=DistributedSampler(dataset) if args.distributed else None`"
    )
    assert check_bytes(text.encode(), "train.py", opts).findings[0].fix_withheld == finding.fix_withheld


def test_subsets_are_tried_largest_first_then_safest() -> None:
    from loadlint.rules.base import FixSpec
    from loadlint.engine.withhold import Candidate, subsets

    safe, unsafe, other = (Candidate(i, "LL2", FixSpec(kind, str(i))) for i, kind in enumerate(["safe", "unsafe", "safe"]))
    order = [[c.index for c in s] for s in subsets([unsafe, safe, other])]
    assert order[0] == [1, 0, 2]
    assert order[1] == [0, 2]  # the two safe fixes before any pair with the unsafe one
    assert [len(s) for s in order] == [3, 2, 2, 2, 1, 1, 1]


def test_a_new_finding_the_next_round_fixes_is_not_introduced() -> None:
    from loadlint.types import Edit, Fix, Location
    from loadlint.engine.withhold import introduced

    def finding(code: str, fixed: bool = False) -> Finding:
        fix = Fix("safe", "m", (Edit("", 0, 0, Location(1, 1), Location(1, 1)),)) if fixed else None
        return Finding(code, "n", "m", "p", Location(1, 1), Location(1, 2), fix)

    def fixable(f: Finding) -> bool:
        return f.fix is not None

    assert introduced([finding("LL201")], [finding("LL204", fixed=True)], fixable) is None
    assert introduced([finding("LL201")], [finding("LL104")], fixable).code == "LL104"
    assert introduced([finding("LL013")], [finding("LL013")], fixable) is None
