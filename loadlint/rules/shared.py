"""What several rules share: the worker suggestion, the start-method
decision, value and code rendering, and small argument tests."""

from __future__ import annotations

from typing import AbstractSet

import libcst as cst

from loadlint.cst.codegen import code_for_node
from loadlint.facts.training_args import TrainingArgumentsCall
from loadlint.facts.datasets import WORKER_METHODS
from loadlint.facts.alive import AliveGroup
from loadlint.facts.loaders import LoaderCall
from loadlint.hardware.detect import ranks_per_node, suggest_num_workers
from loadlint.hardware.workers import CPUS_NAME, run_time_statements, shared_code, workers_for
from loadlint.facts.arguments import context_method
from loadlint.facts.values import MISSING, UNKNOWN, Origin
from loadlint.rules.base import CallChange, Context, FixSpec
from loadlint.types import HardwareProfile


def ranks(ctx: Context) -> int:
    """Ranks per node of the target (1 unless the module runs distributed);
    the module's own count when it sets one (Lightning's ``devices=N``)."""
    return ctx.launch.ranks_per_node or ranks_per_node(ctx.profile, ctx.distributed)


def declared_cpus(ctx: Context) -> int | None:
    """The target's usable CPUs; None where none is declared: no verdict
    then counts workers against CPUs, as none would hold on every machine."""
    return ctx.profile.usable_cpus if "cpus" in ctx.profile.declared else None


def here_workers(ctx: Context, share: int = 1) -> int:
    """What the fix's run-time count (``workers_code``) evaluates to on this
    machine: a message's hint where no CPU count is declared."""
    return workers_for(ctx.profile.here_cpus or 1, ranks(ctx) if ctx.distributed else 1, share)


def alive_share(ctx: Context, call: LoaderCall) -> tuple[int, str]:
    """How many loaders, ``call`` among them, certainly have workers alive
    at the same time (``facts.alive``), sharing the CPUs (1 alone), and how
    a message names them ("" alone)."""
    groups = [group for group in ctx.alive_together() if any(member is call for member in group.calls)]
    if not groups:
        return 1, ""
    group = max(groups, key=lambda g: len(g.calls))
    named = [f"`{name}`" for name in group.names]
    why = "iterated together by `zip`" if group.kind == "zip" else "persistent workers, kept while each loader lives"
    return len(group.calls), f"; a part of the CPUs for each of {', '.join(named[:-1])} and {named[-1]}, alive at the same time ({why})"


def suggested_workers(ctx: Context, call: LoaderCall, share: int = 1) -> int:
    """The ``num_workers`` to suggest for this call on the target (without
    a declared CPU count, the hint: ``here_workers``), its part of the CPUs
    where ``share`` loaders are alive at the same time."""
    if portable(ctx):
        return here_workers(ctx, share)
    # Only a batch size written at the call caps the suggestion: the default
    # of 1 says nothing about how heavy a sample is.
    batch = call.value("batch_size")
    batch_size = batch if type(batch) is int and batch > 0 else None
    return suggest_num_workers(ctx.profile, ranks(ctx), batch_size, share)


def trainer_workers(ctx: Context, call: TrainingArgumentsCall) -> int:
    """The ``dataloader_num_workers`` to suggest for a ``TrainingArguments`` call."""
    if portable(ctx):
        return here_workers(ctx)
    batch = call.effective("per_device_train_batch_size")
    return suggest_num_workers(ctx.profile, ranks(ctx), batch if type(batch) is int and batch > 0 else None)


#: The name a portable fix gives the worker count it computes at run time.
WORKERS_NAME = "LOADER_WORKERS"
#: Computed where the script runs (``hardware.workers``): the CPUs this
#: process may use, then the worker formula on them.
WORKERS_CONSTANT = run_time_statements(WORKERS_NAME, distributed=False)
#: The same under torchrun, shared among the ranks it starts on the node.
#: Only a distributed module gets it: ``LOCAL_WORLD_SIZE`` is distributed evidence.
RANK_WORKERS_CONSTANT = run_time_statements(WORKERS_NAME, distributed=True)
#: What a fix without a declared target says about the number it leaves out.
DECLARE_TARGET = "declare the training machine: `[tool.loadlint.target]`"


def portable(ctx: Context) -> bool:
    """No CPU count is declared: a fix must not write this machine's."""
    return "cpus" not in ctx.profile.declared


def workers_code(ctx: Context, n: int, *, run_time: bool = False, share: int = 1) -> tuple[str, list[str], str]:
    """What a fix writes for a worker count: the code, the statements it
    needs after the imports, and how its help line quotes it.  The target's
    number when one is declared (and ``run_time`` is not asked), else the
    run-time constant (a ``share`` of it for a loader alive beside others)."""
    if not run_time and not portable(ctx):
        return str(n), [], ""
    code = shared_code(WORKERS_NAME, share)
    needs = [] if ctx.names.imports.names.get("os") == "os" else ["import os"]
    bindings = ctx.names.module_scope.bindings
    if WORKERS_NAME not in bindings and CPUS_NAME not in bindings:
        constant = RANK_WORKERS_CONSTANT if ctx.distributed else WORKERS_CONSTANT
        needs.extend(constant)
        return code, needs, f", defined after the imports as `{constant[0]}` and `{constant[1]}`"
    return code, needs, ""


