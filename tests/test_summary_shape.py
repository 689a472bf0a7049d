"""Project summaries have the shape ``loadlint.types`` declares: mypy checks
every read against those TypedDicts, so the summaries made of real modules
must hold exactly the keys declared, with the required ones present."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from loadlint.engine.summaries import summarise_text
from loadlint.facts import summary as summary_module
from loadlint.types import (
    CallSummary, Descriptor, Flags, FunctionSummary, ImportedDataset, LoaderSummary, Returns, SamplerSummary, Summary,
    Use,
)

REPO = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    [*(REPO / "tests" / "fixtures" / "projects").rglob("*.py"), *(REPO / "tests" / "fixtures" / "checker").rglob("*.py")]
)


def keys_of(shape: type) -> tuple[frozenset[str], frozenset[str]]:
    return shape.__required_keys__, shape.__optional_keys__  # type: ignore[attr-defined]


def check(value: object, shape: type, where: str) -> None:
    assert isinstance(value, dict), where
    required, optional = keys_of(shape)
    assert required <= value.keys(), (where, sorted(required - value.keys()))
    assert value.keys() <= required | optional, (where, sorted(value.keys() - required - optional))


def descriptor(value: object, where: str) -> None:
    check(value, Descriptor, where)


def check_function(fn: object, where: str) -> None:
    check(fn, FunctionSummary, where)
    assert isinstance(fn, dict)
    for name, d in fn.get("defaults", {}).items():
        descriptor(d, f"{where}.defaults.{name}")
    for i, loader in enumerate(fn["loaders"]):
        check(loader, LoaderSummary, f"{where}.loaders[{i}]")
        for name, d in loader["values"].items():
            descriptor(d, f"{where}.loaders[{i}].values.{name}")
    for i, sampler in enumerate(fn.get("samplers", [])):
        check(sampler, SamplerSummary, f"{where}.samplers[{i}]")
        if "shuffle" in sampler:
            descriptor(sampler["shuffle"], f"{where}.samplers[{i}].shuffle")
    for i, call in enumerate(fn["calls"]):
        check(call, CallSummary, f"{where}.calls[{i}]")
        for slot, d in call["args"].items():
            descriptor(d, f"{where}.calls[{i}].args.{slot}")
    for i, use in enumerate(fn["uses"]):
        check(use, Use, f"{where}.uses[{i}]")
        assert use["kind"] in ("iter", "next_iter", "iter_call", "transfer")
        descriptor(use["of"], f"{where}.uses[{i}].of")
        if "device" in use:
            descriptor(use["device"], f"{where}.uses[{i}].device")
    if "returns" in fn:
        check(fn["returns"], Returns, f"{where}.returns")
        for d in fn["returns"]["values"]:
            descriptor(d, f"{where}.returns")


@functools.cache
def summaries() -> list[tuple[str, Summary]]:
    out = []
    for path in SOURCES:
        made = summarise_text(path.read_text(encoding="utf-8"))
        if made is not None:
            out.append((path.relative_to(REPO).as_posix(), made))
    return out


def test_summaries_have_the_declared_shape():
    made = summaries()
    # All but the fixture that does not parse on purpose (projects/cycles/broken.py).
    assert len(made) == len(SOURCES) - 1 > 50
    seen: set[str] = set()
    for where, summary in made:
        check(summary, Summary, where)
        check(summary["flags"], Flags, f"{where}.flags")
        for name, fn in summary["functions"].items():
            check_function(fn, f"{where}:{name}")
            seen.update(fn.keys())
        for d in summary.get("constants", {}).values():
            descriptor(d, f"{where}.constants")
        for dataset in summary.get("imported_datasets", []):
            check(dataset, ImportedDataset, f"{where}.imported_datasets")
        seen.update(summary.keys())
    # The fixtures exercise every key a summary may hold.
    everything = set().union(*keys_of(Summary), *keys_of(FunctionSummary))
    assert everything <= seen, sorted(everything - seen)


def test_a_function_summary_keeps_its_json_order():
    # The order every cached summary was written in: a function's keys as
    # the TypedDict declares them, in _in_order's order.
    required, optional = keys_of(FunctionSummary)
    assert set(summary_module.FUNCTION_KEYS) == required | optional
    _, summary = next((w, s) for w, s in summaries() if any("samplers" in f for f in s["functions"].values()))
    for fn in summary["functions"].values():
        assert list(fn) == [k for k in summary_module.FUNCTION_KEYS if k in fn]
    text = json.dumps(summary, separators=(",", ":"))
    assert text.startswith(f'{{"version":{summary_module.VERSION},"imports":')


@pytest.mark.parametrize("shape", [Summary, FunctionSummary, Use, Descriptor])
def test_the_check_refuses_an_undeclared_key(shape):
    with pytest.raises(AssertionError):
        check({**dict.fromkeys(keys_of(shape)[0], None), "undeclared": 1}, shape, "here")
