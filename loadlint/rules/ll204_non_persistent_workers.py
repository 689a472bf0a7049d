from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.counts import positive_count
from loadlint.facts.distributed import lightning_hook
from loadlint.facts.values import MISSING
from loadlint.rules.base import Context, Report, Rule
from loadlint.rules.project_context import BuiltLoader, KeywordChange, ProjectContext, ProjectReport
from loadlint.facts.loaders import LoaderCall
from loadlint.rules.shared import (
    code_of, measured_anywhere, origin_note, set_argument_fix, too_many_together, workers_on,
)


def _training_arguments(ctx: Context) -> Iterator[Report]:
    """``TrainingArguments`` with workers that are not persistent: the
    Trainer iterates its training loader once per epoch."""
    for call in ctx.cli.training_arguments:
        n = call.effective("dataloader_num_workers")
        value = call.value("dataloader_persistent_workers")
        if type(n) is not int or n <= 0 or (value is not MISSING and value is not False):
            continue
        epochs, steps = call.effective("num_train_epochs"), call.effective("max_steps")
        if type(epochs) in (int, float) and epochs <= 1 and type(steps) is int and steps <= 0:
            continue
        found = call.origin("dataloader_persistent_workers")
        what = ("`dataloader_persistent_workers` is not set" if value is MISSING
                else "`dataloader_persistent_workers=False`" + origin_note(found))
        message = (
            f"{what}: the Trainer iterates its loader every epoch and starts its {n} "
            f"workers{origin_note(call.origin('dataloader_num_workers'))} again each time; "
            "set `dataloader_persistent_workers=True`"
        )
        fix = set_argument_fix(call.node, "dataloader_persistent_workers", "True", found,
                               "Set `dataloader_persistent_workers=True`")
        yield Report(call.node, message, fix)


def _crowds_the_cpus(ctx: Context, call: LoaderCall) -> bool:
    """Persistent, the loader's workers would stay alive beside other
    persistent loaders' past the usable CPUs (LL203's finding): which
    loaders keep their workers is then the author's choice."""
    return any(
        group.kind == "persistent" and any(member is call for member in group.calls)
        and too_many_together(ctx, group) is not None
        for group in ctx.alive_together(persistent=call)
    )


#: Expressions that bind tighter than a comparison: ``<count> > 0`` needs no parentheses.
_TIGHT = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.BinaryOperation)


def _persistent_code(ctx: Context, call: LoaderCall) -> str | None:
    """What the fix sets ``persistent_workers`` to: ``True`` for a positive
    constant of the code; ``<count> > 0`` for a count that may be another
    number where the program runs (``--workers 0``, a parameter's default,
    ``os.cpu_count()``), since persistent workers without workers raise;
    a ``**dict``'s count is not written at the call: ``True`` where it is
    positive whatever the inputs (``os.cpu_count()``), else None."""
    expr = call.expr("num_workers")
    if expr is None:
        return None
    scope = call.scope_of("num_workers")
    target, _ = ctx.follow(expr, scope)
    if type(target) is cst.Integer and call.origin("num_workers") is None:
        return "True"
    if "num_workers" not in call.args:
        return "True" if call.origin("num_workers") is None and positive_count(expr, scope, ctx.loaders.cpu_count_calls) else None
    count = code_of(expr)
    return f"{count} > 0" if isinstance(expr, _TIGHT) else f"({count}) > 0"


def _persistent_change(built: BuiltLoader) -> KeywordChange | None:
    """Across files: ``persistent_workers=True``, or ``=<param> > 0`` where
    the worker count is the factory's parameter (another caller may pass
    0, and persistent workers without workers raise)."""
    if "persistent_workers" in built.passed:
        return None  # the caller's to choose
    param = built.passed.get("num_workers")
    if isinstance(param, str) and param.isidentifier():
        code = f"{param} > 0"
    else:
        count = built.setting("num_workers")
        if not (count.cpu_count or count.known and type(count.value) is int and count.value > 0):
            return None
        code = "True"
    return built.at, {"persistent_workers": code}, "safe", f"Set `persistent_workers={code}`"


