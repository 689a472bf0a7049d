"""Default ``loadlint verify`` on loaders in the shapes users run, against an
oracle.

Five loaders, their data generated on the fly into a temporary folder
(nothing is fetched):

- ``jpeg``: a folder of JPEG files decoded with Pillow, random crop and flip
  in numpy (CPU-bound);
- ``io-wait``: items that wait 3 ms on storage (``time.sleep``), 4,096
  items in batches of 16: an epoch of more than 10 s as written;
- ``memmap``: memory-mapped numpy shards with cheap items, where workers
  may lose to the main process;
- ``text``: a text dataset that tokenizes in ``__getitem__`` (a plain
  Python tokenizer);
- ``iterable``: an ``IterableDataset`` over shard files that splits the
  shards by worker.

For each it prints the oracle (the best throughput of an exhaustive sweep
with long runs: whole epochs, two where a run is short), what default
``loadlint verify`` finds within its budget (measured again with the
oracle's long runs), found/oracle, the verdict and verify's wall time,
with the load average before each row (the machine may be shared).

    python benchmarks/verify_realistic.py [--only jpeg,io-wait] [--budget 90]

Not a test: the numbers belong to the machine it runs on.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: Each loader: a module that builds ``DATASET`` and ``KWARGS`` from the
#: data folder next to it and, run as a script, iterates its DataLoader.
COMMON = '''
import os, sys, time
from pathlib import Path
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info
DATA = Path(__file__).resolve().parent / "data"
'''

LOADERS: dict[str, str] = {
    "jpeg": '''
from PIL import Image

class JpegFolder(Dataset):
    def __init__(self, root):
        self.files = sorted(Path(root).glob("*.jpg"))
    def __len__(self):
        return len(self.files)
    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        img = np.asarray(Image.open(self.files[i]).convert("RGB"), dtype=np.float32) / 255.0
        y, x = rng.integers(0, img.shape[0] - 224), rng.integers(0, img.shape[1] - 224)
        img = img[y:y + 224, x:x + 224]
        if rng.random() < 0.5:
            img = img[:, ::-1]
        img = (img - 0.45) / 0.225
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), i % 10

DATASET = JpegFolder(DATA / "jpeg")
KWARGS = dict(batch_size=32, shuffle=True)
''',
    "io-wait": '''
class Remote(Dataset):
    """Each item waits on storage (a network or disk read)."""
    def __len__(self):
        return 4096
    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.full((64,), float(i))

DATASET = Remote()
KWARGS = dict(batch_size=16, shuffle=True)
''',
    "memmap": '''
class Shards(Dataset):
    """Rows of memory-mapped .npy shards: an item is a cheap slice."""
    def __init__(self, root):
        self.shards = [np.load(p, mmap_mode="r") for p in sorted(Path(root).glob("*.npy"))]
        self.index = [(s, r) for s, a in enumerate(self.shards) for r in range(len(a))]
    def __len__(self):
        return len(self.index)
    def __getitem__(self, i):
        s, r = self.index[i]
        return torch.from_numpy(np.array(self.shards[s][r]))

DATASET = Shards(DATA / "memmap")
KWARGS = dict(batch_size=256, shuffle=True)
''',
    "text": '''
import re
WORD = re.compile(r"[a-z]+|[0-9]+|[^a-z0-9\\s]")

class Tokenized(Dataset):
    """Lines tokenized in __getitem__ with a plain Python tokenizer."""
    def __init__(self, path):
        self.lines = Path(path).read_text().splitlines()
        vocab = {}
        for line in self.lines[:2000]:
            for w in WORD.findall(line.lower()):
                vocab.setdefault(w, len(vocab) + 2)
        self.vocab = vocab
    def __len__(self):
        return len(self.lines)
    def __getitem__(self, i):
        words = WORD.findall(self.lines[i].lower())
        ids = [self.vocab.get(w, 1) for w in words][:128]
        ids += [0] * (128 - len(ids))
        return torch.tensor(ids, dtype=torch.long)

DATASET = Tokenized(DATA / "text.txt")
KWARGS = dict(batch_size=64, shuffle=True)
''',
    "iterable": '''
class ShardStream(IterableDataset):
    """Lines of CSV shards, each worker reading its own shards."""
    def __init__(self, root):
        self.shards = sorted(str(p) for p in Path(root).glob("*.csv"))
    def __iter__(self):
        info = get_worker_info()
        mine = self.shards if info is None else self.shards[info.id::info.num_workers]
        for path in mine:
            with open(path) as fh:
                for line in fh:
                    values = [float(v) for v in line.split(",")]
                    yield torch.tensor(values, dtype=torch.float32)

DATASET = ShardStream(DATA / "shards")
KWARGS = dict(batch_size=64)
''',
}

MAIN = '''
if __name__ == "__main__":
    loader = DataLoader(DATASET, **KWARGS)
    for batch in loader:
        pass
'''


def generate(root: Path) -> None:
    """The data every loader reads, made with fixed seeds."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    data = root / "data"
    (data / "jpeg").mkdir(parents=True)
    base = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    for i in range(600):
        # Smooth images compress like photographs (noise would not).
        img = Image.fromarray(np.roll(base, i, axis=1)).resize((384, 288), Image.BILINEAR)
        img.save(data / "jpeg" / f"{i:04d}.jpg", quality=90)
    (data / "memmap").mkdir()
    for s in range(8):
        np.save(data / "memmap" / f"shard{s}.npy", rng.standard_normal((25000, 32), dtype=np.float32))
    words = ["data", "loader", "worker", "batch", "tensor", "epoch", "shard", "token", "model",
             "train", "the", "a", "of", "to", "and", "in", "gradient", "optimizer"] + [
        f"w{i}" for i in range(300)]
    lines = [" ".join(words[j] for j in rng.integers(0, len(words), 60)) + " ."
             for _ in range(40000)]
    (data / "text.txt").write_text("\n".join(lines))
    (data / "shards").mkdir()
    for s in range(16):
        rows = rng.standard_normal((4000, 48)).round(4)
        (data / "shards" / f"part{s:02d}.csv").write_text(
            "\n".join(",".join(map(str, r)) for r in rows))
    for name, body in LOADERS.items():
        (root / f"{name.replace('-', '_')}.py").write_text(COMMON + body + MAIN)


