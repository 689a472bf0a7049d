"""Golden fix tests: ``tests/fixtures/fix/NAME.in.py`` fixed (unsafe fixes
included) must equal ``NAME.out.py`` byte for byte.

Files are compared as bytes so that line endings, a BOM and the encoding
are part of the expectation.  Regenerate with ``LOADLINT_REGEN=1`` and read
the diff before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loadlint.engine.decision import fix_text

from loadlint.types import Options
from loadlint.engine.fixes import Builder, apply_edits
from loadlint.engine.positions import Positions
from loadlint.sources.source import decode
from loadlint.types import HardwareProfile

FIXTURES = Path(__file__).parent / "fixtures" / "fix"

#: A declared machine, so suggestions never depend on the test host.
PROFILE = HardwareProfile(
    usable_cpus=4,
    gpu_count=1,
    platform="linux",
    python="3.11",
    declared=frozenset({"cpus", "gpus", "platform", "python"}),
)

#: The rules whose fixes these fixtures exercise; rules added later must not
#: change the expectations.
CODES = frozenset({"LL013", "LL101", "LL201", "LL202", "LL203"})

OPTIONS = Options(CODES, lambda: PROFILE)


def cases() -> list[Path]:
    return sorted(FIXTURES.glob("*.in.py"))


#: A fixture may declare its own target on its first line (the start method
#: decides whether workers are safe in a script without a main guard).
TARGET_LINE = "# loadlint target: "


def golden_options(text: str) -> Options:
    """OPTIONS, or the target the fixture's first line declares."""
    if not text.startswith(TARGET_LINE):
        return OPTIONS
    from loadlint.hardware.detect import parse_target, resolve_profile

    profile = resolve_profile(parse_target(text.splitlines()[0][len(TARGET_LINE):]))
    return Options(CODES, lambda: profile)


def fix_bytes(data: bytes, name: str) -> tuple[bytes, list]:
    source = decode(data)
    fixed, remaining, _ = fix_text(source.text, name, golden_options(source.text), unsafe=True)
    return source.encode(fixed), remaining


@pytest.mark.parametrize("path", cases(), ids=lambda p: p.name[: -len(".in.py")])
def test_golden(path: Path) -> None:
    expected_path = path.with_name(path.name.replace(".in.py", ".out.py"))
    got, remaining = fix_bytes(path.read_bytes(), path.name)
    if os.environ.get("LOADLINT_REGEN"):
        expected_path.write_bytes(got)
    assert expected_path.exists(), f"missing {expected_path.name}; run with LOADLINT_REGEN=1"
    assert got == expected_path.read_bytes()
    assert got != path.read_bytes(), "a golden case must exercise a fix"
    assert not [f for f in remaining if f.fix is not None], "fixable findings remain after fixing"


@pytest.mark.parametrize("path", cases(), ids=lambda p: p.name[: -len(".in.py")])
def test_golden_output_is_a_fixed_point(path: Path) -> None:
    fixed, _ = fix_bytes(path.read_bytes(), path.name)
    again, remaining = fix_bytes(fixed, path.name)
    assert again == fixed
    assert not [f for f in remaining if f.fix is not None]


@pytest.mark.parametrize("path", cases(), ids=lambda p: p.name[: -len(".in.py")])
def test_only_calls_and_inserted_lines_change(path: Path) -> None:
    """Every edit lies inside a DataLoader call, replaces a node the rule
    named, guards whole statements, or inserts whole lines (imports, ``set_epoch``); the rest of the
    file is byte-identical."""
    from loadlint.engine.analysis import analyse

    text = decode(path.read_bytes()).text
    options = golden_options(text)
    _, analysis = analyse(text, path.name, options)
    assert analysis is not None
    # The fixes the fix run applies: a withheld one is no part of the result.
    remaining = fix_text(text, path.name, options, unsafe=True)[1]
    withheld = {(f.code, f.location) for f in remaining if f.fix_withheld is not None}
    specs = [
        report.fix
        for (code, report), finding in zip(analysis.reports, analysis.findings)
        if report.fix is not None and (code, finding.location) not in withheld
    ]
    edits = Builder(analysis.module, analysis.positions).edits(specs)  # type: ignore[arg-type]
    positions: Positions = analysis.positions  # type: ignore[assignment]
    allowed = []
    for spec in specs:
        for change in spec.calls:
            allowed.append(positions.span(change.call)[:2])
        for node, _ in spec.replace:
            allowed.append(positions.span(node)[:2])
        if spec.guard:
            # LL013's guard: the guarded statements' whole lines.
            first, last = positions.span(spec.guard[0])[0], positions.span(spec.guard[-1])[1]
            end = text.find("\n", last)
            allowed.append((text.rfind("\n", 0, first) + 1, len(text) if end < 0 else end + 1))
    for edit in edits:
        if edit.start == edit.end:
            at_line_start = edit.start == 0 or text[edit.start - 1] in "\r\n"
            assert at_line_start and edit.content.endswith(("\n", "\r")), edit
            for line in edit.content.splitlines():
                # Imports, LL102's set_epoch, and the run-time worker count a fix defines after them.
                assert line.strip().startswith(("import ", "from ", "LOADER_CPUS = ", "LOADER_WORKERS = ")) or ".sampler.set_epoch(" in line, line
        else:
            assert any(a <= edit.start and edit.end <= b for a, b in allowed), edit
    # Outside the edits nothing moved: splicing reproduces the fixed text.
    fixed, _, _ = fix_text(text, path.name, options, unsafe=True)
    assert apply_edits(text, edits) == fixed


def test_crlf_fixture_really_is_crlf() -> None:
    data = (FIXTURES / "crlf_line_endings.out.py").read_bytes()
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")


def test_bom_and_latin1_fixtures_keep_their_encoding() -> None:
    assert (FIXTURES / "bom.out.py").read_bytes().startswith(b"\xef\xbb\xbf")
    latin = (FIXTURES / "latin1_encoding.out.py").read_bytes()
    assert "très".encode("latin-1") in latin
    latin.decode("latin-1")
    with pytest.raises(UnicodeDecodeError):
        latin.decode("utf-8")
