from __future__ import annotations

from typing import Iterator

import libcst as cst

from loadlint.facts.loaders import LoaderCall
from loadlint.facts.values import MISSING, UNKNOWN
from loadlint.facts.arguments import sampler_presence
from loadlint.rules.base import CallChange, Context, FixSpec, Report, Rule
from loadlint.rules.shared import code_of, value_text, written_in_call


def _number(value: object) -> bool:
    return type(value) in (int, float)


class InvalidLoaderArgument(Rule):
    """
    ## What it does
    Checks for `DataLoader` arguments that torch rejects:

    - `num_workers < 0`, such as the `-1` "all cores" habit from joblib and
      Keras;
    - `timeout < 0`;
    - `prefetch_factor < 0`, or `prefetch_factor=0` with workers;
    - `batch_size` that is 0 or negative, a bool, or a float, including a
      true division such as `args.batch_size / world_size`;
    - a `drop_last` that is not a bool (`drop_last=1`).

    ## Why is this bad?
    Each of these raises, at construction or at the first batch:

    ```
    ValueError: num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.
    ValueError: timeout option should be non-negative
    ValueError: prefetch_factor option should be non-negative
    AssertionError: prefetch_factor must be greater than 0 for MultiProcessingDataLoaderIter
    ValueError: batch_size should be a positive integer value, but got batch_size=2.0
    ValueError: drop_last should be a boolean value, but got drop_last=1
    ```

    The batch size division is the common one: `/` always gives a float in
    Python 3, even for `64 / 2`.

    The rule is silent when a value cannot be resolved statically (except a
    true division, whose result is a float whatever its operands).

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=args.batch_size / world_size, num_workers=-1)
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=args.batch_size // world_size, num_workers=4)
    ```

    ## Fix safety
    A true division written in the call becomes a floor division (`//`), and
    a literal non-bool `drop_last` becomes `True` or `False` with the same
    truth value.  Both fixes are safe: they produce the value torch would
    have needed to accept.  The other cases have no fix: only the author
    knows the intended number.

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    - [`torch.utils.data.BatchSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.BatchSampler)
    """

    code = "LL005"
    name = "invalid-loader-argument"
    category = "crash"
    summary = "negative workers/timeout/prefetch, a non-positive or float `batch_size`, a non-bool `drop_last`"
    fix_availability = "sometimes"

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.calls:
            yield from self._check_call(call)

    def _check_call(self, call: LoaderCall) -> Iterator[Report]:
        workers = call.value("num_workers")
        if _number(workers) and workers < 0:
            yield Report(call.node, (
                f"{value_text(call, 'num_workers')} raises ValueError at construction: -1 does not mean "
                "\"all cores\" in PyTorch; pass a count of workers, or 0 to load in the main process"
            ))
        timeout = call.value("timeout")
        if _number(timeout) and timeout < 0:
            yield Report(call.node, f"{value_text(call, 'timeout')} raises ValueError at construction: "
                         "the timeout must be 0 (none) or a positive number of seconds")
        prefetch = call.value("prefetch_factor")
        effective = call.workers()
        if type(effective) is int and effective > 0 and _number(prefetch):
            if prefetch < 0:
                yield Report(call.node, f"{value_text(call, 'prefetch_factor')} raises ValueError at construction: "
                             "it is the number of batches each worker loads ahead; use a positive number")
            elif prefetch == 0:
                yield Report(call.node, f"{value_text(call, 'prefetch_factor')} raises AssertionError at the first "
                             "batch: each worker must load at least one batch ahead; use a positive number "
                             "(2 is the default)")
        if sampler_presence(call.expr("batch_sampler"), call.scope) is not None:
            return  # LL004's domain: batch_size and drop_last are not used
        report = self._batch_size(call)
        if report is not None:
            yield report
        size = call.effective("batch_size")
        drop_last = call.value("drop_last")
        if size is not None and drop_last is not MISSING and drop_last is not UNKNOWN and type(drop_last) is not bool:
            fix = None
            expr = call.expr("drop_last")
            if written_in_call(call, "drop_last") and isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
                new = str(bool(drop_last))
                fix = FixSpec("safe", f"Set `drop_last={new}`", calls=[CallChange(call.node, {"drop_last": new})])
            yield Report(call.node, f"{value_text(call, 'drop_last')} raises ValueError at construction: "
                         "`drop_last` must be a bool; pass True or False", fix)

    def _batch_size(self, call: LoaderCall) -> Report | None:
        size = call.value("batch_size")
        expr = call.expr("batch_size")
        if expr is None:
            return None
        target, _ = Context.follow(expr, call.scope)
        if type(target) is cst.BinaryOperation and type(target.operator) is cst.Divide:
            fix = None
            if written_in_call(call, "batch_size") and target is expr:
                operator = target.operator
                new = code_of(target.with_changes(operator=cst.FloorDivide(
                    whitespace_before=operator.whitespace_before, whitespace_after=operator.whitespace_after)))
                fix = FixSpec("safe", "Use floor division `//`", replace=[(expr, new)])
            return Report(call.node, f"{value_text(call, 'batch_size')} raises ValueError at construction: true "
                          "division always gives a float; use floor division `//`", fix)
        if size is UNKNOWN or size is MISSING or size is None:
            return None
        if type(size) is bool:
            problem = "a bool is not a batch size"
        elif type(size) is float:
            problem = "a float is not a batch size"
        elif type(size) is int and size <= 0:
            problem = "the batch size must be positive"
        elif type(size) is not int:
            problem = "the batch size must be an int"
        else:
            return None
        return Report(call.node, f"{value_text(call, 'batch_size')} raises ValueError at construction: {problem}; "
                      "pass a positive int (or None to disable batching)")
