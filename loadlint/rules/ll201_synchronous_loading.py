from __future__ import annotations

from typing import Iterator

from loadlint.facts.batches import batches_on_gpu, one_batch_read
from loadlint.facts.loaders import LoaderCall
from loadlint.facts.values import MISSING, Origin
from loadlint.rules import hazard_rules, unimportable_dataset, worker_hazards
from loadlint.rules.base import Context, FixSpec, Report, Rule
from loadlint.rules.project_context import HoldFix, ProjectContext, Revision, TakeBack
from loadlint.rules.trainer_workers import training_arguments
from loadlint.rules.shared import (
    alive_share, measured_defers, origin_note, set_workers_fix, suggested_workers, unguarded_script, use_workers,
    waits,
)


def _workers_fix(ctx: Context, call: LoaderCall, n: int, found: Origin | None, hazards: list[str], share: int) -> FixSpec:
    """Set the worker count, or raise the default it comes from."""
    fix = set_workers_fix(ctx, call.node, "num_workers", n, found, share)
    if hazards:
        fix.applicability = "unsafe"
        fix.message += f" (unsafe: {'; '.join(hazards)})"
    return fix


class SynchronousLoading(Rule):
    """
    ## What it does
    Checks for `DataLoader` calls whose `num_workers` is missing or `0`.

    The known DataLoader subclasses (MONAI's `DataLoader`, PyG's
    `DataLoader` and `DenseDataLoader`: README, Rules) are checked like
    torch's own: they forward these keywords to it.

    ## Why is this bad?
    With `num_workers=0` every batch is read, decoded and collated in the
    training process itself, between two training steps: the GPU waits while
    the CPU loads.  With workers, batches are prepared in the background while
    the model trains.  PyTorch's profiler reports the same pattern
    ("Detected DataLoader running with synchronized implementation").

    The suggestion is the worker formula (docs/hardware.md) on the declared
    target's `cpus` (capped by the batch size and memory; the message names
    the target).  Without a declared `cpus` the fix writes code applying the
    formula where the script runs, and the message quotes what it gives on
    this machine as a hint.  Loaders whose workers are certainly alive at
    the same time (iterated together by `zip`, or persistent and started in
    one function: LL203's page) share the CPUs: each gets an equal part of
    the count, never below 1 (`num_workers=3` for each of two on 8 CPUs;
    without a target `num_workers=max(1, LOADER_WORKERS // 2)`), and the
    message names them, so the fixed loaders do not add up past the CPUs.
    A loader alone keeps the whole count.

    The rule stays silent when `num_workers` cannot be resolved statically,
    and where the dataset is not a loading pipeline (`facts/in_memory.py`),
    workers only adding overhead: a `TensorDataset`; a dataset read back
    whole from a cache (`torch.load(path)`, `pickle.load(f)`, or an item of
    one such as `torch.load(path)["dataset"]`); a range or tensor of
    indices (`range(t.size(0))`, `mask.nonzero().view(-1)`, a rank's
    `split`); a list, tuple or comprehension of in-memory values or a tensor
    from `torch.arange`/`randn`/`zeros`/... (without a custom `collate_fn`);
    a `Dataset` class of the module whose `__getitem__` only indexes what
    its `__init__` (or its own first read: `if self.x is None: self.x =
    torch.randn(...)`) builds from such values, or hands on as it is what
    `__init__` stored (a prompt), or whose items are computed from the
    index or drawn at random (`torch.randint`, `torch.tensor` of digits,
    `.item()`, reading settings such as `self.config.ndigit`; minGPT's
    demos).  A constant tensor built per item (`torch.zeros(3, 64, 64)`)
    is a placeholder for loading left out, a draw stored on `self` at
    every read is work beside the item, and a loop in `__getitem__` is work
    of a size the analysis cannot bound: each keeps the finding.  The
    dataset is followed through a literal indexed by a key
    (`{"train": a, "test": b}[split]`) and through each
    binding of its name that reaches the call (a loader built in an `else`
    branch reads the binding made there, not the `if` branch's), the
    callers passing a parameter and a helper's returns, a member unpacked
    from a helper (`features, dataset = convert(...)`: the second member
    of each pair it returns) or from a literal (`a, ds = x, y`).  Any other call in `__getitem__`, a file read in `__init__`,
    or a container passed in from outside keeps the finding.  A dataset
    fed by a generator method of the object building the loader
    (lightning-bolts' `ExperienceSourceDataset(self.train_batch)`, stepping
    the environment with the policy being trained) is a live source: no
    finding, since workers would run frozen copies of the model.
    Project analysis applies the class test to a class imported from
    another module of the project (`from helpers.datasets import
    RandomDataset`): the finding is taken back, and `fix` leaves that
    loader alone.  A class from an installed package keeps the finding.

    Batches built on the GPU get no finding either, since workers cannot
    build them (CUDA fails in a forked worker): a dataset built with a
    CUDA `device=` (MONAI transforms such as `EnsureTypeD(device=device)`),
    a dataset of CUDA tensors, or a `collate_fn` that moves the batch
    (DLRM's factories, LL202's test).  Nor does a loader only read for one
    batch (`first(check_loader)`, `next(iter(loader))`): one worker would
    build it, after its start-up.

    Pre-tokenized Hugging Face rows padded into batches stay silent too: a
    `collate_fn` that is a `transformers` data collator
    (`DataCollatorWithPadding(tokenizer)`, `default_data_collator`, ...) or
    a function that only returns `tokenizer.pad(batch, ...)` or a
    collator called on its argument (once per branch, after statements
    that choose the padding options and call nothing; each of them, for a
    name bound in branches), over a split (`tokenized_datasets["train"]`)
    or a `.map(...)` result, in a module that sets no per-item transform
    (`set_transform`, `with_transform`).  A local collate function that only
    stacks and pads (`pad_sequence`, `torch.stack`, also the one a helper
    such as `get_collate_fn(pad_index)` returns) counts as well, and rows
    passed to a function that builds the loader are the ones each call
    passes, as bound where the call runs (`train_data =
    train_data.with_format("torch")` before `get_data_loader(train_data,
    ...)`; a binding under a condition before it keeps the finding).
    Project analysis applies the same tests to rows and a collate that
    functions of another project module return (accelerate's
    `torch_native_parallelism` examples: `DataLoader(get_dataset(tokenizer,
    n), collate_fn=create_collate_fn())`, both imported from `utils`), in
    modules that set no per-item transform: the finding is taken back and
    `fix` leaves the loader alone.  A function imported from a package, or
    a name the script binds again, keeps the finding.
    Rows cached with `torch.save` and read back whole (`torch.load`,
    `pickle.load`; unpacked from a function that returns several, as
    DeepSpeed-Chat's `create_prompt_dataset`) count as rows, and a
    collator class without bases whose `__call__` only concatenates, pads,
    flips or reads shapes and whose `__init__` only stores its arguments
    (DeepSpeed-Chat's `DataCollatorReward`, `DataCollatorRLHF`) as a
    padding collate.  A dataset bound to `None` on another path (no
    loader is built there) does not count against the rest.
    A collate that does anything more, however cheap (shifting the ids
    into `labels`, `torch.where`, `torch.arange`), keeps the finding: the
    rule does not weigh the work.  So does a loader a tutorial only
    demonstrates (`data_iter = iter(loader)`, then `for x, y in loader:
    pass`): the rule cannot tell it from the loop users copy.  A dataset
    parameter is followed to the values this module's own calls pass, and
    project analysis follows it to other modules' callers: when every
    caller a walk reaches passes a dataset held in memory (a
    `TensorDataset` or one read back whole, by the tests above, also as a
    member of what another module's function returns), the finding is
    taken back.  NVIDIA's BERT distillation builds a `TensorDataset` in
    `squad_utils` (or reads it back with `torch.load`), returns it first of
    three to `task_distill.py`, which passes it to
    `squad_metrics.evaluate(args, model, dataset, ...)`: no finding there.
    A module that builds no loader is entered for this only when its text
    names `TensorDataset`.
    Measured with `benchmarks/pretokenized.py` (2 CPUs): a batch of 8
    costs 1.6 to 1.9 ms in the training process, and 1 or 2 workers made it
    0.41x to 0.56x as fast (moving each batch back from a worker costs more
    than building it); `loadlint verify` refuted workers on both shapes
    (0.40x and 0.60x, with other work on the machine).  Hugging Face's
    `Trainer` defaults to 0 workers too.

    A command-line default counts (`num_workers=args.workers` with
    `parser.add_argument("--workers", default=0)`, dataclass fields parsed by
    `HfArgumentParser`): it is what the script runs with unless the user
    passes the option, and the message names it.  So is the default of a
    parameter that every call in the module leaves out
    (`def build(ds, workers=0)` called as `build(train_ds)`), and the
    default of a config object: a yacs `CfgNode` tree, a dataclass field,
    `OmegaConf.create({...})`, or a YAML file beside the code that Hydra
    (`@hydra.main(config_path=..., config_name=...)`) or
    `OmegaConf.load("config.yaml")` reads.  What may change it stays unknown;
    LL203's page lists the limits.

    Hugging Face's `Trainer` builds its loaders from `TrainingArguments`
    (`dataloader_num_workers` defaults to 0): a `TrainingArguments(...)` or
    `Seq2SeqTrainingArguments(...)` call without workers is reported too
    (what its datasets hold is not known there); arguments parsed from the
    command line stay silent.

    Where workers would change what is loaded, the finding says so instead
    of suggesting a worker count: an `IterableDataset` whose `__iter__`
    reads an object handed in by the training code (a replay buffer, a
    queue) that this code keeps changing, and that never calls
    `get_worker_info()`.  Each worker would sample its own frozen copy.

    A call that `loadlint fix --from-verify` rewrote carries a mark such as
    `# loadlint: measured 8.65x on 2 CPUs, 2026-12-04`: measured beats
    guessed, so the rule stays silent while the target has the measured
    machine's CPUs (and GPUs), and on other hardware it says the
    measurement was made elsewhere.

    Known limitations (still reported; a `noqa` says the choice):
    - a dataset held in memory that reaches the loader through a
      container, an attribute or a call the project walk does not enter
      (a function of an installed package, a module whose text never
      names `TensorDataset`), or that a function returns in a tuple whose
      other returns of the same length hold something else;
    - a loader left at `num_workers=0` on purpose over a dataset that
      prefetches on its own threads (DLRM's binary datasets with
      `batch_size=None`), in-memory graphs batched by a custom
      `collate_fn`, a demo that reads a few batches and stops
      (`if i == 40: break`), a one-off conversion loop: the page's words
      hold, and the finding is the user's to decline.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    ```

    Use instead:
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=7)
    ```

    ## Fix safety
    The fix adds `num_workers=<suggestion>` (or replaces the `0`).  It is safe
    when nothing at the call forbids multi-process loading.  `loadlint fix`
    never applies a fix that would introduce a finding, so this one is
    withheld, with the reason in the help line, where workers would make
    another rule fire: a script that iterates the loader at module level
    without the main guard while workers start with spawn or forkserver
    (LL013), an `IterableDataset` that does not shard by worker (LL104), a
    `collate_fn`/`worker_init_fn` that cannot be pickled for spawned workers
    (LL007), CUDA in the Dataset (LL105), a random generator every worker
    would copy (LL103), or a dataset class of another project module that
    keeps an `lmdb`, `h5py` or file handle spawned workers cannot receive
    (LL014, read by project analysis).  In a notebook under spawn or
    forkserver it is withheld unless the dataset is traced to a class of an importable module:
    a class of the notebook (LL012) or a dataset not traced at all (a
    parameter, `{"train": a, "test": b}[split]` over untraced entries) would
    fail in the workers.  It is also withheld for a loader built at a
    script's module level under spawn or forkserver when no loop over it is
    visibly in a function or under the main guard and a function iterates a
    parameter (`train(train_dataloader)`, which LL013 does not follow).  The
    other fixes on the same call still apply.  A live data source has no fix.

    ## References
    - [PyTorch: Multi-process data loading](https://pytorch.org/docs/stable/data.html#multi-process-data-loading)
    - [Performance Tuning Guide: asynchronous data loading](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-async-data-loading-and-augmentation)
    """

    code = "LL201"
    name = "synchronous-loading"
    category = "performance"
    summary = "`num_workers` missing or 0: batches load on the training thread"
    fix_availability = "sometimes"
    needs_hardware = True

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.all_calls:
            value = call.value("num_workers")
            if value is not MISSING and (type(value) is not int or value != 0):
                continue
            # Batches built on the GPU (CUDA transforms, a collate that moves
            # them) cannot be built in workers: CUDA fails in a forked one.
            if not ctx.loading_pipeline(call) or batches_on_gpu(call, ctx.names, ctx.accelerator) is not None:
                continue
            # One batch read (``first(loader)``): one worker would build it, after its start-up.
            if one_batch_read(call, ctx.names, ctx.iteration, ctx.keys_of(call), ctx.statements):
                continue
            found = call.origin("num_workers")
            what = "`num_workers` is not set" if value is MISSING else "`num_workers=0`" + origin_note(found)
            live = ctx.live_source(call)
            if live is not None:
                cls, target, method = live
                message = (
                    f"{what}, but workers would change what is sampled: `{cls}.__iter__` reads `{target}`, which the "
                    f"training code keeps changing (`{target}.{method}(...)`), and each worker would sample its own "
                    "frozen copy of it; keep loading in the training process, or hand the workers the live data "
                    "explicitly (e.g. through a queue)"
                )
                yield Report(call.node, message)
                continue
            defers, elsewhere = measured_defers(ctx, call)
            if defers:
                continue  # measured on this hardware: the measurement wins over the guess
            share, shared = alive_share(ctx, call)
            n = suggested_workers(ctx, call, share)
            message = (
                f"{what}: batches are loaded in the training process, {waits(ctx)}; "
                f"{use_workers(ctx, 'num_workers', n)}{shared}{elsewhere}"
            )
            fix = _workers_fix(ctx, call, n, found, worker_hazards(ctx, call), share)
            fix.withheld = unguarded_script(ctx, call) or unimportable_dataset(ctx, call)
            yield Report(call.node, message, fix)
        yield from training_arguments(ctx)

    def revise_own(self, project: ProjectContext) -> Iterator[Revision]:
        """Across files: a loader over another module's dataset class that
        holds its data in memory is taken back, as a class of its own module
        is; the fix is withheld where the workers it starts would make the
        project report a finding, or a worker-hazard rule fire on the class."""
        for would in project.introduced:
            yield HoldFix(would.path, would.at, f"no fix: adding workers would introduce {would.code} ({would.name}) "
                          f"at {would.place}: {would.message}")
        for loader in project.imported:
            if loader.in_memory:
                yield TakeBack(loader.path, loader.at)
        # A dataset parameter: held in memory when every walk's caller
        # passed a TensorDataset (another module's ``evaluate(model, ds)``).
        passed: dict[tuple[str, int], bool] = {}
        for flow in project.loaders:
            memory = flow.dataset_in_memory
            if memory is not None:
                key = (flow.built.path, flow.built.at)
                passed[key] = passed.get(key, True) and memory
        for (path, at), memory in passed.items():
            if memory:
                yield TakeBack(path, at)
        # Every hazard counts, selected or not: the fix would crash the run all the same.
        for rule in hazard_rules():
            for report in rule.imported_worker_hazards(project):
                yield HoldFix(report.path, report.at, report.message)
