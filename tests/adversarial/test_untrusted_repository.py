"""A repository nobody vouched for: loadlint reads only inside it, writes
only inside it, runs none of it, ends, and prints nothing a terminal or a
CI log would act on.

Each case builds a hostile repository in ``tmp_path/repo`` beside a folder
``tmp_path/outside`` standing for the rest of the machine (a secret, a
victim file).  For each run: nothing outside changed, no secret from
outside in any output, no marker from planted code, a bound on time and on
memory.  Every case here was reproduced on the code before these guards
(README, Security).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from loadlint import __version__
from loadlint.workspace.cache import content_hash
from tests.adversarial.peak import polled

SECRET = "sk-live-7f3a9c"
#: Every output format; the default one is ``full``.
FORMATS = ("full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint")
#: The formats each case is checked in (the closing test checks all): the
#: default, a CI log's, a structured one.
SOME_FORMATS = ("full", "github", "json")
#: Seconds and kilobytes (peak resident) one run may take.
TIME_BOUND = 20.0
MEMORY_BOUND_KB = 600 * 1024
LOADER = "from torch.utils.data import DataLoader\n\n\ndef make(ds):\n    return DataLoader(ds, batch_size=8, prefetch_factor=2)\n"


@dataclass
class Ran:
    code: int
    out: str
    err: str
    seconds: float
    peak_kb: int
    #: CPU seconds (user and system): a bound a busy machine does not stretch.
    cpu: float

    @property
    def text(self) -> str:
        return self.out + self.err


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    out["NO_COLOR"] = "1"
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    return out


def run(cwd: Path, *args: str, timeout: float = TIME_BOUND, script: Path | None = None) -> Ran:
    """``python -m loadlint ARGS`` (or ``script``) in ``cwd``, its stdin a
    pipe held open (so a read of /dev/stdin would block), killed at
    ``timeout``; its peak memory is its own ``VmHWM``, polled (``wait4``'s
    ``ru_maxrss`` keeps the forking test process's across ``exec``)."""
    command = [sys.executable, str(script)] if script else [sys.executable, "-m", "loadlint", *args]
    ran = Ran(*polled(command, cwd, env(), timeout, hold_stdin=True))
    assert ran.code >= 0 and ran.seconds < timeout, f"killed after {ran.seconds:.1f} s (bound {timeout} s)"
    assert "Traceback" not in ran.err, ran.err[-3000:]
    assert ran.peak_kb < MEMORY_BOUND_KB, f"peak memory {ran.peak_kb // 1024} MB"
    return ran


def snapshot(folder: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry below ``folder``: kind and content (a link's target)."""
    out: dict[str, tuple[str, bytes | str]] = {}
    for dirpath, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(dirpath) / name
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_file():
                out[rel] = ("file", path.read_bytes())
            else:
                out[rel] = ("dir", "")
    return out


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """(repo, outside): a repository with a .git folder, and the machine
    around it holding a secret and a victim file."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / ".git").mkdir(parents=True)
    outside.mkdir()
    (outside / "local_settings.py").write_text(f"API_KEY = {SECRET!r}\n")
    (outside / "victim.txt").write_text("victim\n")
    (outside / "broken.py").write_text(f"from torch.utils.data import DataLoader\nx = DataLoader(ds, {SECRET!r} +)\n")
    (outside / "train.py").write_text(
        "from torch.utils.data import DataLoader\n\n\ndef main(ds):\n    return DataLoader(ds, prefetch_factor=2)\n"
    )
    (outside / "secret.toml").write_text(f"[tool.loadlint]\n{SECRET.replace('-', '_')} = 1\n")
    return repo, outside


def clean_of(outside: Path, before: dict[str, tuple[str, bytes | str]], *runs: Ran) -> None:
    assert snapshot(outside) == before, "a file outside the repository changed"
    for ran in runs:
        assert SECRET not in ran.text and SECRET.replace("-", "_") not in ran.text


def some_formats(repo: Path, *args: str) -> list[Ran]:
    return [run(repo, "check", "--no-cache", *args, "--output-format", fmt) for fmt in SOME_FORMATS]


# -- the cache: no write primitive -------------------------------------------


@pytest.mark.parametrize("marker", [".gitignore", "CACHEDIR.TAG"])
def test_dangling_link_in_committed_cache_is_not_written_through(world, marker):
    repo, outside = world
    (repo / "m.py").write_text(LOADER)
    (repo / ".loadlint_cache").mkdir()
    (repo / ".loadlint_cache" / marker).symlink_to(outside / "created")
    before = snapshot(outside)
    ran = run(repo, "check", ".")
    clean_of(outside, before, ran)
    assert not (outside / "created").exists()


def test_planted_temporary_names_do_not_redirect_cache_writes(world):
    repo, outside = world
    (repo / "m.py").write_text(LOADER)
    project = repo / ".loadlint_cache" / __version__ / "project" / __version__
    project.mkdir(parents=True)
    entry = "project-" + content_hash(str(repo).encode())[:32] + ".pjson"
    # The old names were ".<entry>.<pid>.tmp": plant the next few hundred pids.
    for pid in range(os.getpid(), os.getpid() + 600):
        (project / f".{entry}.{pid}.tmp").symlink_to(outside / "victim.txt")
    before = snapshot(outside)
    ran = run(repo, "check", ".")
    clean_of(outside, before, ran)
    assert (outside / "victim.txt").read_text() == "victim\n"


def test_cache_folder_linked_outside_is_refused(world):
    repo, outside = world
    (repo / "m.py").write_text(LOADER)
    (outside / "cache").mkdir()
    (repo / ".loadlint_cache").symlink_to(outside / "cache")
    before = snapshot(outside)
    ran = run(repo, "check", ".")
    clean_of(outside, before, ran)
    assert ran.err.count("running without a cache") == 1
    assert list((outside / "cache").iterdir()) == []


def test_project_cache_entry_linked_to_stdin_does_not_hang(world):
    repo, outside = world
    (repo / "m.py").write_text(LOADER)
    (repo / "use.py").write_text("from m import make\n\nfor b in make(None):\n    pass\n")
    run(repo, "check", ".")  # fills the cache
    entries = list((repo / ".loadlint_cache").rglob("project-*.pjson"))
    assert entries
    for entry in entries:
        entry.unlink()
        entry.symlink_to("/dev/stdin")
    run(repo, "check", ".", timeout=10)


# -- workers: no code from the repository --------------------------------------


def test_spawned_workers_do_not_import_the_repository(world, tmp_path):
    repo, outside = world
    marker = tmp_path / "marker"
    (repo / "multiprocessing").mkdir()
    (repo / "multiprocessing" / "__init__.py").write_text(
        f"open({str(marker)!r} + str(__import__('os').getpid()), 'w').write('ran')\n"
        "raise SystemExit(3)\n"
    )
    for i in range(4):
        (repo / f"m{i}.py").write_text(LOADER)
    # Outside the repository, so the parent does not import from it.
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import multiprocessing\n"
        "spawn_only = multiprocessing.get_context\n"
        "multiprocessing.get_context = lambda method=None: spawn_only('spawn')\n"
        "from pathlib import Path\n"
        "import loadlint.run.pool as pool\n"
        "import loadlint.run.runner as runner\n"
        "from loadlint.workspace.config import Overrides, ConfigResolver\n"
        "from loadlint.workspace.discover import discover\n"
        "pool.START_METHOD = 'spawn'  # as on macOS and Windows\n"
        "if __name__ == '__main__':\n"
        "    found = runner.lint_candidates(discover([Path('.')], ConfigResolver(Overrides()).for_path), jobs=2,\n"
        "                                   pool_min_saving=0, project=False)\n"
        "    print(sum(len(r.findings) for r in found.results), 'findings')\n"
    )
    ran = run(repo, script=driver, timeout=60)
    assert ran.code == 0, ran.err[-2000:]
    # LL001 in each file (and LL201 where this machine has CPUs to spare).
    assert int(ran.out.split()[0]) >= 4, ran.out
    assert not list(tmp_path.glob("marker*"))


# -- reads: only inside the project ---------------------------------------------


USES_KEY = """from torch.utils.data import DataLoader
{import_line}


def main(ds):
    loader = DataLoader(ds, multiprocessing_context=API_KEY, num_workers=2)
    for b in loader:
        pass
"""


def test_relative_import_above_the_root_stays_unknown(world):
    repo, outside = world
    (repo / "train.py").write_text(USES_KEY.format(import_line="from ..outside.local_settings import API_KEY"))
    before = snapshot(outside)
    clean_of(outside, before, *some_formats(repo, "."))


def test_module_linked_outside_stays_unknown(world):
    repo, outside = world
    (repo / "cfg.py").symlink_to(outside / "local_settings.py")
    (repo / "train.py").write_text(USES_KEY.format(import_line="from cfg import API_KEY"))
    before = snapshot(outside)
    clean_of(outside, before, *some_formats(repo, "."))


def test_links_are_followed_where_the_user_names_them(world):
    repo, outside = world
    (repo / "elsewhere").symlink_to(outside)
    (repo / "train.py").symlink_to(outside / "train.py")
    walked = run(repo, "check", "--no-cache", ".", "--output-format", "concise")
    # Neither link is followed: the walk finds no Python file at all.
    assert walked.out == "" and "No Python files found" in walked.text, walked.text
    for named in ("elsewhere", "train.py"):
        ran = run(repo, "check", "--no-cache", "--select", "LL001", named, "--output-format", "concise")
        assert "train.py:5:12: LL001" in ran.out, ran.text


def test_linked_file_is_not_quoted(world):
    repo, outside = world
    (repo / "bad.py").symlink_to(outside / "broken.py")
    before = snapshot(outside)
    clean_of(outside, before, *some_formats(repo, "."))


def test_extend_outside_the_repository_is_refused_alike_whether_there_or_not(world):
    repo, outside = world
    (repo / "m.py").write_text(LOADER)
    (repo / "pyproject.toml").write_text('[tool.loadlint]\nextend = "../outside/secret.toml"\n')
    present = run(repo, "check", "--no-cache", ".", "--output-format", "concise")
    (repo / "pyproject.toml").write_text('[tool.loadlint]\nextend = "../outside/missing.toml"\n')
    missing = run(repo, "check", "--no-cache", ".", "--output-format", "concise")
    assert present.code == missing.code == 2
    assert "outside the project" in present.err
    assert present.err.replace("secret", "missing") == missing.err
    clean_of(outside, snapshot(outside), present, missing)


def test_configuration_linked_outside_is_not_read(world):
    repo, outside = world
    (repo / "m.py").write_text(LOADER)
    (repo / "loadlint.toml").symlink_to(outside / "secret.toml")
    before = snapshot(outside)
    ran = run(repo, "check", "--no-cache", ".", "--output-format", "concise")
    assert ran.code == 2 and "link leading outside the project" in ran.err
    clean_of(outside, before, ran)


# -- bounded: no hang, no runaway memory -------------------------------------------


def test_fifo_module_does_not_block_the_project_phase(world):
    repo, _ = world
    (repo / "m.py").write_text(LOADER)
    (repo / "use.py").write_text("from m import make\n\nfor b in make(None):\n    pass\n")
    os.mkfifo(repo / "helper.py")
    run(repo, "check", "--no-cache", "use.py", timeout=10)


@pytest.mark.parametrize("device", ["/dev/stdin", "/dev/zero"])
def test_module_linked_to_a_device_is_not_read(world, device):
    repo, outside = world
    (repo / "m.py").write_text(LOADER)
    (repo / "use.py").write_text("from m import make\n\nfor b in make(None):\n    pass\n")
    (repo / "zz.py").symlink_to(device)
    ran = run(repo, "check", "--no-cache", ".", timeout=10)
    assert ran.peak_kb < 300 * 1024


def test_language_server_project_view_does_not_read_its_own_channel(world, tmp_path):
    """The language server checks a saved document with its project; its
    stdin is the protocol channel, which a link to /dev/stdin would read."""
    repo, _ = world
    (repo / "m.py").write_text(LOADER)
    (repo / "use.py").write_text("from m import make\n\nfor b in make(None):\n    pass\n")
    (repo / "zz.py").symlink_to("/dev/stdin")
    os.mkfifo(repo / "helper.py")
    driver = tmp_path / "server_view.py"
    driver.write_text(
        "from pathlib import Path\n"
        "from loadlint.workspace.config import Overrides, ConfigResolver\n"
        "from loadlint.engine.pipeline import ProfileCache\n"
        "from loadlint.project.join import check_in_project\n"
        "path = Path('use.py').resolve()\n"
        "result = check_in_project(path, ConfigResolver(Overrides()).for_path(path), ProfileCache(), None)\n"
        "print(sorted({f.code for f in result.findings}))\n"
    )
    ran = run(repo, script=driver, timeout=10)
    assert ran.code == 0 and ran.out.startswith("["), ran.text[-2000:]


def test_verify_pre_check_does_not_block(world, tmp_path):
    """verify asks the static side which calls have findings before it runs
    anything (``finding_sites``): the same project reads, the same guards."""
    repo, _ = world
    (repo / "m.py").write_text(LOADER)
    (repo / "use.py").write_text("from m import make\n\nfor b in make(None):\n    pass\n")
    (repo / "zz.py").symlink_to("/dev/stdin")
    os.mkfifo(repo / "helper.py")
    driver = tmp_path / "pre_check.py"
    driver.write_text(
        "import os\nfrom loadlint.verify.adapters import finding_sites\n"
        "print({os.path.basename(k): v for k, v in finding_sites('m.py').items()})\n"
    )
    ran = run(repo, script=driver, timeout=10)
    assert ran.code == 0 and ran.out == "{'m.py': [5]}\n", ran.text[-2000:]


def test_backtracking_gitignore_line_ends(world):
    repo, _ = world
    (repo / ".gitignore").write_text("*a" * 12 + "*b\n")
    (repo / ("a" * 40)).write_text("")
    (repo / ("a" * 40 + ".py")).write_text(LOADER)
    ran = run(repo, "check", "--no-cache", ".", "--output-format", "concise", timeout=10)
    assert "LL001" in ran.out or "prefetch" in ran.out


def test_fix_decisions_for_500_module_level_loaders(world):
    repo, _ = world
    (repo / "pyproject.toml").write_text('[tool.loadlint]\nselect = ["ALL"]\n[tool.loadlint.target]\ncpus = 16\n')
    (repo / "many.py").write_text(
        "from torch.utils.data import DataLoader\n"
        + "".join(f"dl{i} = DataLoader(ds, batch_size=64)\nfor b in dl{i}: pass\n" for i in range(500))
    )
    ran = run(repo, "fix", "--no-cache", "many.py", "--output-format", "concise", timeout=60)
    assert ran.out.count("LL201") == 500
    assert ran.cpu <= 5.0, f"{ran.cpu:.1f} s of CPU"


# -- writes: only inside the project -------------------------------------------------


def test_fix_does_not_write_through_a_link_out_of_the_project(world):
    repo, outside = world
    (repo / "train.py").symlink_to(outside / "train.py")
    before = snapshot(outside)
    walked = run(repo, "fix", "--no-cache", ".")
    named = run(repo, "fix", "--no-cache", "train.py")
    clean_of(outside, before, walked, named)
    assert "link leads outside the project" in named.text


def test_fix_from_verify_refuses_files_outside_the_project(world):
    repo, outside = world
    (repo / "report.json").write_text(json.dumps({"call_sites": [
        {"file": "../outside/train.py", "line": 5, "verdict": "confirmed", "best": {"num_workers": 4}},
    ]}))
    before = snapshot(outside)
    ran = run(repo, "fix", "--from-verify", "report.json")
    clean_of(outside, before, ran)
    assert "not fixed: outside the current project" in ran.err


# -- output: nothing a terminal or CI log acts on -------------------------------------


def test_file_names_and_lines_cannot_inject_commands_or_escapes(world):
    repo, _ = world
    name = "b\n::error file=x.py,line=1::injected\n.py"
    hostile = (
        "from torch.utils.data import DataLoader\n"
        "x = DataLoader(ds, prefetch_factor=2)  # \x1b]0;pwned\x07 \x1b]52;c;cHduZWQ=\x07 \x9b31m\u202e\n"
    )
    (repo / name).write_text(hostile)
    for ran in some_formats(repo, "."):
        assert not any(line.startswith("::error file=x.py") for line in ran.out.splitlines()), ran.out
        assert "\x1b" not in ran.out and "\x07" not in ran.out and "\x9b" not in ran.out and "\u202e" not in ran.out
    full = run(repo, "check", "--no-cache", ".")
    assert "b\\x0a::error file=x.py,line=1::injected\\x0a.py:2:" in full.out
    assert "\\x1b]0;pwned\\x07" in full.out


def test_per_file_time_bound_becomes_a_finding(world, tmp_path):
    repo, _ = world
    (repo / "m.py").write_text(LOADER)
    driver = tmp_path / "slow.py"
    driver.write_text(
        "from pathlib import Path\n"
        "import loadlint.run.pool as pool\n"
        "import loadlint.run.runner as runner\n"
        "from loadlint.workspace.config import Overrides, ConfigResolver\n"
        "from loadlint.workspace.discover import discover\n"
        "def forever(*args, **kwargs):\n"
        "    while True:\n"
        "        pass\n"
        "runner.pipeline.check_bytes = forever\n"
        "pool.FILE_TIME_LIMIT = 0.5\n"
        "found = runner.lint_candidates(discover([Path('.')], ConfigResolver(Overrides()).for_path), jobs=1, project=False)\n"
        "print([(f.code, f.message) for r in found.results for f in r.findings])\n"
    )
    ran = run(repo, script=driver, timeout=10)
    assert ran.out.strip() == "[('LL900', 'analysis did not finish within 0.5 s; split the module or exclude it')]"


# -- all of it at once -----------------------------------------------------------


@pytest.mark.slow
def test_one_repository_holding_every_case(world, tmp_path):
    """The closing check: check and fix over one repository with every case
    above end within 30 s, touch nothing outside and print no secret, in
    any format."""
    repo, outside = world
    (repo / "m.py").write_text(LOADER)
    (repo / "use.py").write_text("from m import make\n\nfor b in make(None):\n    pass\n")
    (repo / "train.py").write_text(USES_KEY.format(import_line="from ..outside.local_settings import API_KEY"))
    (repo / "train2.py").write_text(USES_KEY.format(import_line="from cfg import API_KEY"))
    (repo / "cfg.py").symlink_to(outside / "local_settings.py")
    (repo / "bad.py").symlink_to(outside / "broken.py")
    (repo / "fixme.py").symlink_to(outside / "train.py")
    (repo / "zz.py").symlink_to("/dev/zero")
    (repo / "zs.py").symlink_to("/dev/stdin")
    os.mkfifo(repo / "helper.py")
    (repo / ".gitignore").write_text("*a" * 12 + "*b\n")
    (repo / ("a" * 40 + ".py")).write_text(LOADER)
    (repo / "b\n::error file=x.py,line=1::injected\n.py").write_text(
        "from torch.utils.data import DataLoader\nx = DataLoader(ds, prefetch_factor=2)  # \x1b]0;pwned\x07\n"
    )
    (repo / "many.py").write_text(
        "from torch.utils.data import DataLoader\n"
        + "".join(f"dl{i} = DataLoader(ds, batch_size=64)\nfor b in dl{i}: pass\n" for i in range(500))
    )
    (repo / "pyproject.toml").write_text('[tool.loadlint]\nselect = ["ALL"]\n[tool.loadlint.target]\ncpus = 16\n')
    cache = repo / ".loadlint_cache"
    (cache / __version__ / "project" / __version__).mkdir(parents=True)
    (cache / ".gitignore").symlink_to(outside / "created")
    (cache / "CACHEDIR.TAG").symlink_to(outside / "created2")
    entry = "project-" + content_hash(str(repo).encode())[:32] + ".pjson"
    for pid in range(os.getpid(), os.getpid() + 300):
        (cache / __version__ / "project" / __version__ / f".{entry}.{pid}.tmp").symlink_to(outside / "victim.txt")
    before = snapshot(outside)
    start = time.perf_counter()
    runs = [run(repo, "check", ".", "--output-format", fmt, timeout=30) for fmt in FORMATS]
    runs.append(run(repo, "fix", ".", timeout=30))
    elapsed = time.perf_counter() - start
    clean_of(outside, before, *runs)
    for ran in runs:
        assert ran.seconds < 30
        assert "\x1b" not in ran.out
        assert not any(line.startswith("::error file=x.py") for line in ran.out.splitlines())
    print(f"{len(runs)} runs in {elapsed:.1f} s, slowest {max(r.seconds for r in runs):.1f} s, "
          f"peak {max(r.peak_kb for r in runs) // 1024} MB")
