"""How fast loadlint lints a real repository, next to TorchFix and grep.

    python benchmarks/lint_speed.py --tree CHECKOUT [--file REL] [--torchfix PATH | --skip-torchfix]
    python benchmarks/lint_speed.py

With ``--tree``, it measures a checkout you name (the speed issue's
figures come from Lightning-AI/pytorch-lightning), in one run, side by
side: ``loadlint check --no-cache --select LL201 .`` cold and warm (wall and
CPU), cold again with plain libcst (``LOADLINT_PLAIN_LIBCST=1``: none of
``loadlint.cst``'s speed-ups), ``torchfix --select TOR401 .`` (``--torchfix PATH``, default
``torchfix`` on PATH; "not installed" when there is none) and the ratios,
the libcst parse of the files loadlint parses (timed in a subprocess beside
each cold run) and loadlint's CPU as a multiple of it (also, for reference,
of the parse of every file text it parses whole: the project analysis reads
modules that do not build loaders, and notebooks' code), a pre-commit-style run on
one file of the tree with a warm cache (``--file``, default: the first file
with a finding), and the large-file growth curve.

Without ``--tree``:

Run it from the loadlint virtual environment (it needs ``psutil``, which
loadlint depends on, and ``pip``).  Everything it downloads or builds goes to
a work folder outside the repository (``$LOADLINT_BENCH_DIR``, default
``~/.cache/loadlint-bench``) and is reused by later runs:

* the corpus: the ``.py`` files of pinned wheels of lightning, transformers,
  timm and accelerate fetched with ``pip download --no-deps``.
  ``transformers/models/`` (2,600 generated model files, none of which
  mentions ``DataLoader``) is left out of the corpus and used as the padding
  of the scaling table instead;
* TorchFix 0.7.0 in a virtual environment of its own (it pins libcst < 1.6).

It prints, in one run: the corpus, wall time (median of several runs) and
peak memory of loadlint cold and warm, TorchFix and grep, the targets of the
speed issue with the measured ratios, the scaling table (the corpus padded
to 2x and 4x its size with files that never mention DataLoader), the
large-file growth curve (generated modules of 0.1 to 10 MB with one
DataLoader call: wall, CPU and peak memory; ``--growth-only`` runs just
that) and the comparison of TorchFix's TOR401 findings with loadlint's
LL201 findings.

Peak memory is that of the whole process tree (workers included), polled
every 10 ms (every 100 ms after the first 5 s) as the sum of each
process's proportional set size (PSS: pages shared after fork are counted
once, split between the processes sharing them); the sum of resident set
sizes, which counts shared pages once per process, is printed beside it.
CPU seconds (user + system of the whole tree) are printed beside wall
times: on a shared machine they move less with the load than wall time.
Every process it times imports modules compiled beforehand, as an
installed package does, whatever ``PYTHONDONTWRITEBYTECODE`` says (they
are kept in the work folder).

This is not a test: the numbers depend on the machine and on what else it
is doing (the load average is printed with them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import resource

import psutil

PACKAGES = ["lightning==2.6.6", "transformers==5.24.0", "timm==1.0.31", "accelerate==1.15.0"]
TORCHFIX = "torchfix==0.7.0"
#: Inside the transformers wheel: kept out of the corpus, used as padding.
PADDING_PREFIX = "transformers/models/"

TARGETS = {
    "cold_vs_torchfix": 30.0,
    "cold_seconds": 3.0,
    "warm_vs_grep_python": 10.0,
    "warm_seconds": 0.5,
    "double_tree_growth": 0.10,
    "peak_mb": 150.0,
    "startup_seconds": 0.3,
}


# -- preparing -------------------------------------------------------------


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def fetch(work: Path, packages: list[str]) -> list[Path]:
    downloads = work / "wheels"
    downloads.mkdir(parents=True, exist_ok=True)
    wheels = []
    for spec in packages:
        name, _, version = spec.partition("==")
        stem = name.replace("-", "_")
        found = sorted(downloads.glob(f"{stem}-{version or '*'}-*.whl"))
        if not found:
            log(f"pip download {spec}")
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q",
                 "-d", str(downloads), spec],
                check=True,
            )
            found = sorted(downloads.glob(f"{stem}-{version or '*'}-*.whl"))
        wheels.append(found[-1])
    return wheels


def unpack(work: Path, wheels: list[Path]) -> tuple[Path, Path, list[str]]:
    """The corpus folder, the padding folder and the package labels."""
    corpus, padding = work / "corpus", work / "padding"
    stamp = work / "corpus.txt"
    labels = [w.name.split("-")[0] + " " + w.name.split("-")[1] for w in wheels]
    if stamp.exists() and stamp.read_text() == "\n".join(labels) and corpus.is_dir():
        return corpus, padding, labels
    for folder in (corpus, padding):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    for wheel in wheels:
        label = wheel.name.split("-")[0]
        for name, data in wheel_sources(wheel):
            target = (padding if name.startswith(PADDING_PREFIX) else corpus / label) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    stamp.write_text("\n".join(labels))
    return corpus, padding, labels


def wheel_sources(wheel: Path):
    """(name, bytes) of each ``.py`` file of ``wheel`` whose name stays
    inside the folder it is unpacked into."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            if name.endswith(".py") and ".." not in Path(name).parts and not name.startswith("/"):
                yield name, archive.read(info)


