"""The worker formula, written once: how many ``num_workers`` a process gets
from the CPUs it may use.

:func:`workers_for` is the formula; :data:`FORMULA` is the same formula as
the Python source a fix writes into a script, where the CPUs are read at
run time.  The two sit side by side so that a change to one is a change to
the other (``tests/test_worker_formula.py`` evaluates the source for 1 to
128 CPUs and any number of ranks against the function).  The messages, the
fix's constant, ``loadlint hardware``, ``verify``'s suggestion and
docs/hardware.md all come from here (``hardware.detect.suggest_num_workers``
adds the target's caps).
"""

from __future__ import annotations

import os

__all__ = [
    "CPUS_NAME",
    "FORMULA",
    "RUN_TIME_CPUS",
    "RUN_TIME_RANKS",
    "SHARED",
    "SMALL_MACHINE_CPUS",
    "run_time_cpus",
    "run_time_statements",
    "shared_code",
    "workers_for",
]

#: Up to this many CPUs, every CPU gets a worker rather than one being kept
#: for the training process: it mostly waits for batches there, and one
#: worker on two CPUs measured no faster than none (docs/hardware.md).
SMALL_MACHINE_CPUS = 2


def workers_for(cpus: int, ranks: int = 1, share: int = 1) -> int:
    """``num_workers`` for each of ``ranks`` processes sharing ``cpus`` CPUs:
    the CPUs per rank, one kept for the rank's own process unless the node
    has at most :data:`SMALL_MACHINE_CPUS`; never below 1.  With ``share``
    loaders whose workers are alive at the same time, each gets an equal
    part of that count (the parts add up to no more than it, or to one
    worker each where there are more loaders than workers)."""
    return max(1, max(1, cpus // max(1, ranks) - (1 if cpus > SMALL_MACHINE_CPUS else 0)) // max(1, share))


#: :func:`workers_for` as source: ``{per_rank}`` is ``{cpus}`` divided by the
#: ranks (or ``{cpus}`` alone for one process).
FORMULA = "max(1, {per_rank} - (1 if {cpus} > %d else 0))" % SMALL_MACHINE_CPUS

#: One loader's part of the run-time count ``{workers}`` when ``{share}``
#: loaders alive at the same time share it: :func:`workers_for`'s ``share``.
SHARED = "max(1, {workers} // {share})"

#: The name the fix's statements give the CPUs they read.
CPUS_NAME = "LOADER_CPUS"
#: The CPUs this process may use, read where the script runs (affinity from
#: Python 3.13 on, every CPU of the machine before).
RUN_TIME_CPUS = 'getattr(os, "process_cpu_count", os.cpu_count)() or 1'
#: The processes torchrun starts on this node.
RUN_TIME_RANKS = 'int(os.environ.get("LOCAL_WORLD_SIZE", 1))'


def run_time_statements(name: str, distributed: bool) -> tuple[str, str]:
    """The two statements a fix writes after the imports: the CPUs read at
    run time, then ``name`` bound by :data:`FORMULA` (shared among the
    node's ranks when the module trains distributed)."""
    per_rank = f"{CPUS_NAME} // {RUN_TIME_RANKS}" if distributed else CPUS_NAME
    return f"{CPUS_NAME} = {RUN_TIME_CPUS}", f"{name} = {FORMULA.format(per_rank=per_rank, cpus=CPUS_NAME)}"


def shared_code(name: str, share: int) -> str:
    """The code for one loader's part of the run-time count ``name``: the
    name itself for a loader alone, else :data:`SHARED`."""
    return name if share <= 1 else SHARED.format(workers=name, share=share)


def run_time_cpus() -> int:
    """What :data:`RUN_TIME_CPUS` evaluates to in this process: the number
    a message quotes, beside the fix, as this machine's."""
    count = getattr(os, "process_cpu_count", os.cpu_count)()
    return count if isinstance(count, int) and count > 0 else 1
