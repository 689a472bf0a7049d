"""Phase 2's findings: the walk's loaders (``flow``) turned into findings
where the user edits, with the chain of calls in the message.

Each rule here reports only what a single file cannot show (a loader used
in another function than the one that built it); the file's own rules keep
the rest, and a finding they already make on the same line is not repeated.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Callable, Protocol

from loadlint.engine.analysis import Bindings, analyse
from loadlint.engine.suppress import file_suppressions, suppressed_codes
from loadlint.engine.notebook import cell_of
from loadlint.project.budget import Budget, unfinished_message
from loadlint.project.flow import MISSING_VALUE, MODULE, Event, Frame, LoaderRef, SamplerRef, Value, resolve
from loadlint.project.modules import shown_path
from loadlint.rules import name_of
from loadlint.engine.summaries import locate
from loadlint.types import Descriptor, Finding, Flags, Location, Options

NOTEBOOK = ".ipynb"
_PERCENT_CELL = re.compile(r"^# %%", re.MULTILINE)
_GUARD = 'if __name__ == "__main__":'
#: ``device_of`` for a parameter no caller on the path gave a value.
UNBOUND = "unbound"


class Source(Protocol):
    """What the reporter reads from the project (``loadlint.project.Project``)."""

    @property
    def root(self) -> Path: ...

    @property
    def read_text(self) -> Callable[[str], str | None]: ...

    @property
    def file_options(self) -> Callable[[str], Options]: ...

    @property
    def own_findings(self) -> Callable[[str], list[Finding] | None]: ...

    def mentions(self, word: bytes) -> bool: ...


def show(value: Value) -> str:
    """A value as a message shows it (``?`` when unknown)."""
    if isinstance(value, dict):
        if "value" in value:
            return repr(value["value"])
        if value.get("cpu_count"):
            return "cpu_count()"
        if value.get("lambda"):
            return "lambda ..."
    return "?"


def _workers(ref: LoaderRef) -> str | None:
    """The loader's worker count as the message shows it, when certainly > 0."""
    value = ref.setting("num_workers")
    if isinstance(value, dict):
        count = value.get("value")
        if type(count) is int and count > 0:
            return str(count)
        if value.get("cpu_count"):
            return "`os.cpu_count()`"
    return None


def _device_string(value: str) -> str | None:
    head = value.split(":", 1)[0].strip().lower()
    if head in ("cuda", "cpu", "xla"):
        return head
    return "other" if head in ("mps", "xpu", "npu", "hpu") else None


def device_of(descriptor: Value, frame: Frame) -> str | None:
    """The kind of a transfer's device in ``frame`` ("cuda", "cpu", ...), None when unknown.

    A parameter takes the caller's value (or its default), through any
    number of calls: each frame's values were resolved when it was entered.
    """
    value = resolve(descriptor, frame, [], []) if isinstance(descriptor, dict) else descriptor
    if not isinstance(value, dict):
        return None
    if value.get("unbound"):
        # No caller this walk came through gave it (a function walked on its
        # own): the walks from its callers decide.
        return UNBOUND
    text = value.get("value")
    if isinstance(text, str):
        return _device_string(text)
    kind = value.get("device")
    return kind if isinstance(kind, str) else None


class _Locator:
    """Positions of summary-numbered nodes, one parse per file needed."""

    def __init__(self, project: Source) -> None:
        self.project = project
        self.files: dict[str, dict[int, tuple[Location, Location]]] = {}

    def span(self, path: str, ref: int) -> tuple[Location, Location] | None:
        if path not in self.files:
            text = self.project.read_text(path)
            self.files[path] = {} if text is None else locate(text, None)
        return self.files[path].get(ref)

    def name(self, path: str) -> str:
        return shown_path(path)

    def place(self, path: str, ref: int) -> str:
        """``engine.py:40`` (relative to the current folder)."""
        span = self.span(path, ref)
        name = self.name(path)
        if span and path.endswith(NOTEBOOK):
            cell, row = cell_of(self.project.read_text(path) or "", span[0].row)
            return f"{name}:cell {cell}:{row}"
        return f"{name}:{span[0].row}" if span else name


