"""Project analysis of values that cross modules: constants imported from
project modules, imports written over several lines, and bad input.

The golden fixtures (tests/fixtures/projects/constants*, multiline_imports)
run with the others in test_project.py; these tests edit projects and check
what a warm cache, a broken module or an import cycle do.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.test_project import PROJECTS, check

from loadlint.engine.summaries import summarise_text


def copy(case: str, tmp_path: Path) -> Path:
    project = tmp_path / case
    shutil.copytree(PROJECTS / case, project)
    return project


def test_constants_are_summarised_with_what_stays_unknown() -> None:
    summary = summarise_text((PROJECTS / "constants" / "config.py").read_text())
    assert summary is not None
    constants = summary["constants"]
    assert {k: {x: y for x, y in v.items() if x != "at"} for k, v in constants.items()} == {
        "NUM_WORKERS": {"value": 16},
        "BATCH_SIZE": {"value": 32},
        "LOADER_WORKERS": {"value": 4},
        "PIN": {"value": True},
        "CPUS": {"cpu_count": True},
        "ALIAS": {"value": 16},
    }
    # Read from the environment, a file, rebound, or assigned under a condition.
    assert not {"DATA_WORKERS", "FROM_FILE", "EVAL_WORKERS", "ONLY_IF"} & set(constants)


def test_constant_rebound_in_a_function_stays_unknown() -> None:
    summary = summarise_text("WORKERS = 4\n\ndef fast():\n    global WORKERS\n    WORKERS = 0\n")
    assert summary is not None and "WORKERS" not in summary.get("constants", {})


def test_editing_the_config_module_changes_the_importers_finding(tmp_path: Path) -> None:
    project = copy("constants", tmp_path)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    first = check(project, *cache, ".")
    assert "train.py:7:16: LL203 `num_workers=16` (with `config.NUM_WORKERS = 16` from config.py:4)" in first
    config = project / "config.py"
    config.write_text(config.read_text().replace("NUM_WORKERS = 16", "NUM_WORKERS = 12"))
    second = check(project, *cache, ".")
    assert "train.py:7:16: LL203 `num_workers=12` (with `config.NUM_WORKERS = 12` from config.py:4)" in second
    # Only the importer given (a pre-commit run): the config is still read.
    staged = check(project, *cache, "train.py")
    assert "LL203 `num_workers=12`" in staged
    config.write_text(config.read_text().replace("NUM_WORKERS = 12", "NUM_WORKERS = 4"))
    third = check(project, *cache, "train.py")
    assert "train.py:7" not in third
    # Back to 16: the warm run sees the old value again, not a stale entry.
    config.write_text(config.read_text().replace("NUM_WORKERS = 4", "NUM_WORKERS = 16"))
    assert check(project, *cache, ".") == first


def test_editing_the_config_module_changes_the_factorys_finding(tmp_path: Path) -> None:
    project = copy("constants_factory", tmp_path)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert "the default `num_workers=16`" in check(project, *cache, ".")
    config = project / "going_modular" / "config.py"
    config.write_text("NUM_WORKERS = 0\nBATCH_SIZE = 32\n")
    out = check(project, *cache, "going_modular/data_setup.py")
    assert "LL203" not in out and "LL201 `num_workers=0`" in out
    assert "`config.NUM_WORKERS = 0` from going_modular/config.py:1" in out


def test_multiline_import_reaches_the_factory() -> None:
    out = check(PROJECTS / "multiline_imports", "--no-cache", ".")
    assert "called from train.py:15" in out  # from going_modular import (\n data_setup, ...)
    assert "called from aliased.py:6" in out  # import going_modular.data_setup as ds
    assert "called from going_modular/run.py:6" in out  # from . import data_setup


def test_config_that_does_not_parse_leaves_the_importer_checked(tmp_path: Path) -> None:
    project = copy("constants", tmp_path)
    (project / "config.py").write_text("NUM_WORKERS = 16\ndef broken(:\n")
    out = check(project, "--no-cache", "train.py", "pkg/loaders.py")
    # The importer's own findings and the other module's constant remain; 16 is unknown.
    assert "LL203" not in out and "pkg/loaders.py:8:12: LL201" in out


def test_constant_imported_in_a_cycle_stays_unknown(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").touch()
    (tmp_path / "a.py").write_text("from b import Y\n\nX = Y\n")
    (tmp_path / "b.py").write_text("from a import X\n\nY = X\n")
    (tmp_path / "train.py").write_text(
        "from torch.utils.data import DataLoader\n\nfrom a import X\n\nloader = DataLoader(range(10), num_workers=X)\n"
    )
    assert check(tmp_path, "--no-cache", ".") == ""
    # A chain that ends in a value is followed.
    (tmp_path / "b.py").write_text("Y = 0\n")
    (tmp_path / "train.py").write_text(
        "from torch.utils.data import DataLoader\n\nfrom a import X\n\nloader = DataLoader(open('f'), num_workers=X)\n"
    )
    out = check(tmp_path, "--no-cache", ".")
    assert "train.py:5:10: LL201 `num_workers=0` (with `b.Y = 0` from b.py:1)" in out


def test_two_config_modules_resolve_to_the_scripts_folder(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").touch()
    script = "from torch.utils.data import DataLoader\n\nimport config\n\nloader = DataLoader(open('f'), num_workers=config.WORKERS)\n"
    for folder, workers in (("one", 0), ("two", 32)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.py").write_text(f"WORKERS = {workers}\n")
        (tmp_path / folder / "train.py").write_text(script)
    (tmp_path / "config.py").write_text("WORKERS = 4\n")
    (tmp_path / "train.py").write_text(script)
    out = check(tmp_path, "--no-cache", ".").splitlines()
    assert [line.split(" (with")[0].split(": ")[0] for line in out] == ["one/train.py:5:10", "two/train.py:5:10"]
    assert "(with `config.WORKERS = 0` from one/config.py:1)" in out[0]
    assert "(with `config.WORKERS = 32` from two/config.py:1)" in out[1]


def test_notebook_gets_the_project_findings_of_a_script(tmp_path: Path) -> None:
    project = copy("notebook_course", tmp_path)
    out = check(project, "--no-cache", "course.ipynb").splitlines()
    # Only the notebook was given: its own project findings, at cell positions.
    assert [line.split(" ")[0] for line in out] == ["course.ipynb:cell", "course.ipynb:cell"]
    assert out[0].startswith("course.ipynb:cell 7:2:22: LL207") and out[1].startswith("course.ipynb:cell 8:4:20: LL203")
    factory = check(project, "--no-cache", "going_modular/data_setup.py")
    assert "called from course.ipynb:cell 4:1" in factory and "from course.ipynb:cell 6:1" in factory
    # The script that runs the same steps gets LL013; the notebook never does.
    everything = check(project, "--no-cache", ".")
    assert "train.py:5:1: LL013" in everything and not any(
        line.startswith("course.ipynb") and "LL013" in line for line in everything.splitlines()
    )


def test_notebook_with_string_sources_reaches_the_factory(tmp_path: Path) -> None:
    import json

    project = copy("notebook_course", tmp_path)
    notebook = project / "course.ipynb"
    document = json.loads(notebook.read_text())
    for cell in document["cells"]:
        cell["source"] = "".join(cell["source"])  # nbformat allows one string
    notebook.write_text(json.dumps(document))
    factory = check(project, "--no-cache", "going_modular/data_setup.py")
    assert "called from course.ipynb:cell 4:1" in factory


def test_editing_a_notebook_changes_the_factorys_finding(tmp_path: Path) -> None:
    project = copy("notebook_course", tmp_path)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert "LL203 `num_workers=16`" in check(project, *cache, "going_modular/data_setup.py")
    notebook = project / "course.ipynb"
    notebook.write_text(notebook.read_text().replace("num_workers=16", "num_workers=4"))
    out = check(project, *cache, "going_modular/data_setup.py")
    assert "LL203" not in out and "LL204" in out


def test_a_dependency_too_long_to_parse_whole_has_no_facts(tmp_path: Path) -> None:
    """A module over the slicing size would cost seconds per megabyte to
    parse whole for its summary: it has none, as one that does not parse;
    the importer is still checked."""
    project = copy("constants", tmp_path)
    filler = "".join(f"value_{i:07d} = {i}\n" for i in range(14_000))  # about 300 kB
    (project / "config.py").write_text((project / "config.py").read_text() + filler)
    out = check(project, "--no-cache", "train.py", "pkg/loaders.py")
    # NUM_WORKERS = 16 is not seen any more: no LL203 on train.py's loader.
    assert "LL203" not in out and "pkg/loaders.py:8:12: LL201" in out


def test_a_module_read_for_its_constants_is_parsed_once(tmp_path: Path, monkeypatch, capsys) -> None:
    import loadlint.project.join as join
    from loadlint.frontends.cli import main

    project = copy("constants", tmp_path)
    parsed: list[str] = []

    def counting(text: str) -> dict | None:
        parsed.append(text)
        return summarise_text(text)

    monkeypatch.setattr(join, "summarise_text", counting)
    monkeypatch.chdir(project)
    main(["check", "--no-cache", "-j", "1", "--target", "cpus=8", "."])
    out = capsys.readouterr().out
    assert "LL203 `num_workers=16` (with `config.NUM_WORKERS = 16` from config.py:4)" in out
    # Several importers and names, one parse of config.py.
    config = (project / "config.py").read_text()
    assert parsed.count(config) == 1


def test_each_function_lists_the_imports_its_summary_reads() -> None:
    from loadlint.project.values import _imported_reads

    listed = 0
    for path in sorted(PROJECTS.rglob("*.py")):
        summary = summarise_text(path.read_text(encoding="utf-8", errors="replace"))
        for name, fn in (summary or {}).get("functions", {}).items():
            assert fn["reads"] == sorted(set(_imported_reads(fn))), (path, name)
            listed += len(fn["reads"])
    assert listed >= 5


def test_resolving_enters_only_the_functions_that_read_an_import(tmp_path: Path) -> None:
    from loadlint.project.modules import ModuleResolver
    from loadlint.project.values import Constants

    project = copy("constants", tmp_path)
    summaries = {str(p): summarise_text(p.read_text()) for p in project.glob("*.py")}
    constants = Constants(project, ModuleResolver(project), summaries.get, lambda p: Path(p).read_text())
    resolved = 0
    for path, summary in summaries.items():
        assert summary is not None
        out = constants.resolve(path, summary)
        for name, fn in summary["functions"].items():
            # A function reading no import is the same object; one that does is a resolved copy.
            assert (out["functions"][name] is fn) == (fn["reads"] == []), (path, name)
            resolved += fn["reads"] != []
    assert resolved >= 2
