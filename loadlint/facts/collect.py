"""One traversal, every provider: ``collect`` parses nothing and walks once.

The providers' hooks are chained into one visitor class: the cursor's
``visit_*`` runs before the providers' and its ``leave_*`` after them, so each
provider sees the scope and loops of the node it is given.  Everything that
needs the whole file (a device variable assigned below its use) is settled in
a provider's ``finish`` from its records, without a second pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Sequence, TypeVar

import libcst as cst

from loadlint.facts.accelerator import AcceleratorFacts, AcceleratorProvider
from loadlint.facts.alive import AliveFacts, collect_alive
from loadlint.facts.calls import CallFacts, CallProvider
from loadlint.facts.cli_args import CliFacts, CliProvider
from loadlint.facts.configs import ConfigRead, bind_configs
from loadlint.facts.cursor import Cursor, Provider
from loadlint.facts.datasets import DatasetFacts, DatasetProvider
from loadlint.facts.distributed import DistributedFacts, DistributedProvider
from loadlint.facts.iteration import IterationFacts, IterationProvider
from loadlint.facts.loaders import LoaderCall, LoaderFacts, LoaderProvider
from loadlint.facts.loops import LoopFacts, LoopProvider
from loadlint.facts.names import NameFacts
from loadlint.cst.slicing import prepare as prepare_parser
from loadlint.cst.walk import Unit, prepare_walkers, walk_units


F = TypeVar("F")


def provided(provider: type[Provider[F]], facts: Callable[[], F]) -> F:
    """A provider's registration: its facts' field, made empty by ``facts``
    for each module and filled by ``provider`` in the one traversal."""
    spec: F = field(metadata={"provider": provider, "facts": facts})
    return spec


@dataclass(eq=False, repr=False, kw_only=True)
class ProvidedFacts:
    """The providers' facts, one field each, in hook order: a field is a
    provider's one registration, and ``ModuleFacts`` and the rules'
    ``Context`` both read its facts under the field's name."""

    loaders: LoaderFacts = provided(LoaderProvider, LoaderFacts)
    iteration: IterationFacts = provided(IterationProvider, IterationFacts)
    loops: LoopFacts = provided(LoopProvider, LoopFacts)
    #: Distributed evidence, samplers and frameworks.
    launch: DistributedFacts = provided(DistributedProvider, DistributedFacts)
    accelerator: AcceleratorFacts = provided(AcceleratorProvider, AcceleratorFacts)
    datasets: DatasetFacts = provided(DatasetProvider, DatasetFacts)
    #: Calls between functions, returns, relative imports (project analysis).
    calls_between: CallFacts = provided(CallProvider, CallFacts)
    #: Command-line defaults, the framework argument calls and the module's exported values.
    cli: CliFacts = provided(CliProvider, CliFacts)


def provided_names(facts: type[ProvidedFacts]) -> tuple[str, ...]:
    """The providers' field names, in hook order."""
    return tuple(spec.name for spec in fields(facts) if "provider" in spec.metadata)


@dataclass
class ModuleFacts(ProvidedFacts):
    """Every provider's facts about one module, and what the traversal itself finds."""

    names: NameFacts
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


_REGISTERED = tuple((spec.name, spec.metadata["provider"], spec.metadata["facts"])
                    for spec in fields(ProvidedFacts) if "provider" in spec.metadata)
#: In hook order.  A provider reads only the cursor and its own records.
PROVIDERS: tuple[type[Provider[Any]], ...] = tuple(provider for _, provider, _ in _REGISTERED)
#: Indices into PROVIDERS in finishing order: those whose ``finish`` binds names the others read first.
FINISH_ORDER = sorted(range(len(PROVIDERS)), key=lambda index: not PROVIDERS[index].binds_names)

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
    # In the order of PROVIDERS, which the chained hooks index.
    providers = tuple(provider(collector, facts()) for _, provider, facts in _REGISTERED)
    collector.providers = providers
    # Our walker, not module.visit(): libcst's rebuilds every node it passes.
    units = walk_units(module, collector)
    # Namespaces first: a device may be a command-line default; config
    # objects before them, so that ``main(cfg)`` flows as ``main(args)`` does.
    config_reads = bind_configs(module, collector.names, text)
    for index in FINISH_ORDER:
        providers[index].finish(module, text)
    # The providers point back at the collector: left joined, that cycle
    # (and through the facts, the whole tree) would wait for the cyclic
    # collector, which walks every node of a live tree again and again
    # (a twentieth of a run); broken, the tree is freed when the caller drops it.
    collector.providers = ()
    found = {name: provider.facts for (name, _, _), provider in zip(_REGISTERED, providers)}
    return ModuleFacts(
        names=collector.names,
        units=units,
        alive=collect_alive(module, collector.names, found["loaders"], found["iteration"]),
        config_reads=config_reads,
        statements=module.body,
        **found,
    )
