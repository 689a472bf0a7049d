#!/usr/bin/env bash
# Every CUDA and NVML path of `loadlint verify` and `loadlint monitor` on one
# NVIDIA GPU, in under ten minutes, ending with one summary table:
#   1. host-to-device bandwidth, pageable vs pinned, with and without
#      non_blocking (torch directly), and verify's own pinned/pageable figure;
#   2. a simulated GPU training step (--step-ms, a spinning kernel) with the
#      loader as written (0 workers) against the configuration the search
#      finds, NVML utilisation sampled every 50 ms, --plot with the curves;
#   3. --in-situ on a small CUDA training script (benchmarks/gpu_train.py),
#      NVML sampled in the script's own loop, --plot with the curves;
#   4. `loadlint monitor --tune` on the same script: the NVML utilisation
#      curve, PCIe receive throughput, the pinned/pageable finding of its
#      copies (LL202) and the tuning, --plot with the curves.
#
# Needs Python 3.12 (or 3.10+) with torch (CUDA), nvidia-ml-py, psutil, click,
# pathspec, matplotlib and libcst; nothing is downloaded. A libcst wheel in
# WHEELS=DIR is installed from there when libcst is missing.
#
#   bash benchmarks/gpu_check.sh            # results in a new temporary folder
#   OUT=/tmp/gpu PYTHON=python3.12 bash benchmarks/gpu_check.sh
#
# Exit status: 0 when every path ran, 1 when one failed, 2 when the machine
# cannot run them (no CUDA device, no NVML, a missing package).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
cd "$ROOT" || exit 2
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
say() { printf 'gpu_check: %s\n' "$*" >&2; }

# -- 0. what this machine offers --------------------------------------------
if ! "$PY" -c "import libcst" 2>/dev/null && [ -n "${WHEELS:-}" ]; then
    say "installing libcst from $WHEELS (no index)"
    "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" libcst || exit 2
fi
"$PY" - <<'PY' || exit 2
import importlib, sys
missing = []
for name in ("torch", "pynvml", "psutil", "click", "pathspec", "matplotlib", "libcst"):
    try:
        importlib.import_module(name)
    except ImportError:
        missing.append("nvidia-ml-py" if name == "pynvml" else name)
if missing:
    sys.exit(f"gpu_check: missing packages: {', '.join(missing)}; install them (no network "
             "needed for a local wheel: pip install --no-index --find-links DIR NAME)")
import torch
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: no CUDA device (torch {torch.__version__}, built for CUDA "
             f"{torch.version.cuda or 'none'}): nothing to check on this machine")
import pynvml
try:
    pynvml.nvmlInit()
    count = pynvml.nvmlDeviceGetCount()
    pynvml.nvmlShutdown()
except Exception as exc:
    sys.exit(f"gpu_check: NVML unavailable ({type(exc).__name__}: {exc})")
print(f"gpu_check: {torch.cuda.get_device_name(0)}, {count} GPU(s) through NVML, "
      f"torch {torch.__version__} (CUDA {torch.version.cuda}), Python {sys.version.split()[0]}",
      file=sys.stderr)
PY
OUT="${OUT:-$(mktemp -d -t loadlint-gpu-check-XXXXXX)}"
mkdir -p "$OUT" || exit 2
say "results in $OUT"
status=0

# -- 1. host-to-device bandwidth ----------------------------------------------
timeout 120 "$PY" - "$OUT/bandwidth.json" <<'PY' || { say "bandwidth check failed"; status=1; }
import json, sys, time
import torch

