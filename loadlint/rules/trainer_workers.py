"""LL201 for Hugging Face's ``Trainer``: ``TrainingArguments(...)`` without
``dataloader_num_workers`` (which defaults to 0)."""

from __future__ import annotations

from typing import Iterator

from loadlint.facts.values import MISSING
from loadlint.rules.base import Context, Report
from loadlint.rules.shared import origin_note, set_workers_fix, trainer_workers, use_workers, waits


def training_arguments(ctx: Context) -> Iterator[Report]:
    """``TrainingArguments(...)`` without loader workers: the Trainer's
    loaders load in the training process."""
    for call in ctx.cli.training_arguments:
        value = call.value("dataloader_num_workers")
        if value is not MISSING and (type(value) is not int or value != 0):
            continue
        n = trainer_workers(ctx, call)
        found = call.origin("dataloader_num_workers")
        what = ("`dataloader_num_workers` is not set" if value is MISSING
                else "`dataloader_num_workers=0`" + origin_note(found))
        message = (
            f"{what}: the Trainer loads every batch in the training process, {waits(ctx)}; "
            f"{use_workers(ctx, 'dataloader_num_workers', n)}"
        )
        fix = set_workers_fix(ctx, call.node, "dataloader_num_workers", n, found)
        yield Report(call.node, message, fix)
