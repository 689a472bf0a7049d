"""Configuration: discovery (the closest config above each file wins),
``extend``, command-line overrides layered as in ruff, every key, one-line
errors, file-level suppression, and ``respect-gitignore``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loadlint.api import check_paths, check_source
from loadlint.types import Target
from loadlint.workspace.config import ConfigError, Overrides, ConfigResolver, Settings, load_settings

TARGET = '[tool.loadlint.target]\ncpus = 4\ngpus = 1\n'
SCRIPT = """\
from torch.utils.data import DataLoader


def train(dataset, model):
    loader = DataLoader(dataset, batch_size=32)
    for x in loader:
        model(x.cuda())
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def codes(resolver: ConfigResolver, path: Path) -> list[str]:
    return sorted(resolver.for_path(path).codes_for(str(path)))


# -- discovery ----------------------------------------------------------------


def test_closest_config_wins_per_file(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.loadlint]\nselect = ["LL201"]\n')
    write(tmp_path / "sub" / "loadlint.toml", 'select = ["LL202"]\n')
    # A pyproject.toml that does not configure loadlint is skipped.
    write(tmp_path / "other" / "pyproject.toml", "[tool.black]\nline-length = 100\n")
    resolver = ConfigResolver(Overrides())
    assert codes(resolver, tmp_path / "a.py") == ["LL201"]
    assert codes(resolver, tmp_path / "sub" / "a.py") == ["LL202"]
    assert codes(resolver, tmp_path / "sub" / "deeper" / "a.py") == ["LL202"]
    assert codes(resolver, tmp_path / "other" / "a.py") == ["LL201"]
    # Not merged: the nested config does not inherit the parent's target.
    write(tmp_path / "pyproject.toml", '[tool.loadlint]\nselect = ["LL201"]\n' + TARGET)
    fresh = ConfigResolver(Overrides())
    assert fresh.for_path(tmp_path / "a.py").target == Target(cpus=4, gpus=1)
    assert fresh.for_path(tmp_path / "sub" / "a.py").target == Target()


def test_one_file_per_folder_order(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.loadlint]\nselect = ["LL201"]\n')
    write(tmp_path / "loadlint.toml", 'select = ["LL202"]\n')
    assert codes(ConfigResolver(Overrides()), tmp_path / "a.py") == ["LL202"]
    write(tmp_path / ".loadlint.toml", 'select = ["LL203"]\n')
    assert codes(ConfigResolver(Overrides()), tmp_path / "a.py") == ["LL203"]


def test_settings_are_cached_per_folder(tmp_path, monkeypatch):
    write(tmp_path / "loadlint.toml", 'select = ["LL2"]\n')
    import loadlint.workspace.config as config

    calls = []
    real = config.load_settings
    monkeypatch.setattr(config, "load_settings", lambda path, *a: calls.append(path) or real(path, *a))
    resolver = ConfigResolver(Overrides())
    first = resolver.for_path(tmp_path / "a.py")
    assert resolver.for_path(tmp_path / "b.py") is first
    assert resolver.for_path(tmp_path / "sub" / "c.py") is first
    assert len(calls) == 1


def test_per_file_ignores_are_per_project(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.loadlint]\nper-file-ignores = { "tests/*" = ["LL201"], "conftest.py" = ["LL2"] }\n')
    resolver = ConfigResolver(Overrides())
    assert "LL201" in codes(resolver, tmp_path / "train.py")
    assert "LL201" not in codes(resolver, tmp_path / "tests" / "test_train.py")
    # A pattern without a slash matches the file name in any folder.
    deep = codes(resolver, tmp_path / "a" / "b" / "conftest.py")
    assert not any(c.startswith("LL2") for c in deep)


# -- extend -----------------------------------------------------------------


def test_extend_inherits_and_overrides(tmp_path):
    (tmp_path / ".git").mkdir()  # one repository: its configurations extend one another
    write(
        tmp_path / "pyproject.toml",
        '[tool.loadlint]\nselect = ["LL1", "LL2"]\nignore = ["LL203"]\nunsafe-fixes = true\n'
        'per-file-ignores = { "scripts/*.py" = ["LL201"] }\n' + TARGET,
    )
    child = write(
        tmp_path / "services" / "trainer" / "loadlint.toml",
        'extend = "../../pyproject.toml"\nignore = ["LL202"]\n[target]\ncpus = 32\n',
    )
    settings = load_settings(child)
    assert settings.unsafe_fixes is True
    assert settings.target == Target(cpus=32, gpus=1)
    enabled = settings.codes()
    # The child's ignore adds to the parent's.
    assert "LL202" not in enabled and "LL203" not in enabled and "LL201" in enabled
    # The parent's per-file pattern keeps meaning "scripts/ next to the parent".
    assert "LL201" not in settings.codes_for(str(tmp_path / "scripts" / "x.py"))
    assert "LL201" in settings.codes_for(str(tmp_path / "services" / "trainer" / "scripts" / "x.py"))


