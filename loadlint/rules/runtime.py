"""Run-time codes: what only a profiler trace shows (``loadlint trace``).

They share the ``LLnnn`` space and the rule pages with the static rules but
are not rules of the static engine: no source pattern decides them, so they
are not in ``CODES``, ``check --select`` does not know them and no ``noqa``
applies.  Their pages are generated from the text here, like the static
rules' from their docstrings.  The thresholds are constants here so that
the pages and ``loadlint.trace`` cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

#: A share of the step time spent waiting for data that is worth reporting.
DATA_WAIT_SHARE = 0.10
#: A GPU idle for at least this share of a step, while data wait covers at
#: least half of that idle time, makes a tooth of the sawtooth.
IDLE_SHARE = 0.30
#: The share of steps with such a tooth that makes a sawtooth.
SAWTOOTH_STEPS = 0.30
#: One rank's median data wait against the median of the other ranks'.
RANK_WAIT_RATIO = 2.0
#: ... and at least this many milliseconds more.
RANK_WAIT_MS = 5.0


@dataclass(frozen=True)
class RuntimeCode:
    code: str
    name: str
    summary: str
    doc: str

    def documentation(self) -> str:
        """The code's page, in the static rules' format."""
        return f"# {self.name} ({self.code})\n\n{self.doc.strip()}\n"


_TRACE = "[PyTorch profiler](https://pytorch.org/docs/stable/profiler.html)"

RUNTIME_CODES: dict[str, RuntimeCode] = {
    "LL301": RuntimeCode("LL301", "loading-bound-with-workers", "The run waits for data although the loader has workers", f"""
## What it does
Reported by `loadlint trace` (never by `check`): the profiled run uses
worker processes (`_MultiProcessingDataLoaderIter`) and the typical step
still waits for the next batch: the median step time with each step's
data wait (the `enumerate(DataLoader)#...__next__` spans inside it)
removed is at least {DATA_WAIT_SHARE:.0%} below the median step time.  The
typical step decides, not the total, so that a few long waits (a hiccup)
do not make a finding of a short trace; steps that start a pass over the
loader are left out (LL204 covers them).  `loadlint trace` reports LL201
instead, by the same measure, when the loader has no workers.

## Why is this bad?
The workers do not produce batches as fast as the model consumes them:
the accelerator idles while the loop waits.  More workers, cheaper
decoding or augmentation, a faster storage format or a larger
`prefetch_factor` help; which one, the trace cannot say.  The finding
gives the median step time with the data wait removed: the most that
faster loading can gain.

## Example
```python
loader = DataLoader(dataset, batch_size=256, num_workers=2)
```

Use instead:
```python
loader = DataLoader(dataset, batch_size=256, num_workers=8, prefetch_factor=4, persistent_workers=True)
```

## Fix safety
No automatic fix: the right number of workers depends on the machine and
the dataset.  `loadlint trace --source DIR` attaches the static findings
(and their fixes) of the `DataLoader(...)` call the trace maps to.

## References
- {_TRACE}
- [PyTorch: Multi-process data loading](https://pytorch.org/docs/stable/data.html#multi-process-data-loading)
"""),
    "LL302": RuntimeCode("LL302", "gpu-idle-sawtooth", "The GPU idles in step after step while the loop waits for data", f"""
## What it does
Reported by `loadlint trace` on traces with GPU events: in at least
{SAWTOOTH_STEPS:.0%} of the steps (and at least three), the GPU is idle
(no kernel, copy or memset) for at least {IDLE_SHARE:.0%} of the step, and
waiting for the DataLoader covers at least half of that idle time (steps
that start a pass over the loader do not count: LL204 covers them).  This
is the sawtooth of GPU utilisation that `nvidia-smi` shows as busy,
idle, busy.

## Why is this bad?
Compute and loading alternate instead of overlapping: the GPU works only
while the next batch is not needed yet.  The finding gives the GPU busy
share and the mean step time without the waits of those steps.

## Example
```python
for images, labels in DataLoader(dataset, batch_size=64):
    loss = model(images.cuda()).sum()
```

Use instead:
```python
loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True, persistent_workers=True)
for images, labels in loader:
    loss = model(images.cuda(non_blocking=True)).sum()
```

## Fix safety
No automatic fix of its own; the static findings of the mapped call
(LL201, LL202, LL204) carry the fixes.

## References
- {_TRACE}
- [Holistic Trace Analysis: idle time](https://hta.readthedocs.io/en/latest/source/features/idle_time_breakdown.html)
"""),
    "LL303": RuntimeCode("LL303", "rank-data-wait-imbalance", "One rank waits for data far longer than the others", f"""
## What it does
Reported by `loadlint trace` on a folder of per-rank traces: a rank's
median data wait per step is at least {RANK_WAIT_RATIO:g} times the median
of the other ranks' and at least {RANK_WAIT_MS:g} ms longer.  The finding is
listed under that rank.  Ranks are told apart by the `distributedInfo` the
profiler writes under `torch.distributed`; files without it (the cycles of
one process's schedule) are not compared.

## Why is this bad?
In data-parallel training every rank waits for the slowest at each
collective: one rank's slow loading slows them all.  Common causes are a
rank whose shard holds larger samples, a node with fewer CPUs or slower
storage, or workers per rank that oversubscribe one node.  The finding
gives how much longer that rank waits per step: what the whole job loses.

## Example
```python
# rank 3 reads from a network disk, the others from a local cache
dataset = ImageFolder(root if rank != 3 else remote_root)
```

Use instead:
```python
dataset = ImageFolder(local_cache_root)
```

## Fix safety
No automatic fix: the cause lies outside the loader's arguments.

## References
- {_TRACE}
- [Holistic Trace Analysis: temporal breakdown per rank](https://hta.readthedocs.io/en/latest/source/features/temporal_breakdown.html)
"""),
}
