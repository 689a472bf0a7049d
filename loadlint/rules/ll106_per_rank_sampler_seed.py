from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.seeds import per_rank_seed, sampler_argument, seed_without_rank
from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule
from loadlint.rules.shared import code_of


class PerRankSamplerSeed(Rule):
    """
    ## What it does
    Checks for a `DistributedSampler` whose `seed` differs from rank to rank:
    `seed=args.seed + rank`, `seed=dist.get_rank()`,
    `seed=base + int(os.environ["LOCAL_RANK"])`, or a name bound once to
    such a value.  The finding is reported at the `DistributedSampler(...)`
    call.

    A rank is a name or attribute ending in `rank` (not `node_rank`,
    `group_rank` or `world_rank`), `dist.get_rank()`, torch_xla's
    `get_ordinal()`, accelerate's `process_index`, or the `RANK` and
    `LOCAL_RANK` environment variables.  The rule is silent with
    `shuffle=False`, where the seed is not used.

    ## Why is this bad?
    Each rank's `DistributedSampler` shuffles the whole dataset with
    `seed + epoch` and keeps every `num_replicas`-th index starting at its
    rank.  The shards are disjoint only when every rank draws the *same*
    permutation.  With a seed that differs per rank, each rank slices its own
    permutation: the ranks' shards overlap, some samples are seen several
    times per epoch and others never.  Nothing fails; the epoch is silently
    not an epoch (NVIDIA's TFT passes `seed=args.seed + args.distributed_rank`).
    PyTorch's documentation: "seed: random seed used to shuffle the sampler
    ... This number should be identical across all processes in the
    distributed group."

    Per-rank seeds are right for augmentation and dropout; the sampler's seed
    is the one seed that must be shared.

    ## Example
    ```python
    sampler = DistributedSampler(dataset, seed=args.seed + args.rank)
    ```

    Use instead:
    ```python
    sampler = DistributedSampler(dataset, seed=args.seed)
    ```

    ## Fix safety
    When the seed is written in the call as `<seed> + <rank>` (either
    order), the fix drops the rank term.  It is unsafe: the order in which
    samples are drawn changes, so a run that is resumed or compared with an
    earlier one sees different batches.  A seed bound to a name, or mixed
    with the rank otherwise (`seed * rank`), gets no fix.

    ## References
    - [`DistributedSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler)
    """

    code = "LL106"
    name = "per-rank-sampler-seed"
    category = "data-bug"
    summary = "`DistributedSampler` seeded per rank: the ranks' shards overlap and miss samples"
    fix_availability = "sometimes"

    def check(self, ctx: Context) -> Iterator[Report]:
        for sampler in ctx.launch.samplers:
            shuffle = sampler_argument(sampler.node, "shuffle")
            if shuffle is not None and ctx.evaluate(shuffle.value, sampler.scope) is False:
                continue
            found = per_rank_seed(sampler.node, sampler.scope)
            if found is None:
                continue
            arg, term = found
            message = (
                f"`DistributedSampler` seeded per rank (`seed={code_of(arg.value)}`): each rank shuffles differently, "
                "so the ranks' shards overlap and some samples are never drawn; use the same seed on every rank"
            )
            yield Report(sampler.node, message, self._fix(sampler.node, arg, term))

    @staticmethod
    def _fix(node: cst.Call, arg: cst.Arg, term: cst.BaseExpression) -> FixSpec | None:
        kept = seed_without_rank(arg.value, term) if arg.keyword is not None else None
        if kept is None:
            return None
        return FixSpec("unsafe", "Use the same seed on every rank", calls=[CallChange(node, {"seed": code_of(kept)})])
