"""Byte-level mutations of real fixtures: truncation at every line, inserted
NUL bytes and invalid UTF-8, random byte flips, removed indentation.

Whatever the bytes, checking gives findings (never an exception or an
internal error), LL900/LL901 findings point inside the file, and fixing
either writes code that parses or leaves the file alone.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import libcst as cst
import pytest

from loadlint.api import FixRequest
from loadlint.engine.pipeline import fix_bytes
from loadlint.engine.pipeline import lint_bytes
from loadlint.sources.source import LINE_BREAK

HERE = Path(__file__).parent
REPO = HERE.parent.parent
SEED = int(os.environ.get("LOADLINT_MUTATION_SEED", "20240611"))


def corpus() -> dict[str, bytes]:
    paths = sorted((HERE / "fixtures").glob("*.py"))
    paths += sorted((REPO / "tests" / "fixtures" / "fix").glob("*.in.py"))[:12]
    paths += [REPO / "examples" / "train_ddp.py"]
    return {p.name: p.read_bytes() for p in paths if p.is_file()}


def truncations(data: bytes):
    for i, match in enumerate(m for m in LINE_BREAK.finditer(data.decode("latin-1"))):
        yield f"cut-line-{i}", data[: match.start()]
        yield f"cut-mid-line-{i}", data[: max(0, match.start() - 3)]


def random_mutants(data: bytes, rng: random.Random, count: int):
    for i in range(count):
        kind = rng.choice(["nul", "invalid_utf8", "flip", "dedent", "splice", "delete", "bracket"])
        buf = bytearray(data)
        at = rng.randrange(len(buf) + 1)
        if kind == "nul":
            buf[at:at] = b"\x00"
        elif kind == "invalid_utf8":
            buf[at:at] = rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"])
        elif kind == "flip":
            for _ in range(rng.randint(1, 4)):
                j = rng.randrange(len(buf))
                buf[j] ^= 1 << rng.randrange(8)
        elif kind == "dedent":
            lines = bytes(buf).split(b"\n")
            for j in rng.sample(range(len(lines)), k=min(len(lines), rng.randint(1, 3))):
                lines[j] = lines[j].lstrip(b" \t")
            buf = bytearray(b"\n".join(lines))
        elif kind == "splice":
            j = rng.randrange(len(buf) + 1)
            buf[at:at] = data[j : j + rng.randint(1, 40)]
        elif kind == "delete":
            del buf[at : at + rng.randint(1, 20)]
        elif kind == "bracket":
            buf[at:at] = rng.choice([b"(", b")", b"[", b"]", b"{", b"}", b"'", b'"', b'"""', b"\\", b":", b"\t"])
        yield f"{kind}-{i}", bytes(buf)


def assert_sane(result, data: bytes, name: str) -> None:
    assert result.error is None, f"{name}: {result.error}"
    rows = len(LINE_BREAK.findall(data.decode("latin-1"))) + 1
    for finding in result.findings:
        if finding.code in ("LL900", "LL901"):
            assert 1 <= finding.location.row <= rows, (name, finding)
            assert finding.location.column >= 1, (name, finding)


def all_mutants(count_per_file: int, seed: int):
    rng = random.Random(seed)
    for fname, data in corpus().items():
        for kind, mutant in truncations(data):
            yield f"{fname}:{kind}", mutant
        yield from ((f"{fname}:{kind}", m) for kind, m in random_mutants(data, rng, count_per_file))


def test_mutants_check_without_errors(options):
    tried = 0
    for name, mutant in all_mutants(12, SEED):
        assert_sane(lint_bytes(mutant, "m.py", options), mutant, name)
        tried += 1
    assert tried > 500
    print(f"mutants checked: {tried}")


def test_mutants_fix_to_parsable_code_or_not_at_all(tmp_path, options):
    tried = 0
    path = tmp_path / "m.py"
    for i, (name, mutant) in enumerate(all_mutants(4, SEED + 1)):
        if b"DataLoader" not in mutant or i % 3:
            continue
        path.write_bytes(mutant)
        result = fix_bytes(path, mutant, options, FixRequest(unsafe=True))
        written = path.read_bytes()
        if written != mutant:
            assert result.fixed is not None and result.error is None, name
            cst.parse_module(written)  # raises if the fix broke the file
        assert sorted(tmp_path.iterdir()) == [path], name
        tried += 1
    assert tried > 100
    print(f"mutants fixed: {tried}")


def test_mutants_through_the_cli(cli, tmp_path):
    rng = random.Random(SEED + 2)
    written = 0
    for fname, data in corpus().items():
        for kind, mutant in random_mutants(data, rng, 6):
            (tmp_path / f"{Path(fname).stem}_{kind}.py").write_bytes(mutant)
            written += 1
    findings = cli.json("check", "--no-cache", "--target", "cpus=4,gpus=1", ".", timeout=300)
    engine = [f for f in findings if f["code"] in ("LL900", "LL901")]
    assert engine, "mutations that break the syntax must be reported"
    for finding in engine:
        assert finding["location"]["row"] >= 1 and finding["location"]["column"] >= 1
    cli.run("fix", "--no-cache", "--unsafe-fixes", "--target", "cpus=4,gpus=1", ".", timeout=300)
    assert not list(tmp_path.rglob("*.loadlint-tmp"))


@pytest.mark.fuzz_long
def test_mutants_long(options, tmp_path):
    count = int(os.environ.get("LOADLINT_MUTANTS_PER_FILE", "400"))
    tried = 0
    path = tmp_path / "m.py"
    for name, mutant in all_mutants(count, SEED + 3):
        assert_sane(lint_bytes(mutant, "m.py", options), mutant, name)
        if b"DataLoader" in mutant and tried % 4 == 0:
            path.write_bytes(mutant)
            result = fix_bytes(path, mutant, options, FixRequest(unsafe=True))
            if path.read_bytes() != mutant:
                assert result.error is None, name
                cst.parse_module(path.read_bytes())
        tried += 1
    print(f"mutants (long): {tried}")
