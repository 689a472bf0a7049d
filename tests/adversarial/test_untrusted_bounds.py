"""Bounded work on a hostile repository: a huge literal statement costs
little memory, a configuration's selectors are expanded once, any cache
record is at worst a miss, and out-of-range target numbers are a
configuration error."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from loadlint.api import check_source
from loadlint.cst import slicing
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.workspace.config import Settings
from tests.adversarial.peak import peak_run

FIXTURES = Path(__file__).parent / "fixtures"
BASIC = (FIXTURES / "basic.py").read_bytes()
TARGET = "cpus=4,gpus=1"
PROFILE = resolve_profile(parse_target("cpus=8,gpus=4,memory=64,shm=16,platform=linux,python=3.12"))

# -- memory: the slicer's syntax check of dropped statements ----------------


def table_module(megabytes: float, element: str = "1") -> str:
    count = int(megabytes * 1_000_000 / (len(element) + 1))
    return (
        "from torch.utils.data import DataLoader\n"
        f"TABLE = [{(element + ',') * count}{element}]\n"
        "loader = DataLoader(ds, batch_size=8)\n"
    )


@pytest.mark.parametrize("element", ["1", "'ab'", pytest.param("{1: 2.5}", marks=pytest.mark.slow)])
def test_a_huge_literal_table_costs_little_memory(tmp_path, element):
    # 2 MB of `1,` took 760 MB (15 MB: 5.4 GB) when each dropped statement was compiled.
    (tmp_path / "big.py").write_text(table_module(2, element))
    proc, peak = peak_run(tmp_path, "check", "--no-cache", "--target", TARGET, "--output-format", "json", "big.py")
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    found = [(f["code"], f["location"]["row"], f["location"]["column"]) for f in json.loads(proc.stdout)]
    assert found == [("LL201", 3, 10)]
    assert peak < 300, f"{peak} MiB"


@pytest.mark.slow
def test_a_huge_invalid_table_is_still_a_syntax_error_at_its_place(tmp_path):
    text = table_module(0.3).replace("1,1,1]", "1,1,,1]")
    found = check_source(text, "big.py", settings=Settings(select=("ALL",)), profile=PROFILE)
    assert [(f.code, f.location.row, f.location.column, f.message) for f in found] == [
        ("LL900", 2, text.index(",,") - text.index("TABLE") + 2, "SyntaxError: invalid syntax")
    ]


def test_a_long_statement_that_does_not_shrink_is_compiled_up_to_a_bound():
    # Names are not literal data: such a statement is compiled whole up to
    # 256,000 characters (about 100 MB), and kept for the parser beyond.
    def module(characters: int) -> str:
        return table_module(0).replace("TABLE = [1]", "NAMES = [" + "a," * (characters // 2) + "a]")

    assert slicing.slice_module(module(200_000)).kept < 1000
    assert slicing.slice_module(module(300_000)).kept > 300_000


#: Statements whose literal groups are shrunk, and whether Python parses them.
STATEMENTS = [
    ("X = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]", True),
    ("X = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 007]", False),
    ("X = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,, 14]", False),
    ("X = {1: 2, 3: 4, 5: 6, 7: 8, 9: 10, 11: 12, 13}", False),
    ("X = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13: 1}", False),
    ("X = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', b'i']", True),
    ("X = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h' b'i']", False),
    ("X = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', '\\N{NO SUCH NAME}']", False),
    ("X = [b'\\xff', b'a', b'b', b'c', b'd', b'e', b'f', b'\u00e9']", False),
    ("X = [f'{x}', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]", True),
    ("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] = X", False),
    ("(                                              ) = X", True),
    ("X = np.array([[1.5, 2.5, -3.5], [4.5, 5.5, 6.5], [7.5, 8.5, 9.5]])", True),
    ("X = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 15)", False),
    ("X = " + "[" * 199 + "1, 2, 3" + "]" * 199, True),
    ("X = " + "[" * 201 + "1, 2, 3" + "]" * 201, False),
    ("X = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 1_0, 1__0]", False),
    ("X = [-1, - 2, ~3, +-4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, -]", False),
]


@pytest.mark.parametrize("statement, parses", STATEMENTS, ids=range(len(STATEMENTS)))
def test_shrunk_statements_parse_as_the_originals(statement, parses):
    from loadlint.cst import literals

    assert slicing._parses(statement) is parses
    shrunk = literals.reduce(statement)
    assert slicing._parses(shrunk) is parses, shrunk


def test_a_table_shrinks_to_a_constant_size():
    from loadlint.cst import literals

    assert literals.reduce("X = [" + "1, " * 100_000 + "]\n") == "X = [0]\n"
    assert literals.reduce("X = {" + "'k': 1.5, " * 100_000 + "}\n") == "X = {0: 0}\n"
    assert literals.reduce("X = f(" + "1, " * 100_000 + ")\n") == "X = f(0)\n"


@pytest.mark.parametrize("path", sorted((FIXTURES.parent.parent / "fixtures" / "checker").glob("*.py")), ids=lambda p: p.stem)
def test_every_dropped_statement_checked_alone_gives_the_same_findings(path, monkeypatch):
    # Each dropped statement goes through the shrinking check: the findings
    # stay those of a full parse.
    from loadlint.cst import literals

    text = path.read_text(encoding="utf-8")
    settings = Settings(select=("ALL",))
    full = check_source(text, path.name, settings=settings, profile=PROFILE)
    monkeypatch.setattr(slicing, "SLICE_ABOVE", 0)
    monkeypatch.setattr(slicing, "_CHECK_BATCH", 0)
    monkeypatch.setattr(literals, "REPLACE_FROM", 0)
    assert check_source(text, path.name, settings=settings, profile=PROFILE) == full


# -- selectors, expanded once per run ---------------------------------------


def test_three_hundred_thousand_selectors_are_expanded_once():
    # Expanded again for every file: 20 files took 42 s.
    settings = Settings(
        select=("LL2",) * 300_000,
        ignore=(" ll20 ",) * 1000,
        per_file_ignores=(("m*.py", ("LL201",) * 100_000),),
        source="pyproject.toml",
    )
    began = time.perf_counter()
    fingerprints = {settings.fingerprint(f"m{i}.py") for i in range(20)}
    codes = settings.codes_for("other.py")
    assert time.perf_counter() - began < 3
    assert codes == frozenset({"LL210", "LL211"})
    assert len(fingerprints) == 1 and "LL201" not in settings.codes_for("m1.py")


def test_many_selectors_through_the_command_line(cli, tmp_path):
    selectors = ",".join('"LL2"' for _ in range(100_000))
    (tmp_path / "pyproject.toml").write_text(f"[tool.loadlint]\nselect = [{selectors}]\n")
    for i in range(10):
        (tmp_path / f"m{i}.py").write_bytes(BASIC)
    began = time.perf_counter()
    findings = cli.json("check", "--no-cache", "--target", TARGET, ".")
    assert time.perf_counter() - began < 20
    assert {f["code"] for f in findings} == {"LL201", "LL202"} and len(findings) == 20


# -- cache records: anything in them is a miss ------------------------------


DEEP = b"[" * 100_000


def test_any_cache_record_is_at_worst_a_miss(cli, tmp_path):
    (tmp_path / "train.py").write_bytes(BASIC)
    for i in range(3):
        (tmp_path / f"plain{i}.py").write_bytes(b"x = 1\n")
    expected = cli.json("check", "--target", TARGET, ".")
    cache = tmp_path / ".loadlint_cache"
    records = [p for p in cache.rglob("*") if p.is_file() and p.suffix in (".json", ".pjson", ".record")]
    assert {p.suffix for p in records} >= {".json", ".record"}
    for record in records:
        record.write_bytes(DEEP)
    assert cli.json("check", "--target", TARGET, ".") == expected
    assert cli.run("fix", "--target", TARGET, "--diff", ".", ok=(0, 1)).stderr.count(b"error") == 0


def test_a_summary_nested_too_deeply_is_a_miss(cli, tmp_path):
    # A project: the factory's findings come from its callers' summaries.
    factory_project(tmp_path, 3, helpers=0)
    expected = cli.json("check", "--target", TARGET, ".")
    assert any("`make` called from train.py" in f["message"] for f in expected)
    for entry in (tmp_path / ".loadlint_cache").rglob("*.json"):
        data = json.loads(entry.read_bytes())
        if data.get("summary") is not None:
            data["summary"] = "[" * 100_000
            entry.write_text(json.dumps(data))
    for stale in (tmp_path / ".loadlint_cache").rglob("project-*.pjson"):
        stale.unlink()
    assert cli.json("check", "--target", TARGET, ".") == expected


# -- target numbers out of range --------------------------------------------


HUGE = "9" * 5000

TOML_TARGETS = {
    "memory_1e308": ("memory = 1e308", "memory"),
    "shm_1e308": ("shm = 1e308", "shm"),
    "memory_1e300": ("memory = 1e300", "memory"),
    "memory_beyond_an_exbibyte": ("memory = 2e9", "memory"),
    "cpus_2_to_the_70": (f"cpus = {2**70}", "cpus"),
    "gpus_2_to_the_63": ("gpus = 9223372036854775807", "gpus"),
    "cpus_5000_digits": (f"cpus = {HUGE}", "invalid TOML"),
    "memory_negative": ("memory = -1e308", "memory"),
    "memory_nan": ("memory = nan", "memory"),
    "cpus_inf": ("cpus = inf", "cpus"),
}


@pytest.mark.parametrize("case", sorted(TOML_TARGETS))
def test_out_of_range_target_in_the_configuration(cli, tmp_path, case):
    line, needle = TOML_TARGETS[case]
    (tmp_path / "pyproject.toml").write_text(f"[tool.loadlint.target]\n{line}\n")
    (tmp_path / "train.py").write_bytes(BASIC)
    for command in (("check", "train.py"), ("fix", "train.py"), ("hardware",)):
        proc = cli.run(*command, ok=(2,))
        [error] = proc.stderr.decode().splitlines()
        assert error.startswith("loadlint: error: ") and needle in error, error
        assert "internal error" not in error


@pytest.mark.parametrize(
    "target", ["cpus=" + HUGE, "cpus=99999999999999999999999", "gpus=2000000", "python=3." + HUGE, "torch=1." + HUGE,
               "memory=" + HUGE, "memory=2000000000", "shm=1e308"],
    ids=["cpus_digits", "cpus_huge", "gpus_huge", "python_digits", "torch_digits", "memory_digits", "memory_huge", "shm_exp"],
)
def test_out_of_range_target_on_the_command_line(cli, tmp_path, target):
    (tmp_path / "train.py").write_bytes(BASIC)
    proc = cli.run("check", "--target", target, "train.py", ok=(2,))
    [error] = proc.stderr.decode().splitlines()
    assert error.startswith(f"loadlint: error: --target: invalid {target.split('=')[0]} "), error[:300]


# -- the project phase: bounded, what it left undone reported, never cached --


def factory_project(root: Path, calls: int, helpers: int = 100) -> Path:
    """A factory called with ``calls`` distinct sets of literal values."""
    (root / "pyproject.toml").write_text("[tool.loadlint]\n")
    (root / "data.py").write_text(
        "from torch.utils.data import DataLoader\n\n\n"
        "def make(ds, workers, batch):\n"
        "    return DataLoader(ds, batch_size=batch, num_workers=workers, pin_memory=True)\n"
        + "".join(f"\n\ndef helper{i}(a, b):\n    x = [a, b, {i}]\n    return sum(x) * {i}\n" for i in range(helpers))
    )
    (root / "train.py").write_text(
        "from data import make\nds = list(range(10))\n" + "".join(f"loader{i} = make(ds, {i % 64}, {i + 1})\n" for i in range(calls))
    )
    return root


UNFINISHED_LL900 = "project analysis did not finish: `make` is called with more than 32 distinct sets of values"


def test_a_factory_called_with_many_values_is_analysed_a_bounded_number_of_times(cli, tmp_path):
    # Each call's values were analysed again: 200 call sites took 37 s (1,000: 224 s).
    factory_project(tmp_path, 200)
    began = time.perf_counter()
    findings = cli.json("check", "--target", "cpus=8", ".")
    first = time.perf_counter() - began
    [undone] = [f for f in findings if f["code"] == "LL900"]
    assert (undone["filename"], undone["location"]["row"]) == ("data.py", 5)
    assert undone["message"].startswith(UNFINISHED_LL900), undone["message"]
    assert first < 45
    # Never cached: the next run tries again, and says so again.
    assert not list((tmp_path / ".loadlint_cache").rglob("project-*.pjson"))
    assert cli.json("check", "--target", "cpus=8", ".") == findings


def test_the_project_phase_stops_at_its_time_bound(tmp_path, monkeypatch):
    from loadlint.api import check_paths
    from loadlint.project import budget

    factory_project(tmp_path, 120, helpers=200)
    monkeypatch.setattr(budget, "PROJECT_TIME_LIMIT", 1.0)
    monkeypatch.setattr(budget, "MAX_VALUE_SETS", 10**6)
    monkeypatch.chdir(tmp_path)
    began = time.perf_counter()
    run = check_paths([tmp_path / "train.py", tmp_path / "data.py"])
    elapsed = time.perf_counter() - began
    undone = [f for r in run.results for f in r.findings if f.code == "LL900"]
    assert [(Path(f.path).name, f.location.row, f.message) for f in undone] == [
        ("data.py", 5, "project analysis did not finish: stopped after 1 s (findings of calls from other files may be missing)")
    ]
    assert elapsed < 20


async def _shutdown_during(root: Path, uri: str, text: str, save: bool) -> tuple[float, float]:
    """Open ``text`` (and save it), let its analysis start, then time the
    shutdown's answer and the exit."""
    import asyncio

    from lsprotocol import types
    from pygls.lsp.client import LanguageClient
    from pygls.uris import from_fs_path

    client = LanguageClient("loadlint-tests", "1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    await client.start_io(sys.executable, "-m", "loadlint", "lsp", cwd=str(root), env=env)
    params = types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=from_fs_path(str(root)))
    await asyncio.wait_for(client.initialize_async(params), 60)
    client.initialized(types.InitializedParams())
    item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
    if save:
        saved = types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        client.text_document_did_save(saved)
    await asyncio.sleep(1.5)  # the analysis is under way
    began = time.perf_counter()
    await asyncio.wait_for(client.shutdown_async(None), 120)
    answered = time.perf_counter() - began
    client.exit(None)
    began = time.perf_counter()
    await asyncio.wait_for(client.stop(), 120)
    return answered, time.perf_counter() - began


