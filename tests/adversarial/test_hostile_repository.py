"""One hostile repository holding every case of the second pass at once
(and the first pass's), run through every command that reads a repository:
``check`` in each format, ``fix``, ``fix --diff``, ``--add-noqa``, the
flake8 plugin, ``init`` and ``trace`` (``-j 2``, ``--source``, ``--plot``,
JSON), with every process pool started by spawn.

For each run: nothing outside the repository changed, no secret from
outside in the output, no marker from planted code, no output line a CI
runner would take for a workflow command (``::`` at a line's start after
blanks, ``##[`` anywhere) and no raw escape, peak memory under 1 GB, ended
within its bound, no traceback.  Every problem is collected, so one run
names every command that breaks a promise.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from loadlint import __version__
from tests.adversarial.peak import high_water_kb

SECRET = "sk-live-7f3a9c"
#: Peak resident memory of one run.
MEMORY_BOUND_KB = 1024 * 1024
#: Virtual memory each process (and its pool) may take: three times the bound.
ADDRESS_SPACE_CAP = 3 << 30
FORMATS = ("full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint")
LOADER = "from torch.utils.data import DataLoader\n\n\ndef make(ds):\n    return DataLoader(ds, batch_size=8, prefetch_factor=2)\n"
OSC = "\x1b]52;c;aGk=\x07"
CSI = "\x1b[2J\x9b1m"
#: What a runner acts on: a workflow command after blanks, the legacy form anywhere.
_COMMAND = re.compile(r"^\s*::|##\[")
_FLAKE8_PLACE = re.compile(r"^.*?:\d+:\d+: (?=LL\d{3} )")
_ANNOTATION = re.compile(r"^::(?:error|warning|notice) [^:\n]*::")
#: Every process pool this run starts uses spawn, whatever the platform's default.
DRIVER = """import multiprocessing, sys
multiprocessing.set_start_method("spawn", force=True)
_context = multiprocessing.get_context
multiprocessing.get_context = lambda method=None: _context("spawn")
try:
    import loadlint.processes as processes
    processes.START_METHOD = "spawn"
except ImportError:
    pass
import loadlint.run.pool as pool
pool.START_METHOD = "spawn"
from loadlint.frontends.cli import main
if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
"""


@dataclass
class Ran:
    label: str
    code: int
    out: str
    err: str
    seconds: float
    peak_kb: int
    bound: float

    @property
    def text(self) -> str:
        return self.out + self.err


def _env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("LOADLINT_")}
    out.update(NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg")
    return out


def measure(label: str, cwd: Path, command: list[str], bound: float) -> Ran:
    """``command`` in ``cwd``, stdin a pipe held open, killed at ``bound``
    seconds; peak memory is the largest ``VmHWM`` of it and its children."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE, stdout=out, stderr=err, env=_env(),
                                preexec_fn=_cap_address_space)
        peak = 0
        killed = False
        try:
            while proc.poll() is None:
                peak = max(peak, high_water_kb(proc.pid), *(high_water_kb(c) for c in _children(proc.pid)))
                if time.perf_counter() - start > bound and not killed:
                    _kill_tree(proc.pid)
                    killed = True
                time.sleep(0.02)
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        code = -9 if killed else proc.returncode
        return Ran(label, code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                   seconds, peak, bound)


def _cap_address_space() -> None:
    # A run that breaks the memory bound fails here rather than take the machine's memory with it.
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            direct = [int(c) for c in handle.read().split()]
    except OSError:
        return []
    return direct + [g for c in direct for g in _children(c)]


def _kill_tree(pid: int) -> None:
    for child in _children(pid):
        try:
            os.kill(child, 9)
        except OSError:
            pass
    try:
        os.kill(pid, 9)
    except OSError:
        pass


def snapshot(folder: Path) -> dict[str, tuple[str, bytes | str]]:
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


# -- the repository ---------------------------------------------------------------