def torchfix_venv(work: Path) -> Path:
    venv = work / "torchfix-venv"
    exe = venv / "bin" / "torchfix"
    if not exe.exists():
        log(f"creating {venv} with {TORCHFIX}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", TORCHFIX], check=True)
    return exe


def as_installed(folder: Path) -> None:
    """Run every measured process with its modules compiled, as an installed
    package has them: under ``PYTHONDONTWRITEBYTECODE`` a checkout has no
    ``__pycache__``, and each run would time Python compiling loadlint's own
    source (about 0.15 s of CPU) instead of loadlint.  The compiled modules
    go to ``folder`` (``PYTHONPYCACHEPREFIX``), not beside the sources; the
    first run, not timed, writes them."""
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def loadlint_command() -> list[str]:
    script = Path(sys.executable).with_name("loadlint")
    return [str(script)] if script.exists() else [sys.executable, "-m", "loadlint"]


def py_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file())


def link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def scaled_tree(work: Path, corpus: Path, padding: Path, scale: int) -> Path:
    """The corpus plus ``scale - 1`` times its size in files that never
    mention DataLoader (hard links: same bytes to read, no disk to fill)."""
    if scale == 1:
        return corpus
    tree = work / f"scaled-{scale}x"
    stamp = tree / ".complete"
    label = (corpus.parent / "corpus.txt").read_text()
    if stamp.exists() and stamp.read_text() == label:
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    files = py_files(corpus)
    for f in files:
        link(f, tree / "corpus" / f.relative_to(corpus))
    wanted = (scale - 1) * sum(f.stat().st_size for f in files)
    pads = [p for p in py_files(padding) if b"DataLoader" not in p.read_bytes()]
    added, round_ = 0, 0
    while added < wanted and pads:
        for p in pads:
            if added >= wanted:
                break
            link(p, tree / f"padding-{round_}" / p.relative_to(padding))
            added += p.stat().st_size
        round_ += 1
    stamp.write_text(label)
    return tree


# -- measuring -------------------------------------------------------------


@dataclass
class Measure:
    wall: float
    rc: int
    #: user + system seconds of the whole tree (workers included).
    cpu: float
    peak_pss_mb: float | None = None
    peak_rss_mb: float | None = None
    stdout: str = ""
    #: Stopped at the time limit: ``wall`` is a lower bound.
    timed_out: bool = False


def run(cmd: list[str], cwd: Path, *, poll: bool = False, capture: bool = False, limit: float | None = None,
        env: dict[str, str] | None = None) -> Measure:
    """Wall time of one run; with ``poll``, the peak memory of its tree too;
    ``env``: variables set for it on top of this process's."""
    out = tempfile.TemporaryFile() if capture else subprocess.DEVNULL
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = psutil.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.DEVNULL,
                        env=None if env is None else {**os.environ, **env})
    peak_pss = peak_rss = 0
    timed_out = False
    if poll:
        while proc.poll() is None:
            if limit is not None and time.perf_counter() - start > limit:
                timed_out = True
                for p in [*proc.children(recursive=True), proc]:
                    try:
                        p.kill()
                    except psutil.Error:
                        pass
                break
            pss = rss = 0
            try:
                procs = [proc, *proc.children(recursive=True)]
            except psutil.Error:
                procs = [proc]
            for p in procs:
                try:
                    info = p.memory_full_info()
                except psutil.Error:
                    continue
                pss += getattr(info, "pss", info.rss)
                rss += info.rss
            peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
            # Reading smaps costs CPU the measured run would otherwise get:
            # fine-grained while a short run may peak, coarser for long ones.
            time.sleep(0.01 if time.perf_counter() - start < 5 else 0.1)
    rc = proc.wait()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = ""
    if capture:
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        out.close()
    mb = 1024 * 1024
    return Measure(wall, rc, cpu, peak_pss / mb if poll else None, peak_rss / mb if poll else None, text, timed_out)