def test_a_shutdown_is_answered_at_once_during_a_project_check(tmp_path):
    pytest.importorskip("pygls", reason="the language server needs the 'lsp' extra (pygls)")
    import asyncio

    from pygls.uris import from_fs_path

    # The project phase ran on the event loop: 400 call sites kept the server deaf for 18 s.
    factory_project(tmp_path, 200, helpers=300)
    train = tmp_path / "train.py"
    answered, exited = asyncio.run(_shutdown_during(tmp_path, from_fs_path(str(train)), train.read_text(), save=True))
    assert answered < 1.0, f"shutdown answered after {answered:.1f} s"
    assert exited < 10, f"exited {exited:.1f} s after exit"


def test_a_shutdown_is_answered_at_once_during_a_large_buffers_analysis(tmp_path):
    pytest.importorskip("pygls", reason="the language server needs the 'lsp' extra (pygls)")
    import asyncio

    from pygls.uris import from_fs_path

    # Unsaved (the buffer is not the file): analysed alone, 3,000 loaders.
    (tmp_path / "pyproject.toml").write_text("[tool.loadlint]\n")
    text = "from torch.utils.data import DataLoader\n" + "".join(
        f"\n\ndef make{i}(ds):\n    return DataLoader(ds, batch_size={i + 1})\n" for i in range(3000)
    )
    uri = from_fs_path(str(tmp_path / "big.py"))
    answered, exited = asyncio.run(_shutdown_during(tmp_path, uri, text, save=False))
    assert answered < 1.0, f"shutdown answered after {answered:.1f} s"
    assert exited < 10, f"exited {exited:.1f} s after exit"
