"""Phase 2's walk: from each module's body along the calls it makes, with
the values each call passes, into the functions of other project modules.

Loaders built on the way are followed through returns and parameters to
what is done with them (iterated, iterated every epoch, ``next(iter(...))``
in a loop, batches moved); ``DistributedSampler``s likewise, to the loader
that draws from them.  The walk is bounded: ``MAX_DEPTH`` calls deep,
``MAX_FRAMES`` functions entered in all; recursion and import cycles end a
branch silently (a function already on the path is not entered again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

# A module's summary, typed in ``loadlint.types`` (``loadlint.facts.summary``
# makes it, not imported: a warm run never needs libcst).
from loadlint.project.modules import shown_path
from loadlint.types import CallSummary, Descriptor, FunctionSummary, LoaderSummary, SamplerSummary, Summary, Use

MODULE = "<module>"

MAX_DEPTH = 6
MAX_FRAMES = 20000


@dataclass(eq=False)
class Frame:
    """One entered function: its module, name, parameter values and caller."""

    path: str
    function: str
    env: dict[str, Value]
    parent: Frame | None
    #: The call in the parent that entered this frame.
    site: CallSummary | None
    #: Entered (directly or further up) from inside a loop.
    in_loop: bool
    #: The ``DistributedSampler``s this frame builds, in summary order.
    samplers: list[SamplerRef] = field(default_factory=list)
    #: What each of its calls returned, in summary order (a loader's
    #: argument may be one: a sampler a helper builds).
    results: list[Value] = field(default_factory=list)

    @property
    def root(self) -> Frame:
        """The module body (or the function) the walk started from."""
        frame = self
        while frame.parent is not None:
            frame = frame.parent
        return frame

    def on_path(self, path: str, function: str) -> bool:
        frame: Frame | None = self
        while frame is not None:
            if frame.path == path and frame.function == function:
                return True
            frame = frame.parent
        return False

    def chain(self) -> list[Frame]:
        """This frame and its callers, outermost (a module body) first."""
        out: list[Frame] = []
        frame: Frame | None = self
        while frame is not None:
            out.append(frame)
            frame = frame.parent
        return out[::-1]


@dataclass(eq=False)
class Event:
    """Something a function does with a loader it was given."""

    use: Use
    frame: Frame
    #: The use happens once per pass of some enclosing loop (its own or a caller's).
    repeated: bool


@dataclass(eq=False)
class LoaderRef:
    """One ``DataLoader(...)`` as built by one frame."""

    frame: Frame
    index: int
    summary: LoaderSummary
    events: list[Event] = field(default_factory=list)

    def setting(self, name: str) -> Value:
        """The value of a loader argument in this frame; MISSING_VALUE when absent."""
        values = self.summary.get("values", {})
        if name not in values:
            return MISSING_VALUE
        return resolve(values[name], self.frame, [], self.frame.results)

    def dataset(self) -> Value:
        """The dataset a caller passed for the function's parameter;
        MISSING_VALUE when the dataset is no parameter."""
        described = self.summary.get("dataset")
        return MISSING_VALUE if described is None else resolve(described, self.frame, [], self.frame.results)


@dataclass(eq=False)
class SamplerRef:
    """One ``DistributedSampler(...)`` as built by one frame."""

    frame: Frame
    summary: SamplerSummary


class Members(tuple["Value", ...]):
    """A returned dict literal's values, with its keys."""

    keys: tuple[str, ...]

    def __new__(cls, values: tuple[Value, ...], keys: tuple[str, ...]) -> Members:
        made = super().__new__(cls, values)
        made.keys = keys
        return made


@dataclass(frozen=True, eq=False)
class Unpacked:
    """A call's result whose function also returns tuple literals of other
    lengths than its last return: that return's value, and by length, the
    members of those literals that are datasets held in memory."""

    value: Value
    held: dict[int, list[int]]


class _Missing:
    """The argument is absent from the call (torch's default applies)."""


