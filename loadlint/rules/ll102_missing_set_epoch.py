from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.distributed import SamplerCall
from loadlint.facts.iteration import Iteration
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.names import LoopFrame
from loadlint.facts.arguments import bound_in_branches, sampler_presence
from loadlint.rules.base import Context, FixSpec, Report, Rule
from loadlint.rules.project_context import LoaderFlow, ProjectContext, ProjectReport


#: The finding's text; across files, the loader's place and epoch loop follow.
MESSAGE = (
    "`DistributedSampler` shuffles with the same seed every epoch: its loader is iterated in an epoch "
    "loop but `set_epoch` is never called; call `sampler.set_epoch(epoch)` at the start of each epoch"
)


def _iterated_elsewhere(project: ProjectContext, flow: LoaderFlow) -> Iterator[ProjectReport]:
    """A shuffling sampler whose loader is iterated every epoch in another
    function, no module on the way calling ``set_epoch``."""
    sampler = flow.sampler
    if sampler is None:
        return
    shuffle = sampler.shuffle
    if shuffle.written and not shuffle.is_(True):
        return  # False, or unknown: silent (as in one file)
    for use in flow.uses:
        if use.kind != "iter" or not use.repeated:
            continue
        if use.here and sampler.here:
            continue  # one function: the file's own check
        modules = use.reached | flow.callers | sampler.callers
        if any(project.module(m).set_epoch or project.module(m).frameworks for m in modules):
            return
        # A module the walk never entered may call it (on a global loader,
        # through a helper that is not given the loader): stay silent.
        if project.mentions(b"set_epoch"):
            return
        where = f"the loader, built at {flow.place}, is iterated every epoch {use.by}"
        yield ProjectReport(sampler.path, sampler.at, f"{MESSAGE} ({where})")
        return


def _shuffle_arg(node: cst.Call) -> cst.BaseExpression | None:
    # DistributedSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False)
    positional = [a for a in node.args if a.keyword is None and not a.star]
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "shuffle":
            return arg.value
    return positional[3].value if len(positional) > 3 else None