def use_workers(ctx: Context, name: str, n: int) -> str:
    """The advice a message ends with: the target's number, or with no
    target this machine's figure beside the run-time count the fix writes."""
    if portable(ctx):
        return f"start workers from the usable CPUs at run time ({here_note(ctx, n)})"
    return f"use `{name}={n}` ({profile_note(ctx)})"


def here_note(ctx: Context, n: int) -> str:
    """The hint without a declared CPU count: what the fix's count gives on this machine."""
    per_rank = f" per rank, {ranks(ctx)} ranks" if ctx.distributed and ranks(ctx) > 1 else ""
    return f"{n} on this machine{per_rank}; no target declared"


def waits(ctx: Context) -> str:
    """Who waits for a batch loaded in the training process: the
    accelerator when the code uses one (CUDA, XLA) or the target has one,
    else the training step."""
    declared_none = "gpus" in ctx.profile.declared and ctx.profile.gpu_count == 0
    uses_device = ctx.accelerator.cuda or ctx.accelerator.xla
    if (uses_device and not declared_none) or (ctx.profile.gpu_count or 0) > 0:
        return "the accelerator waits"
    return "the training step waits"


def oversubscribed(name: str, value: int, found: Origin | None, per_node: int) -> str:
    """How LL203 quotes the workers a node starts: `` `num_workers=8` × 4 ranks = 32 workers``."""
    started = f"`{name}={value}`" + origin_note(found)
    return started + (f" × {per_node} ranks = {value * per_node} workers" if per_node > 1 else "")


def measured_defers(ctx: Context, call: LoaderCall) -> tuple[bool, str]:
    """Whether a hardware guess about ``call`` defers to the configuration
    ``loadlint verify`` measured there (the target is the measured machine),
    and otherwise what to add to the message ("" when nothing was measured)."""
    mark = ctx.measured.get(id(call.node))
    if mark is None:
        return False, ""
    # A rule that does not read the hardware defers to any measurement, and
    # so does one without a declared CPU count to say the hardware differs.
    if not ctx.hardware or "cpus" not in ctx.profile.declared or mark.matches(ctx.profile):
        return True, ""
    gpus = "" if mark.gpus is None else f", {mark.gpus} GPU{'s' * (mark.gpus != 1)}"
    return False, (f"; the call's configuration was measured ({mark.speedup:g}x on {mark.cpus} "
                   f"CPU{'s' * (mark.cpus != 1)}{gpus}, {mark.date}) on other hardware than the "
                   "target: re-measure with `loadlint verify` there")


def measured_anywhere(ctx: Context, call: LoaderCall) -> bool:
    """``loadlint verify`` measured the call's configuration, on whatever
    machine (what it measured beyond the worker count holds on any)."""
    return id(call.node) in ctx.measured


def profile_note(ctx: Context) -> str:
    """The target, as messages name it."""
    note = ctx.profile.label
    if ctx.distributed and ranks(ctx) > 1:
        note += f", {ranks(ctx)} ranks per node"
    return note


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in str(text).split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def torch_before_2(profile: HardwareProfile) -> bool:
    """The target's torch is 1.x."""
    version = _version(profile.torch)
    return bool(version) and version < (2,)


def spawn_reason(
    profile: HardwareProfile, call: LoaderCall | None = None, start_methods: AbstractSet[str] = frozenset()
) -> str | None:
    """Why worker processes may start with spawn or forkserver (which pickle
    everything the workers need); None when they certainly fork.

    The one place that decides the start method: LL007 and the notebook rule
    read it.  ``start_methods`` are those the module passes to
    ``set_start_method``.  Without a declared platform and Python the answer
    is the portable one (they may spawn): the same script runs on a laptop,
    and Python 3.14 made forkserver Linux's default.
    """
    if call is not None:
        expr = call.expr("multiprocessing_context")
        if expr is not None:
            method = context_method(expr, call.scope_of("multiprocessing_context"))
            if method == "fork":
                return None
            if method in ("spawn", "forkserver"):
                return f'`multiprocessing_context="{method}"`'
    if start_methods:
        spawning = sorted(start_methods & {"spawn", "forkserver"})
        if spawning:
            return f'`set_start_method("{spawning[0]}")`'
        if start_methods == {"fork"}:
            return None
    declared = profile.declared
    if "platform" not in declared:
        return "no target platform is declared, and macOS and Windows spawn workers"
    if profile.platform in ("macos", "windows"):
        return f"the target platform is {profile.platform}, where workers are spawned"
    if profile.platform != "linux":
        return None
    if "python" not in declared:
        return "no target Python is declared, and from 3.14 Linux starts workers with forkserver"
    if _version(profile.python) >= (3, 14):
        return f"Python {profile.python} on Linux starts workers with forkserver"
    return None