class Reporter:
    """Turns the walk's loaders into findings on the files asked for."""

    def __init__(
        self, project: Source, wanted: set[str], flags: Callable[[str], Flags], entered: list[Frame]
    ) -> None:
        self.project = project
        self.wanted = wanted
        #: A module's flags (``loadlint.facts.summary``): what its own rules see.
        self.flags = flags
        self.where = _Locator(project)
        self.out: dict[str, list[Finding]] = {}
        self.seen: set[tuple[str, str, int, int, str]] = set()
        self.baselines: dict[str, set[tuple[str, int, int]]] = {}
        self.own: dict[str, set[tuple[str, int]]] = {}
        self.injected: set[tuple[str, str]] = set()
        self.reanalysed: dict[tuple[str, str], list[Finding]] = {}
        self.budget = Budget()
        #: A factory file's tree, parsed once for all its callers' values.
        self.trees: dict[str, Any] = {}
        #: Whether any project file mentions ``set_epoch`` (read once, on demand).
        self.set_epoch_anywhere: bool | None = None
        #: The fix each finding asks for, by (path, code, row, column):
        #: (node ref, keywords to set, applicability, label); decided in ``fixing``.
        self.changes: dict[tuple[str, str, int, int], Change] = {}
        #: A loader whose file's fix would add workers, while its findings are tried.
        self.what_if: LoaderRef | None = None
        #: (path, loader ref) -> (code, message, place) of the first finding such a fix would introduce.
        self.blocked: dict[tuple[str, int], tuple[str, str, str]] = {}
        #: The modules each walk (by its root frame) entered.
        self.reached: dict[int, set[str]] = {}
        for frame in entered:
            self.reached.setdefault(id(frame.root), set()).add(frame.path)

    def _add(self, path: str, code: str, ref: int, message: str, change: Change | None = None) -> None:
        if self.what_if is not None:
            self._would_add(path, code, ref, message, self.what_if)
            return
        if path not in self.wanted:
            return
        options = self.project.file_options(path)
        if code not in options.select:
            return
        span = self.where.span(path, ref)
        if span is None or (code, span[0].row) in self._own(path, options):
            return
        if change is not None:
            self.changes.setdefault((path, code, span[0].row, span[0].column), change)
        self._keep(Finding(code, name_of(code), message, path, span[0], span[1]))

    def add(self, path: str, code: str, ref: int, message: str, change: Change | None = None) -> None:
        """A finding of another pass over the project (``lightning``), kept as the walk's are."""
        self._add(path, code, ref, message, change)

    def place(self, path: str, ref: int) -> str:
        """``train.py:12`` for a summary-numbered node."""
        return self.where.place(path, ref)

    def _would_add(self, path: str, code: str, ref: int, message: str, loader: LoaderRef) -> None:
        """Record, by the loader's place, the first finding its file's fix
        adding workers would introduce (anywhere in the project, selected or not)."""
        span = self.where.span(path, ref)
        if span is None or (code, span[0].row) in self._own(path, self.project.file_options(path)):
            return
        key = (loader.frame.path, int(loader.summary.get("at", -1)))
        self.blocked.setdefault(key, (code, message, self.where.place(path, ref)))

    def _own(self, path: str, options: Options) -> set[tuple[str, int]]:
        """(code, line) of the file's own findings: those it reports already."""
        if path not in self.own:
            found = self.project.own_findings(path)
            if found is None:
                text = self.project.read_text(path)
                found = analyse(text, path, options, notebook=path.endswith(NOTEBOOK))[0] if text is not None else []
            self.own[path] = {(f.code, f.location.row) for f in found}
        return self.own[path]

    def _keep(self, finding: Finding, call: str = "") -> None:
        """Once per place and code; per ``call`` (the values a factory's
        caller passes) too, so that callers passing different values each get
        their finding, naming them."""
        key = (finding.path, finding.code, finding.location.row, finding.location.column, call)
        if key in self.seen:
            return
        self.seen.add(key)
        self.out.setdefault(finding.path, []).append(finding)

    def _calls(self, frame: Frame) -> str:
        """``called from train.py:41`` for the chain of calls that entered ``frame``."""
        places = [
            self.where.place(f.parent.path, int(f.site.get("at", -1)))
            for f in reversed(frame.chain()) if f.parent is not None and f.site is not None
        ]
        return "called from " + ", from ".join(places) if places else ""

    def _by(self, event: Event) -> str:
        """``by `engine.train_step` (engine.py:20) called from train.py:41``, or
        ``at module level (train.py:12)``."""
        frame = event.frame
        use = self.where.place(frame.path, int(event.use.get("at", -1)))
        if frame.function == MODULE:
            return f"at module level ({use})"
        calls = self._calls(frame)
        stem = Path(frame.path).stem
        return f"by `{stem}.{frame.function}` ({use})" + (f" {calls}" if calls else "")

    def _built(self, ref: LoaderRef) -> str:
        return self.where.place(ref.frame.path, int(ref.summary.get("at", -1)))

    # -- the rules ---------------------------------------------------------

    def loader(self, ref: LoaderRef) -> None:
        self._factory(ref)
        self._transfers(ref)
        self._pinning(ref)
        self._set_epoch(ref)
        workers = _workers(ref)
        if workers is None:
            count = ref.setting("num_workers")
            if count is MISSING_VALUE or isinstance(count, dict) and count.get("value") == 0:
                # What the file's own fix adding workers (LL201) would make
                # the project report: a crash there withholds that fix.
                self.what_if = ref
                self._with_workers(ref, "the fix's")
                self.what_if = None
            return
        self._with_workers(ref, workers)

    def _with_workers(self, ref: LoaderRef, workers: str) -> None:
        for event in ref.events:
            if event.frame is ref.frame or not event.repeated:
                continue  # the file's own rules see what happens where it is built
            kind = event.use.get("kind")
            if kind == "iter" and self.what_if is None:
                self._epoch(ref, event, workers)  # LL204 has a fix: not a reason to withhold
            elif kind == "next_iter":
                self._next_iter(ref, event, workers)
        self._main_guard(ref, workers)

    def _factory(self, ref: LoaderRef) -> None:
        """The factory's file analysed again with this call's values."""
        frame = ref.frame
        if frame.parent is None or frame.path not in self.wanted:
            return
        given: dict[str, Descriptor] = {}
        for param in sorted(set(ref.summary.get("kw", {}).values())):
            value = frame.env.get(param)
            # Only values the rules can use: an unknown default changes nothing.
            if isinstance(value, dict) and show(value) != "?":
                given[param] = value
        if not given:
            return
        sites = [(f.parent.path, f.site.get("at")) for f in frame.chain() if f.parent is not None and f.site is not None]
        key = (frame.path, json.dumps([frame.function, given, sites], sort_keys=True))
        if key in self.injected:
            return
        self.injected.add(key)
        options = self.project.file_options(frame.path)
        bindings = {frame.function: given}
        memo = (frame.path, json.dumps(bindings, sort_keys=True))
        if memo not in self.reanalysed:
            why = self.budget.refusal(frame.path, frame.function)
            if why is not None:
                self.budget.skip(frame.path, why, self.where.span(frame.path, int(ref.summary.get("at", -1))))
                return
            self.reanalysed[memo] = self._reanalyse(frame.path, bindings, options)
        findings = [dataclasses.replace(f) for f in self.reanalysed[memo]]
        if findings:
            suffix = self._values(frame, given)
        # Callers passing the same values (or one call reached along a
        # longer chain) make one finding; other values make their own.
        call = json.dumps({param: show(value) for param, value in given.items()}, sort_keys=True)
        for finding in findings:
            finding.message += suffix
            finding.fix = None  # the fix would change the factory for every caller
            self._keep(finding, call)

    def _values(self, frame: Frame, given: dict[str, Descriptor]) -> str:
        """`` (with `workers=0` and the default `batch_size=32`; `f` called from train.py:5)``."""
        passed = [f"`{p}={show(v)}`" for p, v in given.items() if not v.get("default")]
        defaults = [f"`{p}={show(v)}`" for p, v in given.items() if v.get("default")]
        shown = passed + ([f"the default{'s' if len(defaults) > 1 else ''} " + ", ".join(defaults)] if defaults else [])
        notes = [str(v["note"]) for v in given.values() if v.get("note")]
        return f" (with {' and '.join(shown)}; " + "; ".join(notes + [f"`{frame.function}` {self._calls(frame)}"]) + ")"

    def _reanalyse(self, path: str, bindings: Bindings, options: Options) -> list[Finding]:
        text = self.project.read_text(path)
        if text is None:
            return []
        if path not in self.baselines:
            before = self.project.own_findings(path)
            if before is None:
                before, _ = analyse(text, path, options, notebook=path.endswith(NOTEBOOK))
            self.baselines[path] = {_sig(f) for f in before}
        tree = self.trees.get(path)
        after, analysis = analyse(text, path, options, bindings=bindings, notebook=path.endswith(NOTEBOOK), parsed=tree)
        if tree is None and analysis is not None:
            self.trees[path] = (analysis.module, analysis.positions.piece)
        # Where the file already reports the code at that spot (LL201 with
        # the default's value), a second copy with the caller's value would
        # only contradict it.
        return [f for f in after if _sig(f) not in self.baselines[path]]

    def _epoch(self, ref: LoaderRef, event: Event, workers: str) -> None:
        persistent = ref.setting("persistent_workers")
        if persistent is not MISSING_VALUE and not (isinstance(persistent, dict) and persistent.get("value") is False):
            return
        what = "`persistent_workers` is not set" if persistent is MISSING_VALUE else "`persistent_workers=False`"
        use = self.where.place(event.frame.path, int(event.use.get("at", -1)))
        calls = self._calls(event.frame)
        count = ref.setting("num_workers")
        # An imported constant says where it comes from, as a factory's values do.
        note = f" (with {count['note']})" if isinstance(count, dict) and count.get("note") else ""
        message = (
            f"{what}: {workers} workers{note} of this loader are started again at every epoch; "
            f"set `persistent_workers=True` (iterated every epoch by `{event.frame.function}` ({use})"
            + (f" {calls})" if calls else ")")
        )
        self._add(ref.frame.path, "LL204", int(ref.summary.get("at", -1)), message, _persistent_change(ref))

    def _transfers(self, ref: LoaderRef) -> None:
        """LL205 on a blocking ``.cuda()`` or ``.to(<CUDA device>)`` of a pinned
        batch in another function (as LL205: an unknown device stays silent)."""
        pinned = ref.setting("pin_memory")
        if not (isinstance(pinned, dict) and pinned.get("value") is True):
            return
        for event in ref.events:
            use = event.use
            device = use.get("device")
            # In the loader's own function the file's LL205 decides, unless
            # the device is a parameter: then only its callers know it.
            param = device.get("param") if isinstance(device, dict) and "attribute" not in device else None
            passed = param is not None
            if event.frame is ref.frame and not passed or use.get("kind") != "transfer" or use.get("non_blocking"):
                continue
            method = use.get("method")
            if method not in ("cuda", "to") or use.get("plain") is False:
                continue
            if method == "to" and device_of(device, event.frame) != "cuda":
                continue
            where = f"the loader is built at {self._built(ref)}"
            if passed and event.frame is ref.frame:
                where = f"{where}; with a CUDA `{param}`; `{event.frame.function}` {self._calls(event.frame)}"
            message = (
                f"`.{method}()` of a pinned batch without `non_blocking=True`: the copy blocks and cannot overlap "
                f"compute, so pinning buys nothing; pass `non_blocking=True` ({where})"
            )
            change = (int(use.get("at", -1)), {"non_blocking": "True"}, "safe", "Pass `non_blocking=True`")
            self._add(event.frame.path, "LL205", int(use.get("at", -1)), message, change)

    def _pinning(self, ref: LoaderRef) -> None:
        """LL202 on a loader that is not pinned whose batches another module
        moves to the GPU (where it is built, no CUDA is in sight)."""
        pinned = ref.setting("pin_memory")
        if pinned is MISSING_VALUE:
            what = "`pin_memory` is not set"
        elif isinstance(pinned, dict) and pinned.get("value") is False:
            what = "`pin_memory=False`"
        else:
            return
        own = self.flags(ref.frame.path)
        # The file's own LL202 sees its CUDA evidence; a module whose code
        # touches CUDA may hand the loader a Dataset that returns CUDA tensors.
        if own.get("cuda") or own.get("cuda_code"):
            return
        for event in ref.events:
            use = event.use
            if use.get("kind") != "transfer" or use.get("method") not in ("cuda", "to"):
                continue
            if use.get("method") == "to":
                kind = device_of(use.get("device"), event.frame)
                if kind is None and self.flags(event.frame.path).get("cuda"):
                    kind = "cuda"  # the module's CUDA evidence, as LL202 reads a module
                if kind not in ("cuda", "accelerator"):
                    continue
            message = (
                f"{what} but batches go to the GPU: copies from pageable memory block and cannot overlap compute; "
                f"set `pin_memory=True` (batches moved to the GPU {self._by(event)})"
            )
            at = int(ref.summary.get("at", -1))
            # A value passed in is the caller's to choose.
            change = None if "pin_memory" in ref.summary.get("kw", {}) else (at, {"pin_memory": "True"}, "safe", "Set `pin_memory=True`")
            self._add(ref.frame.path, "LL202", at, message, change)
            return

    def _set_epoch(self, ref: LoaderRef) -> None:
        """LL102 on a shuffling ``DistributedSampler`` whose loader is iterated
        every epoch, no module on the way calling ``set_epoch``."""
        sampler = ref.setting("sampler")
        if not isinstance(sampler, SamplerRef):
            return
        shuffle = sampler.summary.get("shuffle")
        if shuffle is not None:
            value = resolve(shuffle, sampler.frame, [], [])
            if not (isinstance(value, dict) and value.get("value") is True):
                return  # False, or unknown: silent (as LL102)
        for event in ref.events:
            if event.use.get("kind") != "iter" or not event.repeated:
                continue
            if event.frame is ref.frame and ref.frame is sampler.frame:
                continue  # one function: the file's own LL102
            modules = set(self.reached.get(id(event.frame.root), ()))
            for frame in (event.frame, ref.frame, sampler.frame):
                modules.update(f.path for f in frame.chain())
            if any(self.flags(m).get("set_epoch") or self.flags(m).get("frameworks") for m in modules):
                return
            # A module the walk never entered may call it (on a global loader,
            # through a helper that is not given the loader): stay silent.
            if self.set_epoch_anywhere is None:
                self.set_epoch_anywhere = self.project.mentions(b"set_epoch")
            if self.set_epoch_anywhere:
                return
            message = (
                "`DistributedSampler` shuffles with the same seed every epoch: its loader is iterated in an epoch "
                "loop but `set_epoch` is never called; call `sampler.set_epoch(epoch)` at the start of each epoch "
                f"(the loader, built at {self._built(ref)}, is iterated every epoch {self._by(event)})"
            )
            self._add(sampler.frame.path, "LL102", int(sampler.summary.get("at", -1)), message)
            return

    def _next_iter(self, ref: LoaderRef, event: Event, workers: str) -> None:
        calls = self._calls(event.frame)
        message = (
            f"`next(iter(...))` inside a loop creates a new iterator on every pass, restarting and priming "
            f"{workers} workers for one batch; create the iterator once before the loop (the loader is built at "
            f"{self._built(ref)}" + (f"; `{event.frame.function}` {calls})" if calls else ")")
        )
        self._add(event.frame.path, "LL207", int(event.use.get("at", -1)), message)

    def _main_guard(self, ref: LoaderRef, workers: str) -> None:
        """LL013 on the unguarded module-level call that reaches the loop, or
        on the module-level line that starts the workers itself."""
        context = ref.setting("multiprocessing_context")
        if isinstance(context, dict) and context.get("value") == "fork":
            return
        for event in ref.events:
            kind = event.use.get("kind")
            if kind not in ("iter", "next_iter", "iter_call"):
                continue
            chain = event.frame.chain()
            root = chain[0]
            if root.function != MODULE or self._notebook(root.path):
                continue
            if len(chain) == 1:
                if event.frame is ref.frame or event.use.get("guarded"):
                    continue  # built here: the file's own LL013
                at = int(event.use.get("at", -1))
            else:
                first = chain[1]
                if first.site is None or first.site.get("guarded"):
                    continue
                at = int(first.site.get("at", -1))
            methods = set(self.flags(root.path).get("start_methods", ())) | set(
                self.flags(ref.frame.path).get("start_methods", ())
            )
            # Imported here: it brings libcst, which a run served from the cache never needs.
            from loadlint.rules.shared import spawn_reason

            reason = spawn_reason(self.project.file_options(root.path).profile(), None, methods)
            if reason is None:
                continue
            loop = self.where.place(event.frame.path, int(event.use.get("at", -1)))
            if len(chain) == 1:
                what = {"iter": "a loop over", "next_iter": "`next(iter(...))` of", "iter_call": "`iter(...)` of"}[kind]
                message = (
                    f"{what} a loader with {workers} workers (built at {self._built(ref)}) runs at module level "
                    f"without `{_GUARD}`, and its workers may start with spawn or forkserver ({reason}): every "
                    "worker re-imports this script, reaches this line again and fails; move it into a function "
                    f"called under `{_GUARD}`"
                )
            else:
                reached = "`iter(...)` of" if kind == "iter_call" else "a loop over"
                message = (
                    f"this call reaches {reached} a loader with {workers} workers ({loop}, in "
                    f"`{event.frame.function}`) without `{_GUARD}`, and its workers may start with "
                    f"spawn or forkserver ({reason}): every worker re-imports this script, runs this call again and "
                    f"fails; call it from a function run under `{_GUARD}`"
                )
            self._add(root.path, "LL013", at, message, Guard(at))

    def _notebook(self, path: str) -> bool:
        """A notebook, or a script in the percent format (``# %%`` cells),
        which Jupyter runs as one: no worker re-imports it (LL012's case)."""
        if path.endswith(NOTEBOOK):
            return True
        return _PERCENT_CELL.search(self.project.read_text(path) or "") is not None

    def held(self) -> dict[str, list[Finding]]:
        """By path, the places of loaders whose LL201 fix (adding workers)
        would introduce a finding elsewhere: LL201 with the reason as ``fix_withheld``."""
        out: dict[str, list[Finding]] = {}
        for (path, at), (code, message, place) in sorted(self.blocked.items()):
            span = self.where.span(path, at)
            if span is None or path.endswith(NOTEBOOK):
                continue
            reason = f"no fix: adding workers would introduce {code} ({name_of(code)}) at {place}: {message}"
            out.setdefault(path, []).append(
                Finding("LL201", name_of("LL201"), "", path, span[0], span[1], fix_withheld=reason)
            )
        return out

    def unfinished(self) -> bool:
        """LL900 where the budget left work undone; whether it did."""
        for path, (why, start, end) in self.budget.undone.items():
            if path in self.wanted and "LL900" in self.project.file_options(path).select:
                self._keep(Finding("LL900", name_of("LL900"), unfinished_message(why), path, start, end))
        return bool(self.budget.undone)

    def done(self) -> dict[str, list[Finding]]:
        """The findings, noqa comments honoured."""
        out: dict[str, list[Finding]] = {}
        for path, findings in self.out.items():
            text = self.project.read_text(path) or ""
            lines = text.splitlines()
            file_level = file_suppressions(text)
            kept = []
            for finding in findings:
                if not self.project.file_options(path).noqa:
                    kept.append(finding)
                    continue
                line = lines[finding.location.row - 1] if finding.location.row <= len(lines) else ""
                codes = suppressed_codes(line)
                if "*" in file_level or finding.code in file_level or codes and ("*" in codes or finding.code in codes):
                    continue
                kept.append(finding)
            if kept:
                out[path] = kept
        return out


