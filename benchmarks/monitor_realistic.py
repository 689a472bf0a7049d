"""``loadlint monitor --tune`` inside training loops over
``verify_realistic.py``'s loaders, against an oracle.

Each loader (a JPEG folder, items waiting 3 ms on storage, memory-mapped
shards, tokenized text, a worker-split ``IterableDataset``; data generated
on the fly) is iterated by a training loop with a simulated step (``--step-ms``,
the host waiting on the device) after ``torch.manual_seed(0)``, for whole
epochs until the plain run passes ``--run-seconds``; the loop hashes every
batch.  For each loader:

- the plain ``python`` run: its wall time and its stream of batch hashes;
- the ``--tune`` run: the configuration it ended with, the verdict, the
  share of the run spent before the decision, its wall time, and whether
  its batch hashes (so the sample indices, their order and the data) are
  those of the plain run;
- the oracle: every configuration of a sweep (the call as written, a
  ``num_workers`` ladder, a deeper prefetch on the best) run in the same
  loop over whole epochs (at least ``--oracle-seconds``), in batches per
  second; the configuration the tuner ended with is run in the same rounds,
  and its rate is given as a fraction of the oracle's best.  Each rate is
  the median of ``--oracle-rounds`` rounds that run every configuration once,
  in alternating order: on a shared machine the load moves between runs.

``--done-when`` runs the issue's acceptance loop instead: 4 epochs over the
I/O loader (4,096 items waiting 3 ms, batch 16, ``num_workers=0``,
``shuffle=True``), plain and under ``--tune``, side by side.

    python benchmarks/monitor_realistic.py [--only io-wait,jpeg] [--run-seconds 30] [--step-ms 5]
    python benchmarks/monitor_realistic.py --done-when

Not a test: the numbers belong to the machine it runs on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import verify_realistic as realistic  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

#: The loop every loader runs: the loader's call sits on its own line so
#: that the report names it.
LOOP = '''
import hashlib


def digest(batch):
    h = hashlib.blake2b(digest_size=8)
    for leaf in (batch if isinstance(batch, (list, tuple)) else [batch]):
        h.update(leaf.numpy().tobytes() if hasattr(leaf, "numpy") else repr(leaf).encode())
    return h.hexdigest()


if __name__ == "__main__":
    epochs, step_s, out = int(sys.argv[1]), float(sys.argv[2]) / 1e3, sys.argv[3]
    config = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    torch.manual_seed(0)
    loader = DataLoader(DATASET, **KWARGS, **config)
    hashes, t0, n, passes = [], time.perf_counter(), 0, 0
    for epoch in range(epochs):
        for batch in loader:
            time.sleep(step_s)  # the step: the host waits on the device
            if out != "-":
                hashes.append(digest(batch))
            n += 1
        passes += 1
        if seconds and time.perf_counter() - t0 >= seconds and passes >= 1:
            break
    wall = time.perf_counter() - t0
    if out != "-":
        Path(out).write_text("\\n".join(hashes))
    print("RESULT " + json.dumps({"batches": n, "passes": passes, "wall": wall, "rate": n / wall}), flush=True)
'''


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _result(proc: subprocess.CompletedProcess[str], what: str) -> dict[str, Any]:
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{what} failed: {proc.stderr.strip()[-600:]}")
    return dict(json.loads(line[len("RESULT "):]))


def plain(script: Path, epochs: int, step_ms: float, out: str, seconds: float = 0.0) -> tuple[dict[str, Any], float]:
    """The plain run: ``epochs`` epochs, or as many as pass ``seconds``."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, script.name, str(epochs), str(step_ms), out, "{}", str(seconds)],
                          cwd=script.parent, env=_env(), capture_output=True, text=True)
    return _result(proc, f"plain {script.name}"), time.monotonic() - t0


def tuned(script: Path, epochs: int, step_ms: float, out: str) -> tuple[dict[str, Any], dict[str, Any], float]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "loadlint", "monitor", "--tune", "--no-static", "-o", "report.json",
                           script.name, "--", str(epochs), str(step_ms), out], cwd=script.parent, env=_env(),
                          capture_output=True, text=True)
    wall = time.monotonic() - t0
    report = json.loads((script.parent / "report.json").read_text())
    return _result(proc, f"tuned {script.name}"), report, wall


def oracle_rate(script: Path, config: dict[str, Any], step_ms: float, seconds: float) -> tuple[float, list[str]]:
    """Batches per second of the loop over whole epochs (at least
    ``seconds``), and the batch hashes it saw."""
    with tempfile.NamedTemporaryFile("r", dir=script.parent, suffix=".txt") as out:
        proc = subprocess.run([sys.executable, script.name, "50", str(step_ms), out.name, json.dumps(config), str(seconds)],
                              cwd=script.parent, env=_env(), capture_output=True, text=True)
        return float(_result(proc, f"oracle {script.name} {config}")["rate"]), out.read().splitlines()


