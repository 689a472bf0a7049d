"""loadlint monitor on real training scripts (torch; slow): the output
passes through and the exit status is kept, findings land on the loader's
line, the live line never reaches a pipe, NVML through a fake module,
Ctrl-C still reports, and ``watch(loader)`` from the script itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]

TRAIN = """\
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Remote(Dataset):
    def __len__(self):
        return 96

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.full((4,), float(i))


if __name__ == "__main__":
    loader = DataLoader(Remote(), batch_size=8)
    print("args", sys.argv[1:])
    for epoch in range(2):
        for batch in loader:
            pass
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


def monitor(tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [full.get("PYTHONPATH"), str(REPO)]))
    return subprocess.run([sys.executable, "-m", "loadlint", "monitor", *args], cwd=tmp_path, env=full,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def train(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def test_output_passes_through_and_the_exit_status_is_kept(train: Path, tmp_path: Path) -> None:
    proc = monitor(tmp_path, "train.py", "--", "3", "--lr", "0.1")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith("args ['3', '--lr', '0.1']\nloadlint monitor: python train.py 3 --lr 0.1 (exit 3, ")
    assert "  train.py:18              num_workers=0 " in proc.stdout
    assert "train.py:18:14: LL201 DataLoader loads in the training process (num_workers=0): " in proc.stdout
    assert "  = static: train.py:18:14: LL201 `num_workers` is not set" in proc.stdout
    # The live line is for terminals only.
    assert "\r" not in proc.stderr and "batches/s" not in proc.stderr


def test_json_report_follows_the_trace_contract(train: Path, tmp_path: Path) -> None:
    proc = monitor(tmp_path, "-o", "run.json", "--plot", "run.png", "train.py")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["summary"]["steps"] == 24  # a pass's last step ends at the next() that raises StopIteration
    assert {"index", "dur_ms", "data_wait_ms", "gpu_busy_ms"} <= set(data["steps"][0])
    assert [(f["code"], f["location"]) for f in data["findings"]] == [("LL201", {"path": "train.py", "row": 18, "column": 14})]
    assert data["loaders"][0]["passes"] == 2 and data["loaders"][0]["batches"] == 24
    assert data["exit_code"] == 0 and data["tuning"] is None
    assert (tmp_path / "run.png").stat().st_size > 1000
    compare = subprocess.run([sys.executable, "-m", "loadlint", "trace", "--compare", "run.json", "run.json"],
                             cwd=tmp_path, capture_output=True, text=True)
    assert compare.returncode == 1 and "median step time ratio (before/after): 1.00x" in compare.stdout


def test_gpu_is_sampled_through_nvml(train: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fakenvml"
    fake.mkdir()
    (fake / "pynvml.py").write_text(
        "NVML_PCIE_UTIL_RX_BYTES = 1\n"
        "class _U:\n    gpu = 7\n"
        "def nvmlInit(): pass\n"
        "def nvmlDeviceGetCount(): return 1\n"
        "def nvmlDeviceGetHandleByIndex(i): return i\n"
        "def nvmlDeviceGetName(h): return 'Fake GPU'\n"
        "def nvmlDeviceGetUtilizationRates(h): return _U()\n"
        "def nvmlDeviceGetPcieThroughput(h, kind): return 3000\n")
    proc = monitor(tmp_path, "--output-format", "json", "train.py", env={"PYTHONPATH": str(fake)})
    assert proc.returncode == 0, proc.stderr
    first, _, rest = proc.stdout.partition("\n")
    assert first == "args []"  # the script's own output, then the report
    data = json.loads(rest)
    assert data["gpu"]["sampled"] and data["gpu"]["name"] == "Fake GPU"
    assert {s[1] for s in data["gpu"]["samples"]} == {7} and {s[2] for s in data["gpu"]["samples"]} == {3.0}
    assert all(s["gpu_busy_ms"] is not None for s in data["steps"])
    assert [f["code"] for f in data["findings"]] == ["LL201", "LL302"]
    assert "GPU idle sawtooth" in data["findings"][1]["message"]


def test_ctrl_c_still_reports(tmp_path: Path) -> None:
    (tmp_path / "forever.py").write_text(
        "import time\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(range(10**6), batch_size=4)\n"
        "for i, batch in enumerate(loader):\n"
        "    time.sleep(0.01)\n"
        "    if i == 5:\n        print('ready', flush=True)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # SIG_DFL: a test run started in the background inherits SIGINT ignored, and Ctrl-C would do nothing.
    proc = subprocess.Popen([sys.executable, "-m", "loadlint", "monitor", "forever.py"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "KeyboardInterrupt" in err
    assert "loadlint monitor: python forever.py (exit 130, " in out
    assert "  forever.py:3 " in out


def test_watch_reports_from_inside_the_script(tmp_path: Path) -> None:
    (tmp_path / "own_loop.py").write_text(
        "import json, time\nimport torch\nfrom torch.utils.data import DataLoader\n"
        "from loadlint.monitor import watch\n"
        "data = DataLoader([torch.zeros(2)] * 40, batch_size=4)\n"
        "loader = watch(data)\n"
        "for epoch in range(2):\n"
        "    for batch in loader:\n        time.sleep(0.002)\n"
        "report = loader.report()\n"
        "print(json.dumps([report['loaders'][0]['call'], report['summary']['steps'], len(loader)]))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "own_loop.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    call, steps, length = json.loads(proc.stdout)
    assert call["path"] == "own_loop.py" and call["row"] == 5 and call["column"] == 8
    assert steps == 20 and length == 10


def test_the_live_line_goes_to_a_terminal(tmp_path: Path) -> None:
    import pty

    (tmp_path / "long.py").write_text(
        "import time\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(range(400), batch_size=2)\n"
        "for batch in loader:\n    time.sleep(0.01)\n")
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "loadlint", "monitor", "long.py"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    out, _ = proc.communicate(timeout=120)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.returncode == 0
    assert b"\r\x1b[Kloadlint monitor: long.py:3 data wait " in seen
    assert "data wait" not in out.splitlines()[0]  # the report's table, not the live line
    assert "\r" not in out