def _x(name: str, ts: float, dur: float, cat: str = "user_annotation", pid: int = 100, tid: int = 100) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def _steps(steps: int, *, iterator: str = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
           long_every: int = 0, frames: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    for i in range(steps):
        t = 1_000_000.0 + i * 10_000
        long = bool(long_every) and i % long_every == 0
        yield _x(f"ProfilerStep#{i}", t, 10_000)
        if long:
            yield _x("torch/utils/data/dataloader.py(480): __iter__", t + 5, 2, cat="python_function")
        for frame in frames:
            yield _x(frame, t + 6, 9_000, cat="python_function")
        yield _x(iterator, t + 10, 9_000.0 if long else 6_000.0)
        yield _x("volta_sgemm_128x64_nn", t + 9_100, 800, cat="kernel", pid=0, tid=7)


def _trace(events: Any, device: str = "NVIDIA H200", **header: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": device}], **header, "traceEvents": list(events)}


def _gzip_stream(path: Path, head: bytes, block: bytes, count: int, tail: bytes) -> None:
    with gzip.open(path, "wb", compresslevel=1) as handle:
        handle.write(head)
        for _ in range(count):
            handle.write(block)
        handle.write(tail)


HOSTILE_NAME = f"::x##[error]{OSC}.py"
STACK_SCRIPT = "from torch.utils.data import DataLoader\n\n\ndef main(ds):\n    return DataLoader(ds, {secret!r})\n"


def build(repo: Path, outside: Path, marker: Path) -> None:
    """Every case, each named after what it tries."""
    (repo / ".git").mkdir(parents=True)
    outside.mkdir()
    (outside / "local_settings.py").write_text(f"API_KEY = {SECRET!r}\n")
    (outside / "victim.toml").write_text('[project]\nname = "victim"\n')
    (outside / "broken.py").write_text(f"from torch.utils.data import DataLoader\nx = DataLoader(ds, {SECRET!r} +)\n")
    (outside / "train.py").write_text(STACK_SCRIPT.format(secret=SECRET))
    (outside / "preamble.tex").write_text("\\immediate\\write18{touch pwned}\n")
    # The folder around the repository: what `OmegaConf.load("../config.yaml")` from the root names.
    (repo.parent / "config.yaml").write_text(f"loader:\n  workers: 0\nkey: {SECRET}\n")

    # Configuration: every rule, a declared machine, 300k selectors expanded per file.
    selectors = ", ".join(['"LL2"'] * 300_000)
    (repo / "pyproject.toml").write_text(
        f'[tool.loadlint]\nselect = ["ALL"]\nextend-select = [{selectors}]\n[tool.loadlint.target]\ncpus = 16\ngpus = 1\n'
    )

    # Planted code a worker or rank process would import from the current folder.
    for name in ("multiprocessing/__init__.py", "concurrent/__init__.py", "sitecustomize.py", "usercustomize.py"):
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(marker)!r} + str(__import__('os').getpid()), 'w').write({name!r})\n")
    (repo / "matplotlibrc").write_text(
        f"text.usetex: True\ntext.latex.preamble: \\input{{{outside / 'preamble.tex'}}}\n"
    )

    # Workflow commands and terminal escapes in names, lines, strings and the diff's context.
    (repo / "::stop-commands::tok.py").write_text(LOADER)
    (repo / "b\n::error file=x.py,line=1::injected\n.py").write_text(LOADER)
    (repo / "##[error]x.py").write_text(
        "from torch.utils.data import DataLoader\n"
        f'x = DataLoader(ds, prefetch_factor=2, multiprocessing_context="{OSC}{CSI} ##[error]x \u202e")  # ##[error] {OSC}\n'
        f'NOTE = """\n ::error title=Injected::diff\n  ##[error] {CSI}\n"""\n'
    )
    (repo / "readonly").mkdir()
    (repo / "readonly" / HOSTILE_NAME).write_text(LOADER)
    (repo / "readonly" / HOSTILE_NAME).chmod(0o444)
    for name in (b"nonchar\xef\xbf\xbe\xef\xbf\xbf.py", b"undecodable\xff.py"):
        with open(os.path.join(os.fsencode(repo), name), "wb") as handle:
            handle.write(LOADER.encode())

    # Reads that leave the project, FIFOs, devices, a huge file.
    (repo / "cfg.py").symlink_to(outside / "local_settings.py")
    (repo / "bad.py").symlink_to(outside / "broken.py")
    (repo / "train_out.py").symlink_to(outside / "train.py")
    (repo / "zz.py").symlink_to("/dev/zero")
    (repo / "zs.py").symlink_to("/dev/stdin")
    os.mkfifo(repo / "helper.py")
    with open(repo / "big.py", "wb") as handle:
        handle.truncate(1 << 30)
    (repo / "use.py").write_text("from m import make\n\nfor b in make(None):\n    pass\n")
    (repo / "m.py").write_text(LOADER)
    (repo / "relative.py").write_text(
        "from torch.utils.data import DataLoader\nfrom ..outside.local_settings import API_KEY\n\n\n"
        "def main(ds):\n    return DataLoader(ds, multiprocessing_context=API_KEY, num_workers=2)\n"
    )
    (repo / "config.yaml").write_text("loader:\n  workers: 0\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "omega.py").write_text(
        "from omegaconf import OmegaConf\nfrom torch.utils.data import DataLoader\n\n"
        'cfg = OmegaConf.load("../config.yaml")\nloader = DataLoader(ds, num_workers=cfg.loader.workers)\n'
        "for b in loader:\n    pass\n"
    )
    (repo / "omega_far.py").write_text(
        "from omegaconf import OmegaConf\nfrom torch.utils.data import DataLoader\n\n"
        'cfg = OmegaConf.load("../../X.yaml")\nloader = DataLoader(ds, num_workers=cfg.loader.workers)\n'
    )

    # Work without a bound: a 15 MB table, deep nesting, a factory called with 200 values, 500 loaders.
    (repo / "table.py").write_text("TABLE = [" + "1," * 7_500_000 + "]\n" + LOADER)
    (repo / "deep.py").write_text("from torch.utils.data import DataLoader\nx = a" + ".b" * 100_000 + "\nDataLoader(x)\n")
    (repo / "factory.py").write_text(
        "from torch.utils.data import DataLoader\n\n\ndef make(ds, n):\n    return DataLoader(ds, num_workers=n)\n"
    )
    (repo / "calls.py").write_text(
        "from factory import make\n\n" + "".join(f"l{i} = make(None, {i})\nfor b in l{i}:\n    pass\n" for i in range(200))
    )
    (repo / "many.py").write_text(
        "from torch.utils.data import DataLoader\n"
        + "".join(f"dl{i} = DataLoader(ds, batch_size=64)\nfor b in dl{i}: pass\n" for i in range(500))
    )
    (repo / ".gitignore").write_text("*a" * 12 + "*b\n")
    (repo / ("a" * 40 + ".py")).write_text(LOADER)

    # Nested projects whose configuration is hostile in itself.
    (repo / "keyed").mkdir()
    (repo / "keyed" / "pyproject.toml").write_text('[tool.loadlint]\n"x\\n::error title=Injected::y" = 1\n')
    (repo / "keyed" / "k.py").write_text(LOADER)
    (repo / "huge_memory").mkdir()
    (repo / "huge_memory" / "pyproject.toml").write_text("[tool.loadlint.target]\nmemory = 1e308\n")
    (repo / "huge_memory" / "h.py").write_text(LOADER)
    # init: a link out, a dangling link out, a FIFO, each where init is run.
    for folder in ("init_link", "init_dangling", "init_fifo"):
        (repo / folder).mkdir()
    (repo / "init_link" / "pyproject.toml").symlink_to(outside / "victim.toml")
    (repo / "init_dangling" / "pyproject.toml").symlink_to(outside / "created.toml")
    os.mkfifo(repo / "init_fifo" / "pyproject.toml")

    # A committed cache: links to write through, a record nested 100k deep.
    cache = repo / ".loadlint_cache"
    (cache / __version__ / "project" / __version__).mkdir(parents=True)
    (cache / ".gitignore").symlink_to(outside / "created")
    (cache / "CACHEDIR.TAG").symlink_to(outside / "created2")
    (cache / __version__ / "turned-away.record").write_text("[" * 100_000)

    # Traces: two ranks, 80k steps (pass starts, a plot, stack frames linked out), one 1 GB string,
    # 10M kernel events, NaN and Infinity, a device name that is nested mathtext.
    traces = repo / "traces"
    traces.mkdir()
    for rank in range(2):
        (traces / f"rank{rank}.json").write_text(json.dumps(_trace(_steps(6), distributedInfo={"rank": rank})))
    sqrt = "$" + "\\sqrt{" * 300 + "x" + "}" * 300 + "$ " + OSC + "\n::error title=Injected::device"
    steps = _trace(_steps(80_000, iterator="enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", long_every=3,
                          frames=("train_out.py(5): main", "##[error]x.py(2): <module>")), device=sqrt)
    (traces / "steps.json.gz").write_bytes(gzip.compress(json.dumps(steps).encode(), 1))
    events = json.dumps(list(_steps(6)))
    _gzip_stream(traces / "huge.json.gz", b'{"schemaVersion": 1, "traceEvents": ' + events[:-1].encode()
                 + b', {"ph": "X", "name": "', b"a" * (1 << 20), 1024, b'", "ts": 1, "dur": 1}]}')
    kernel = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1000000.0,"dur":1},'
    _gzip_stream(traces / "kernels.json.gz", b'{"schemaVersion": 1, "traceEvents": ' + events[:-1].encode() + b",",
                 kernel * 10_000, 1_000, b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1}]}')
    odd = '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99", "ts": 1e308, "dur": Infinity}'
    (traces / "odd.json").write_text('{"traceEvents": ' + events[:-1] + ", " + odd + "]}")


