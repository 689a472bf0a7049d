"""LL204's `persistent_workers=<count> > 0` on counts written in odd ways:
the fixed program parses, keeps each count's meaning, and is persistent
exactly when the count is positive."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

SOURCE = '''import argparse
from torch.utils.data import DataLoader
parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=4)
args = parser.parse_args()
N = 3
def main(ds, fast, epochs):
    a = DataLoader(ds, num_workers=args.workers or 2)
    b = DataLoader(ds, num_workers=N if fast else 2)
    c = DataLoader(ds, num_workers=args.workers * 2)
    d = DataLoader(ds, num_workers=(
        args.workers
    ))
    e = DataLoader(ds, num_workers=-(-N))
    f = DataLoader(ds, num_workers=args.workers | 1)
    for epoch in range(epochs):
        for loader in [a, b, c, d, e, f]:
            for batch in loader:
                pass
'''

FIXED = SOURCE.replace(
    "num_workers=N if fast else 2)", "num_workers=N if fast else 2, persistent_workers=(N if fast else 2) > 0)"
).replace(
    "num_workers=args.workers * 2)", "num_workers=args.workers * 2, persistent_workers=args.workers * 2 > 0)"
).replace(
    "        args.workers\n    ))", "        args.workers\n    ), persistent_workers=(\n        args.workers\n    ) > 0)"
).replace(
    "num_workers=-(-N))", "num_workers=-(-N), persistent_workers=(-(-N)) > 0)"
)


def test_odd_counts_keep_their_meaning(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SOURCE, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "loadlint", "fix", "--no-cache", "--select", "LL204", path.name],
                          cwd=tmp_path, capture_output=True, text=True)
    # `args.workers or 2` and `args.workers | 1` are not resolved: left alone.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fixed = path.read_text(encoding="utf-8")
    assert fixed == FIXED
    # Each persistent flag is the truth of its own count, for every option value.
    calls = [line for line in fixed.splitlines() if "persistent_workers=" in line]
    assert len(calls) == 4
    for workers in (0, 1, 4):
        namespace = {"args": argparse.Namespace(workers=workers), "N": 3, "fast": False}
        for expression in ("(N if fast else 2) > 0", "args.workers * 2 > 0", "(\n        args.workers\n    ) > 0",
                           "(-(-N)) > 0"):
            assert expression in fixed
            count = expression.rsplit(" > 0", 1)[0]
            assert eval(expression, namespace) is (eval(count, namespace) > 0)
    compile(fixed, "train.py", "exec")
