"""Project summaries of whole module texts: for a dependency the run was
not given (its facts without its findings), and where the nodes a cached
summary numbered stand in the text when a finding needs its position."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadlint.cst.syntax import too_deep_at
from loadlint.cst.slicing import SLICE_ABOVE, parse_module
from loadlint.types import Location, Summary

if TYPE_CHECKING:
    import libcst

    from loadlint.engine.positions import Positions
    from loadlint.facts.collect import ModuleFacts


def summarise_text(text: str) -> Summary | None:
    """The project summary of a module's text, whether or not it builds a
    loader; None when it does not parse."""
    from loadlint.facts.collect import collect
    from loadlint.facts.summary import Numbering, summarise

    # A module this long is parsed in part when checked (``loadlint.cst.slicing``),
    # and a dependency's facts need all of it: it has none, as one that does
    # not parse, rather than costing the run seconds per megabyte.
    module = None if len(text) > SLICE_ABOVE else parse_quietly(text)
    if module is None:
        return None
    try:
        return summarise(collect(module, text), Numbering())
    except RecursionError:
        return None


def locate(text: str, refs: list[int] | None = None) -> dict[int, tuple[Location, Location]]:
    """Where the nodes a summary numbered ``refs`` (all when None) are in ``text``."""
    import libcst as cst

    found = numbered(text)
    if found is None:
        return {}
    positions, nodes = found
    try:
        count = len(nodes)
        wanted = range(count) if refs is None else [r for r in refs if 0 <= r < count]
        return {r: positions.range(nodes[r]) for r in wanted}
    except (RecursionError, KeyError, cst.CSTValidationError):
        return {}


def numbered(text: str) -> tuple[Positions, list[libcst.CSTNode]] | None:
    """The text's positions and the nodes its summary numbers, in order;
    None when it does not parse."""
    found = numbered_facts(text)
    return None if found is None else (found[0], found[1])


def numbered_facts(text: str) -> tuple[Positions, list[libcst.CSTNode], ModuleFacts] | None:
    """``numbered``'s answer with the module's facts (a project fix that
    reads what the module's functions use)."""
    import libcst as cst

    from loadlint.facts.collect import collect
    from loadlint.facts.summary import Numbering, summarise
    from loadlint.engine.positions import Positions

    module = parse_quietly(text)
    if module is None:
        return None
    numbering = Numbering()
    try:
        facts = collect(module, text)
        summarise(facts, numbering)
        return Positions(module, text, None, facts.units), numbering.nodes, facts
    except (RecursionError, KeyError, cst.CSTValidationError):
        return None


def parse_quietly(text: str) -> libcst.Module | None:
    if too_deep_at(text) is not None:
        return None
    try:
        return parse_module(text)
    except Exception:  # a dependency that does not parse has no facts
        return None
