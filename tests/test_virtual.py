"""``check`` decides its fix markers with simulated trials where it can
(``loadlint.engine.virtual``) and tells a round's blamed calls apart (``Blame``):
both must decide exactly what real trials of the fixed text decide."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

import loadlint.engine.positions
import loadlint.engine.virtual
from loadlint.engine.analysis import analyse
from loadlint.engine.decision import decided_findings
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.rules import CODES, all_rules
from loadlint.rules.base import CallChange, FixSpec
from loadlint.rules.examples import examples_of
from loadlint.sources.source import decode
from loadlint.testing import EXAMPLE_PROFILE
from loadlint.types import Finding, Options
from loadlint.engine.virtual import patched

FIXTURES = Path(__file__).parent / "fixtures"
TARGET_LINE = "# loadlint target: "


#: No CPU count declared: worker fixes write the run-time constant (``LOADER_WORKERS``).
PORTABLE = "gpus=4,platform=linux,python=3.14"


def _options(text: str, select: frozenset[str] = frozenset(CODES), target: str | None = None) -> Options:
    first = text.splitlines()[0] if text else ""
    target = target or (first[len(TARGET_LINE):] if first.startswith(TARGET_LINE) else "cpus=8,gpus=4,platform=linux,python=3.14")
    profile = resolve_profile(parse_target(target))
    return Options(select, lambda: profile)


def _shown(findings: list[Finding]) -> list[tuple[object, ...]]:
    return [
        (f.code, f.location.row, f.location.column, f.message, None if f.fix is None else f.fix.message, f.fix_withheld)
        for f in findings
    ]


def _sources() -> list[tuple[str, str]]:
    paths = sorted((FIXTURES / "fix").glob("*.in.py")) + sorted((FIXTURES / "checker").glob("*.py"))
    paths += sorted((FIXTURES / "projects").rglob("*.py"))
    out = [(str(p.relative_to(FIXTURES)), decode(p.read_bytes()).text) for p in paths]
    for rule in all_rules():
        invalid = examples_of(rule).invalid
        out += [(f"{rule.code}-INVALID-{i}", textwrap.dedent(example.code)) for i, example in enumerate(invalid)]
    return out


SOURCES = _sources()


@pytest.mark.parametrize("target", [None, PORTABLE], ids=["declared", "portable"])
@pytest.mark.parametrize("select", ["all", "LL201"])
@pytest.mark.parametrize("name,text", SOURCES, ids=[name for name, _ in SOURCES])
def test_simulated_trials_decide_as_real_ones(
    monkeypatch: pytest.MonkeyPatch, name: str, text: str, select: str, target: str | None
) -> None:
    opts = _options(text, frozenset(CODES) if select == "all" else frozenset({select}), target)
    simulated = decided_findings(text, name, opts)
    monkeypatch.setattr(loadlint.engine.virtual, "patched", lambda info, specs, text=None: None)
    real = decided_findings(text, name, opts)
    assert _shown(simulated) == _shown(real)


def _reparses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = loadlint.engine.positions.reparse

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(loadlint.engine.positions, "reparse", counting)
    return calls


MANY = """\
# loadlint target: cpus=8,gpus=1,platform=linux,python=3.14
from torchvision.datasets import ImageFolder
from torch.utils.data import DataLoader, IterableDataset

class Stream(IterableDataset):
    def __iter__(self):
        yield from range(10)

def main():
    loaders = [
{calls}
    ]
    for epoch in range(3):
        for loader in loaders:
            for batch in loader:
                batch.cuda()

if __name__ == "__main__":
    main()