def median_run(cmd: list[str], cwd: Path, repeat: int, before=None) -> tuple[float, float]:
    """Median wall and CPU seconds of ``repeat`` runs (``before`` each)."""
    walls, cpus = [], []
    for _ in range(repeat):
        if before is not None:
            before()
        m = run(cmd, cwd)
        walls.append(m.wall)
        cpus.append(m.cpu)
    return statistics.median(walls), statistics.median(cpus)


def median_wall(cmd: list[str], cwd: Path, repeat: int) -> float:
    return median_run(cmd, cwd, repeat)[0]


def loadlint_runs(tree: Path, cache: Path, repeat: int) -> dict:
    base = [*loadlint_command(), "check", "--isolated", "--output-format", "json", "--cache-dir", str(cache), "."]

    def wipe() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    def refresh() -> None:
        # A warm run right after one that filled the cache: in a checkout
        # being edited, a change to loadlint's own code between the two
        # would (rightly) invalidate the cache and time a cold run instead.
        run(base, tree)

    cold, cold_cpu = median_run(base, tree, repeat, before=wipe)
    wipe()
    memory = run(base, tree, poll=True)
    warm_memory = run(base, tree, poll=True)
    warm, warm_cpu = median_run(base, tree, max(repeat, 5), before=refresh)
    return {"cold": cold, "cold_cpu": cold_cpu, "warm": warm, "warm_cpu": warm_cpu,
            "peak_pss": memory.peak_pss_mb, "peak_rss": memory.peak_rss_mb, "warm_peak_pss": warm_memory.peak_pss_mb}


# -- large files -----------------------------------------------------------

#: Sizes of the generated modules of the growth curve, in MB.
GROWTH_SIZES = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0)


def large_module(size: int) -> str:
    """A generated module of about ``size`` bytes: simple assignments, with
    one DataLoader call (and the loop over it) in the middle."""
    head = "import torch\nfrom torch.utils.data import DataLoader\nfrom dataset import Images\n\n"
    # A dataset LL201 cannot see is in memory (``range(10)`` is: no finding).
    middle = 'loader = DataLoader(Images("data"), batch_size=4)\nfor batch in loader:\n    print(batch)\n'
    lines: list[str] = []
    total = len(head) + len(middle)
    while total < size:
        line = f"value_{len(lines):07d} = {len(lines)} * 2 + {len(lines) % 7}\n"
        lines.append(line)
        total += len(line)
    half = len(lines) // 2
    return head + "".join(lines[:half]) + middle + "".join(lines[half:])


def growth_curve(scratch: Path, limit: float) -> list[tuple[float, int, Measure]]:
    """(MB, lines, measure) of ``loadlint check`` on each generated module."""
    rows = []
    for mb in GROWTH_SIZES:
        path = scratch / f"large_{mb:g}mb.py"
        text = large_module(int(mb * 1e6))
        path.write_text(text)
        log(f"large file {mb:g} MB")
        cmd = [*loadlint_command(), "check", "--isolated", "--no-cache", "--output-format", "concise", path.name]
        rows.append((mb, text.count("\n"), run(cmd, scratch, poll=True, capture=True, limit=limit)))
        path.unlink()
    return rows