MISSING_VALUE = _Missing()
#: A parameter no caller on the walk's path gave a value (the walk started
#: at its function): unknown, and known to be so only for want of a caller.
UNBOUND: Descriptor = {"unbound": True}
#: A descriptor (``{"value": 4}``...), a loader, a tuple of values, or None (unknown).
Value = Union[Descriptor, LoaderRef, SamplerRef, tuple["Value", ...], Unpacked, None, _Missing]
MEMORY: Descriptor = {"memory": True}


def resolve(descriptor: Descriptor, frame: Frame, loaders: list[LoaderRef], results: list[Value]) -> Value:
    """A summary's value descriptor as a value in ``frame``."""
    if "param" in descriptor:
        given = frame.env.get(descriptor["param"], UNBOUND)
        if "attribute" not in descriptor:
            return given
        # ``args.n_cpu`` of the namespace a caller passed: its default.
        options = given.get("options") if isinstance(given, dict) else None
        option = options.get(descriptor["attribute"]) if isinstance(options, dict) else None
        if not isinstance(given, dict) or not isinstance(option, dict) or "value" not in option:
            return None
        return {"value": option["value"], "note": f"{option.get('text')} of the namespace {shown_path(given.get('from', ''))} passes"}
    if "options" in descriptor and "from" not in descriptor:
        return {**descriptor, "from": frame.path}
    if "loader" in descriptor:
        index = descriptor["loader"]
        return loaders[index] if 0 <= index < len(loaders) else None
    if "sampler" in descriptor:
        index = descriptor["sampler"]
        return frame.samplers[index] if 0 <= index < len(frame.samplers) else None
    if "call" in descriptor:
        index = descriptor["call"]
        result = results[index] if 0 <= index < len(results) else None
        part = descriptor.get("index")
        if isinstance(result, Unpacked):
            length = descriptor.get("of")
            if isinstance(part, int) and isinstance(length, int) and length in result.held:
                return MEMORY if part in result.held[length] else None
            result = result.value
        if part is None:
            return result
        if isinstance(part, str):
            # A dict's member: only of a returned dict literal, whose keys are known.
            if isinstance(result, Members) and part in result.keys:
                return result[result.keys.index(part)]
            return None
        return result[part] if isinstance(result, tuple) and not isinstance(result, Members) and part < len(result) else None
    return descriptor if descriptor else None