def test_extend_select_starts_over(tmp_path):
    (tmp_path / ".git").mkdir()
    write(tmp_path / "base.toml", 'ignore = ["LL202"]\n')
    child = write(tmp_path / "sub" / "loadlint.toml", 'extend = "../base.toml"\nselect = ["LL202"]\n')
    assert sorted(load_settings(child).codes()) == ["LL202"]


def test_extend_cycle_and_missing(tmp_path):
    write(tmp_path / "a.toml", 'extend = "b.toml"\n')
    write(tmp_path / "b.toml", 'extend = "a.toml"\n')
    with pytest.raises(ConfigError, match="circular 'extend'"):
        load_settings(tmp_path / "a.toml")
    write(tmp_path / "c.toml", 'extend = "missing.toml"\n')
    with pytest.raises(ConfigError, match="missing file: missing.toml"):
        load_settings(tmp_path / "c.toml")


# -- command-line overrides ------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "overrides", "enabled", "disabled"),
    [
        # --select starts over: the config's ignore no longer applies.
        ('ignore = ["LL202"]', Overrides(select=("LL202",)), {"LL202"}, {"LL201"}),
        # --extend-select re-enables what the config ignored.
        ('ignore = ["LL2"]', Overrides(extend_select=("LL202",)), {"LL202", "LL101"}, {"LL201"}),
        # --ignore adds to the config's ignores.
        ('select = ["LL2"]\nignore = ["LL203"]', Overrides(ignore=("LL201",)), {"LL202"}, {"LL201", "LL203", "LL101"}),
    ],
)
def test_cli_layers_over_config(tmp_path, config, overrides, enabled, disabled):
    write(tmp_path / "loadlint.toml", config + "\n")
    got = set(codes(ConfigResolver(overrides), tmp_path / "a.py"))
    assert enabled <= got and not (disabled & got)


def test_cli_overrides_scalars_and_target(tmp_path):
    write(tmp_path / "loadlint.toml", 'unsafe-fixes = true\noutput-format = "json"\nrespect-gitignore = false\n[target]\ncpus = 8\ngpus = 2\n')
    settings = ConfigResolver(
        Overrides(unsafe_fixes=False, output_format="github", respect_gitignore=True, target=Target(cpus=64))
    ).for_path(tmp_path / "a.py")
    assert (settings.unsafe_fixes, settings.output_format, settings.respect_gitignore) == (False, "github", True)
    assert settings.target == Target(cpus=64, gpus=2)


def test_config_flag_and_isolated(tmp_path):
    write(tmp_path / "loadlint.toml", 'select = ["LL202"]\n')
    other = write(tmp_path / "elsewhere.toml", 'select = ["LL203"]\n')
    assert codes(ConfigResolver(Overrides(), config=other), tmp_path / "a.py") == ["LL203"]
    assert "LL201" in codes(ConfigResolver(Overrides(), isolated=True), tmp_path / "a.py")


# -- keys and errors -----------------------------------------------------------


def test_every_documented_key_is_accepted(tmp_path):
    path = write(
        tmp_path / "pyproject.toml",
        """\
[tool.loadlint]
select = ["LL1", "LL2"]
ignore = ["LL203"]
extend-select = ["LL900"]
per-file-ignores = { "tests/*" = ["LL201"] }
exclude = [".git", "build"]
extend-exclude = ["generated"]
respect-gitignore = false
unsafe-fixes = true
output-format = "sarif"

[tool.loadlint.target]
cpus = 64
gpus = 8
memory = 512
shm = "64G"
platform = "linux"
python = "3.12"
torch = "2.4"
""",
    )
    settings = load_settings(path)
    assert settings.exclude == (".git", "build") and settings.extend_exclude == ("generated",)
    assert settings.respect_gitignore is False and settings.unsafe_fixes is True
    assert settings.output_format == "sarif"
    assert settings.target.gpus == 8 and settings.target.python == "3.12"
    assert "LL900" in settings.codes() and "LL203" not in settings.codes()


