"""The rule registry.

``CODES`` maps each code to its module and class without importing them:
selection, ``noqa`` and ``--statistics`` work without loading libcst, which
keeps start-up fast for files that never reach a rule.  A test checks the
table against the modules.  The worker hazards are found on the rule classes
(those that override ``Rule.worker_hazards``).
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loadlint.facts.loaders import LoaderCall
    from loadlint.rules.base import Context, Rule

#: code -> (name, module under loadlint.rules, class)
CODES: dict[str, tuple[str, str, str]] = {
    "LL001": ("prefetch-without-workers", "ll001_prefetch_without_workers", "PrefetchWithoutWorkers"),
    "LL002": ("persistent-without-workers", "ll002_persistent_without_workers", "PersistentWithoutWorkers"),
    "LL003": ("sampler-with-shuffle", "ll003_sampler_with_shuffle", "SamplerWithShuffle"),
    "LL004": ("batch-sampler-conflict", "ll004_batch_sampler_conflict", "BatchSamplerConflict"),
    "LL005": ("invalid-loader-argument", "ll005_invalid_loader_argument", "InvalidLoaderArgument"),
    "LL006": ("timeout-without-workers", "ll006_timeout_without_workers", "TimeoutWithoutWorkers"),
    "LL007": ("unpicklable-worker-function", "ll007_unpicklable_worker_function", "UnpicklableWorkerFunction"),
    "LL008": ("iterable-dataset-with-sampler", "ll008_iterable_dataset_with_sampler", "IterableDatasetWithSampler"),
    "LL009": ("invalid-multiprocessing-context", "ll009_invalid_multiprocessing_context", "InvalidMultiprocessingContext"),
    "LL010": ("batch-none-drop-last", "ll010_batch_none_drop_last", "BatchNoneDropLast"),
    "LL011": ("loader-attribute-reassigned", "ll011_loader_attribute_reassigned", "LoaderAttributeReassigned"),
    "LL012": ("notebook-worker-code", "ll012_notebook_worker_code", "NotebookWorkerCode"),
    "LL013": ("missing-main-guard", "ll013_missing_main_guard", "MissingMainGuard"),
    "LL014": ("unpicklable-dataset-handle", "ll014_unpicklable_dataset_handle", "UnpicklableDatasetHandle"),
    "LL101": ("missing-distributed-sampler", "ll101_missing_distributed_sampler", "MissingDistributedSampler"),
    "LL102": ("missing-set-epoch", "ll102_missing_set_epoch", "MissingSetEpoch"),
    "LL103": ("worker-rng-duplication", "ll103_worker_rng_duplication", "WorkerRngDuplication"),
    "LL104": ("unsharded-iterable-dataset", "ll104_unsharded_iterable_dataset", "UnshardedIterableDataset"),
    "LL105": ("cuda-in-worker", "ll105_cuda_in_worker", "CudaInWorker"),
    "LL201": ("synchronous-loading", "ll201_synchronous_loading", "SynchronousLoading"),
    "LL202": ("missing-pin-memory", "ll202_missing_pin_memory", "MissingPinMemory"),
    "LL203": ("worker-oversubscription", "ll203_worker_oversubscription", "WorkerOversubscription"),
    "LL204": ("non-persistent-workers", "ll204_non_persistent_workers", "NonPersistentWorkers"),
    "LL205": ("blocking-transfer", "ll205_blocking_transfer", "BlockingTransfer"),
    "LL206": ("loader-rebuilt-per-epoch", "ll206_loader_rebuilt_per_epoch", "LoaderRebuiltPerEpoch"),
    "LL207": ("iterator-recreated", "ll207_iterator_recreated", "IteratorRecreated"),
    "LL208": ("pin-memory-without-accelerator", "ll208_pin_memory_without_accelerator", "PinMemoryWithoutAccelerator"),
    "LL209": ("shared-memory-too-small", "ll209_shared_memory_too_small", "SharedMemoryTooSmall"),
    "LL210": ("xla-without-device-loader", "ll210_xla_without_device_loader", "XlaWithoutDeviceLoader"),
    "LL211": ("manual-pin-in-loop", "ll211_manual_pin_in_loop", "ManualPinInLoop"),
    "LL900": ("syntax-error", "ll900_syntax_error", "SyntaxErrorRule"),
    "LL901": ("unreadable-file", "ll901_unreadable_file", "UnreadableFile"),
    "LL902": ("unused-noqa", "ll902_unused_noqa", "UnusedNoqa"),
}

#: Reported by the engine itself (parse and read failures), not by a visitor.
ENGINE_CODES = frozenset({"LL900", "LL901", "LL902"})

#: Rules that are opt-in (``--select``/``extend-select``), as ruff's preview.
DEFAULT_OFF: frozenset[str] = frozenset()


def name_of(code: str) -> str:
    return CODES[code][0]


@lru_cache(maxsize=None)
def rule_class(code: str) -> type[Rule]:
    _, module, cls = CODES[code]
    found: type[Rule] = getattr(importlib.import_module(f"loadlint.rules.{module}"), cls)
    return found


def all_rules() -> list[type[Rule]]:
    """Every rule class, by code."""
    return [rule_class(code) for code in sorted(CODES)]


@lru_cache(maxsize=None)
def hazard_rules() -> tuple[Rule, ...]:
    """The rules that are worker hazards, in the order their reasons are given."""
    from loadlint.rules.base import Rule

    hazards = [rule for rule in all_rules() if rule.worker_hazards is not Rule.worker_hazards]
    return tuple(rule() for rule in sorted(hazards, key=lambda rule: rule.hazard_order))


def worker_hazards(ctx: Context, call: LoaderCall) -> list[str]:
    """Reasons why starting workers at this call may crash or corrupt data:
    the conditions of the worker-hazard rules without their worker gate, so
    that a fix adding workers is unsafe exactly where they would fire after it."""
    return [reason for rule in hazard_rules() for reason in rule.worker_hazards(ctx, call)]
