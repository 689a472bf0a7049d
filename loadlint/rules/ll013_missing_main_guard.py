from __future__ import annotations

import os
from typing import Iterator, Sequence

import libcst as cst

from loadlint.facts.names import NameFacts
from loadlint.facts.toplevel import first_holding, globals_read, is_main_guard, top_statements
from loadlint.rules.base import Context, FixSpec, Report, Rule
from loadlint.rules.project_context import Guard, HoldFix, LoaderFlow, ProjectContext, ProjectReport, Revision
from loadlint.rules.shared import module_spawn_reason, spawn_reason, workers_on


_GUARD = 'if __name__ == "__main__":'
_FIX = f"Indent the module-level code that starts the workers under `{_GUARD}`"
_UNSAFE = " (unsafe: a module that imports this script no longer runs that code)"


#: A module body in a use's chain of calls.
_MODULE = "<module>"


def _reached_at_module_level(project: ProjectContext, flow: LoaderFlow) -> Iterator[ProjectReport]:
    """The unguarded module-level call that reaches a loop over a loader
    with workers in a function, or the module-level line that starts the
    workers of a loader built elsewhere."""
    workers = flow.workers
    if workers is None or flow.setting("multiprocessing_context").known and (
        flow.setting("multiprocessing_context").value == "fork"
    ):
        return
    for use in flow.uses:
        kind = use.kind
        if kind not in ("iter", "next_iter", "iter_call"):
            continue
        chain = use.chain
        root = chain[0]
        if root.function != _MODULE or project.notebook(root.path):
            continue  # a notebook runs as one script: no worker re-imports it (LL012's case)
        if len(chain) == 1:
            if use.here or use.guarded:
                continue  # built here: the file's own check
            at = use.at
        else:
            first = chain[1]
            if first.site is None or first.site_guarded:
                continue
            at = first.site
        methods = project.module(root.path).start_methods | project.module(flow.built.path).start_methods
        reason = spawn_reason(project.profile(root.path), None, methods)
        if reason is None:
            continue
        if len(chain) == 1:
            what = {"iter": "a loop over", "next_iter": "`next(iter(...))` of", "iter_call": "`iter(...)` of"}[kind]
            message = (
                f"{what} a loader with {workers} workers (built at {flow.place}) runs at module level "
                f"without `{_GUARD}`, and its workers may start with spawn or forkserver ({reason}): every "
                "worker re-imports this script, reaches this line again and fails; move it into a function "
                f"called under `{_GUARD}`"
            )
        else:
            reached = "`iter(...)` of" if kind == "iter_call" else "a loop over"
            message = (
                f"this call reaches {reached} a loader with {workers} workers ({use.place}, in "
                f"`{use.function}`) without `{_GUARD}`, and its workers may start with "
                f"spawn or forkserver ({reason}): every worker re-imports this script, runs this call again and "
                f"fails; call it from a function run under `{_GUARD}`"
            )
        yield ProjectReport(root.path, at, message, Guard(at))


def guard_fix(body: Sequence[cst.BaseStatement], names: NameFacts, nodes: Sequence[cst.CSTNode]) -> FixSpec | None:
    """The statements from the first that holds one of ``nodes`` (what
    starts workers: a loop, or a call that reaches one) to the end of the
    script, with the plain statements just above them that no function
    reads, indented under the guard; withheld where a worker could miss
    something it needs.  The project phase asks for it too, for a call that
    reaches a loop in a function."""
    first = first_holding(body, nodes)
    if first is None:
        return None
    tops = top_statements(body)

    def withheld(why: str) -> FixSpec:
        return FixSpec("unsafe", _FIX + _UNSAFE, withheld=f"no fix: {why}")

    if any(is_main_guard(t.node) for t in tops):
        return withheld(
            f"the script already has an `{_GUARD}` block; move this code into it (or into a function it calls)")
    reads = globals_read(names)
    for top in tops[first:]:
        if top.defines is not None:
            return withheld(
                f"`{top.defines}` is defined below the code that starts the workers; under the guard it would be "
                "hidden from the workers, which re-import the script and may need it; move the definitions above "
                "that code first")
        shared = sorted(top.binds & reads.keys())
        if shared:
            return withheld(
                f"`{reads[shared[0]]}` reads the global `{shared[0]}`, which the code to guard binds; a worker "
                "re-imports the script without running that code, and would not have it")
    start = first
    while start > 0:
        top = tops[start - 1]
        if top.preamble or top.defines is not None or top.binds & reads.keys():
            break
        start -= 1
    left = next((t for t in tops[:start] if t.sets_start_method), None)
    if left is not None:
        return withheld(
            "`set_start_method(...)` stays outside the guard (definitions or globals that functions read come "
            "between): every worker would run it again and fail (\"context has already been set\")")
    return FixSpec("unsafe", _FIX + _UNSAFE, guard=tuple(t.node for t in tops[start:]))


