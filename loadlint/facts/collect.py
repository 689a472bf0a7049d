"""One traversal, every provider: ``collect`` parses nothing and walks once.

The providers' hooks are chained into one visitor class: the cursor's
``visit_*`` runs before the providers' and its ``leave_*`` after them, so each
provider sees the scope and loops of the node it is given.  Everything that
needs the whole file (a device variable assigned below its use) is settled in
a provider's ``finish`` from its records, without a second pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import libcst as cst

from loadlint.facts.accelerator import AcceleratorFacts, AcceleratorProvider
from loadlint.facts.alive import AliveFacts, collect_alive
from loadlint.facts.calls import CallFacts, CallProvider
from loadlint.facts.cli_args import CliFacts, CliProvider
from loadlint.facts.configs import ConfigRead, bind_configs
from loadlint.facts.cursor import Cursor
from loadlint.facts.datasets import DatasetFacts, DatasetProvider
from loadlint.facts.distributed import DistributedFacts, DistributedProvider
from loadlint.facts.iteration import IterationFacts, IterationProvider
from loadlint.facts.loaders import LoaderCall, LoaderFacts, LoaderProvider
from loadlint.facts.loops import LoopFacts, LoopProvider
from loadlint.facts.names import NameFacts
from loadlint.cst.slicing import prepare as prepare_parser
from loadlint.cst.walk import Unit, prepare_walkers, walk_units


@dataclass
class ModuleFacts:
    """Every provider's facts about one module."""

    names: NameFacts
    loaders: LoaderFacts
    iteration: IterationFacts
    loops: LoopFacts
    distributed: DistributedFacts
    accelerator: AcceleratorFacts
    datasets: DatasetFacts
    #: Calls between functions, returns, relative imports (project analysis).
    calls_between: CallFacts
    #: Command-line defaults and the module's exported values.
    cli: CliFacts
    #: Each node's innermost statement unit (``walk.statement_units``),
    #: found by the same traversal: locating a finding needs it.
    units: tuple[dict[int, int], list[Unit]]
    #: Loaders whose workers are certainly alive at the same time.
    alive: AliveFacts = field(default_factory=AliveFacts)
    #: YAML files the module reads into names (Hydra, ``OmegaConf.load``).
    config_reads: list[ConfigRead] = field(default_factory=list)
    #: The module's top-level statements (a fix that guards some of them).
    statements: Sequence[cst.BaseStatement] = ()

    @property
    def calls(self) -> list[LoaderCall]:
        return self.loaders.calls


#: In hook order.  A provider reads only the cursor and its own records.
PROVIDERS = (
    LoaderProvider, IterationProvider, LoopProvider, DistributedProvider, AcceleratorProvider, DatasetProvider,
    CallProvider, CliProvider,
)

Hook = Callable[[Any, cst.CSTNode], Any]


def _chain(own: Hook | None, parts: tuple[tuple[int, Hook], ...], leave: bool) -> Hook:
    """One method calling the cursor's hook and the providers' (written
    out, compiled: a loop over them was a tenth of the traversal)."""
    namespace: dict[str, Any] = {"own": own}
    calls: list[str] = []
    for k, (index, hook) in enumerate(parts):
        namespace[f"hook{k}"] = hook
        calls.append(f"hook{k}(providers[{index}], node)")
    if leave:
        lines = ["providers = self.providers", *calls, *(["own(self, node)"] if own is not None else [])]
    else:
        lines = ["result = own(self, node)" if own is not None else "result = None", "providers = self.providers"]
        for call in calls:
            lines.extend([f"if {call} is False:", "    result = False"])
        lines.append("return result")
    source = "def hook(self, node):\n" + "".join(f"    {line}\n" for line in lines)
    exec(compile(source, "<loadlint chained hook>", "exec"), namespace)
    chained: Hook = namespace["hook"]
    return chained


class _Collector(Cursor):
    providers: tuple[Any, ...]


def _compose() -> type[_Collector]:
    hooks: dict[str, list[tuple[int, Hook]]] = {}
    for index, provider in enumerate(PROVIDERS):
        for name, value in vars(provider).items():
            if name.startswith(("visit_", "leave_")) and callable(value):
                hooks.setdefault(name, []).append((index, value))
    methods = {
        name: _chain(getattr(Cursor, name, None), tuple(parts), name.startswith("leave_"))
        for name, parts in hooks.items()
    }
    return type("Collector", (_Collector,), methods)


_COLLECTOR = _compose()


def prepare() -> None:
    """Make the parser's node constructors and the traversal's walkers now,
    once: before forking workers, which share them, or as an editor starts."""
    prepare_parser()
    prepare_walkers(_COLLECTOR)


def collect(module: cst.Module, text: str | None = None) -> ModuleFacts:
    """The facts of one parsed module, from one traversal; ``text`` is its
    source when the caller has it (printing the tree again is slow)."""
    collector = _COLLECTOR()
    loaders = LoaderProvider(collector, LoaderFacts())
    iteration = IterationProvider(collector, IterationFacts())
    loops = LoopProvider(collector, LoopFacts())
    distributed = DistributedProvider(collector, DistributedFacts())
    accelerator = AcceleratorProvider(collector, AcceleratorFacts())
    datasets = DatasetProvider(collector, DatasetFacts())
    between = CallProvider(collector, CallFacts())
    cli = CliProvider(collector, CliFacts())
    # In the order of PROVIDERS, which the chained hooks index.
    collector.providers = (loaders, iteration, loops, distributed, accelerator, datasets, between, cli)
    # Our walker, not module.visit(): libcst's rebuilds every node it passes.
    units = walk_units(module, collector)
    # Namespaces first: a device may be a command-line default; config
    # objects before them, so that ``main(cfg)`` flows as ``main(args)`` does.
    config_reads = bind_configs(module, collector.names, text)
    cli.finish(module, text)
    loaders.finish()
    accelerator.finish()
    distributed.finish()
    # The providers point back at the collector: left joined, that cycle
    # (and through the facts, the whole tree) would wait for the cyclic
    # collector, which walks every node of a live tree again and again
    # (a twentieth of a run); broken, the tree is freed when the caller drops it.
    collector.providers = ()
    return ModuleFacts(
        collector.names,
        loaders.facts,
        iteration.facts,
        loops.facts,
        distributed.facts,
        accelerator.facts,
        datasets.facts,
        between.facts,
        cli.facts,
        units,
        collect_alive(module, collector.names, loaders.facts, iteration.facts),
        config_reads,
        module.body,
    )
