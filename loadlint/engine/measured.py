"""Configurations measured by ``loadlint verify``, written back as fixes.

``loadlint fix --from-verify REPORT`` reads the JSON report (the static
core never imports the verify package: the report is its only interface)
and turns each confirmed call site into a FixSpec for the call at that line,
applied under the same checks as any rule's fix.
"""

from __future__ import annotations

import ast
import json
import os
import time
from dataclasses import dataclass

import libcst as cst

from loadlint.cst.codegen import code_for_node
from loadlint.engine.call_rewrite import arg_index
from loadlint.engine.fixes import FixError
from loadlint.engine.positions import Positions
from loadlint.rules.base import CallChange, FixSpec
from loadlint.facts.signature import TUNABLE_DEFAULTS
from loadlint.types import Location


class ReportError(Exception):
    """A verify report that cannot be read or does not have the expected shape."""


@dataclass(frozen=True)
class MeasuredSite:
    """One confirmed call site of a verify report: where, and what to write."""

    path: str
    line: int
    end_line: int | None
    set: tuple[tuple[str, object], ...]
    remove: tuple[str, ...]
    #: The comment left next to the call: what was measured, where, when.
    mark: str | None = None

    def describe(self) -> str:
        return f"line {self.line}"


def _literal(value: object) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, (int, float)) and value == value and value not in (float("inf"), float("-inf")):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise ReportError(f"value {value!r} cannot be written as Python source")


def load_verify_report(path: str) -> tuple[list[MeasuredSite], list[str]]:
    """The confirmed sites of a ``loadlint verify`` JSON report, and notes on
    the sites skipped (not confirmed).  Relative file names are taken from
    the report's folder."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ReportError(f"{path} is not JSON: {exc}") from None
    sites = data.get("call_sites") if isinstance(data, dict) else None
    if not isinstance(sites, list):
        raise ReportError(f"{path} is not a loadlint verify report (no \"call_sites\" list)")
    base = os.path.dirname(os.path.abspath(path))
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    date = data.get("date") if isinstance(data.get("date"), str) else time.strftime("%Y-%m-%d", time.gmtime())
    out: list[MeasuredSite] = []
    skipped: list[str] = []
    for i, site in enumerate(sites):
        if not isinstance(site, dict) or not isinstance(site.get("file"), str) or not isinstance(site.get("line"), int):
            raise ReportError(f"{path}: call_sites[{i}] needs \"file\" and \"line\"")
        where = f"{site['file']}:{site['line']}"
        if site.get("verdict") != "confirmed":
            skipped.append(f"{where}: verdict {site.get('verdict')!r}, nothing to apply")
            continue
        best = site.get("best")
        if not isinstance(best, dict):
            raise ReportError(f"{path}: call_sites[{i}] has no \"best\" configuration")
        unknown = sorted(set(best) - set(TUNABLE_DEFAULTS))
        if unknown:
            raise ReportError(f"{path}: call_sites[{i}] sets {', '.join(unknown)}, which verify does not tune")
        removed = site.get("removed")
        if isinstance(removed, list):
            remove = tuple(k for k in removed if k in TUNABLE_DEFAULTS and k not in best)
        else:
            # An older report: every tunable keyword not in ``best`` goes.
            remove = tuple(k for k in TUNABLE_DEFAULTS if k not in best)
        for value in best.values():
            _literal(value)
        file = site["file"] if os.path.isabs(site["file"]) else os.path.join(base, site["file"])
        end = site.get("end_line")
        out.append(MeasuredSite(
            os.path.normpath(file), site["line"], end if isinstance(end, int) else None, tuple(best.items()), remove,
            _mark(site.get("speedup"), machine, date),
        ))
    return out, skipped


def _mark(speedup: object, machine: dict[str, object], date: str) -> str | None:
    """``# loadlint: measured 8.65x on 2 CPUs, 2026-12-04`` (the rules that
    guess defer to it on that hardware), or None without the figures."""
    cpus, gpus = machine.get("usable_cpus"), machine.get("gpu_count")
    if not isinstance(speedup, (int, float)) or not isinstance(cpus, int) or isinstance(cpus, bool):
        return None
    gpu = f", {gpus} GPU{'s' * (gpus != 1)}" if isinstance(gpus, int) and gpus > 0 else ""
    return f"# loadlint: measured {speedup:.2f}x on {cpus} CPU{'s' * (cpus != 1)}{gpu}, {date}"


def _calls_at(positions: Positions, line: int) -> list[cst.Call]:
    return [node for node in positions.starting_at(line) if isinstance(node, cst.Call)]


def _arg_value(call: cst.Call, name: str) -> cst.Arg | None:
    index = arg_index(call, name)
    return None if index is None else call.args[index]


def _holds(call: cst.Call, name: str, value: object) -> bool:
    """The call already passes ``name=value`` (literally)."""
    arg = _arg_value(call, name)
    if arg is None:
        return name in TUNABLE_DEFAULTS and TUNABLE_DEFAULTS[name] == value and type(value) is type(TUNABLE_DEFAULTS[name])
    try:
        current = ast.literal_eval(code_for_node(arg.value))
    except (ValueError, SyntaxError, TypeError):
        return False
    return current == value and type(current) is type(value)


def _site_rank(call: cst.Call, positions: Positions, site: MeasuredSite) -> tuple[bool, bool, Location]:
    """Prefer the call that ends where the report says, looks like a loader,
    and is outermost (inner calls starting on the line are its arguments)."""
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    end = positions.range(call)[1]
    return (site.end_line is None or end.row == site.end_line, "Loader" in name, end)


def measured_specs(sites: list[MeasuredSite], text: str, positions: Positions) -> list[tuple[str, FixSpec]]:
    """FixSpecs writing each site's measured configuration into the call that
    starts at its line; a site already applied gives none.  Raises FixError
    when the call is not where the report says (the file changed since)."""
    specs = []
    for site in sites:
        candidates = _calls_at(positions, site.line)
        if not candidates:
            raise FixError(f"no call starts at line {site.line}; the file changed since it was verified")
        call = max(candidates, key=lambda c: _site_rank(c, positions, site))
        settled = all(_holds(call, k, v) for k, v in site.set) and all(
            _holds(call, k, TUNABLE_DEFAULTS[k]) for k in site.remove
        )
        if settled:
            continue
        if site.end_line is not None and positions.range(call)[1].row != site.end_line:
            raise FixError(
                f"the call at line {site.line} no longer ends at line {site.end_line}; "
                "the file changed since it was verified"
            )
        change = CallChange(
            call,
            {k: _literal(v) for k, v in site.set if not _holds(call, k, v)},
            tuple(k for k in site.remove if _arg_value(call, k) is not None and not _holds(call, k, TUNABLE_DEFAULTS[k])),
        )
        shown = ", ".join(f"{k}={_literal(v)}" for k, v in site.set) or "DataLoader defaults"
        comment: list[tuple[cst.CSTNode, str]] = [(call, site.mark)] if site.mark else []
        specs.append(("verify", FixSpec("safe", f"Apply the measured configuration ({shown})", calls=[change],
                                        comment=comment)))
    return specs
