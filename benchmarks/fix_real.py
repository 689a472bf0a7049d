"""``loadlint fix`` on real trees: does one run reach a fixed point, and does
it ever introduce a finding?

    python benchmarks/fix_real.py TREE [TREE ...] [--target SPEC] [--scratch DIR]

Each TREE (a checkout of a training repository) is copied to a scratch
folder (``--scratch``, default a temporary one) and never modified.  On the
copy, in two modes (plain ``fix``, then ``fix --unsafe-fixes`` on a fresh
copy), it runs ``check`` -> ``fix`` -> ``check`` -> ``fix`` again and prints
one table: findings before (how many marked fixable in that mode), fixed
(fix's own count), withheld (findings the first check says have a fix
withheld), marked fixable after (must be 0), introduced (findings whose
(file, code) occurs more often after than before; must be 0) and the files
the second fix changed (must be 0).  Then, per tree and mode, every withheld
fix with its reason, and every marked-after or introduced finding.

It fetches nothing.  One loadlint process at a time, ``-j 1``, no cache.
Exit status 1 when a tree breaks one of the three "must be 0" columns.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_TARGET = "cpus=8,gpus=2,python=3.14,platform=linux"
Record = dict[str, Any]


def loadlint(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "loadlint", *args, "--no-cache", "-j", "1", "--target", target]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def check(root: Path, target: str) -> list[Record]:
    proc = loadlint(target, "check", "--output-format", "json", "--exit-zero", str(root))
    if proc.returncode != 0:
        raise SystemExit(f"check failed on {root}: rc={proc.returncode}\n{proc.stderr}")
    findings: list[Record] = json.loads(proc.stdout)
    for f in findings:
        f["rel"] = os.path.relpath(f["filename"], root)
    return findings


def checksums(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".loadlint_cache" not in p.parts
    }


def marked(f: Record, unsafe: bool) -> bool:
    """Whether check marks this finding fixable in this mode."""
    return bool(f.get("fix")) and (unsafe or f["fix"]["applicability"] == "safe")


def fixed_count(output: str) -> int:
    match = re.search(r"\((\d+) fixed", output)
    return int(match.group(1)) if match else 0


def introduced(before: list[Record], after: list[Record]) -> list[Record]:
    """Findings after whose (file, code) occurs more often than before."""
    left = collections.Counter((f["rel"], f["code"]) for f in before)
    new = []
    for f in sorted(after, key=lambda f: (f["rel"], f["location"]["row"])):
        key = (f["rel"], f["code"])
        if left[key] > 0:
            left[key] -= 1
        else:
            new.append(f)
    return new


def short(f: Record) -> str:
    return f"{f['rel']}:{f['location']['row']} {f['code']} {f['message']}"


def run_one(tree: Path, scratch: Path, target: str, unsafe: bool) -> Record:
    mode = "unsafe" if unsafe else "safe"
    root = scratch / mode / tree.name
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(tree, root)
    before = check(root, target)
    first = loadlint(target, "fix", *(["--unsafe-fixes"] if unsafe else []), str(root))
    after = check(root, target)
    middle = checksums(root)
    loadlint(target, "fix", *(["--unsafe-fixes"] if unsafe else []), str(root))
    final = checksums(root)
    return {
        "tree": tree.name,
        "mode": mode,
        "before": before,
        "after": after,
        "fixed": fixed_count(first.stdout + first.stderr),
        "errors": [ln.replace(str(root) + "/", "") for ln in (first.stdout + first.stderr).splitlines() if ": error: " in ln],
        "withheld": [f for f in before if f.get("fix_withheld")],
        "marked_after": [f for f in after if marked(f, unsafe)],
        "introduced": introduced(before, after),
        "second_changed": sorted(k for k in middle if middle[k] != final.get(k)),
        "unsafe": unsafe,
    }


def table(results: list[Record]) -> list[str]:
    header = ["tree", "mode", "before (marked)", "fixed", "withheld", "after", "marked after", "introduced", "2nd run changed"]
    rows = [
        [
            r["tree"], r["mode"],
            f"{len(r['before'])} ({sum(marked(f, r['unsafe']) for f in r['before'])})",
            str(r["fixed"]), str(len(r["withheld"])), str(len(r["after"])),
            str(len(r["marked_after"])), str(len(r["introduced"])), str(len(r["second_changed"])),
        ]
        for r in results
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    fmt = " | ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header), "-+-".join("-" * w for w in widths), *(fmt.format(*row) for row in rows)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--target", default=DEFAULT_TARGET)
    parser.add_argument("--scratch", type=Path, default=None, help="where the copies go (default: a temporary folder)")
    args = parser.parse_args()
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="loadlint-fix-real-"))
    results = [run_one(tree.resolve(), scratch, args.target, unsafe) for unsafe in (False, True) for tree in args.trees]
    print(f"loadlint fix on real trees, target {args.target}, -j 1, no cache")
    print("\n".join(table(results)))
    for r in results:
        print(f"\n== {r['tree']} ({r['mode']})")
        reasons = collections.Counter(re.sub(r"`[^`]*`", "`…`", f["fix_withheld"]).split(": ", 2)[1] for f in r["withheld"])
        print(f"withheld ({len(r['withheld'])}): " + "; ".join(f"{n} × {why}" for why, n in reasons.most_common()))
        for f in r["withheld"]:
            print(f"  {f['rel']}:{f['location']['row']} {f['code']}: {f['fix_withheld']}")
        for label, found in (("marked fixable after", r["marked_after"]), ("introduced", r["introduced"])):
            print(f"{label} ({len(found)}):")
            for f in found:
                print(f"  {short(f)}")
        for line in r["errors"]:
            print(f"  fix error: {line}")
        if r["second_changed"]:
            print("changed by the second fix: " + ", ".join(r["second_changed"]))
    bad = any(r["marked_after"] or r["introduced"] or r["second_changed"] for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