# -- the runs -----------------------------------------------------------------------


#: Folders whose own configuration is hostile: a configuration error stops
#: a run over them (one line, exit 2), so the other runs leave them out.
NESTED = ("keyed", "huge_memory", "init_fifo")


def runs(repo: Path, driver: Path) -> list[tuple[str, Path, list[str], float, tuple[int, ...]]]:
    """(label, folder, command, bound in seconds, the exit codes it may end with)."""
    me = [sys.executable, str(driver)]
    skip = ["--extend-exclude", ",".join(NESTED)]
    out: list[tuple[str, Path, list[str], float, tuple[int, ...]]] = []
    for fmt in FORMATS:
        out.append((f"check {fmt}", repo, [*me, "check", "-j", "2", *skip, ".", "--output-format", fmt], 120, (1,)))
    out += [
        ("check nested configs", repo, [*me, "check", "-j", "2", "."], 60, (2,)),
        ("fix --diff", repo, [*me, "fix", "-j", "2", *skip, "--diff", "."], 120, (1,)),
        ("fix", repo, [*me, "fix", "-j", "2", *skip, "."], 120, (1,)),
        ("check --add-noqa", repo, [*me, "check", "-j", "2", *skip, "--add-noqa", "."], 120, (0, 1)),
        # flake8 reads, parses and names every file itself: what it cannot (a FIFO, a device, 1 GB, deep
        # nesting, a name that is not UTF-8 or holds a line break) is its limit.
        ("flake8", repo, [str(Path(sys.executable).with_name("flake8")), "-j", "1", "--select", "LL",
                          "--exclude", "big.py,zz.py,zs.py,helper.py,table.py,deep.py,undecodable*,b?::error*,.loadlint_cache", "."], 120, (1,)),
        ("init", repo, [*me, "init", "--target", "cpus=8"], 10, (2,)),
        ("init link", repo / "init_link", [*me, "init"], 10, (2,)),
        ("init dangling", repo / "init_dangling", [*me, "init"], 10, (2,)),
        ("init fifo", repo / "init_fifo", [*me, "init"], 10, (2,)),
        ("trace -j 2 json", repo, [*me, "trace", "-j", "2", "--output-format", "json", "traces/rank0.json", "traces/rank1.json"], 60, (1,)),
        ("trace --source --plot", repo, [*me, "trace", "--source", ".", "--plot", "p.png", "traces/steps.json.gz"], 120, (1,)),
        ("trace json 80k", repo, [*me, "trace", "--output-format", "json", "traces/steps.json.gz"], 120, (1,)),
        ("trace huge string", repo, [*me, "trace", "traces/huge.json.gz"], 60, (2,)),
        ("trace 10M kernels", repo, [*me, "trace", "traces/kernels.json.gz"], 120, (1, 2)),
        ("trace NaN json", repo, [*me, "trace", "--output-format", "json", "traces/odd.json"], 60, (1,)),
    ]
    return out


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def malformed(label: str, out: str) -> str | None:
    """Why a structured output does not parse, None when it does."""
    try:
        if label.endswith(("json", "sarif", "gitlab")) or label == "trace NaN json":
            _strict_json(out)
        elif label.endswith("json-lines"):
            for line in out.splitlines():
                _strict_json(line)
        elif label.endswith("junit"):
            from xml.etree import ElementTree

            ElementTree.fromstring(out)
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None


