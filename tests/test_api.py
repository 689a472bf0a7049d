import subprocess
import sys

import pytest

from loadlint.api import (
    FixRequest,
    ProfileCache,
    analyse_document,
    check_paths,
    check_source,
    findings_in_project,
    fixed_document,
    fixed_in_project,
    options_for,
    suggest_for_call,
)
from loadlint.workspace.config import ConfigResolver, Overrides, Settings
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.facts.resolve import UNKNOWN

PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,memory=16,shm=8,platform=linux,python=3.12"))

SOURCE = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(ds, batch_size=32, shuffle=True, prefetch_factor=2)
other = DataLoader(ds, num_workers=args.workers)
model.cuda()
"""


def test_suggest_for_call_is_what_fix_writes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    # LL001's fix removes prefetch_factor; LL201 and LL202 add their keywords.
    assert suggest_for_call(str(script), 4, PROFILE) == {
        "dataset": UNKNOWN,
        "batch_size": 32,
        "shuffle": True,
        "num_workers": 7,
        "pin_memory": True,
    }


def test_suggest_for_call_measures_a_script_in_a_tests_folder_too(tmp_path):
    # check spares test files the LL2xx codes; a script the user asks verify to measure is not spared.
    (tmp_path / "tests").mkdir()
    script = tmp_path / "tests" / "train.py"
    script.write_text(SOURCE)
    assert suggest_for_call(str(script), 4, PROFILE)["num_workers"] == 7


def test_suggest_for_call_keeps_unresolved_values_unknown(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    suggestion = suggest_for_call(str(script), 5, PROFILE)
    assert suggestion["num_workers"] is UNKNOWN
    assert suggestion["pin_memory"] is True


def test_suggest_for_call_without_a_call_on_the_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    assert suggest_for_call(str(script), 1, PROFILE) is None


def test_check_source_reports_with_the_given_profile():
    codes = [f.code for f in check_source(SOURCE, "train.py", profile=PROFILE)]
    assert codes == ["LL001", "LL201", "LL202", "LL202"]


def test_identifier_this_python_rejects_is_a_syntax_error():
    # U+2EBF0 (CJK Extension I) is newer than Python 3.11's Unicode tables:
    # libcst's tokenizer takes it, its node validation does not.
    source = "from torch.utils.data import DataLoader\n\U0002ebf0 = 1\nDataLoader(ds)\n"
    [finding] = check_source(source, "x.py", profile=PROFILE)
    assert (finding.code, finding.location.row, finding.location.column) == ("LL900", 2, 1)
    assert finding.message == "SyntaxError: Name '\\U0002ebf0' is not a valid identifier."


# -- what the language server reaches through the API --------------------------

FACTORY = """\
from torch.utils.data import DataLoader


def create_dataloaders(train_data, batch_size):
    return DataLoader(train_data, batch_size=batch_size, num_workers=2, pin_memory=True, persistent_workers=True)
