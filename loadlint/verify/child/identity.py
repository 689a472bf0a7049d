"""Data identity: whether a candidate configuration yields the same data as
the configuration as written (same index stream, or the same samples by
digest for an IterableDataset), and when two configurations are the same."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any


def _leaves(obj: Any, out: list[Any]) -> None:
    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            _leaves(obj[key], out)
    elif isinstance(obj, (list, tuple)) and not (obj and isinstance(obj[0], (str, bytes))):
        for item in obj:
            _leaves(item, out)
    else:
        out.append(obj)


def flat(obj: Any) -> list[Any]:
    """The leaves of a nested batch (dicts in key order, lists, tuples)."""
    out: list[Any] = []
    _leaves(obj, out)
    return out


def _bytes_of(value: Any) -> bytes:
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().contiguous().numpy().tobytes() + str(value.dtype).encode()
    if hasattr(value, "tobytes"):
        return value.tobytes()
    return repr(value).encode()


def _digest(leaves: list[Any]) -> str:
    return hashlib.blake2b(b"".join(_bytes_of(v) for v in leaves), digest_size=12).hexdigest()


def sample_digests(batch: Any, batched: bool) -> list[str]:
    """One digest per sample of a collated batch (rows along dim 0)."""
    leaves = flat(batch)
    if not batched:
        return [_digest(leaves)]
    n = None
    for leaf in leaves:
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape) > 0:
            n = shape[0]
            break
        if isinstance(leaf, (list, tuple)):
            n = len(leaf)
            break
    if n is None:
        return [_digest(leaves)]
    out = []
    for i in range(n):
        h = hashlib.blake2b(digest_size=12)
        for leaf in leaves:
            shape = getattr(leaf, "shape", None)
            if shape is not None and len(shape) > 0 and shape[0] == n:
                h.update(_bytes_of(leaf[i]))
            elif isinstance(leaf, (list, tuple)) and len(leaf) == n:
                h.update(_bytes_of(leaf[i]))
            else:
                h.update(_bytes_of(leaf))
        out.append(h.hexdigest())
    return out


def compare_iterable(ref: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """Equivalence of two IterableDataset streams from their sample digests."""
    a, b = Counter(ref["digests"]), Counter(got["digests"])
    if ref["complete"] and got["complete"]:
        same = a == b
        if same:
            how = f"same {len(ref['digests'])} samples (hashes, any order)"
        else:
            dup = sum(n - 1 for n in b.values() if n > 1) - sum(n - 1 for n in a.values() if n > 1)
            how = (f"{len(got['digests'])} samples instead of {len(ref['digests'])}"
                   + (f"; {dup} duplicated samples (the dataset is not worker-aware: every "
                      "worker yields the whole stream)" if dup > 0 else ""))
        return {"equivalent": same, "how": how, "samples": len(got["digests"])}
    k = min(len(ref["digests"]), len(got["digests"]))
    dup_ref = sum(n - 1 for n in Counter(ref["digests"][:k]).values() if n > 1)
    dup_got = sum(n - 1 for n in Counter(got["digests"][:k]).values() if n > 1)
    if dup_got > dup_ref:
        return {"equivalent": False, "samples": k,
                "how": f"{dup_got} duplicated samples among the first {k} (not worker-aware)"}
    return {"equivalent": True, "samples": k,
            "how": f"no duplicates among the first {k} samples (epoch too long to compare whole)"}


def compare_streams(ref: list[Any], total: int, got: list[Any], n: int,
                    *, detail: bool = True) -> dict[str, Any]:
    """Equivalence of two map-style index streams (``total``/``n``: lengths)."""
    same = got == ref and n == total
    out: dict[str, Any] = {"equivalent": same,
                           "how": "same index stream" if same else "index stream differs",
                           "batches": n}
    if detail:
        out["detail"] = None if same else f"{total} batches as written, {n} with this config"
    return out


def normalise(config: dict[str, Any]) -> dict[str, Any]:
    """A configuration with the keywords that mean nothing without workers reset."""
    config = dict(config)
    if not config.get("num_workers"):
        config.update(num_workers=0, prefetch_factor=None, persistent_workers=False,
                      multiprocessing_context=None, timeout=0)
    return config


def canon(config: dict[str, Any]) -> str:
    """A key under which two configurations that load the same way are equal."""
    c = dict(config)
    if c.get("num_workers") and c.get("prefetch_factor") is None:
        c["prefetch_factor"] = 2
    return json.dumps(c, sort_keys=True, default=str)
