"""LL014 across modules: a loader with workers whose dataset class, defined
in another project module, keeps a handle that cannot be pickled (the
class's module summary names it), reported at the loader."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from loadlint.engine.summaries import locate
from loadlint.engine.suppress import file_suppressions, suppressed_codes
from loadlint.project.modules import ModuleResolver
from loadlint.rules import name_of
from loadlint.types import Finding, Options, Summary


def _why(context: Any, summary: Summary, options: Options) -> str | None:
    """Why the loader's workers may start with spawn or forkserver; None
    when they fork or the context is not known."""
    if context in ("spawn", "forkserver"):
        return f'`multiprocessing_context="{context}"`'
    if context is not None:
        return None  # "fork", or not a literal
    from loadlint.rules.shared import spawn_reason  # imports libcst: see ``handles_elsewhere``

    methods = (summary.get("flags") or {}).get("start_methods") or []
    return spawn_reason(options.profile_factory(), None, frozenset(m for m in methods if isinstance(m, str)))


def handles_elsewhere(
    root: Path,
    summaries: dict[str, Summary],
    summary_of: Callable[[str], Summary | None],
    read_text: Callable[[str], str | None],
    original: dict[str, int],
    options: Callable[[str], Options],
) -> dict[str, list[Finding]]:
    resolver = ModuleResolver(root)
    out: dict[str, list[Finding]] = {}
    for path in original:
        summary = summaries.get(path)
        if summary is None or "LL014" not in options(path).select:
            continue
        found: list[tuple[int, str]] = []
        for loader in summary.get("imported_datasets", []):
            name, workers = loader.get("class"), loader.get("workers")
            if not isinstance(name, str) or type(workers) is not int or workers <= 0:
                continue
            where = resolver.module_file(path, name)
            if where is None or "." in where[1] or where[0] == path:
                continue
            module = summary_of(where[0])
            handle = module.get("handle_classes", {}).get(where[1]) if module is not None else None
            why = _why(loader.get("context"), summary, options(path)) if isinstance(handle, dict) else None
            if handle is None or why is None:
                continue
            # Imported here: the rules' modules import libcst, which a run
            # served from the cache (this module is imported by every run) never needs.
            from loadlint.rules.ll014_unpicklable_dataset_handle import message

            owner = f"{handle['cls']}.__init__` (`{os.path.relpath(where[0])}`)"
            found.append((int(loader.get("at", -1)), message(owner, handle, "the DataLoader", workers, why)))
        text = read_text(path) if found else None
        if text is None:
            continue
        spans = locate(text, [at for at, _ in found])
        lines = text.splitlines()
        file_level = file_suppressions(text) if options(path).noqa else set()
        for at, text_of in found:
            if at not in spans:
                continue
            start, end = spans[at]
            line = lines[start.row - 1] if start.row <= len(lines) else ""
            codes = (suppressed_codes(line) or set()) if options(path).noqa else set()
            if {"*", "LL014"} & (set(file_level) | set(codes)):
                continue
            out.setdefault(path, []).append(Finding("LL014", name_of("LL014"), text_of, path, start, end))
    return out
