"""``loadlint monitor --tune`` must never change the data or fail the run
(torch; slow): the sample indices, their order and every random number the
script draws after training are those of the plain run, and a candidate
that cannot start leaves the run going as written with a line saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """\
import random
import sys
import time

import numpy
import torch
from torch.utils.data import DataLoader, Dataset


class Remote(Dataset):
    def __len__(self):
        return 384

    def __getitem__(self, i):
        time.sleep(0.003)
        return i


def refuse(worker_id):
    raise RuntimeError("this storage cannot be read from a worker")


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(1)
    numpy.random.seed(2)
    kind = sys.argv[1]
    options = {"shuffle": True}
    if kind == "refuse":
        options["worker_init_fn"] = refuse
    elif kind == "persistent":
        options.update(num_workers=2, persistent_workers=True)
    elif kind == "generator":
        options["generator"] = torch.Generator().manual_seed(5)
    loader = DataLoader(Remote(), batch_size=8, **options)
    seen = []
    for epoch in range(3):
        for step, batch in enumerate(loader):
            seen += batch.tolist()
            torch.rand(1)  # the script draws between steps too
            if kind == "break" and step == 30 + 7 * epoch:
                break  # a pass left early: the next one starts afresh
    print(" ".join(map(str, seen)))
    print(torch.rand(3).tolist(), random.random(), numpy.random.rand())
"""


def run(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("kind", ["global", "generator", "persistent", "break"])
def test_tuning_draws_the_same_numbers_as_the_plain_run(tmp_path: Path, kind: str) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    plain = run(tmp_path, "train.py", kind)
    tuned = run(tmp_path, "-m", "loadlint", "monitor", "--tune", "-o", "r.json", "train.py", "--", kind)
    assert plain.returncode == 0 and tuned.returncode == 0, tuned.stderr
    lines = tuned.stdout.splitlines()
    assert lines[:2] == plain.stdout.splitlines()
    if kind != "break":
        assert sorted(map(int, lines[0].split())) == sorted(list(range(384)) * 3)
    assert "tuning train.py:" in tuned.stdout
    assert "tuning stopped" not in tuned.stderr


def test_a_candidate_that_cannot_start_leaves_the_run_as_written(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    plain = run(tmp_path, "train.py", "refuse")
    tuned = run(tmp_path, "-m", "loadlint", "monitor", "--tune", "train.py", "--", "refuse")
    assert plain.returncode == 0 and tuned.returncode == 0, tuned.stderr
    assert tuned.stdout.splitlines()[:2] == plain.stdout.splitlines()
    stopped = [line for line in tuned.stderr.splitlines() if line.startswith("loadlint: monitor: tuning stopped")]
    assert len(stopped) == 1
    assert "RuntimeError" in stopped[0] and stopped[0].endswith("; the loader runs as written")
    assert "tuning train.py:35: INCONCLUSIVE" in tuned.stdout
    assert "  after (as written): num_workers=0: " in tuned.stdout
