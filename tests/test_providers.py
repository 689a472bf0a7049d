"""Fact providers: one class and one registration line, read under one name."""

from __future__ import annotations

import importlib.util
import inspect
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import libcst as cst
import pytest

import loadlint.facts.collect as collect_module
from loadlint.facts.collect import ModuleFacts, collect, provided_names
from loadlint.rules.base import Context, RuleSettings

CODE = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader
    torch.distributed.init_process_group("nccl")
    loader = DataLoader(make(), num_workers=4)
""")

#: The whole of adding a provider: its class ...
PROVIDER_CLASS = '''
class CallCount:
    def __init__(self) -> None:
        self.count = 0
        self.settled = False


class CallCounter(Provider[CallCount]):
    def visit_Call(self, node: cst.Call) -> None:
        self.facts.count += 1

    def finish(self, module: cst.Module, text: str | None) -> None:
        self.facts.settled = True


'''
#: ... and its registration.
REGISTRATION = "    counted: CallCount = provided(CallCounter, CallCount)\n"


def unread_profile() -> object:
    raise AssertionError("the hardware profile was read")


def context(facts: ModuleFacts) -> Context:
    return Context(facts, RuleSettings(unread_profile), hardware=False)


def with_provider(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``loadlint.facts.collect`` as it reads with a provider added: the
    class before the registrations, the one line after the last of them."""
    source = Path(inspect.getfile(collect_module)).read_text(encoding="utf-8")
    registrations = "@dataclass(eq=False, repr=False, kw_only=True)\nclass ProvidedFacts:"
    last = "    cli: CliFacts = provided(CliProvider, CliFacts)\n"
    assert source.count(registrations) == 1 and source.count(last) == 1
    source = source.replace(registrations, PROVIDER_CLASS + registrations).replace(last, last + REGISTRATION)
    spec = importlib.util.spec_from_loader("loadlint_collect_with_counter", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses read the module of a class being made.
    monkeypatch.setitem(sys.modules, spec.name, module)
    exec(compile(source, "collect_with_counter.py", "exec"), module.__dict__)
    return module


def test_a_provider_registered_in_one_line_is_read_under_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    extended = with_provider(monkeypatch)
    facts = extended.collect(cst.parse_module(CODE), CODE)
    # init_process_group, DataLoader and make: each call once, and settled after the walk.
    assert (facts.counted.count, facts.counted.settled) == (3, True)
    ctx = context(facts)
    assert ctx.counted is facts.counted
    # The providers already registered see the same module as before.
    assert provided_names(type(facts))[-1] == "counted"
    assert len(facts.loaders.calls) == 1 and facts.launch.evidence
    assert "counted" not in provided_names(ModuleFacts)
    assert not hasattr(collect(cst.parse_module(CODE), CODE), "counted")


def test_each_provider_is_one_name_in_the_facts_and_the_context() -> None:
    facts = collect(cst.parse_module(CODE), CODE)
    ctx = context(facts)
    names = provided_names(ModuleFacts)
    assert names == ("loaders", "iteration", "loops", "launch", "accelerator", "datasets", "calls_between", "cli")
    for name in names:
        assert getattr(ctx, name) is getattr(facts, name), name
    # The old second names are gone: a rule reads what the engine collects.
    assert not hasattr(facts, "distributed") and not hasattr(ctx, "values")
    assert ctx.distributed is True and ctx.launch.evidence


def test_the_names_binding_provider_finishes_first() -> None:
    order = [collect_module.PROVIDERS[index].__name__ for index in collect_module.FINISH_ORDER]
    assert order[0] == "CliProvider"
    assert order[1:] == [p.__name__ for p in collect_module.PROVIDERS if p.__name__ != "CliProvider"]