# -- the oracle: long runs of every configuration, in a child process ------


def oracle_child(script: str, configs: list[dict[str, Any]], seconds: float) -> None:
    """Print one JSON line per configuration: epochs per second over whole
    epochs (two, or one when a run passes ``seconds``), start-up included."""
    spec = importlib.util.spec_from_file_location("loader_under_test", script)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from torch.utils.data import DataLoader

    length = None
    for config in configs:
        loader = DataLoader(mod.DATASET, **mod.KWARGS, **config)
        t0 = time.perf_counter()
        batches = epochs = 0
        while epochs < 2:
            n = 0
            for _ in loader:
                n += 1
                if length and time.perf_counter() - t0 > 3 * seconds:
                    break  # far too slow to matter: a partial epoch is rate enough
            batches += n
            epochs += 1
            length = length or n
            if time.perf_counter() - t0 > seconds:
                break
        wall = time.perf_counter() - t0
        del loader
        print(json.dumps({"config": config, "rate": batches / (length or 1) / wall}), flush=True)


def oracle(script: Path, usable: int, waiting: bool, seconds: float,
           extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ladder = [0, 1, 2, 3, 4] if not waiting else [0, 1, 2, 4, 8, 16, 24, 32, 48, 64]
    ladder = sorted(set(ladder) | set(range(usable + 2)))
    plain = [{"num_workers": n} for n in ladder]
    first = _oracle_runs(script, plain + extra, seconds)
    top = sorted((r for r in first if r["config"].get("num_workers")), key=lambda r: -r["rate"])[:3]
    variants = [dict(num_workers=r["config"]["num_workers"], persistent_workers=True,
                     prefetch_factor=pf) for r in top for pf in (2, 4)]
    variants += [dict(num_workers=r["config"]["num_workers"], prefetch_factor=4) for r in top]
    return first + _oracle_runs(script, variants, seconds)


def _oracle_runs(script: Path, configs: list[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
    code = ("import json, sys; sys.path.insert(0, %r); import verify_realistic as v; "
            "v.oracle_child(sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]))"
            % str(Path(__file__).resolve().parent))
    proc = subprocess.run([sys.executable, "-c", code, str(script), json.dumps(configs),
                           str(seconds)], capture_output=True, text=True, cwd=script.parent)
    if proc.returncode != 0:
        raise SystemExit(f"oracle failed on {script.name}: {proc.stderr.strip()[-500:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


# -- default verify ---------------------------------------------------------


def run_verify(script: Path, budget: float | None) -> tuple[dict[str, Any], float, int]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "loadlint", "verify", "--output-format", "json"]
    if budget is not None:
        cmd += ["--budget", f"{budget:g}"]
    t0 = time.monotonic()
    proc = subprocess.run([*cmd, script.name], cwd=script.parent, env=env,
                          capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"verify failed on {script.name}: "
                         f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(proc.stdout), wall, proc.returncode


def short(config: dict[str, Any]) -> str:
    if not config:
        return "as written"
    names = {"num_workers": "nw", "persistent_workers": "pw", "prefetch_factor": "pf"}
    return ",".join(f"{names.get(k, k)}={int(v) if isinstance(v, bool) else v}"
                    for k, v in config.items())


def _tunable(config: dict[str, Any]) -> dict[str, Any]:
    keep = {"num_workers": 0, "persistent_workers": False, "prefetch_factor": None}
    return {k: v for k, v in config.items() if k in keep and v != keep[k]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated loader names")
    parser.add_argument("--budget", type=float, default=None,
                        help="verify's --budget (default: verify's own default)")
    parser.add_argument("--oracle-seconds", type=float, default=6.0,
                        help="minimum seconds of an oracle run (whole epochs)")
    parser.add_argument("--keep", action="store_true",
                        help="print and keep the data folder (with each verify report)")
    opts = parser.parse_args()
    names = [n for n in LOADERS if not opts.only or n in opts.only.split(",")]
    usable = len(os.sched_getaffinity(0))
    tmp = tempfile.mkdtemp(prefix="verify-realistic-")
    root = Path(tmp)
    generate(root)
    if opts.keep:
        print(f"data and loaders in {root}")
    print(f"{'loader':<9} {'loadavg':>7}  {'as written':>10}  {'oracle':<18} {'x':>6}  "
          f"{'verify found':<18} {'found/oracle':>12}  {'verdict':<12} {'speedup':>8} {'wall':>5}")
    for name in names:
        script = root / f"{name.replace('-', '_')}.py"
        load = f"{os.getloadavg()[0]:.2f}"
        rep, wall, _ = run_verify(script, opts.budget)
        (root / f"{script.stem}.report.json").write_text(json.dumps(rep, indent=1))
        site = rep["call_sites"][0]
        found = _tunable(site["best"])
        waiting = "waits" in ((site.get("search") or {}).get("reason") or "")
        runs = oracle(root / script.name, usable, waiting, opts.oracle_seconds,
                      [found] if found and found not in [{"num_workers": n} for n in range(65)] else [])
        rates = {json.dumps(r["config"], sort_keys=True): r["rate"] for r in runs}
        best = max(runs, key=lambda r: r["rate"])
        written = rates[json.dumps({"num_workers": 0}, sort_keys=True)]
        key = json.dumps(found or {"num_workers": 0}, sort_keys=True)
        got = rates.get(key)
        ratio = f"{got / best['rate']:.2f}" if got else "?"
        sp = f"{site['speedup']:.2f}x" if site.get("speedup") else "-"
        print(f"{name:<9} {load:>7}  {written:>8.3f}/s  {short(_tunable(best['config'])):<18} "
              f"{best['rate'] / written:>5.2f}x  {short(found):<18} {ratio:>12}  "
              f"{site['verdict']:<12} {sp:>8} {wall:>4.0f}s", flush=True)
    print(f"rates in epochs/s (oracle: whole epochs, start-up included); x: oracle over the call "
          f"as written; verify with default options on {usable} usable CPUs; speedup: verify's "
          "own paired median")
    if not opts.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