class MissingMainGuard(Rule):
    """
    ## What it does
    Checks scripts for a `DataLoader` with workers that is iterated at
    module level, outside `if __name__ == "__main__":`, when the workers may
    start with spawn or forkserver.

    ## Why is this bad?
    A spawned (or forkserver) worker starts a fresh interpreter and imports
    the main script again, as `__mp_main__`, to find the dataset's class and
    functions.  Code at module level runs again in every worker: it builds
    the loader and iterates it, which tries to start workers from a worker
    that has not finished starting, and fails with

    ```text
    RuntimeError: An attempt has been made to start a new process before the
    current process has finished its bootstrapping phase.
    ```

    The DataLoader then reports that its workers exited unexpectedly.  macOS
    and Windows always spawn; Linux starts workers with forkserver from
    Python 3.14, so a script that runs on Linux today breaks there.  The
    start method comes from `multiprocessing_context`,
    `set_start_method(...)`, or the target's `platform` and `python`
    (`--target`, `[tool.loadlint.target]`); without a declared platform the
    portable answer applies and the rule reports.  It is silent with
    `multiprocessing_context="fork"`, and in notebooks (LL012 covers them).

    A `for` loop over the loader, `next(iter(loader))` or `iter(loader)`
    written at module level is seen here; a training function called at
    module level, a loader built by a factory, and a module-level loader
    that a function iterates (`for epoch in ...: train(epoch)` where `train`
    loops over the global `trainloader`, the shape of a much-copied CIFAR
    script) are followed by project analysis (the finding is then on the
    module-level line that starts the iteration).  A loop in a nested
    function is not followed: when it runs is unknown.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=32, num_workers=4)
    for batch in loader:
        train_step(batch)
    ```

    Use instead:
    ```python
    from torch.utils.data import DataLoader


    def main():
        loader = DataLoader(dataset, batch_size=32, num_workers=4)
        for batch in loader:
            train_step(batch)


    if __name__ == "__main__":
        main()
    ```

    ## Fix safety
    The fix indents the module-level code under `if __name__ == "__main__":`,
    where it stays at module level, so its names are still the script's
    globals.  It guards every statement from the first one that starts the
    workers to the end of the script, and the plain statements just above
    them (building the loader, the model, `set_start_method(...)`) up to the
    last import, `def` or `class`, or the last assignment of a global that a
    function or lambda of the script reads: a worker re-imports the script
    without running guarded code, and the dataset's methods may read those
    globals.  Comments and blank lines above the guarded code stay where
    they are; comments between its statements move in with them.  The fix
    is unsafe: a module that imports the script no longer runs that code.

    A finding of project analysis (a module-level call that reaches a loop
    in a function of this script or of another module) gets the same fix,
    in the script that makes the call: the statements from the first such
    call to the end of the script go under the guard, with the plain
    statements above them as before, so a module-level loader that a
    function iterates (the CIFAR shape) stays above the guard, built but
    never iterated by a worker.

    The fix is withheld, with the reason, where the workers could miss
    something they need:

    - a `def` or `class` comes after the code that starts the workers (a
      worker needs it to unpickle the dataset or the collate function);
    - that code assigns a global that a function of the script reads (a
      dataset's `__getitem__` reading a module-level table);
    - the script already has a main guard: the code belongs in that one;
    - a `set_start_method(...)` would stay outside the guard, where every
      spawned worker runs it again and fails ("context has already been
      set");
    - another module of the project imports this one (found by project
      analysis): under the guard, what it runs on import would no longer
      run for that importer.  A file checked alone (standard input, the
      flake8 plugin, an editor's fix-all) cannot see importers: that is
      why the fix is unsafe.

    A fix that adds workers (LL201) does not guard the script as a side
    effect: where workers would introduce this finding, that fix is
    withheld instead.  Notebooks get neither the finding nor the fix.

    ## References
    - [PyTorch: Platform-specific behaviors](https://pytorch.org/docs/stable/data.html#platform-specific-behaviors)
    - [Python: multiprocessing, safe importing of main module](https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-methods)
    """

    code = "LL013"
    name = "missing-main-guard"
    category = "crash"
    summary = "a loader with workers iterated at module level without `if __name__ == \"__main__\":` under spawn/forkserver"
    needs_hardware = True
    # Offered everywhere, withheld with its reason where a worker could miss
    # something (as LL203 counts its machine-bound withholding).
    fix_availability = "sometimes"
    # Guarding reshapes the script: only where this finding already is.
    implied_fix = False
    #: Across files, a fix adding workers would introduce it (asked after LL207).
    project_hazard = 2

    def check(self, ctx: Context) -> Iterator[Report]:
        if ctx.is_notebook:
            return
        found: list[tuple[cst.CSTNode, str]] = []
        anchors: list[cst.For | cst.Call] = []
        for call in ctx.calls:
            if not workers_on(call):
                continue
            keys = ctx.keys_of(call)
            iteration = ctx.iteration
            # (node, what the message says, the loop or call that starts workers):
            # loops, then iterators made by hand.
            starts: list[tuple[cst.CSTNode, str, cst.For | cst.Call]] = [
                (it.node.iter, f"`{it.key[1]}` ({call.workers()} workers) is iterated", it.node)
                for it in iteration.iterations
                if it.key in keys and it.at_module_level and not it.in_main_guard
            ]
            starts += [
                (step.node, f"`next(iter({step.key[1]}))` ({call.workers()} workers) starts the workers", step.node)
                for step in iteration.next_iter
                if step.key in keys and step.at_module_level and not step.in_main_guard
            ]
            starts += [
                (made.node, f"`iter({made.key[1]})` ({call.workers()} workers) starts the workers", made.node)
                for made in iteration.iter_calls
                if made.key in keys and made.at_module_level and not made.in_main_guard
            ]
            if not starts:
                continue
            why = module_spawn_reason(ctx, call)
            if why is None:
                continue
            for node, what, anchor in starts:
                place = "loop" if what.endswith("iterated") else "line"
                anchors.append(anchor)
                found.append((
                    node,
                    f"{what} at module level without `{_GUARD}`, "
                    f"and its workers may start with spawn or forkserver ({why}): every worker re-imports this "
                    f"script, reaches this {place} again and fails (\"An attempt has been made to start a new process "
                    f"before the current process has finished its bootstrapping phase\"); move the {place} into a "
                    f"function, e.g. `def main():`, and call it under `{_GUARD}`",
                ))
        if not found:
            return
        # One guard for the whole script: every finding offers the same edit.
        fix = guard_fix(ctx.statements, ctx.names, anchors)
        for node, message in found:
            yield Report(node, message, fix)

    def check_project(self, project: ProjectContext) -> Iterator[ProjectReport]:
        for flow in project.loaders:
            yield from _reached_at_module_level(project, flow)

    def revise_own(self, project: ProjectContext) -> Iterator[Revision]:
        """The guard is withheld in a script another project module imports
        (one that starts workers at module level, or that the hook reported):
        under the guard, what it runs on import would no longer run for its
        importer."""
        scripts = [path for path in project.summarised if project.module(path).unguarded_starts]
        scripts += sorted(project.reported)
        for path, by in project.importers_of(scripts).items():
            yield HoldFix(path, None, (
                f"no fix: `{os.path.relpath(by)}` imports this module, and under `{_GUARD}` "
                "the code it runs on import would no longer run there; move that code into a function instead"
            ))