"""


def _many(n: int, bad: int) -> str:
    calls = [f"        DataLoader(ImageFolder('part{i}'), batch_size=8)," for i in range(n)]
    calls[bad] = "        DataLoader(Stream(), batch_size=8),"
    return MANY.replace("{calls}", "\n".join(calls))


def test_blame_tries_the_innocent_calls_together(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _many(12, 5)
    monkeypatch.setattr(loadlint.engine.virtual, "patched", lambda info, specs, text=None: None)
    trials = _reparses(monkeypatch)
    findings = decided_findings(text, "many.py", _options(text, frozenset({"LL201"})))
    assert len(findings) == 12
    withheld = [f for f in findings if f.fix is None]
    assert [f.location.row for f in withheld] == [16]
    assert withheld[0].fix_withheld is not None and "would introduce LL104" in withheld[0].fix_withheld
    # The round, then the eleven innocent calls together: the blamed call on
    # top of them is the round again (its reason too).  Two, not one per call.
    assert len(trials) == 2


def test_check_simulates_literal_keyword_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _many(12, 5)
    trials = _reparses(monkeypatch)
    findings = decided_findings(text, "many.py", _options(text, frozenset({"LL201"})))
    assert [f.location.row for f in findings if f.fix is None] == [16]
    assert trials == []


def test_check_simulates_the_run_time_worker_count(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _many(12, 5)
    trials = _reparses(monkeypatch)
    findings = decided_findings(text, "many.py", _options(text, frozenset({"LL201"}), PORTABLE))
    # With a count known only at run time, the IterableDataset's LL104 is its fix's "unsafe" note.
    assert len(findings) == 12 and all(f.fix is not None for f in findings)
    assert all("`num_workers=LOADER_WORKERS`, defined after the imports" in f.fix.message for f in findings)
    assert trials == []
    # A module that mentions ``os`` gets a real trial: the added import could change what it means.
    mentions = text.replace("import ImageFolder", "import ImageFolder  # needs no os")
    again = decided_findings(mentions, "many.py", _options(mentions, frozenset({"LL201"}), PORTABLE))
    assert len(trials) == 1
    assert _shown(again) == _shown(findings)


def _call_facts(code: str):  # type: ignore[no-untyped-def]
    findings, analysis = analyse(textwrap.dedent(code), "x.py", Options(frozenset(CODES), lambda: EXAMPLE_PROFILE))
    assert analysis is not None
    return analysis.info


def test_patched_sets_the_argument_and_names_its_nodes() -> None:
    info = _call_facts("""
        from torch.utils.data import DataLoader
        a = DataLoader(ds, 8, num_workers=0)
        b = DataLoader(ds, 8)
    """)
    a, b = info.calls
    out = patched(info, [FixSpec("safe", "x", calls=[CallChange(a.node, {"num_workers": "4"})]),
                         FixSpec("safe", "y", calls=[CallChange(a.node, {"pin_memory": "True"})])])
    assert out is not None
    facts, made = out
    new_a, new_b = facts.calls
    assert new_b is b and facts.calls is not info.calls and info.calls[0] is a
    assert new_a.value("num_workers") == 4 and new_a.value("pin_memory") is True and new_a.value("batch_size") == 8
    assert a.value("num_workers") == 0  # the original facts are left as they are
    assert id(new_a.args["pin_memory"]) in made and id(new_a.args["num_workers"].value) in made


@pytest.mark.parametrize("change,extra", [
    (CallChange(cst.Call(cst.Name("x")), {"num_workers": "4"}), {}),  # not a loader call of this module
    (None, {"remove": ("shuffle",)}),
    (None, {"set": {"num_workers": "os.cpu_count()"}}),
    (None, {"set": {"sampler": "None"}}),
    (None, {"imports": ["import os"]}),
])
def test_patched_leaves_other_fixes_to_real_trials(change: CallChange | None, extra: dict[str, object]) -> None:
    info = _call_facts("""
        from torch.utils.data import DataLoader
        a = DataLoader(ds, shuffle=True)
    """)
    call = info.calls[0].node
    if change is None:
        change = CallChange(call, extra.get("set", {}), extra.get("remove", ()))  # type: ignore[arg-type]
    spec = FixSpec("safe", "x", calls=[change], imports=extra.get("imports", []))  # type: ignore[arg-type]
    assert patched(info, [spec]) is None


def test_patched_refuses_conflicts_dict_arguments_and_bare_generators() -> None:
    info = _call_facts("""
        from torch.utils.data import DataLoader
        def build(ds):
            kw = {"num_workers": 2}
            return DataLoader(ds, **kw)
        b = DataLoader(x for x in range(3))
        c = DataLoader(ds)
    """)
    a, b, c = info.calls
    assert "num_workers" in a.dict_args
    assert patched(info, [FixSpec("safe", "x", calls=[CallChange(a.node, {"num_workers": "4"})])]) is None
    assert patched(info, [FixSpec("safe", "x", calls=[CallChange(b.node, {"num_workers": "4"})])]) is None
    conflict = [FixSpec("safe", "x", calls=[CallChange(c.node, {"num_workers": "4"})]),
                FixSpec("safe", "y", calls=[CallChange(c.node, {"num_workers": "2"})])]
    assert patched(info, conflict) is None
    assert patched(info, conflict[:1]) is not None


def test_patched_simulates_the_run_time_worker_count() -> None:
    from loadlint.facts.values import UNKNOWN
    from loadlint.rules.shared import RANK_WORKERS_CONSTANT, WORKERS_CONSTANT

    code = """
        from torch.utils.data import DataLoader
        a = DataLoader(ds, 8)
    """
    info = _call_facts(code)
    call = info.calls[0].node

    def spec(imports: list[str], name: str = "num_workers", value: str = "LOADER_WORKERS") -> list[FixSpec]:
        return [FixSpec("safe", "x", calls=[CallChange(call, {name: value})], imports=imports)]

    out = patched(info, spec(["import os", *WORKERS_CONSTANT]), textwrap.dedent(code))
    assert out is not None
    assert out[0].calls[0].value("num_workers") is UNKNOWN and out[0].calls[0].expr("num_workers") is not None
    assert patched(info, spec([*RANK_WORKERS_CONSTANT]), textwrap.dedent(code)) is not None
    assert patched(info, spec([]), None) is not None  # the constant is already defined
    assert patched(info, spec(["import os", *WORKERS_CONSTANT]), None) is None
    assert patched(info, spec(["import os", *WORKERS_CONSTANT]), "import torch  # os\n") is None
    assert patched(info, spec(["import os", *WORKERS_CONSTANT]), "import numpy as os\n") is None
    assert patched(info, spec(["import os", *WORKERS_CONSTANT]), "from os import path\nx = path.os\n") is not None
    assert patched(info, spec(["import sys", *WORKERS_CONSTANT]), textwrap.dedent(code)) is None
    assert patched(info, spec([*WORKERS_CONSTANT], "prefetch_factor"), textwrap.dedent(code)) is None
    assert patched(info, spec([*WORKERS_CONSTANT], value="WORKERS"), textwrap.dedent(code)) is None