@pytest.mark.parametrize(
    ("body", "key", "allowed"),
    [
        ('selcet = ["LL2"]', "'selcet'", "allowed: exclude, extend"),
        ('select = "LL2, LL9"', "'LL2, LL9'", "codes look like LL201"),
        ('select = ["XX1"]', "'XX1'", "prefixes like LL2"),
        ("ignore = 3", "'ignore'", "must be a list of strings"),
        ('extend-select = [1]', "'extend-select'", "must be a list of strings"),
        ('per-file-ignores = ["tests/*"]', "'per-file-ignores'", "glob = [codes]"),
        ('per-file-ignores = { "t/*" = ["LX1"] }', "'LX1'", "codes look like"),
        ("exclude = true", "'exclude'", "must be a list of strings"),
        ("extend-exclude = 1", "'extend-exclude'", "must be a list of strings"),
        ('respect-gitignore = "no"', "'respect-gitignore'", "must be true or false"),
        ("unsafe-fixes = 1", "'unsafe-fixes'", "must be true or false"),
        ('output-format = "xml"', "'output-format'", "full, concise, json"),
        ("extend = 3", "'extend'", "path string"),
        ("target = 4", "[tool.loadlint.target]", "must be a table"),
        ("[tool.loadlint.target]\ncpus = 0", "cpus", "expected a positive integer"),
        ("[tool.loadlint.target]\nram = 4", "'ram'", "allowed: cpus"),
        ('[tool.loadlint.target]\nplatform = "beos"', "platform", "expected"),
        ("[tool.loadlint.target]\npython = 3.10", "python", "quote it"),
    ],
)
def test_bad_config_is_one_line_naming_file_key_and_allowed(tmp_path, body, key, allowed):
    path = write(tmp_path / "pyproject.toml", "[tool.loadlint]\n" + body + "\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path.resolve()))
    assert key in message and allowed in message


def test_bad_config_exits_2_from_the_command_line(tmp_path):
    write(tmp_path / "sub" / "loadlint.toml", 'unsafe-fixes = "yes"\n')
    write(tmp_path / "sub" / "train.py", SCRIPT)
    proc = subprocess.run(
        [sys.executable, "-m", "loadlint", "check", "--no-cache", "."], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"loadlint: error: {(tmp_path / 'sub' / 'loadlint.toml').resolve()}: "
        "'unsafe-fixes' must be true or false, not 'yes'\n"
    )


def test_invalid_toml(tmp_path):
    write(tmp_path / "loadlint.toml", "select = [\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        ConfigResolver(Overrides()).for_path(tmp_path / "a.py")


# -- suppression and file selection ------------------------------------------


def _codes_in(text: str) -> list[str]:
    settings = Settings(target=Target(cpus=4, gpus=1), select=("LL201", "LL202"))
    return sorted(f.code for f in check_source(text, "train.py", settings=settings))


def test_file_level_noqa():
    assert _codes_in(SCRIPT) == ["LL201", "LL202"]
    assert _codes_in("# loadlint: noqa\n" + SCRIPT) == []
    assert _codes_in("# loadlint: noqa: LL201\n" + SCRIPT) == ["LL202"]
    assert _codes_in(SCRIPT + "    # loadlint: noqa: LL202, LL201\n") == []
    # Only on a line of its own: after code it is an ordinary comment.
    assert _codes_in(SCRIPT.replace("import DataLoader", "import DataLoader  # loadlint: noqa")) == ["LL201", "LL202"]
    # Unknown codes are ignored, not errors.
    assert _codes_in("# loadlint: noqa: LL999\n" + SCRIPT) == ["LL201", "LL202"]


def test_respect_gitignore(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path / ".gitignore", "scratch/\n")
    write(tmp_path / "scratch" / "train.py", SCRIPT)
    write(tmp_path / "loadlint.toml", '[target]\ncpus = 4\ngpus = 1\n')
    assert check_paths([tmp_path]).findings == []
    write(tmp_path / "loadlint.toml", 'respect-gitignore = false\n[target]\ncpus = 4\ngpus = 1\n')
    assert {f.code for f in check_paths([tmp_path]).findings} >= {"LL201"}
    assert {f.code for f in check_paths([tmp_path], Overrides(respect_gitignore=True)).findings} == set()


@pytest.mark.parametrize("lines", [
    ["*.pyc", "build/", "/top.py", "docs/**/gen_*.py", "a/b/", "# comment", "", "data?.py", "[Tt]emp*", "**/cache"],
    ["*.py", "!keep.py"],
])
def test_a_gitignore_ignores_what_pathspec_ignores(tmp_path, lines):
    """Without a negation the one-regex matcher answers alone (pathspec's
    spec is not compiled); with one, pathspec decides: both as pathspec."""
    import pathspec

    from loadlint.workspace.discover import _GitIgnore

    write(tmp_path / ".gitignore", "\n".join(lines) + "\n")
    gitignore = _GitIgnore()
    specs = gitignore.specs_for(tmp_path, None)
    assert (specs[0][1][0] is None) == (not any(line.startswith("!") for line in lines))
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    paths = ["x.pyc", "src/x.pyc", "build/", "src/build/", "build", "top.py", "src/top.py", "docs/a/gen_x.py",
             "docs/gen_x.py", "src/docs/a/gen_x.py", "a/b/", "c/a/b/", "a/b", "data1.py", "data12.py", "Temp1.py",
             "temp/", "x/cache", "cache/", "keep.py", "src/keep.py", "train.py", "src/"]
    for rel in paths:
        is_dir = rel.endswith("/")
        got = gitignore.ignored(str(tmp_path / rel.rstrip("/")), is_dir, specs)
        assert got == spec.match_file(rel), rel


def test_gitignore_negations_and_nested_files(tmp_path):
    """Each .gitignore is first searched with one regex of all its patterns
    (most paths match none); a match goes through the full rules, so the
    last matching pattern still decides, negations included."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path / ".gitignore", "# generated\n*_gen.py\n!keep_gen.py\nbuild/\n/top_only.py\n")
    write(tmp_path / "sub" / ".gitignore", "local.py\n!top_only.py\n")
    write(tmp_path / "loadlint.toml", '[target]\ncpus = 4\ngpus = 1\n')
    names = ["a_gen.py", "keep_gen.py", "build/train.py", "top_only.py", "sub/top_only.py", "sub/local.py",
             "sub/b_gen.py", "sub/train.py", "train.py"]
    for name in names:
        write(tmp_path / name, SCRIPT)
    found = {Path(f.path).relative_to(tmp_path).as_posix() for f in check_paths([tmp_path]).findings}
    assert found == {"keep_gen.py", "sub/top_only.py", "sub/train.py", "train.py"}


# -- performance codes in tests --------------------------------------------------

CRASH_IN_TEST = SCRIPT.replace("batch_size=32)", "batch_size=32, prefetch_factor=4)")


@pytest.mark.parametrize(
    "rel, test",
    [
        ("tests/test_data.py", True),
        ("tests/helpers/datasets.py", True),
        ("pkg/testing/loaders.py", True),
        ("test_train.py", True),
        ("train_test.py", True),
        ("conftest.py", True),
        ("src/pkg/tests.py", True),
        ("train.py", False),
        ("contest.py", False),
        ("testbed/train.py", False),
        ("latest/train.py", False),
        ("src/attest_data.py", False),
    ],
)
def test_what_counts_as_a_test_file(rel: str, test: bool) -> None:
    from loadlint.workspace.config import is_test_file

    assert is_test_file(rel) is test


def test_performance_codes_are_not_reported_in_tests_by_default(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.loadlint]\nselect = [\"ALL\"]\n" + TARGET)
    write(tmp_path / "train.py", SCRIPT)
    write(tmp_path / "tests" / "test_train.py", CRASH_IN_TEST)
    run = check_paths([tmp_path])
    by_file = {Path(r.path).name: sorted({f.code for f in r.findings}) for r in run.results}
    assert by_file["train.py"] == ["LL201", "LL202"]
    # The crash (prefetch_factor without workers) is still reported in the test.
    assert by_file["test_train.py"] == ["LL001"]
    write(tmp_path / "pyproject.toml", "[tool.loadlint]\nselect = [\"ALL\"]\nperformance-in-tests = true\n" + TARGET)
    run = check_paths([tmp_path / "tests"])
    assert sorted({f.code for f in run.findings}) == ["LL001", "LL201", "LL202"]


def test_performance_in_tests_must_be_a_boolean(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.loadlint]\nperformance-in-tests = \"yes\"\n")
    with pytest.raises(ConfigError, match="'performance-in-tests' must be true or false, not 'yes'"):
        ConfigResolver(Overrides()).for_path(tmp_path / "train.py")