def problems_of(ran: Ran, expect: tuple[int, ...], outside_changed: bool, markers: list[str]) -> list[str]:
    found = []
    if ran.code == -9:
        found.append(f"killed at its bound of {ran.bound:.0f} s")
    elif ran.code not in expect:
        found.append(f"exit {ran.code}, expected {' or '.join(map(str, expect))}: " + (ran.err.strip().splitlines() or [""])[-1][:200])
    if "Traceback" in ran.err:
        found.append("traceback: " + ran.err.strip().splitlines()[-1][:160])
    if ran.code == 2 and len(ran.err.splitlines()) != 1:
        found.append(f"exit 2 with {len(ran.err.splitlines())} lines on stderr")
    if ran.peak_kb >= MEMORY_BOUND_KB:
        found.append(f"peak memory {ran.peak_kb // 1024} MB")
    if SECRET in ran.text or SECRET.replace("-", "_") in ran.text:
        found.append("a secret from outside in the output")
    lines = ran.text.splitlines()
    if ran.label == "check github":
        # Its own annotations are the one command it prints; what follows their "::" is escaped text.
        lines = [_ANNOTATION.sub("", line, count=1) for line in lines]
    if ran.label == "flake8":
        # flake8 prints the file names itself; the plugin answers for its messages.
        lines = [_FLAKE8_PLACE.sub("", line, count=1) for line in lines]
    hits = [line for line in lines if _COMMAND.search(line)]
    if hits:
        found.append(f"{len(hits)} line(s) a runner acts on, e.g. {hits[0][:120]!r}")
    escapes = [line for line in lines if re.search("[\x1b\x9b\x07]", line)]
    if escapes:
        found.append(f"{len(escapes)} line(s) with a raw terminal escape, e.g. {escapes[0][:120]!r}")
    if ran.code == 1 and (why := malformed(ran.label, ran.out)):
        found.append(f"output does not parse: {why}")
    if outside_changed:
        found.append("a file outside the repository changed")
    if markers:
        found.append(f"planted code ran: {markers}")
    return found


@pytest.mark.slow
def test_one_hostile_repository_through_every_command(tmp_path):
    repo, outside, marker = tmp_path / "repo", tmp_path / "outside", tmp_path / "marker"
    build(repo, outside, marker)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    before = snapshot(outside)
    report: list[str] = []
    failed: dict[str, list[str]] = {}
    for label, cwd, command, bound, expect in runs(repo, driver):
        ran = measure(label, cwd, command, bound)
        changed = snapshot(outside) != before
        if changed:
            before = snapshot(outside)  # blame the next change on its own run
        markers = sorted(p.name for p in tmp_path.glob("marker*")) + (["pwned"] if list(tmp_path.rglob("pwned")) else [])
        for path in tmp_path.glob("marker*"):
            path.unlink()
        found = problems_of(ran, expect, changed, markers)
        if found:
            failed[label] = found
        report.append(f"{label:24} exit {ran.code:3}  {ran.seconds:6.1f} s  {ran.peak_kb // 1024:6} MB  "
                      + ("; ".join(found) if found else "ok"))
    print("\n" + "\n".join(report))
    assert not failed, "\n".join(f"{label}: {'; '.join(found)}" for label, found in failed.items())