def oracle(script: Path, configs: list[dict[str, Any]], opts: argparse.Namespace,
           stream: list[str]) -> dict[str, float]:
    """Every configuration's batches/s, the median of ``--oracle-rounds``
    rounds, among the configurations that keep the data: a configuration
    whose first epoch's batch hashes are not the plain run's (``stream``; a
    worker-split ``IterableDataset`` interleaves its workers' batches) is no
    candidate, since tuning must never change the data.  (Later epochs are
    not compared: persistent workers draw no new base seed per epoch, which
    moves a plain script's next permutation; the tuner draws it for them.)
    A round runs each
    configuration once, in the order of the list and then reversed, so that
    the load of a shared machine, which drifts over minutes, falls on all
    of them alike.  From the second round on, the best of the first is also
    run with ``prefetch_factor=4``."""
    keys = list(dict.fromkeys(json.dumps(_keywords(c), sort_keys=True) for c in configs))
    samples: dict[str, list[float]] = {k: [] for k in keys}
    changed: set[str] = set()
    for r in range(opts.oracle_rounds):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            if k in changed:
                continue
            rate, seen = oracle_rate(script, json.loads(k), opts.step_ms, opts.oracle_seconds)
            n = min(len(seen), len(stream))  # ``stream``: the first epoch
            if seen[:n] != stream[:n]:
                changed.add(k)
                continue
            samples[k].append(rate)
        if r == 0:
            first = json.loads(max((k for k in keys if samples[k]), key=lambda k: samples[k][0]))
            if first.get("num_workers"):
                variant = json.dumps(_keywords(dict(first, prefetch_factor=4)), sort_keys=True)
                if variant not in samples:
                    keys.append(variant)
                    samples[variant] = []
    return {k: statistics.median(v) for k, v in samples.items() if v and k not in changed}


def sweep(waiting: bool, usable: int) -> list[dict[str, Any]]:
    counts = [1, 2, 4, 8, 16, 24, 32] if waiting else sorted({1, 2, 3, 4, usable, 2 * usable})
    configs: list[dict[str, Any]] = [{"num_workers": n, "persistent_workers": True} for n in counts]
    return configs


def short(config: dict[str, Any]) -> str:
    if not config.get("num_workers"):
        return "nw=0"
    parts = [f"nw={config['num_workers']}"]
    if config.get("persistent_workers"):
        parts.append("pw=1")
    if (config.get("prefetch_factor") or 2) != 2:
        parts.append(f"pf={config['prefetch_factor']}")
    return ",".join(parts)


def _keywords(config: dict[str, Any]) -> dict[str, Any]:
    out = {"num_workers": config.get("num_workers") or 0}
    if out["num_workers"]:
        out["persistent_workers"] = bool(config.get("persistent_workers"))
        out["prefetch_factor"] = config.get("prefetch_factor") or 2
    return out


