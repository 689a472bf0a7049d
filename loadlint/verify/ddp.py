"""``--nproc N``: check the data split of a distributed script.

Each rank runs the script under ``torch.distributed.run`` (gloo, loopback)
with the shim recording, at every ``iter()`` of the target loader, the full
index list its sampler yields (no data is loaded beyond two batches per
epoch) and every ``set_epoch`` call. Each rank writes its own JSON; the
comparison happens here, after every rank has exited, so it needs no
collective and cannot hang.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any


def compare(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """PASS/FAIL checks with evidence from the per-rank records."""
    ranks = sorted(ranks, key=lambda r: r["rank"])
    checks: list[dict[str, Any]] = []
    n = len(ranks)
    first = ranks[0]
    dataset_len = first.get("dataset_len")
    epochs_seen = min(len(r["epochs"]) for r in ranks) if ranks else 0
    indexable = all(r["epochs"] and r["epochs"][0].get("indices") is not None for r in ranks)
    if not indexable:
        checks.append({"name": "ranks overlap", "status": "SKIP",
                       "evidence": "no sampler indices (IterableDataset or no epoch observed)"})
        return _verdict(checks, first, epochs_seen)

    # 1. Overlap: the same sample on two ranks in one epoch. DistributedSampler
    # pads to a multiple of the world size; that many repeats are by design.
    allowed = max(int(r.get("padded") or 0) for r in ranks)
    worst = (0, 0, 0)
    for a, b in combinations(range(n), 2):
        sa, sb = set(ranks[a]["epochs"][0]["indices"]), set(ranks[b]["epochs"][0]["indices"])
        shared = len(sa & sb)
        if shared > worst[0]:
            worst = (shared, a, b)
    per_rank = len(first["epochs"][0]["indices"])
    if worst[0] > allowed:
        hint = ("" if first.get("distributed_sampler") else
                f" (sampler is {first.get('sampler')}, not DistributedSampler: every rank "
                "trains on the whole dataset)")
        checks.append({"name": "ranks overlap", "status": "FAIL",
                       "evidence": f"ranks {worst[1]} and {worst[2]} share {worst[0]} of "
                                   f"{per_rank} indices in epoch 1{hint}"})
    else:
        checks.append({"name": "ranks overlap", "status": "PASS",
                       "evidence": f"{n} ranks draw disjoint indices ({per_rank} each"
                                   + (f"; {allowed} padding repeats by design" if allowed else "")
                                   + ")"})

    # 2. Coverage: every sample reaches some rank each epoch.
    union = set().union(*(set(r["epochs"][0]["indices"]) for r in ranks))
    if dataset_len:
        missing = dataset_len - len(union & set(range(dataset_len)))
        dropped_ok = dataset_len % n if any(r.get("drop_last") for r in ranks) else 0
        if missing > dropped_ok:
            checks.append({"name": "coverage", "status": "FAIL",
                           "evidence": f"{missing} of {dataset_len} samples reach no rank in epoch 1"})
        else:
            checks.append({"name": "coverage", "status": "PASS",
                           "evidence": f"the ranks together cover {len(union)} of {dataset_len} samples"})

    # 3. A new order every epoch: DistributedSampler reshuffles only when
    # set_epoch is called before iter().
    shuffles = first.get("shuffle")
    if first.get("simulated"):
        checks.append({"name": "order per epoch", "status": "SKIP",
                       "evidence": "not observable in a simulation: set_epoch calls need the "
                                   "script's real loop"})
    elif epochs_seen < 2:
        checks.append({"name": "order per epoch", "status": "SKIP",
                       "evidence": f"only {epochs_seen} epoch observed (run the script with more epochs)"})
    else:
        repeats = [r["rank"] for r in ranks
                   if all(e["indices"] == r["epochs"][0]["indices"] for e in r["epochs"][1:epochs_seen])]
        calls = len(first.get("set_epoch", []))
        if not shuffles:
            checks.append({"name": "order per epoch", "status": "PASS",
                           "evidence": "the sampler does not shuffle: the same order every epoch is by design"})
        elif repeats:
            checks.append({"name": "order per epoch", "status": "FAIL",
                           "evidence": f"rank(s) {', '.join(map(str, repeats))} drew the same order in "
                                       f"all {epochs_seen} epochs; set_epoch was called {calls} time(s)"
                                       + ("" if calls else " (call sampler.set_epoch(epoch) before "
                                                           "each epoch's iter())")})
        else:
            checks.append({"name": "order per epoch", "status": "PASS",
                           "evidence": f"a new order in each of {epochs_seen} epochs; set_epoch called "
                                       f"{calls} time(s)"})
    return _verdict(checks, first, epochs_seen)


def _verdict(checks: list[dict[str, Any]], first: dict[str, Any], epochs: int) -> dict[str, Any]:
    failed = any(c["status"] == "FAIL" for c in checks)
    return {"verdict": "fail" if failed else "pass", "checks": checks,
            "sampler": first.get("sampler"), "dataset_len": first.get("dataset_len"),
            "epochs_observed": epochs}


NEEDS_CUDA = ("nccl", "cuda", "CUDA", "NCCL", "no NVIDIA driver", "Torch not compiled with CUDA")


def needs_cuda(text: str) -> bool:
    return any(word in text for word in NEEDS_CUDA)