@dataclasses.dataclass(frozen=True)
class Guard:
    """LL013's fix asked for in the script that starts the workers: the
    module-level code from the statement holding the node ``at`` (a summary
    ref) on, under the main guard, as the file's own LL013 guards it."""

    at: int


#: A fix a project finding asks for: (summary node ref of the call, keywords
#: to set with their code, applicability, label), or a main guard.
Change = tuple[int, dict[str, str], str, str] | Guard


def _persistent_change(ref: LoaderRef) -> Change | None:
    """``persistent_workers=True``, or ``=<param> > 0`` where the worker
    count is the factory's parameter: another caller may pass 0, and
    persistent workers without workers raise."""
    kw = ref.summary.get("kw", {})
    if "persistent_workers" in kw:
        return None  # the caller's to choose
    at = int(ref.summary.get("at", -1))
    param = kw.get("num_workers")
    if isinstance(param, str) and param.isidentifier():
        code = f"{param} > 0"
    else:
        raw = ref.summary.get("values", {}).get("num_workers")
        number = raw.get("value") if isinstance(raw, dict) else None
        certain = isinstance(raw, dict) and (raw.get("cpu_count") or type(number) is int and number > 0)
        if not certain:
            return None
        code = "True"
    return at, {"persistent_workers": code}, "safe", f"Set `persistent_workers={code}`"


def _sig(finding: Finding) -> tuple[str, int, int]:
    return finding.code, finding.location.row, finding.location.column
