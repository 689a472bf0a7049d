"""Module constants imported from project modules, joined into the
summaries and the rules of the modules that import them.

Phase 1 describes a name imported from another module as
``{"import": "config.NUM_WORKERS"}`` and exports each module's constants
(``loadlint.facts.summary``).  Here the import is resolved as Python would
(``modules.ModuleResolver``) and replaced by the constant's value with a note
saying where it comes from; a constant that is itself imported is followed
(a bounded chain; a cycle stays unknown).  What cannot be resolved becomes
unknown (``{}``), so the rules stay silent.

A file that reads such a constant in a loader's (or ``TrainingArguments``')
arguments is analysed again with the values bound to the names it imports
(``engine.analyse(..., bindings={"<module>": ...})``); what is new is
reported, with the note in the message.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator

from loadlint.engine.analysis import analyse
from loadlint.project.modules import ModuleResolver, shown_path
from loadlint.engine.summaries import locate
from loadlint.sources.files import read_source
from loadlint.types import Descriptor, Finding, FunctionSummary, Options, Summary

MODULE = "<module>"
#: Constants followed through at most this many imports.
MAX_CHAIN = 8
#: A finding no line names a constant for is attributed by binding each
#: constant alone, for at most this many constants.
MAX_SOLE = 4
#: Files searched for writes to a config attribute, at most.
MAX_SCAN = 20000
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"})


class Constants:
    """Resolves imported names to project constants, with memos."""

    def __init__(
        self,
        root: Path,
        resolver: ModuleResolver,
        summary_of: Callable[[str], Summary | None],
        read_text: Callable[[str], str | None],
        read_bytes: Callable[[str, str | None], bytes] = read_source,
    ) -> None:
        self.root = root
        self.read_bytes = read_bytes
        self.resolver = resolver
        self.summary_of = summary_of
        self.read_text = read_text
        self._memo: dict[tuple[str, str], Descriptor] = {}
        self._lines: dict[str, dict[int, int]] = {}
        self._written: dict[tuple[str, str], bool] = {}
        #: id of a summary's functions -> (them, the names they import): a
        #: summary is resolved, then asked for its bindings; one walk serves both.
        self._reads: dict[int, tuple[object, list[str]]] = {}

    def lookup(self, importer: str, qualified: str) -> Descriptor:
        """The value descriptor of ``qualified`` as ``importer`` imports it,
        with a ``note``; ``{}`` when it is not a known project constant."""
        return self._lookup(importer, qualified, ())

    def _lookup(self, importer: str, qualified: str, seen: tuple[tuple[str, str], ...]) -> Descriptor:
        key = (importer, qualified)
        if key in self._memo:
            return self._memo[key]
        found: Descriptor = {}
        target = self.resolver.module_file(importer, qualified)
        if target is not None and "." in target[1]:
            found = self._option(*target)
        elif target is not None and len(seen) < MAX_CHAIN and target not in seen:
            path, name = target
            # Parsed only when the name is assigned at the start of a line
            # (a function or class passed as an argument costs a read, not a parse).
            text = self.read_text(path) if not path.endswith(".ipynb") else None
            assigned = text is not None and re.search(rf"^{re.escape(name)}[ \t]*(?::[^=\n]*)?=(?!=)", text, re.MULTILINE)
            summary = self.summary_of(path) if assigned else None
            constant = summary.get("constants", {}).get(name) if summary else None
            if isinstance(constant, dict):
                if "import" in constant:
                    found = self._lookup(path, str(constant["import"]), (*seen, target))
                elif "value" in constant or constant.get("cpu_count"):
                    shown = repr(constant["value"]) if "value" in constant else "os.cpu_count()"
                    note = f"`{_module_name(path)}.{name} = {shown}` from {self._place(path, constant.get('at'))}"
                    if "value" in constant:
                        found["value"] = constant["value"]
                    if "cpu_count" in constant:
                        found["cpu_count"] = constant["cpu_count"]
                    found["note"] = note
        self._memo[key] = found
        return found

    def _option(self, path: str, dotted: str) -> Descriptor:
        """A default of a module-level config tree (``cfg.DATA.NUM_WORKERS``
        of ``cfg = _C``), with a note naming it."""
        name, _, attribute = dotted.partition(".")
        text = self.read_text(path) if not path.endswith(".ipynb") else None
        if text is None or not re.search(rf"^{re.escape(name)}[ \t]*(?::[^=\n]*)?=(?!=)", text, re.MULTILINE):
            return {}
        summary = self.summary_of(path)
        constants = summary.get("constants") if summary else None
        entry = constants.get(name) if constants else None
        tree = entry.get("options") if entry else None
        constant = tree.get(attribute) if tree else None
        if not isinstance(constant, dict) or "value" not in constant or self._written_elsewhere(path, attribute):
            return {}
        note = f"{constant.get('text')} from {self._place(path, constant.get('at'))}"
        return {"value": constant["value"], "note": note, "tree": True}

    def _written_elsewhere(self, path: str, attribute: str) -> bool:
        """Whether a project file other than the config's own assigns the
        attribute (``cfg.DATA.NUM_WORKERS = ...``) or names its key in a
        string (``merge_from_list(["DATA.NUM_WORKERS", "2"])``): the default
        is then not what runs, wherever it is read."""
        if (path, attribute) not in self._written:
            self._written[(path, attribute)] = self._scan(path, attribute)
        return self._written[(path, attribute)]

    def _scan(self, path: str, attribute: str) -> bool:
        # Imported here: the facts import libcst, which a run served from the cache never needs.
        from loadlint.facts.configs import alias_pattern, key_pattern, write_pattern

        parts = tuple(attribute.split("."))
        written = [write_pattern(parts[:end]) for end in range(1, len(parts) + 1)]
        pattern = re.compile("|".join([*written, alias_pattern(parts[-1]), key_pattern(parts)]).encode())
        for count, other in enumerate(_python_files(self.root)):
            if count >= MAX_SCAN:
                return True  # not all read: assume it is there
            if other == path:
                continue
            try:
                if pattern.search(self.read_bytes(other, str(self.root))):
                    return True
            except OSError:
                continue
        return False

    def _place(self, path: str, ref: object) -> str:
        name = shown_path(path)
        if type(ref) is not int:
            return name
        if path not in self._lines:
            text = self.read_text(path)
            self._lines[path] = {} if text is None else {r: span[0].row for r, span in locate(text, None).items()}
        row = self._lines[path].get(ref)
        return f"{name}:{row}" if row is not None else name

    def resolve(self, path: str, summary: Summary) -> Summary:
        """``summary`` with its import descriptors replaced by values (a copy
        where anything changed: cached summaries are shared)."""
        if not self._imported(summary.get("functions")):
            return summary
        out = summary.copy()
        out["functions"] = self._replace_functions(path, summary["functions"])
        return out

    def _replace_functions(self, path: str, functions: dict[str, FunctionSummary]) -> dict[str, FunctionSummary]:
        """``_replace`` over a summary's functions, entering only those that
        read an import (a function's summary lists them in ``reads``)."""
        if type(functions) is not dict:  # a cache entry this code did not write
            replaced: dict[str, FunctionSummary] = self._replace(path, functions)
            return replaced
        changed: dict[str, FunctionSummary] | None = None
        for name, fn in functions.items():
            if type(fn) is dict and fn.get("reads") == []:
                continue
            new: FunctionSummary = self._replace(path, fn)
            if new is not fn:
                changed = dict(functions) if changed is None else changed
                changed[name] = new
        return functions if changed is None else changed

    def _replace(self, path: str, value: Any) -> Any:
        """``value`` with its import descriptors replaced; the same object
        where nothing under it changed (most of a summary: no copy).  Any
        JSON: a descriptor may sit at any depth of a function's summary."""
        kind = type(value)
        if kind is dict:
            if "import" in value and isinstance(value["import"], str):
                found = self.lookup(path, value["import"])
                # Kept beside the value: a parameter default bound again names
                # an import the factory's own file cannot evaluate.
                return {**found, "import": value["import"]} if found else {}
            changed: dict[str, Any] | None = None
            for key, item in value.items():
                new = self._replace(path, item)
                if new is not item:
                    changed = dict(value) if changed is None else changed
                    changed[key] = new
            return value if changed is None else changed
        if kind is list:
            items = [self._replace(path, v) for v in value]
            return value if all(a is b for a, b in zip(items, value)) else items
        return value

    def _imported(self, functions: object) -> list[str]:
        """The names ``functions`` (a summary's) imports, sorted."""
        memo = self._reads.get(id(functions))
        if memo is None or memo[0] is not functions:
            memo = self._reads[id(functions)] = (functions, sorted(set(_function_reads(functions))))
        return memo[1]

    def bindings(self, path: str, summary: Summary) -> dict[str, Descriptor]:
        """Values for the names ``path`` imports and reads in a loader's or
        a call's arguments: local name (``config.WORKERS``, ``WORKERS``) ->
        descriptor with its note."""
        imports = summary.get("imports", {})
        text = self.read_text(path) or ""
        out: dict[str, Descriptor] = {}
        for qualified in self._imported(summary.get("functions")):
            found = self.lookup(path, qualified)
            if not found:
                continue
            for local, full in imports.items():
                if qualified == full:
                    spelled = local
                elif qualified.startswith(full + "."):
                    spelled = local + qualified[len(full):]
                else:
                    continue
                # ``config.WORKERS = args.workers`` in this module: not the constant that runs.
                if "." in spelled and re.search(rf"\b{re.escape(spelled)}\s*(?:[-+*/]?=(?!=))", text):
                    continue
                out[spelled] = found
        return out


def _python_files(root: Path) -> Iterator[str]:
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        yield from (os.path.join(folder, name) for name in sorted(names) if name.endswith((".py", ".ipynb")))


def _module_name(path: str) -> str:
    p = Path(path)
    return p.parent.name if p.stem == "__init__" else p.stem


def _function_reads(functions: Any) -> Iterator[str]:
    """The import descriptors' names in a summary's functions: as each
    function lists them, or found by walking one that does not."""
    if type(functions) is not dict:
        yield from _imported_reads(functions)
        return
    for fn in functions.values():
        reads = fn.get("reads") if type(fn) is dict else None
        if type(reads) is list and all(type(name) is str for name in reads):
            yield from reads
        else:
            yield from _imported_reads(fn)


def _imported_reads(value: Any) -> Iterator[str]:
    """The import descriptors' names under ``value`` (JSON-like), in no
    particular order; a stack, not recursive generators (a summary nests deep)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            name = item.get("import")
            if isinstance(name, str):
                yield name
            else:
                stack.extend(item.values())
        elif kind is list:
            stack.extend(item)


def constant_findings(
    path: str,
    text: str,
    given: dict[str, Descriptor],
    options: Options,
    baseline: list[Finding] | None,
    notebook: bool = False,
) -> list[Finding]:
    """The findings of ``path`` that appear once the imported constants
    ``given`` are bound, with where each value comes from."""
    if baseline is None:
        baseline, _ = analyse(text, path, options, notebook=notebook)
    # By place: the run's own findings may carry a decided fix's note, and a
    # place the file already reports needs no second finding.
    before = {_sig(f)[:3] for f in baseline}
    after, _ = analyse(text, path, options, notebook=notebook, bindings={MODULE: given})
    notes = sorted({str(d["note"]) for d in given.values() if d.get("note")})
    lines = text.splitlines()
    alone: dict[str, set[tuple[str, int, int, str]]] = {}

    def sole(local: str) -> set[tuple[str, int, int, str]]:
        """The findings with only ``local`` bound (which constant a finding needs)."""
        if local not in alone:
            found, _ = analyse(text, path, options, notebook=notebook, bindings={MODULE: {local: given[local]}})
            alone[local] = {_sig(f) for f in found}
        return alone[local]

    out = []
    for finding in after:
        if _sig(finding)[:3] in before:
            continue
        finding = dataclasses.replace(finding)
        if not any(note in finding.message for note in notes):
            span = "\n".join(lines[finding.location.row - 1 : finding.end_location.row])
            named = [local for local in given if given[local].get("note") and re.search(rf"\b{re.escape(local)}\b", span)]
            if not named and len(given) <= MAX_SOLE:
                named = [local for local in given if given[local].get("note") and _sig(finding) in sole(local)]
            shown = sorted({str(given[local]["note"]) for local in named}) or notes
            finding.message += f" (with {' and '.join(shown)})"
        # A fix would write the value into the use and lose the constant.
        finding.fix = None
        out.append(finding)
    return out


def _sig(finding: Finding) -> tuple[str, int, int, str]:
    return finding.code, finding.location.row, finding.location.column, finding.message