def module_spawn_reason(ctx: Context, call: LoaderCall) -> str | None:
    """``spawn_reason`` for a call, with the module's ``set_start_method`` calls."""
    return spawn_reason(ctx.profile, call, ctx.loaders.start_methods)


def too_many_together(ctx: Context, group: AliveGroup) -> list[int] | None:
    """The workers of each loader of ``group`` when together, and only
    together, they exceed the usable CPUs (a loader that does alone is
    reported by itself: LL203); None otherwise or when a count is unknown."""
    per_node, usable = ranks(ctx), declared_cpus(ctx)
    if usable is None:
        return None
    counts = [call.workers() for call in group.calls]
    known = [n for n in counts if type(n) is int and n >= 0]
    if len(known) < len(counts) or sum(1 for n in known if n > 0) < 2:
        return None
    if sum(known) * per_node <= usable or any(n * per_node > usable for n in known):
        return None
    return known


def workers_on(call: LoaderCall) -> bool:
    """``num_workers`` resolves to a positive int."""
    value = call.workers()
    return type(value) is int and value > 0


def workers_off(call: LoaderCall) -> bool:
    """``num_workers`` is missing or resolves to 0 (single-process loading)."""
    value = call.workers()
    return type(value) is int and value == 0


def dataset_touches_cuda(ctx: Context, call: LoaderCall) -> str | None:
    """``Class.method`` of the loader's local Dataset class that uses CUDA in a
    worker-side method, or None."""
    _, cls = ctx.dataset_class(call)
    if cls is None:
        return None
    for name in WORKER_METHODS:
        method = ctx.names.method_of(cls, name)
        if method is not None and method in ctx.accelerator.cuda_code:
            return f"{cls.name}.{name}"
    return None


def is_truthy(value: object) -> bool | None:
    """Python truthiness of a known value; None when unknown."""
    if value is UNKNOWN or value is MISSING:
        return None
    return bool(value)


def written_in_call(call: LoaderCall, name: str) -> bool:
    """The argument is written in the call itself (so a fix can edit it),
    not carried by a resolved ``**dict``."""
    return name in call.args


def code_of(node: cst.CSTNode) -> str:
    """The source of a node."""
    return code_for_node(node)


def workers_text(call: LoaderCall) -> str:
    """How the call's worker count reads in a message."""
    return "without `num_workers`" if call.value("num_workers") is MISSING else f"with `num_workers={call.workers()!r}`"


def value_text(call: LoaderCall, name: str) -> str:
    """An argument as a message quotes it: ``name=<code>``."""
    expr = call.expr(name)
    return f"`{name}={code_of(expr)}`" if expr is not None else f"`{name}`"


def origin_note(found: Origin | None) -> str:
    """`` (with the default `--workers 16`)`` for a message, or ""."""
    return f" ({found.text})" if found is not None else ""


def set_argument_fix(
    call: cst.Call, name: str, code: str, found: Origin | None, label: str, imports: list[str] | None = None
) -> FixSpec:
    """Set an argument, or the default it comes from (the command-line
    override keeps working).  Replacing an option the user may pass with a
    constant is unsafe."""
    needs = list(imports or [])
    if found is not None and found.node is not None:
        return FixSpec("safe", f"{label} (the default it comes from)", replace=[(found.node, code)], imports=needs)
    if found is not None:
        return FixSpec("unsafe", f"{label} (unsafe: the command-line option no longer applies)",
                       calls=[CallChange(call, {name: code})], imports=needs)
    return FixSpec("safe", label, calls=[CallChange(call, {name: code})], imports=needs)


def set_workers_fix(ctx: Context, call: cst.Call, name: str, n: int, found: Origin | None, share: int = 1) -> FixSpec:
    """``set_argument_fix`` for a worker count (``workers_code``)."""
    code, needs, defined = workers_code(ctx, n, share=share)
    return set_argument_fix(call, name, code, found, f"Set `{name}={code}`{defined}", needs)


def unguarded_script(ctx: Context, call: LoaderCall) -> str | None:
    """Why workers at a loader built at a script's module level may crash:
    its workers may start with spawn or forkserver and re-run the module-level
    code, no loop over the loader is visibly in a function or under the main
    guard, and a function iterates a parameter (the module level may hand it
    the loader: LL013 does not follow such calls).  None otherwise."""
    if ctx.is_notebook or call.function is not None or call.class_name is not None or call.in_main_guard:
        return None
    if not any(ctx.iteration.iterated_params.values()):
        return None
    keys = ctx.keys_of(call)
    if any(it.key in keys and (it.in_main_guard or not it.at_module_level) for it in ctx.iteration.iterations):
        return None
    why = module_spawn_reason(ctx, call)
    if why is None:
        return None
    name = f"`{call.key[1]}`" if call.key is not None else "this DataLoader"
    return (
        f"no fix: {name} is built at the module level of a script whose workers may start with spawn or forkserver "
        f"({why}): every worker re-imports the script and runs that code again, and nothing shows the loader is "
        f"iterated only under `if __name__ == \"__main__\":`; move the code that builds and iterates it there "
        "(e.g. into `main()`) first (LL013)"
    )