class Walk:
    """Walks a project's calls from module bodies; records loaders and uses."""

    def __init__(
        self,
        summary_of: Callable[[str], Summary | None],
        callee: Callable[[str, str], tuple[str, str] | None],
        known: Callable[[str], bool],
    ) -> None:
        self.summary_of = summary_of
        self.callee = callee
        #: Whether a module is entered though given no loader: its summary
        #: is at hand without parsing it, or it builds datasets to pass on.
        self.known = known
        self.frames = 0
        self.loaders: list[LoaderRef] = []
        #: Every frame entered, in order (what a walk from one root reached).
        self.entered: list[Frame] = []
        #: (module, function) -> uses of the module body's loaders in that
        #: function (``for x in loader`` over a global), for the frames that enter it.
        self.global_uses: dict[tuple[str, str], list[tuple[Use, LoaderRef]]] = {}

    def function(self, path: str, name: str) -> FunctionSummary | None:
        summary = self.summary_of(path)
        if summary is None:
            return None
        found = summary.get("functions", {}).get(name)
        return found if isinstance(found, dict) else None

    def root(self, path: str) -> None:
        """Walk from a module's body, then from each of its functions (a
        function no module body calls still hands its loaders on; its
        parameters are unknown)."""
        summary = self.summary_of(path)
        functions = summary.get("functions", {}) if summary else {}
        for name in sorted(functions, key=lambda n: n != MODULE):
            fn = functions[name]
            if isinstance(fn, dict) and (name == MODULE or fn.get("calls") or fn.get("loaders") or fn.get("samplers")):
                self._enter(Frame(path, name, {}, None, None, False), fn, 0)

    def _enter(self, frame: Frame, fn: FunctionSummary, depth: int) -> Value:
        self.frames += 1
        self.entered.append(frame)
        frame.samplers = [SamplerRef(frame, sampler) for sampler in fn.get("samplers", [])]
        loaders = [LoaderRef(frame, i, loader) for i, loader in enumerate(fn.get("loaders", []))]
        self.loaders.extend(loaders)
        uses = fn.get("uses", [])
        if frame.function == MODULE and frame.parent is None:
            for use in uses:
                subject = resolve(use.get("of", {}), frame, loaders, []) if "in_function" in use else None
                if isinstance(subject, LoaderRef):
                    self.global_uses.setdefault((frame.path, str(use["in_function"])), []).append((use, subject))
        results: list[Value] = frame.results
        for call in fn.get("calls", []):
            results.append(self._call(frame, call, loaders, results, depth))
        for use in uses:
            if "in_function" in use:
                continue  # the function's frames have it
            subject = resolve(use.get("of", {}), frame, loaders, results)
            if isinstance(subject, LoaderRef):
                repeated = frame.in_loop or bool(use.get("in_loop"))
                subject.events.append(Event(use, frame, repeated))
        returns = fn.get("returns")
        if not returns:
            return None
        values = tuple(resolve(d, frame, loaders, results) for d in returns.get("values", []))
        if "keys" in returns:
            return Members(values, tuple(returns["keys"]))
        value = values if returns.get("tuple") else (values[0] if values else None)
        unpacked = returns.get("unpacked")
        return Unpacked(value, {int(n): held for n, held in unpacked.items()}) if unpacked else value

    def _call(self, frame: Frame, call: CallSummary, loaders: list[LoaderRef], results: list[Value], depth: int) -> Value:
        if depth >= MAX_DEPTH or self.frames >= MAX_FRAMES:
            return None
        target = self.callee(frame.path, call.get("callee", ""))
        if target is None or frame.on_path(*target):
            return None  # outside the project, or recursion / an import cycle
        args = call.get("args", {})
        if target[0] != frame.path and not self.known(target[0]) and not any(
            _holds_loader(resolve(d, frame, loaders, results)) for d in args.values()
        ):
            # A module that builds no loader matters only when given one:
            # parsing every module a project calls would cost a cold run.
            return None
        fn = self.function(*target)
        root = frame.root
        # The module body's loaders its functions iterate, when the walk started at that body.
        globals_used = self.global_uses.get(target, []) if root.path == target[0] and root.function == MODULE else []
        if fn is None or not (
            fn.get("loaders") or fn.get("uses") or fn.get("calls") or globals_used or self._sets_epoch(target[0])
        ):
            return None
        params: list[str] = fn.get("params", [])
        env: dict[str, Value] = {}
        for slot, descriptor in args.items():
            if slot == "*":
                return None  # unpacked arguments: which parameter gets what is unknown
            name = params[int(slot)] if slot.isdigit() and int(slot) < len(params) else slot
            if name in params:
                env[name] = resolve(descriptor, frame, loaders, results)
        defaults = fn.get("defaults", {})
        for name in fn.get("has_default", []):
            if name not in env:
                env[name] = {**defaults.get(name, {}), "default": True}
        child = Frame(target[0], target[1], env, frame, call, frame.in_loop or bool(call.get("in_loop")))
        for use, loader in globals_used:
            loader.events.append(Event(use, child, child.in_loop or bool(use.get("in_loop"))))
        return self._enter(child, fn, depth + 1)


    def _sets_epoch(self, path: str) -> bool:
        """A module that calls ``set_epoch`` is entered (LL102 looks for it on the path)."""
        summary = self.summary_of(path)
        return bool(summary and summary.get("flags", {}).get("set_epoch"))


def _holds_loader(value: Value) -> bool:
    if isinstance(value, tuple):
        return any(_holds_loader(v) for v in value)
    return isinstance(value, (LoaderRef, SamplerRef))
