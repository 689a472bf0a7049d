"""torch's ``DataLoader`` signature, written down once: the positional
slots, every parameter's default, and which of them tune the loading
machinery (what ``fix`` changes and ``verify`` measures) rather than the
data.  torch 2.x, ``torch/utils/data/dataloader.py``.
"""

from __future__ import annotations

from typing import Any

#: The qualified name every import alias resolves to.
DATALOADER = "torch.utils.data.DataLoader"

#: DataLoader's positional parameters, in order; the rest are keyword-only.
POSITIONAL = (
    "dataset",
    "batch_size",
    "shuffle",
    "sampler",
    "batch_sampler",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)

#: Every parameter but ``dataset`` and its default.
DEFAULTS: dict[str, Any] = {
    "batch_size": 1,
    "shuffle": None,
    "sampler": None,
    "batch_sampler": None,
    "num_workers": 0,
    "collate_fn": None,
    "pin_memory": False,
    "drop_last": False,
    "timeout": 0,
    "worker_init_fn": None,
    "multiprocessing_context": None,
    "generator": None,
    "prefetch_factor": None,
    "persistent_workers": False,
    "pin_memory_device": "",
    "in_order": True,
}

#: The keywords of the loading machinery, never the data (dataset, sampler,
#: batch size and collate stay the user's).  verify's report omits one from
#: ``best`` when the best value is the default.
TUNABLE = (
    "num_workers",
    "prefetch_factor",
    "persistent_workers",
    "pin_memory",
    "multiprocessing_context",
    "timeout",
    "in_order",
    "pin_memory_device",
)
TUNABLE_DEFAULTS: dict[str, Any] = {name: DEFAULTS[name] for name in TUNABLE}
