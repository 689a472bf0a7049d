"""Broken configuration gives one clear line and exit 2; a broken, foreign or
unwritable cache is recovered from; a cache entry written by another version
or for another configuration is never used."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

TARGET = "cpus=4,gpus=1"
BASIC = (Path(__file__).parent / "fixtures" / "basic.py").read_bytes()


def one_error_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("loadlint: error: "), lines
    for needle in needles:
        assert needle in lines[0], lines
    assert proc.stdout == b""
    return lines[0]


CONFIGS = {
    "malformed_toml": ("pyproject.toml", b"[tool.loadlint\nselect = [\"LL2\"\n", "invalid TOML"),
    "not_utf8": ("pyproject.toml", b"[tool.loadlint]\nselect = [\"LL2\"] # \xff\n", "invalid TOML"),
    "unknown_code": ("pyproject.toml", b"[tool.loadlint]\nselect = [\"LL999\"]\n", "LL999"),
    "unknown_code_in_ignore": ("pyproject.toml", b"[tool.loadlint]\nignore = [\"XX1\"]\n", "XX1"),
    "unknown_key": ("pyproject.toml", b"[tool.loadlint]\nselekt = [\"LL2\"]\n", "selekt"),
    "select_not_a_list": ("pyproject.toml", b"[tool.loadlint]\nselect = 3\n", "select"),
    "target_string": ("pyproject.toml", b"[tool.loadlint.target]\ncpus = \"many\"\n", "cpus"),
    "target_bool": ("pyproject.toml", b"[tool.loadlint.target]\ngpus = true\n", "gpus"),
    "target_negative": ("pyproject.toml", b"[tool.loadlint.target]\ncpus = -3\n", "cpus"),
    "target_infinite": ("pyproject.toml", b"[tool.loadlint.target]\ncpus = inf\n", "cpus"),
    "target_list": ("pyproject.toml", b"[tool.loadlint.target]\nmemory = [1, 2]\n", "memory"),
    "target_platform": ("pyproject.toml", b"[tool.loadlint.target]\nplatform = 3\n", "platform"),
    "target_not_a_table": ("pyproject.toml", b"[tool.loadlint]\ntarget = 5\n", "target"),
    "section_not_a_table": ("pyproject.toml", b"[tool]\nloadlint = 3\n", "table"),
    "per_file_ignores": ("pyproject.toml", b"[tool.loadlint]\nper-file-ignores = {\"*\" = 3}\n", "per-file-ignores"),
    "output_format": ("pyproject.toml", b"[tool.loadlint]\noutput-format = \"xml\"\n", "output-format"),
    "extend_loop": ("loadlint.toml", b"extend = \"loadlint.toml\"\n", "extend"),
    "extend_missing": ("loadlint.toml", b"extend = \"nowhere.toml\"\n", "extend"),
    "dotfile_malformed": (".loadlint.toml", b"select = [\n", "invalid TOML"),
    "nested_too_deeply": ("pyproject.toml", b"[tool.loadlint]\nselect = " + b"[" * 50000 + b"]" * 50000 + b"\n", "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_bad_configuration_is_one_line_and_exit_2(tmp_path, monkeypatch, capfd, case):
    # In this process (a subprocess per case is slow); the subprocess test
    # below shows the same through the real command line.
    from loadlint.frontends.cli import main

    name, data, needle = CONFIGS[case]
    (tmp_path / name).write_bytes(data)
    (tmp_path / "train.py").write_bytes(BASIC)
    monkeypatch.chdir(tmp_path)
    for command in ("check", "fix"):
        assert main([command, "--no-cache", "."]) == 2
        out, err = capfd.readouterr()
        one_error_line(subprocess.CompletedProcess([], 2, out.encode(), err.encode()), needle, name)
    assert (tmp_path / "train.py").read_bytes() == BASIC


@pytest.mark.parametrize("case", ["malformed_toml", "unknown_code", "target_string"])
def test_bad_configuration_through_the_cli(cli, tmp_path, case):
    name, data, needle = CONFIGS[case]
    (tmp_path / name).write_bytes(data)
    (tmp_path / "train.py").write_bytes(BASIC)
    one_error_line(cli.run("fix", "--no-cache", ".", ok=(2,)), needle, name)
    assert (tmp_path / "train.py").read_bytes() == BASIC


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--select", "LL999"], "LL999"),
        (["--ignore", "ZZ"], "ZZ"),
        (["--extend-select", "LL2,,bogus"], "bogus"),
        (["--target", "cpus=abc"], "cpus"),
        (["--target", "cpus"], "cpus"),
        (["--target", "gpus=-1"], "gpus"),
        (["--target", "memory=lots"], "memory"),
        (["--target", "=,="], "="),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(tmp_path, monkeypatch, capfd, args, needle):
    from loadlint.frontends.cli import main

    (tmp_path / "train.py").write_bytes(BASIC)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", *args, "."]) == 2
    out, err = capfd.readouterr()
    one_error_line(subprocess.CompletedProcess([], 2, out.encode(), err.encode()), needle)


def test_broken_pyproject_without_a_loadlint_section_is_ignored(cli, tmp_path):
    # Not ours to judge: another tool's broken file must not stop loadlint.
    (tmp_path / "pyproject.toml").write_bytes(b"[project\nname = 'x'\n")
    (tmp_path / "train.py").write_bytes(BASIC)
    findings = cli.json("check", "--no-cache", "--target", TARGET, ".")
    assert sorted(f["code"] for f in findings) == ["LL201", "LL202"]


@pytest.mark.parametrize("name", ["pyproject.toml", "loadlint.toml", ".loadlint.toml"])
def test_unreadable_configuration_is_an_error(tmp_path, monkeypatch, capfd, name):
    # A configuration that cannot be read may configure loadlint: running
    # with the defaults instead would apply settings nobody wrote.
    (tmp_path / name).mkdir()
    (tmp_path / "train.py").write_bytes(BASIC)
    monkeypatch.chdir(tmp_path)
    from loadlint.frontends.cli import main

    for command in ("check", "fix"):
        assert main([command, "--no-cache", "."]) == 2
        out, err = capfd.readouterr()
        assert (out, err) == ("", f"loadlint: error: {tmp_path.resolve() / name}: cannot read: Is a directory\n")
    assert (tmp_path / "train.py").read_bytes() == BASIC


def test_unreadable_configuration_through_the_cli(cli, tmp_path):
    (tmp_path / "pyproject.toml").mkdir()
    (tmp_path / "train.py").write_bytes(BASIC)
    proc = cli.run("check", "--no-cache", ".", ok=(2,))
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert proc.stderr.decode() == f"loadlint: error: {tmp_path.resolve()}/pyproject.toml: cannot read: Is a directory\n"


def test_pyproject_linked_out_of_the_repository_is_not_a_configuration(cli, tmp_path):
    # Not the repository's file: skipped, even when it points at nothing readable.
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (repo / "pyproject.toml").symlink_to(tmp_path / "elsewhere")
    (repo / "train.py").write_bytes(BASIC)
    findings = cli.json("check", "--no-cache", "--target", TARGET, ".", cwd=repo)
    assert sorted(f["code"] for f in findings) == ["LL201", "LL202"]


# -- cache -------------------------------------------------------------------


def cached_run(cli, cache: Path, *extra: str, **kw) -> list[dict]:
    return cli.json("check", "--cache-dir", str(cache), "--target", TARGET, *extra, ".", **kw)


def entries(cache: Path) -> dict[str, Path]:
    """Cache entries by the base name of the file they are for."""
    return {Path(json.loads(p.read_bytes())["path"]).name: p for p in cache.rglob("*.json")}


def by_file(findings: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for finding in findings:
        out.setdefault(finding["filename"], []).append(finding)
    return out


@pytest.fixture
def warm(cli, tmp_path):
    """A tree of twelve files, their findings and the cache of a first run."""
    for i in range(12):
        (tmp_path / f"m{i}.py").write_bytes(BASIC.replace(b"batch_size=32", f"batch_size={i + 1}".encode()))
    cache = tmp_path / "cache"
    expected = cached_run(cli, cache)
    assert len(expected) == 24 and len(entries(cache)) == 12
    return cache, expected


def poison(entry: Path, change) -> None:
    data = json.loads(entry.read_bytes())
    for finding in data["findings"]:
        finding["message"] = "POISONED"
    entry.write_text(json.dumps(change(data)))


#: Each field an entry is checked against, and a value from another
#: version, configuration, file content or path.
FOREIGN = [
    ("loadlint", "0.0.1"),
    ("schema", 999),
    ("stamp", "0" * 40),
    ("fingerprint", "(['LL201'], ())"),
    ("digest", "f" * 40),
    ("path", "/elsewhere/m0.py"),
]


def test_entry_from_another_version_or_configuration_is_not_used(cli, warm):
    cache, expected = warm
    found = entries(cache)
    for i, (field, value) in enumerate(FOREIGN):
        poison(found[f"m{i}.py"], lambda data: {**data, field: value})
    # The control: a poisoned entry whose every key matches is used, so the
    # poisoning is visible when it is not caught.
    poison(found["m11.py"], lambda data: data)
    stamp = json.loads(found["m11.py"].read_bytes())["stamp"]
    findings = by_file(cached_run(cli, cache))
    if {f["message"] for f in findings["m11.py"]} != {"POISONED"}:
        from loadlint.workspace.cache import code_stamp

        if stamp != code_stamp():
            pytest.skip("loadlint's own sources changed while the test ran (the cache rightly refused)")
    assert {f["message"] for f in findings.pop("m11.py")} == {"POISONED"}
    assert [f for fs in findings.values() for f in fs] == [f for f in expected if f["filename"] != "m11.py"]


def test_other_version_folder_is_not_read(cli, warm):
    cache, expected = warm
    [version] = [p for p in cache.iterdir() if p.is_dir()]
    for entry in entries(cache).values():
        poison(entry, lambda data: data)
    version.rename(cache / "0.0.1")
    assert cached_run(cli, cache) == expected


def test_configuration_change_is_not_served_from_the_cache(cli, warm):
    cache, expected = warm
    findings = cached_run(cli, cache, "--select", "LL202")
    assert {f["code"] for f in findings} == {"LL202"} and len(findings) == 12
    findings = cli.json("check", "--cache-dir", str(cache), "--target", "cpus=64,gpus=1", ".")
    assert any("64 CPUs" in f["message"] for f in findings)


def test_edited_file_is_not_served_from_the_cache(cli, warm, tmp_path):
    cache, expected = warm
    (tmp_path / "m0.py").write_bytes(b"# DataLoader: none here any more\n")
    assert "m0.py" not in by_file(cached_run(cli, cache))


CORRUPTIONS = {
    "truncated": lambda raw: raw[: len(raw) // 2],
    "empty": lambda raw: b"",
    "binary": lambda raw: bytes(range(256)) * 4,
    "not_json_object": lambda raw: b"[1, 2, 3]",
    "wrong_types": lambda raw: raw.replace(b'"findings":[', b'"findings":[{"code": 5},'),
    "bad_location": lambda raw: raw.replace(b'"location":[', b'"location":[true,'),
    "deep_json": lambda raw: b"[" * 100000 + b"]" * 100000,
    "huge_numbers": lambda raw: raw.replace(b'"location":[', b'"location":[' + b"9" * 5000 + b","),
    "utf16": lambda raw: raw.decode().encode("utf-16"),
    "nul_bytes": lambda raw: raw.replace(b",", b"\x00,"),
}


def test_corrupt_cache_entries_are_misses(cli, warm):
    cache, expected = warm
    found = entries(cache)
    for i, corrupt in enumerate(CORRUPTIONS.values()):
        entry = found[f"m{i}.py"]
        entry.write_bytes(corrupt(entry.read_bytes()))
    assert cached_run(cli, cache) == expected
    # The entries are rewritten and valid again.
    assert len(entries(cache)) == 12
    assert cached_run(cli, cache) == expected


def test_cache_entries_that_are_not_files(cli, warm):
    cache, expected = warm
    found = entries(cache)
    found["m0.py"].unlink()
    os.mkfifo(found["m0.py"])  # reading it would block forever
    found["m1.py"].unlink()
    os.symlink("/dev/zero", found["m1.py"])  # reading it would never end
    found["m2.py"].unlink()
    found["m2.py"].mkdir()
    assert cached_run(cli, cache, timeout=60) == expected


def test_unwritable_cache_folder(cli, warm, tmp_path):
    cache, expected = warm
    shutil.rmtree(cache)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache folder would go")
    # Below a file nothing can be created, whatever the user's privileges.
    assert cached_run(cli, blocker / "cache") == expected
    assert blocker.read_text().startswith("a file")
    from loadlint import __version__

    cache.mkdir()

    (cache / __version__).write_text("not a folder")
    assert cached_run(cli, cache) == expected


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_cache_folder(cli, warm):
    cache, expected = warm
    for folder in [cache, *[p for p in cache.rglob("*") if p.is_dir()]]:
        folder.chmod(0o555)
    try:
        (Path(cli.cwd) / "m0.py").write_bytes(BASIC + b"# edited\n")
        assert len(cached_run(cli, cache)) == 24
    finally:
        for folder in [cache, *[p for p in cache.rglob("*") if p.is_dir()]]:
            folder.chmod(0o755)


def test_cache_dir_that_is_a_file_is_a_usage_error(cli, tmp_path):
    (tmp_path / "train.py").write_bytes(BASIC)
    (tmp_path / "cachefile").write_text("x")
    proc = cli.run("check", "--cache-dir", "cachefile", ".", ok=(2,))
    assert b"cache-dir" in proc.stderr


def test_no_cache_touches_nothing(cli, tmp_path):
    (tmp_path / "train.py").write_bytes(BASIC)
    cli.run("check", "--no-cache", ".")
    cli.run("fix", "--no-cache", "--target", TARGET, ".", ok=(0,))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_fix_never_writes_edits_read_from_the_cache(cli, warm, tmp_path):
    cache, expected = warm
    for entry in entries(cache).values():
        data = json.loads(entry.read_bytes())
        for finding in data["findings"]:
            for edit in (finding["fix"] or {}).get("edits", []):
                edit[0] = "import os; os.system('echo pwned')\n"
        entry.write_text(json.dumps(data))
    cli.run("fix", "--cache-dir", str(cache), "--target", TARGET, ".", ok=(0,))
    for i in range(12):
        text = (tmp_path / f"m{i}.py").read_bytes()
        assert b"pwned" not in text and b"num_workers=" in text