def print_growth(rows: list[tuple[float, int, Measure]], limit: float) -> None:
    print("Large files: a generated module of simple assignments with one DataLoader call, "
          "`loadlint check --no-cache` (goals: 1 MB < 5 s, 10 MB < 30 s or reported too large)")
    print()
    print("| size | lines | wall | CPU | peak RSS | peak PSS | result |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for mb, lines, m in rows:
        codes = sorted(set(re.findall(r": (LL\d{3}) ", m.stdout)))
        result = f"stopped at {limit:.0f} s" if m.timed_out else (", ".join(codes) or "no finding")
        bound = "> " if m.timed_out else ""
        print(f"| {mb:g} MB | {lines:,} | {bound}{fmt_s(m.wall)} | {bound}{fmt_s(m.cpu)} | {fmt_mb(m.peak_rss_mb)} | "
              f"{fmt_mb(m.peak_pss_mb)} | {result} |")


# -- findings --------------------------------------------------------------

TOR401 = re.compile(r"^(?P<path>.+?):(?P<row>\d+):(?P<col>\d+): TOR401 ")


def compare_findings(corpus: Path, torchfix_out: str, loadlint_json: str) -> tuple[list, list, list]:
    """(matched, silences with reasons, LL201 findings TorchFix lacks)."""
    tor = set()
    for line in torchfix_out.splitlines():
        m = TOR401.match(line)
        if m:
            tor.add((os.path.normpath(m["path"]), int(m["row"])))
    ll = {
        (os.path.normpath(f["filename"]), f["location"]["row"])
        for f in json.loads(loadlint_json or "[]")
        if f["code"] == "LL201"
    }
    matched = sorted(tor & ll)
    silences = [(path, row, why_silent(corpus / path, row)) for path, row in sorted(tor - ll)]
    extra = sorted(ll - tor)
    return matched, silences, extra


def why_silent(path: Path, row: int) -> str:
    """Which of LL201's documented silences keeps it quiet at this call."""
    import libcst as cst

    from loadlint.facts.collect import collect
    from loadlint.facts.datasets import is_tensor_dataset
    from loadlint.engine.analysis import suppressed_codes
    from loadlint.engine.positions import Positions
    from loadlint.facts.resolve import MISSING, UNKNOWN

    text = path.read_text(encoding="utf-8")
    codes = suppressed_codes(text, row)
    if codes and ("*" in codes or "LL201" in codes):
        return "suppressed by a noqa comment"
    module = cst.parse_module(text)
    info = collect(module)
    positions = Positions(module, text)
    for call in info.calls:
        if positions.range(call.node)[0].row != row:
            continue
        if call.opaque_kwargs:
            return "`**kwargs` may set num_workers"
        if call.opaque_positional:
            return "`*args` may set num_workers"
        value = call.value("num_workers")
        if value is UNKNOWN:
            return "num_workers not resolvable statically"
        if is_tensor_dataset(info.names, call):
            return "TensorDataset (in memory: workers only add overhead)"
        if value is not MISSING and value != 0:
            return f"num_workers resolves to {value!r}"
        return "UNEXPLAINED: LL201 should have reported this call"
    return "not resolved to torch.utils.data.DataLoader by loadlint's import table"


# -- a named checkout (--tree) ------------------------------------------------

TREE_GOALS = {"vs_torchfix": 40.0, "cpu_vs_parse": 1.5, "warm_seconds": 0.5, "one_file_seconds": 0.5}

#: Run in a subprocess: the libcst parse of the files ``loadlint check``
#: parses in ``argv[1]`` (discovered and pre-filtered as the runner does),
#: or of the texts in ``argv[1]`` when it names ``PARSED_SCRIPT``'s JSON file.
PARSE_SCRIPT = """
import json, sys, time
from pathlib import Path
from loadlint.workspace.config import Overrides, ConfigResolver
from loadlint.workspace.discover import discover
from loadlint.sources.prefilter import passes_prefilter
from loadlint.sources.source import DecodeError, decode

texts, notebooks = [], 0
if sys.argv[1].endswith(".json"):
    texts = json.load(open(sys.argv[1]))["texts"]
else:
    for candidate in discover([Path(sys.argv[1])], ConfigResolver(Overrides()).for_path):
        if str(candidate.path).endswith(".ipynb"):
            notebooks += 1
            continue
        data = candidate.path.read_bytes()
        if passes_prefilter(data):
            try:
                texts.append(decode(data).text)
            except DecodeError:
                pass
import libcst
start = time.process_time()
for text in texts:
    try:
        libcst.parse_module(text)
    except Exception:
        pass
print(json.dumps({"files": len(texts), "chars": sum(map(len, texts)), "notebooks": notebooks,
                  "cpu": time.process_time() - start}))
"""


#: Run in a subprocess: every file text ``loadlint check`` (``argv[2:]``,
#: in one process) parses whole, written as JSON to ``argv[1]``: the files
#: it checks, the modules its project analysis reads for their functions
#: and constants, and notebooks' code (the texts of fix trials are not files).
PARSED_SCRIPT = """
import json, sys
from pathlib import Path
import libcst
from loadlint.engine.notebook import joined_text
from loadlint.sources.source import DecodeError, decode

seen = {}
original = libcst.parse_module
def recording(source, *args, **kwargs):
    if isinstance(source, str):
        seen.setdefault(source, None)
    return original(source, *args, **kwargs)
libcst.parse_module = recording
from loadlint.frontends.cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
files, notebooks = {}, {}
for path in Path(".").rglob("*"):
    if path.suffix not in (".py", ".ipynb") or not path.is_file():
        continue
    data = path.read_bytes()
    try:
        text = joined_text(data) if path.suffix == ".ipynb" else decode(data).text
    except DecodeError:
        continue
    if text is not None:
        (notebooks if path.suffix == ".ipynb" else files)[text] = str(path)
whole = [t for t in seen if t in files or t in notebooks]
json.dump({"texts": whole, "notebooks": sum(t in notebooks for t in whole)}, open(sys.argv[1], "w"))
"""

def parsed_texts(tree: Path, select: list[str], into: Path) -> dict:
    """Record every file text ``loadlint check`` parses in ``tree`` (into ``into``)."""
    subprocess.run([sys.executable, "-c", PARSED_SCRIPT, str(into), "check", "--no-cache", "--exit-zero", "-j", "1",
                    *select, "."], cwd=tree, capture_output=True, text=True, check=True)
    found = json.loads(into.read_text())
    return {"files": len(found["texts"]), "notebooks": found["notebooks"]}


def find_torchfix(option: str) -> str | None:
    """The TorchFix executable the option names (a path or a command on PATH)."""
    if os.sep in option:
        return option if os.access(option, os.X_OK) else None
    return shutil.which(option)


def parse_cost(tree: Path, texts: Path | None = None) -> dict:
    """``PARSE_SCRIPT``'s figures for ``tree``, or for the texts recorded in ``texts``."""
    out = subprocess.run([sys.executable, "-c", PARSE_SCRIPT, str(texts) if texts else "."], cwd=tree,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def tree_benchmark(args: argparse.Namespace) -> int:
    tree: Path = args.tree.resolve()
    select = ["--select", args.select] if args.select else []
    cold_cmd = [*loadlint_command(), "check", "--no-cache", *select, "."]
    scratch = Path(tempfile.mkdtemp(prefix="loadlint-bench-"))
    cache = ["--cache-dir", str(scratch / "cache")]
    warm_cmd = [*loadlint_command(), "check", *cache, *select, "."]
    torchfix = None if args.skip_torchfix else find_torchfix(args.torchfix)
    loads = [("start", os.getloadavg()[0])]
    try:
        files = py_files(tree)
        # Each cold run beside a parse of the same files: the machine's pace
        # drifts by a fifth over minutes, and the multiple compares the two.
        log(f"{tree.name}: loadlint cold, each beside the parse cost of the files it parses")
        recorded = parsed_texts(tree, select, scratch / "parsed.json")
        run(cold_cmd, tree)  # compiles what the pool imports (see ``as_installed``)
        parses, everything, colds, plains = [], [], [], []
        for i in range(args.repeat):
            parses.append(parse_cost(tree))
            everything.append(parse_cost(tree, scratch / "parsed.json"))
            colds.append(run(cold_cmd, tree, capture=i == 0))
            plains.append(run(cold_cmd, tree, env={"LOADLINT_PLAIN_LIBCST": "1"}))
        parse = dict(parses[0], cpu=statistics.median(p["cpu"] for p in parses))
        whole = dict(everything[0], cpu=statistics.median(p["cpu"] for p in everything), **recorded)
        cold_out = colds[0].stdout
        log("loadlint warm")
        run(warm_cmd, tree)  # fills the cache
        warms = [run(warm_cmd, tree) for _ in range(max(args.repeat, 5))]
        one = args.file or first_flagged(cold_out)
        ones = [run([*loadlint_command(), "check", "--force-exclude", *cache, *select, one], tree)
                for _ in range(5)] if one else []
        loads.append(("after loadlint", os.getloadavg()[0]))
        tf = None
        if torchfix is not None:
            log("TorchFix (slow)")
            tf = run([torchfix, "--select", "TOR401", "."], tree, poll=True, limit=args.torchfix_limit)
            loads.append(("after TorchFix", os.getloadavg()[0]))
        growth = [] if args.skip_growth else growth_curve(scratch, args.growth_limit)
        loads.append(("end", os.getloadavg()[0]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def med(measures: list[Measure], attr: str) -> float:
        return statistics.median(getattr(m, attr) for m in measures)

    cold, cold_cpu = med(colds, "wall"), med(colds, "cpu")
    warm, warm_cpu = med(warms, "wall"), med(warms, "cpu")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"Tree: {tree.name}, {len(files)} .py files; loadlint parses {parse['files']} "
          f"({parse['chars'] / 1e6:.2f} M characters) and {parse['notebooks']} notebooks")
    print(f"Machine: {cpus} CPUs; load average {', '.join(f'{x:.1f} {when}' for when, x in loads)}; "
          f"medians of {args.repeat} cold runs and parses (alternating) / {len(warms)} warm runs; "
          "modules compiled beforehand, as installed")
    print(f"Commands: `{' '.join(['loadlint', *cold_cmd[len(loadlint_command()):]])}` (cold), with a cache (warm), "
          f"`torchfix --select TOR401 .`")
    print()
    print("| run | wall | CPU |")
    print("|---|---:|---:|")
    print(f"| loadlint cold (`--no-cache`) | {fmt_s(cold)} | {fmt_s(cold_cpu)} |")
    plain, plain_cpu = med(plains, "wall"), med(plains, "cpu")
    print(f"| loadlint cold, plain libcst (`LOADLINT_PLAIN_LIBCST=1`) | {fmt_s(plain)} | {fmt_s(plain_cpu)} |")
    print(f"| loadlint warm (cache hit for every file) | {fmt_s(warm)} | {fmt_s(warm_cpu)} |")
    if ones:
        print(f"| loadlint on `{one}`, warm cache (pre-commit) | {fmt_s(med(ones, 'wall'))} | {fmt_s(med(ones, 'cpu'))} |")
    if tf is not None:
        bound = "> " if tf.timed_out else ""
        print(f"| torchfix --select TOR401 | {bound}{fmt_s(tf.wall)} | {bound}{fmt_s(tf.cpu)} |")
    else:
        print(f"| torchfix --select TOR401 | {'skipped' if args.skip_torchfix else 'not installed'} | — |")
    print(f"| libcst.parse_module of the {parse['files']} files loadlint parses | — | {fmt_s(parse['cpu'])} |")
    others = whole["files"] - parse["files"] - whole["notebooks"]
    print(f"| libcst.parse_module of every file text loadlint parses whole: those {parse['files']}, "
          f"{others} modules its project analysis reads and {whole['notebooks']} notebooks' code | — | "
          f"{fmt_s(whole['cpu'])} |")
    print()
    print("| target | goal | measured | |")
    print("|---|---|---:|---|")
    if tf is not None:
        ratio, cpu_ratio = tf.wall / cold, tf.cpu / cold_cpu
        more = "> " if tf.timed_out else ""
        print(f"| TorchFix / loadlint cold, wall | ≥ {TREE_GOALS['vs_torchfix']:.0f}× | {more}{ratio:.1f}× | "
              f"{verdict(ratio >= TREE_GOALS['vs_torchfix'])} |")
        print(f"| TorchFix / loadlint cold, CPU | ≥ {TREE_GOALS['vs_torchfix']:.0f}× | {more}{cpu_ratio:.1f}× | "
              f"{verdict(cpu_ratio >= TREE_GOALS['vs_torchfix'])} |")
    multiple = cold_cpu / parse["cpu"] if parse["cpu"] else float("inf")
    print(f"| loadlint cold CPU / libcst parse CPU | ≤ {TREE_GOALS['cpu_vs_parse']}× | {multiple:.2f}× | "
          f"{verdict(multiple <= TREE_GOALS['cpu_vs_parse'])} |")
    plain_multiple = plain_cpu / parse["cpu"] if parse["cpu"] else float("inf")
    print(f"| plain libcst: cold CPU / libcst parse CPU (plain / fast CPU) | — | {plain_multiple:.2f}× "
          f"({plain_cpu / cold_cpu:.2f}×) | what the speed-ups save |")
    pairs = sorted(c.cpu / p["cpu"] for c, p in zip(colds, parses) if p["cpu"])
    if len(pairs) > 1:
        # The machine's pace drifts between runs: how far one pair's multiple strays from the medians'.
        print(f"| (each cold run over the parse timed beside it, lowest to highest) | — | "
              f"{pairs[0]:.2f}× to {pairs[-1]:.2f}× | spread |")
    broad = cold_cpu / whole["cpu"] if whole["cpu"] else float("inf")
    print(f"| (the same, over every file text it parses whole) | — | {broad:.2f}× | for reference |")
    print(f"| warm run | < {TREE_GOALS['warm_seconds']} s | {fmt_s(warm)} | {verdict(warm < TREE_GOALS['warm_seconds'])} |")
    if ones:
        one_wall = med(ones, "wall")
        print(f"| one file, warm cache | < {TREE_GOALS['one_file_seconds']} s | {fmt_s(one_wall)} | "
              f"{verdict(one_wall < TREE_GOALS['one_file_seconds'])} |")
    if growth:
        print()
        print_growth(growth, args.growth_limit)
    return 0


def first_flagged(report: str) -> str | None:
    """The file of the first finding in a ``full`` report."""
    match = re.search(r"^(\S+?\.py):\d+:\d+: ", report, re.MULTILINE)
    return match.group(1) if match else None


# -- report ----------------------------------------------------------------


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds:.3f} s" if seconds < 10 else f"{seconds:.1f} s"


def fmt_mb(mb: float | None) -> str:
    return "—" if mb is None else f"{mb:.0f} MB"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("LOADLINT_BENCH_DIR", "~/.cache/loadlint-bench")).expanduser())
    parser.add_argument("--packages", nargs="+", default=PACKAGES)
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (median)")
    parser.add_argument("--skip-torchfix", action="store_true", help="leave TorchFix out (quick iterations)")
    parser.add_argument("--torchfix-limit", type=float, default=None, metavar="SECONDS",
                        help="stop TorchFix after this long; its time is then a lower bound")
    parser.add_argument("--growth-only", action="store_true",
                        help="only the large-file growth curve (no corpus, no TorchFix)")
    parser.add_argument("--growth-limit", type=float, default=300.0, metavar="SECONDS",
                        help="stop a large-file run after this long; its time is then a lower bound")
    parser.add_argument("--tree", type=Path, default=None, metavar="CHECKOUT",
                        help="measure this checkout instead of the fetched corpus (see the module's help)")
    parser.add_argument("--select", default="LL201", help="with --tree: the codes loadlint checks (default LL201, "
                        "as TorchFix's TOR401; empty for every rule)")
    parser.add_argument("--file", default=None, metavar="REL",
                        help="with --tree: the file of the pre-commit-style run (default: the first with a finding)")
    parser.add_argument("--torchfix", default="torchfix", metavar="PATH",
                        help="the TorchFix executable (default: torchfix on PATH)")
    parser.add_argument("--skip-growth", action="store_true", help="with --tree: leave the growth curve out")
    args = parser.parse_args(argv)
    as_installed(args.work / "pycache")

    if args.tree is not None:
        return tree_benchmark(args)
    if args.growth_only:
        scratch = Path(tempfile.mkdtemp(prefix="loadlint-bench-"))
        try:
            load = os.getloadavg()[0]
            rows = growth_curve(scratch, args.growth_limit)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        print(f"Load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
        print_growth(rows, args.growth_limit)
        return 0

    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    corpus, padding, labels = unpack(work, fetch(work, args.packages))
    torchfix = None if args.skip_torchfix else torchfix_venv(work)

    files = py_files(corpus)
    contents = [f.read_bytes() for f in files]
    size = sum(len(c) for c in contents)
    dl_files = sum(b"DataLoader" in c for c in contents)
    torch_files = sum(b"torch" in c for c in contents)
    del contents

    scratch = Path(tempfile.mkdtemp(prefix="loadlint-bench-"))
    try:
        run([*loadlint_command(), "check", "--isolated", "--no-cache", "."], corpus)  # compiles (``as_installed``)
        log("timing python start-up and grep")
        python_start = median_wall([sys.executable, "-c", "pass"], corpus, 5)
        grep_cmd = ["grep", "-rl", "DataLoader", "."]
        grep = median_wall(grep_cmd, corpus, 5)
        grep_mem = run(grep_cmd, corpus, poll=True)

        log("timing loadlint start-up")
        clean_file = scratch / "clean.py"
        clean_file.write_text("import os\n\nprint(os.getcwd())\n")
        version = median_wall([*loadlint_command(), "--version"], scratch, 5)
        one_file = median_wall([*loadlint_command(), "check", "--isolated", "--no-cache", "clean.py"], scratch, 5)

        log("timing loadlint cold and warm")
        ll = loadlint_runs(corpus, scratch / "cache", args.repeat)
        ll_out = run([*loadlint_command(), "check", "--isolated", "--no-cache", "--output-format", "json", "."],
                     corpus, capture=True)

        tf = None
        if torchfix is not None:
            log("running TorchFix (slow)")
            tf = run([str(torchfix), "--select", "TOR401", "."], corpus, poll=True, capture=True,
                     limit=args.torchfix_limit)

        log("scaling")
        scaling = []
        for scale in (1, 2, 4):
            tree = scaled_tree(work, corpus, padding, scale)
            tree_files = py_files(tree)
            tree_bytes = sum(f.stat().st_size for f in tree_files)
            runs = ll if scale == 1 else loadlint_runs(tree, scratch / f"cache-{scale}", args.repeat)
            scaling.append((scale, len(tree_files), tree_bytes, runs["cold"], runs["warm"],
                            median_wall(grep_cmd, tree, 3), runs["cold_cpu"]))
        growth = growth_curve(scratch, args.growth_limit)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = os.getloadavg()

    # -- print -------------------------------------------------------------
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"Corpus: {', '.join(labels)} (without {PADDING_PREFIX})")
    print(f"{len(files)} files, {size / 1e6:.1f} MB; {dl_files} mention DataLoader, {torch_files} mention torch")
    print(f"Machine: {cpus} CPUs; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; "
          f"medians of {args.repeat} cold / 5 warm runs")
    print()
    print("| tool | files parsed | cold (CPU) | warm, cached (CPU) | peak memory (PSS, tree) | peak RSS sum |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| loadlint check | {dl_files} | {fmt_s(ll['cold'])} ({fmt_s(ll['cold_cpu'])}) | "
          f"{fmt_s(ll['warm'])} ({fmt_s(ll['warm_cpu'])}) | "
          f"{fmt_mb(ll['peak_pss'])} (warm {fmt_mb(ll['warm_peak_pss'])}) | {fmt_mb(ll['peak_rss'])} |")
    if tf is not None:
        bound = "> " if tf.timed_out else ""
        print(f"| torchfix --select TOR401 | {torch_files} | {bound}{fmt_s(tf.wall)} ({bound}{fmt_s(tf.cpu)}) | no cache | "
              f"{fmt_mb(tf.peak_pss_mb)} | {fmt_mb(tf.peak_rss_mb)} |")
    print(f"| grep -rl DataLoader | 0 | {fmt_s(grep)} | — | {fmt_mb(grep_mem.peak_pss_mb)} | {fmt_mb(grep_mem.peak_rss_mb)} |")
    print(f"| python -c pass | 0 | {fmt_s(python_start)} | — | — | — |")
    print(f"| loadlint --version | 0 | {fmt_s(version)} | — | — | — |")
    print(f"| loadlint check clean.py | 0 | {fmt_s(one_file)} | — | — | — |")
    print()
    print("| target | goal | measured | |")
    print("|---|---|---:|---|")
    if tf is not None:
        ratio = tf.wall / ll["cold"]
        print(f"| cold run vs TorchFix | ≥ {TARGETS['cold_vs_torchfix']:.0f}× faster | {'> ' if tf.timed_out else ''}{ratio:.0f}× "
              f"(CPU {tf.cpu / ll['cold_cpu']:.0f}×) | "
              f"{verdict(ratio >= TARGETS['cold_vs_torchfix'])} |")
    print(f"| cold run | ≤ {TARGETS['cold_seconds']:.0f} s | {fmt_s(ll['cold'])} | {verdict(ll['cold'] <= TARGETS['cold_seconds'])} |")
    floor = grep + python_start
    ratio = ll["warm"] / floor
    print(f"| warm run vs grep + python start-up ({fmt_s(floor)}) | ≤ {TARGETS['warm_vs_grep_python']:.0f}× | {ratio:.1f}× | "
          f"{verdict(ratio <= TARGETS['warm_vs_grep_python'])} |")
    print(f"| warm run | < {TARGETS['warm_seconds']} s | {fmt_s(ll['warm'])} | {verdict(ll['warm'] < TARGETS['warm_seconds'])} |")
    growth = scaling[1][3] / scaling[0][3] - 1
    cpu_growth = scaling[1][6] / scaling[0][6] - 1
    print(f"| cold run, tree doubled with non-DataLoader files | < +{TARGETS['double_tree_growth']:.0%} | "
          f"{growth:+.0%} (CPU {cpu_growth:+.0%}) | "
          f"{verdict(growth < TARGETS['double_tree_growth'])} |")
    print(f"| peak memory, whole run | < {TARGETS['peak_mb']:.0f} MB | {fmt_mb(ll['peak_pss'])} | "
          f"{verdict(ll['peak_pss'] < TARGETS['peak_mb'])} |")
    print(f"| `loadlint --version` | < {TARGETS['startup_seconds']} s | {fmt_s(version)} | "
          f"{verdict(version < TARGETS['startup_seconds'])} |")
    print(f"| lint one clean file | < {TARGETS['startup_seconds']} s | {fmt_s(one_file)} | "
          f"{verdict(one_file < TARGETS['startup_seconds'])} |")
    print()
    print("| scale | files | MB | loadlint cold (CPU) | vs 1× | loadlint warm | grep |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for scale, n, nbytes, cold, warm, grep_s, cold_cpu in scaling:
        print(f"| {scale}× | {n} | {nbytes / 1e6:.1f} | {fmt_s(cold)} ({fmt_s(cold_cpu)}) | "
              f"{cold / scaling[0][3] - 1:+.0%} | {fmt_s(warm)} | {fmt_s(grep_s)} |")

    print()
    print_growth(growth, args.growth_limit)

    if tf is not None and tf.timed_out:
        print()
        print("Findings: not compared (TorchFix was stopped at the time limit).")
    elif tf is not None:
        matched, silences, extra = compare_findings(corpus, tf.stdout, ll_out.stdout)
        print()
        total = len(matched) + len(silences)
        print(f"Findings: TorchFix TOR401 {total}; also LL201 in loadlint {len(matched)}; "
              f"deliberate silences {len(silences)}; LL201 findings TorchFix does not make {len(extra)}")
        reasons: dict[str, int] = {}
        for _, _, why in silences:
            reasons[why] = reasons.get(why, 0) + 1
        for why, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {count:3d}  {why}")
        for path, row, why in silences:
            print(f"  - {path}:{row}: {why}")
        unexplained = [s for s in silences if s[2].startswith(("UNEXPLAINED", "not resolved"))]
        print(f"Unexplained TOR401 findings: {len(unexplained)}")
        if extra:
            print("LL201 findings without TOR401 (loadlint resolves constants, aliases and dict arguments):")
            for path, row in extra:
                print(f"  - {path}:{row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