"""
TRANSFERS = """\
def train(loader, model, device, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            model(x)
"""
CUDA_TRAIN = """\
import torch

import data_setup
import engine
from data import dataset

if __name__ == "__main__":
    device = torch.device("cuda")
    model = torch.nn.Linear(3, 2).to(device)
    engine.train(data_setup.create_dataloaders(dataset, 32), model, device, 5)
"""


def _project(tmp_path, monkeypatch):
    """A pinned loader built in one module, its batches copied in another: LL205 across files.
    The current folder is the test's: the server's cache is the one of the folder it runs in."""
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text('[tool.loadlint]\nselect = ["LL205"]\n\n[tool.loadlint.target]\ncpus = 8\ngpus = 1\n')
    (root / "data_setup.py").write_text(FACTORY)
    (root / "engine.py").write_text(TRANSFERS)
    (root / "train.py").write_text(CUDA_TRAIN)
    engine = root / "engine.py"
    return engine, ConfigResolver(Overrides()).for_path(engine)


def test_a_saved_files_findings_include_what_its_project_shows(tmp_path, monkeypatch):
    engine, settings = _project(tmp_path, monkeypatch)
    found = findings_in_project(engine, settings, ProfileCache())
    assert [(f.code, f.location.row, f.location.column) for f in found] == [("LL205", 4, 20), ("LL205", 4, 34)]
    # The file alone shows nothing: the pinning is in data_setup.py.
    assert check_source(TRANSFERS, str(engine), settings=settings) == []


def test_a_saved_files_project_fix_is_computed_and_nothing_written(tmp_path, monkeypatch):
    engine, settings = _project(tmp_path, monkeypatch)
    fixed = fixed_in_project(engine, settings, ProfileCache())
    assert fixed == TRANSFERS.replace("x.to(device), y.to(device)", "x.to(device, non_blocking=True), y.to(device, non_blocking=True)")
    assert engine.read_text() == TRANSFERS


def test_an_editors_next_text_parses_again_only_the_statement_it_changed():
    options = options_for(Settings(select=("ALL",)), "train.py", ProfileCache())
    findings, first = analyse_document(SOURCE, "train.py", options)
    changed = SOURCE.replace("batch_size=32", "batch_size=64")
    again, second = analyse_document(changed, "train.py", options, first)
    assert first is not None and second is not None
    kept = [a is b for a, b in zip(first.module.body, second.module.body)]
    assert kept == [True, True, False, True, True]
    assert [(f.code, f.message) for f in again] == [(f.code, f.message) for f in analyse_document(changed, "train.py", options)[0]]
    assert [f.code for f in again] == [f.code for f in findings]


def test_an_editors_text_after_its_own_fixes_or_none():
    options = options_for(Settings(), "train.py", ProfileCache())
    fixed = fixed_document(SOURCE, "train.py", options, unsafe=False)
    assert fixed is not None and "prefetch_factor" not in fixed
    assert fixed_document(fixed, "train.py", options, unsafe=False) is None


def test_check_paths_keeps_a_cache_only_when_asked(tmp_path):
    (tmp_path / "train.py").write_text(SOURCE)
    check_paths([tmp_path], isolated=True, cache_dir=str(tmp_path / "unasked"))
    assert not (tmp_path / "unasked").exists()
    run = check_paths([tmp_path], isolated=True, cache=True, cache_dir=str(tmp_path / "kept"))
    assert (tmp_path / "kept").is_dir() and [f.code for f in run.findings] == ["LL001", "LL201", "LL202", "LL202"]


def test_a_dry_run_fix_over_a_warm_cache_applies_each_project_edit_once(tmp_path, monkeypatch):
    # The project phase's cache was keyed on the files' stat alone, which a
    # dry run does not change: its later rounds took the first round's
    # findings and applied their edits again to the text fixed already.
    engine, settings = _project(tmp_path, monkeypatch)
    monkeypatch.chdir(engine.parent)  # the default cache is the project's
    check_paths([engine.parent], cache=True)
    assert (engine.parent / ".loadlint_cache").is_dir()
    expected = TRANSFERS.replace("x.to(device), y.to(device)", "x.to(device, non_blocking=True), y.to(device, non_blocking=True)")
    assert fixed_in_project(engine, settings, ProfileCache()) == expected
    run = check_paths([engine.parent], cache=True, fix=FixRequest(unsafe=False, dry_run=True))
    assert [(r.path, r.fixed, r.applied) for r in run.results if r.fixed is not None] == [(str(engine), expected, {"LL205": 2})]
    assert engine.read_text() == TRANSFERS


def test_importing_the_facade_imports_no_parser():
    # The command line imports the API for every check: a repository whose
    # files never mention DataLoader must not pay for libcst (or the flake8
    # plugin, on such a file, for the API at all).
    code = (
        "import sys\nimport loadlint.api\nprint('libcst' in sys.modules)\n"
        "del sys.modules['loadlint.api']\nfrom loadlint.frontends.flake8 import Plugin\n"
        "print(list(Plugin(None, ['x = 1\\n'], 'x.py').run()), 'loadlint.api' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out == "False\n[] False\n"


def test_every_name_the_facade_lists_resolves():
    import loadlint.api as api

    assert [name for name in api.__all__ if getattr(api, name, None) is None] == []
    with pytest.raises(AttributeError, match="no attribute 'not_there'"):
        api.not_there