class NonPersistentWorkers(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls with workers and without
    `persistent_workers=True` whose loader is built outside an epoch loop and
    iterated inside one (directly, through `enumerate`/`tqdm`/`zip`, through
    a function called in the loop, or as the `train_dataloader` or
    `val_dataloader` hook of a Lightning module, which `fit` iterates every
    epoch; the `test_dataloader` and `predict_dataloader` hooks run once).

    The known DataLoader subclasses (MONAI's `DataLoader`, PyG's
    `DataLoader` and `DenseDataLoader`: README, Rules) are checked like
    torch's own: they forward these keywords to it.

    ## Why is this bad?
    Without persistent workers, every `for batch in loader` starts the worker
    processes again: each one imports its modules, receives the dataset and
    fills its prefetch queue before the first batch of the epoch arrives,
    then is shut down at the end of the epoch.  With heavy datasets or many
    workers that is seconds to minutes of idle GPU per epoch (reports range
    from a 4 minute pause per epoch to 7 minutes cut to 35 seconds).

    A loader constructed inside the loop is LL206's finding, not this one.
    A loader whose workers, kept alive, would add up with other persistent
    loaders' past the usable CPUs (LL203: a train and a test loader of one
    function, 7 workers each on 8 CPUs, the first already persistent) is
    left alone: which loaders keep their workers is then the author's choice.

    A loader kept in a dict, list or tuple literal is followed to the loops
    that read it by a constant key (`loaders["train"]`, `loaders[0]`), and
    through `for loader in loaders.values()` (or `.items()`, or a list of
    loaders) when every member is a loader: that loop takes each loader in
    turn, so it is not an epoch loop for them; a loop around it is.  A key
    known only at run time (`loaders[phase]`), or a container changed,
    bound again or handed to a call, leaves the loader unfollowed: silent.
    A holder object of a class of the module (`Phase(loader)`, alone or in
    such a container) is followed to `phase.loader` when its `__init__`
    stores the argument as `self.loader` and nothing else assigns it.

    Hugging Face's `Trainer` iterates its training loader once per epoch:
    `TrainingArguments` with `dataloader_num_workers` and without
    `dataloader_persistent_workers=True` is reported unless it trains a
    single epoch.

    A call that `loadlint fix --from-verify` rewrote carries a mark such as
    `# loadlint: measured 1.90x on 2 CPUs, 2026-12-04`: measured beats
    guessed, so the rule stays silent on it.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=8)
    for epoch in range(epochs):
        for batch in loader:
            ...
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32, num_workers=8, persistent_workers=True)
    for epoch in range(epochs):
        for batch in loader:
            ...
    ```

    The worker count need not be a literal: any count that is at least 1
    for every input is reported, such as a module constant, a command-line
    or config default (`num_workers=args.workers`), `os.cpu_count()`, or
    `max(1, ...)` (the `LOADER_WORKERS` that LL201's fix writes), so that
    `fix` followed by `check` finds nothing more to do.

    ## Fix safety
    The fix sets `persistent_workers=True` where the count is a positive
    constant of the code, and `persistent_workers=<count> > 0` for any other
    count (`persistent_workers=args.workers > 0`): the program must still
    run when the option is given as 0, and persistent workers without
    workers raise `ValueError`.  It is safe: the batches are the same.  The
    workers keep their memory between epochs, and changes the main process
    makes to the Dataset after the first epoch are not seen by them (they
    never were within an epoch).  There is no fix when the count comes from
    a `**dict` and is not a constant, nor for `num_workers=os.cpu_count()`
    in a distributed module until LL203's fix has replaced the count (a
    `**dict`'s count that is positive whatever the inputs, such as
    `os.cpu_count()`, gets `persistent_workers=True`).

    ## References
    - [`torch.utils.data.DataLoader` (`persistent_workers`)](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    """

    code = "LL204"
    needs_hardware = True  # only to tell whether kept workers would crowd the CPUs
    name = "non-persistent-workers"
    category = "performance"
    summary = "workers restarted every epoch (`persistent_workers` not set)"
    fix_availability = "sometimes"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.all_calls:
            expr = call.expr("num_workers")
            if call.loops or expr is None or not positive_count(expr, call.scope_of("num_workers"), ctx.loaders.cpu_count_calls):
                continue
            value = call.value("persistent_workers")
            if value is not MISSING and value is not False:
                continue
            if not ctx.epoch_uses(call, outlived=True) and not lightning_hook(ctx.names, call, every_epoch=True):
                continue
            if measured_anywhere(ctx, call):
                continue  # loadlint verify measured this configuration (its persistence holds on any machine)
            if _crowds_the_cpus(ctx, call):
                continue
            n = call.workers()
            found = call.origin("persistent_workers")
            what = ("`persistent_workers` is not set" if value is MISSING
                    else "`persistent_workers=False`" + origin_note(found))
            code = _persistent_code(ctx, call)
            workers = (f"the {n} workers{origin_note(call.origin('num_workers'))} of this loader" if workers_on(call)
                       else f"the workers of this loader (`num_workers={code_of(expr)}`)")
            advice = f"`persistent_workers={code}`" if code is not None else "`persistent_workers` when the count is positive"
            message = f"{what}: {workers} are started again at every epoch; set {advice}"
            fix = None
            if ctx.distributed and id(expr) in ctx.loaders.cpu_count_calls:
                pass  # LL203 replaces the count first; the next round sets it from the new one
            elif code == "True" or (code is not None and found is None):
                # A command-line default of `persistent_workers` can only be made True.
                fix = set_argument_fix(call.node, "persistent_workers", code, found, f"Set `persistent_workers={code}`")
            yield Report(call.node, message, fix)
        yield from _training_arguments(ctx)

    def check_project(self, project: ProjectContext) -> Iterator[ProjectReport]:
        """A loader with workers iterated every epoch by another function
        than the one that built it (a fix here is no reason to withhold one:
        not asked ``what_if``)."""
        for flow in project.loaders:
            persistent = flow.setting("persistent_workers")
            if flow.workers is None or persistent.written and not persistent.is_(False):
                continue
            what = "`persistent_workers=False`" if persistent.written else "`persistent_workers` is not set"
            count = flow.setting("num_workers")
            # An imported constant says where it comes from, as a factory's values do.
            note = f" (with {count.note})" if count.note else ""
            for use in flow.uses:
                if use.here or not use.repeated or use.kind != "iter":
                    continue  # the file's own check sees what happens where it is built
                calls = use.calls
                message = (
                    f"{what}: {flow.workers} workers{note} of this loader are started again at every epoch; "
                    f"set `persistent_workers=True` (iterated every epoch by `{use.function}` ({use.place})"
                    + (f" {calls})" if calls else ")")
                )
                yield ProjectReport(flow.built.path, flow.built.at, message, _persistent_change(flow.built))