class MissingSetEpoch(Rule):
    """
    ## What it does
    Checks for a `DistributedSampler` that shuffles (the default) whose
    loader is iterated in an epoch loop, in a module that never calls
    `.set_epoch(`.  The finding is reported at the `DistributedSampler(...)`
    call.

    A `set_epoch` call anywhere in the module counts, also through a helper
    (`self.train_data.sampler.set_epoch(epoch)`, as in the DDP tutorial).

    ## Why is this bad?
    `DistributedSampler` seeds its permutation with `seed + epoch`, and the
    epoch only changes through `set_epoch`.  Without it, every epoch visits
    the samples in exactly the same order, on every rank: shuffling is
    silently off after the first epoch.  Nothing fails; models just
    generalise worse.  PyTorch's documentation warns about it: "Calling the
    `set_epoch()` method at the beginning of each epoch before creating the
    DataLoader iterator is necessary to make shuffling work properly across
    multiple epochs. Otherwise, the same ordering will be always used."

    A sampler chosen in branches counts like one assigned once: the loader
    draws from the `DistributedSampler` whenever the run is distributed.  A
    loader iterated through a progress bar on one branch
    (`it = tqdm(loader) if is_main_process() else loader`) is the loader.

    The rule is silent with `shuffle=False`, when a framework drives the
    loop (Lightning and accelerate call `set_epoch` themselves), and when
    the loader is not iterated in a loop.

    Project analysis follows the sampler and its loader across functions
    and modules (a factory builds them, a helper returns the sampler that a
    loader of another module draws from, another module's training function
    iterates the loader every epoch): the finding is on the
    `DistributedSampler(` line with the chain, and no module the walk passes
    through may call `set_epoch`.

    ## Example
    ```python
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(epochs):
        for batch in loader:
            ...
    ```

    Use instead:
    ```python
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            ...
    ```

    ## Fix safety
    The fix inserts `<sampler>.set_epoch(<epoch>)` (or
    `<loader>.sampler.set_epoch(<epoch>)`) as the first statement of the
    epoch loop, when that loop has a simple loop variable.  It is safe: it
    only changes the seed of each epoch's permutation, which is the
    documented use.  A conditional sampler is guarded with
    `if sampler is not None:`; a sampler chosen in branches
    (`if local_rank == -1: sampler = RandomSampler(ds) else: sampler =
    DistributedSampler(ds)`, or a conditional expression) with
    `if hasattr(sampler, "set_epoch"):`, since the other sampler has no
    `set_epoch`.

    ## References
    - [`DistributedSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler)
    - [Multi-GPU training with DDP](https://pytorch.org/tutorials/beginner/ddp_series_multigpu.html)
    """

    code = "LL102"
    name = "missing-set-epoch"
    category = "data-bug"
    summary = "`DistributedSampler` without `set_epoch`: every epoch uses the same order"
    fix_availability = "sometimes"

    def check(self, ctx: Context) -> Iterator[Report]:
        if ctx.loops.set_epoch_called or ctx.launch.frameworks:
            return
        for sampler in ctx.launch.samplers:
            shuffle = _shuffle_arg(sampler.node)
            if shuffle is not None and ctx.evaluate(shuffle, sampler.scope) is not True:
                continue  # False, or unknown: silent
            for call in ctx.calls:
                presence = self._uses(call, sampler.node)
                if presence is None:
                    continue
                uses = ctx.epoch_uses(call)
                if not uses:
                    continue
                yield Report(sampler.node, MESSAGE, self._fix(sampler, call, presence, uses))
                break

    def check_project(self, project: ProjectContext) -> Iterator[ProjectReport]:
        for flow in project.loaders:
            yield from _iterated_elsewhere(project, flow)

    @staticmethod
    def _uses(call: LoaderCall, node: cst.Call) -> str | None:
        """None when the loader does not use this sampler; else "always",
        "conditional" (it or None) or "branch" (a name bound to it in one
        branch and to another sampler in another)."""
        expr = call.expr("sampler")
        if expr is None:
            return None
        if expr is node:
            return "always"
        target, _ = Context.follow(expr, call.scope_of("sampler"))
        if target is node:
            return "always"
        if type(target) is cst.IfExp and node in (target.body, target.orelse):
            # Both branches build a sampler: the other one may lack ``set_epoch``.
            return "branch" if sampler_presence(expr, call.scope_of("sampler")) == "always" else "conditional"
        # ``if local_rank == -1: s = RandomSampler(d) else: s = DistributedSampler(d)``
        if bound_in_branches(expr, call.scope_of("sampler"), call.point, node):
            return "branch"
        return None

    @staticmethod
    def _fix(
        sampler: SamplerCall, call: LoaderCall, presence: str, uses: list[tuple[LoopFrame, Iteration | None]]
    ) -> FixSpec | None:
        key = sampler.key
        expr = call.expr("sampler")
        if type(expr) is cst.Name:
            found = call.scope.lookup(expr.value)
            key = (id(found[0]), expr.value) if found else None
        for frame, iteration in uses:
            if iteration is None or frame.var is None:
                continue
            if key is not None and key[0] == id(iteration.scope.function) and "." not in key[1]:
                name = key[1]
                code = f"{name}.set_epoch({frame.var})"
                if presence == "conditional":
                    code = f"if {name} is not None: {code}"
                elif presence == "branch":
                    # The other branch's sampler (``RandomSampler``) has no ``set_epoch``.
                    code = f"if hasattr({name}, \"set_epoch\"): {code}"
            elif presence != "always":
                continue
            else:
                code = f"{iteration.key[1]}.sampler.set_epoch({frame.var})"
            return FixSpec("safe", "Call `set_epoch` at the start of each epoch", prepend=[(frame.node, code)])
        return None