size = 64 * 1024 * 1024  # bytes per copy
reps = 20
out = {}
for pinned in (False, True):
    host = torch.empty(size // 4, dtype=torch.float32, pin_memory=pinned)
    host.fill_(1.0)
    for non_blocking in (False, True):
        host.to("cuda", non_blocking=non_blocking)  # allocation and first copy
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            host.to("cuda", non_blocking=non_blocking)
        torch.cuda.synchronize()
        gbps = size * reps / (time.perf_counter() - t0) / 1e9
        out[f"{'pinned' if pinned else 'pageable'}, non_blocking={non_blocking}"] = gbps
json.dump(out, open(sys.argv[1], "w"), indent=2)
PY

# -- 2. simulated GPU step: as written vs the search's best ------------------
VERIFY=("$PY" -m loadlint verify)
timeout 150 "${VERIFY[@]}" benchmarks/gpu_train.py --step-ms 20 --budget 75 \
    -o "$OUT/step.json" --plot "$OUT/step.png" -- --items 1024 --rounds 20 \
    > "$OUT/step.txt" 2> "$OUT/step.err" || { say "--step-ms run failed: $(tail -1 "$OUT/step.err")"; status=1; }

# -- 3. --in-situ on the CUDA training script ---------------------------------
LOADLINT_VERIFY_EXTRA_ROUNDS=0 timeout 150 "${VERIFY[@]}" benchmarks/gpu_train.py --in-situ \
    --repeats 3 --steps 40 -o "$OUT/insitu.json" --plot "$OUT/insitu.png" \
    -- --items 1024 --rounds 20 \
    > "$OUT/insitu.txt" 2> "$OUT/insitu.err" || { say "--in-situ run failed: $(tail -1 "$OUT/insitu.err")"; status=1; }

# -- 4. loadlint monitor --tune on the CUDA training script -------------------
timeout 180 "$PY" -m loadlint monitor --tune -o "$OUT/monitor.json" --plot "$OUT/monitor.png" \
    benchmarks/gpu_train.py -- --items 4096 --rounds 20 --epochs 3 \
    > "$OUT/monitor.txt" 2> "$OUT/monitor.err" || { say "monitor run failed: $(tail -1 "$OUT/monitor.err")"; status=1; }

# -- summary -------------------------------------------------------------------
"$PY" - "$OUT" <<'PY' || status=1
import json, os, sys

out = sys.argv[1]

def load(name):
    try:
        with open(os.path.join(out, name)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None

rows = []
bw = load("bandwidth.json") or {}
for key, gbps in bw.items():
    rows.append(("H2D copy, 64 MB", key, f"{gbps:.1f} GB/s", ""))
for name, label in (("step.json", "--step-ms 20"), ("insitu.json", "--in-situ")):
    rep = load(name)
    if rep is None:
        rows.append((label, "no report", "FAILED", ""))
        continue
    site = rep["call_sites"][0]
    cuda = rep.get("cuda") or {}
    if cuda.get("measured"):
        rows.append((label, "verify: pinned vs pageable, non_blocking",
                     f"{cuda['pinned_gbps']:.1f} / {cuda['pageable_gbps']:.1f} GB/s", ""))
    for c in site["candidates"]:
        util = ("-" if c.get("gpu_util_mean") is None
                else f"GPU {c['gpu_util_mean']:.0f}±{c['gpu_util_stdev'] or 0:.0f}%")
        wait = c.get("data_wait_share")
        d = c.get("decision") or {}
        vs = f"{d['speedup']:.2f}x {d['verdict']}" if d.get("speedup") else (d.get("verdict") or "")
        rows.append((label, f"{c['name']} nw={c['config'].get('num_workers')}",
                     util + ("" if wait is None else f", waits {wait:.0%}"), vs))
    rows.append((label, "verdict", site["verdict"], f"{site.get('speedup') or 0:.2f}x"))
    gpu = rep.get("gpu") or {}
    rows.append((label, "NVML sampling", "every 50 ms" if gpu.get("sampled") else gpu.get("reason", "?"), ""))
rep = load("monitor.json")
if rep is None:
    rows.append(("monitor --tune", "no report", "FAILED", ""))
else:
    gpu = rep.get("gpu") or {}
    util = [s[1] for s in gpu.get("samples") or []]
    rx = [s[2] for s in gpu.get("samples") or [] if s[2] is not None]
    rows.append(("monitor --tune", "NVML utilisation",
                 f"{len(util)} samples, mean {sum(util) / len(util):.0f}%" if util else f"FAILED ({gpu.get('reason')})", ""))
    rows.append(("monitor --tune", "PCIe receive", f"mean {sum(rx) / len(rx):.0f} MB/s" if rx else "-", ""))
    h2d = (rep.get("summary") or {}).get("h2d") or {}
    rows.append(("monitor --tune", "host-to-device copies",
                 f"pageable {h2d.get('pageable_bytes', 0):,} B, pinned {h2d.get('pinned_bytes', 0):,} B", ""))
    rows.append(("monitor --tune", "findings", ", ".join(sorted({f["code"] for f in rep.get("findings", [])})) or "none", ""))
    tuning = rep.get("tuning") or {}
    if tuning:
        rows.append(("monitor --tune", f"tuned to {tuning['after']['config']}", tuning["verdict"],
                     f"{tuning.get('speedup') or 0:.2f}x"))
for plot in ("step.png", "insitu.png", "monitor.png"):
    path = os.path.join(out, plot)
    rows.append(("--plot", plot, f"{os.path.getsize(path)} bytes" if os.path.exists(path) else "MISSING", ""))
w = [max(len(r[i]) for r in rows) for i in range(4)]
print("  ".join(h.ljust(w[i]) for i, h in enumerate(("check", "what", "measured", "vs current"))))
for r in rows:
    print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)))
failed = [r for r in rows if "FAILED" in r[2] or "MISSING" in r[2]]
sys.exit(1 if failed else 0)
PY
exit $status