def realistic_table(root: Path, names: list[str], opts: argparse.Namespace) -> None:
    usable = len(os.sched_getaffinity(0))
    print(f"{'loader':<9} {'load':>5} {'epochs':>6}  {'plain s':>8}  {'oracle':<16} {'b/s':>7}  {'tuned to':<16} {'b/s':>7} "
          f"{'/oracle':>7}  {'verdict':<12} {'tuning':>6} {'tuned s':>8}  same data")
    for name in names:
        script = root / f"{name.replace('-', '_')}.py"
        load = os.getloadavg()[0]
        # As many epochs as the plain run needs to pass --run-seconds: a
        # short run leaves the tuner no batches to decide on.
        base, plain_wall = plain(script, 10_000, opts.step_ms, "plain.txt", opts.run_seconds)
        _, report, tuned_wall = tuned(script, base["passes"], opts.step_ms, "tuned.txt")
        same = (script.parent / "plain.txt").read_text() == (script.parent / "tuned.txt").read_text()
        tuning = report.get("tuning") or {}
        after = tuning.get("after", {}).get("config") or {"num_workers": 0}
        written = tuning.get("before", {}).get("config") or {"num_workers": 0}
        waiting = (tuning.get("busy") or 1.0) < 0.5
        mine = _keywords(after) if after.get("num_workers") else {"num_workers": 0}
        key = json.dumps(mine, sort_keys=True)
        stream = (script.parent / "plain.txt").read_text().splitlines()[: base["batches"] // base["passes"]]
        rates = oracle(script, [{"num_workers": 0}, *sweep(waiting, usable), mine], opts, stream)
        best_key = max(rates, key=lambda k: rates[k])
        best = json.loads(best_key)
        share = tuning.get("share_of_run_tuning")
        verdict = tuning.get("verdict") or "not tuned"
        excluded = len(set(json.dumps(_keywords(c), sort_keys=True) for c in [{"num_workers": 0}, *sweep(waiting, usable)])
                       - set(rates))
        print(f"{name:<9} {load:>5.1f} {base['passes']:>6}  {plain_wall:>8.1f}  {short(best):<16} {rates[best_key]:>7.1f}  "
              f"{short(after) + ('' if after != written else ' (as written)'):<16} {rates.get(key, math.nan):>7.1f} "
              f"{rates.get(key, math.nan) / rates[best_key]:>7.2f}  {verdict:<12} {'-' if share is None else f'{share:.0%}':>6} "
              f"{tuned_wall:>8.1f}  {'yes' if same else 'NO'}"
              + (f"  ({excluded} sweep configurations change the data)" if excluded else ""), flush=True)
    print(f"b/s: batches per second of the loop ({opts.step_ms:g} ms steps) over whole epochs (at least "
          f"{opts.oracle_seconds:g} s, start-up included), the median of {opts.oracle_rounds} interleaved rounds; oracle: "
          f"the best of a sweep (as written, a num_workers ladder with persistent workers, prefetch_factor=4 on the first "
          f"round's best, among those whose batch hashes are the plain run's) measured in the same rounds as the "
          f"configuration --tune ended with; tuning: share of "
          f"the --tune run before its decision; same data: the batch hashes of the --tune run equal the plain run's; "
          f"{usable} usable CPUs, load average now {os.getloadavg()[0]:.1f}")


def done_when(root: Path, opts: argparse.Namespace) -> None:
    script = root / "io_wait.py"
    load = os.getloadavg()[0]
    base, plain_wall = plain(script, 4, opts.step_ms, "plain.txt")
    _, report, tuned_wall = tuned(script, 4, opts.step_ms, "tuned.txt")
    same = (root / "plain.txt").read_text() == (root / "tuned.txt").read_text()
    tuning = report["tuning"]
    after = tuning["after"]["config"]
    found = [f for f in report["findings"] if f["code"] == "LL201"]
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; {len(os.sched_getaffinity(0))} usable CPUs")
    print(f"plain python:    {plain_wall:6.1f} s wall ({base['batches']} batches, loop {base['wall']:.1f} s)")
    print(f"monitor --tune:  {tuned_wall:6.1f} s wall = {tuned_wall / plain_wall:.2f}x the plain run's")
    print(f"ended with:      {short(after)} ({after}); verdict {tuning['verdict']}"
          + (f", {tuning['speedup']:.2f}x" if tuning.get("speedup") else "")
          + (f"; decided after {tuning['tuned_at_s']:.1f} s ({tuning['share_of_run_tuning']:.0%} of the run)"
             if tuning.get("tuned_at_s") is not None else "; the run ended before a decision"))
    print("points:          " + ", ".join(f"{short(p['config'])} {p['ratio']:.2f}x ({len(p['ratios'])} pairs)" for p in tuning["points"]))
    print(f"index stream:    {'identical' if same else 'DIFFERENT'} (batch hashes, {base['batches']} batches)")
    print("LL201:           " + (f"{found[0]['location']['path']}:{found[0]['location']['row']}:{found[0]['location']['column']}"
                                 if found else "not reported"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated loader names")
    parser.add_argument("--run-seconds", type=float, default=30.0,
                        help="the plain run trains whole epochs until it passes this; the tuned run the same epochs")
    parser.add_argument("--step-ms", type=float, default=5.0)
    parser.add_argument("--oracle-seconds", type=float, default=4.0)
    parser.add_argument("--oracle-rounds", type=int, default=3,
                        help="rounds of the sweep (each configuration once per round, the order reversed each round)")
    parser.add_argument("--done-when", action="store_true", help="the acceptance loop: 4 epochs of the I/O loader")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    opts = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="monitor-realistic-"))
    realistic.generate(root)
    for name, body in realistic.LOADERS.items():
        (root / f"{name.replace('-', '_')}.py").write_text(realistic.COMMON + "import json\n" + body + LOOP)
    if opts.done_when:
        opts.step_ms = opts.step_ms if "--step-ms" in sys.argv else 1.0
        done_when(root, opts)
    else:
        names = [n for n in realistic.LOADERS if not opts.only or n in opts.only.split(",")]
        realistic_table(root, names, opts)
    if opts.keep:
        print(f"data and loaders in {root}")
    else:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
