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

#: DataLoader subclasses of major libraries whose constructor forwards the
#: loading machinery's keywords (``num_workers``, ``pin_memory``,
#: ``persistent_workers``, ``prefetch_factor``, ``timeout``) to torch's
#: unchanged, each with its own positional parameters.  They are loaders for
#: the rules that read only those keywords (``Context.all_calls``); the
#: rest keep to torch's exact signature.  Read from each library's source:
#: MONAI ``monai/data/dataloader.py`` (sets its own collate and worker init
#: when not given), PyG ``torch_geometric/loader/dataloader.py`` and
#: ``dense_data_loader.py`` (replace ``collate_fn``).  PyG's NeighborLoader
#: family is left out: its first argument is a graph, not the dataset the
#: loader indexes.
_MONAI = ("dataset", "num_workers")
_PYG = ("dataset", "batch_size", "shuffle", "follow_batch", "exclude_keys")
_PYG_DENSE = ("dataset", "batch_size", "shuffle")
SUBCLASSES: dict[str, tuple[str, ...]] = {
    "monai.data.DataLoader": _MONAI,
    "monai.data.dataloader.DataLoader": _MONAI,
    "torch_geometric.loader.DataLoader": _PYG,
    "torch_geometric.loader.dataloader.DataLoader": _PYG,
    "torch_geometric.data.DataLoader": _PYG,
    "torch_geometric.loader.DenseDataLoader": _PYG_DENSE,
    "torch_geometric.loader.dense_data_loader.DenseDataLoader": _PYG_DENSE,
    "torch_geometric.data.DenseDataLoader": _PYG_DENSE,
}


def shared_positional(subclass: str) -> int:
    """How many leading positional slots the subclass shares with torch's."""
    count = 0
    for ours, theirs in zip(SUBCLASSES[subclass], POSITIONAL):
        if ours != theirs:
            break
        count += 1
    return count
