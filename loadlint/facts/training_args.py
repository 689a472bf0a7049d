"""Hugging Face's ``TrainingArguments(...)`` calls: the Trainer builds its
loaders from them, with the framework's defaults for what a call leaves out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from loadlint.facts.resolve import MISSING, UNKNOWN, Origin, Scope, evaluate, origin


#: The loader settings of Hugging Face's ``TrainingArguments`` (transformers 5.x defaults).
TRAINING_DEFAULTS: dict[str, object] = {
    "dataloader_num_workers": 0,
    "dataloader_pin_memory": True,
    "dataloader_persistent_workers": False,
    "dataloader_prefetch_factor": None,
    "per_device_train_batch_size": 8,
    "num_train_epochs": 3.0,
    "max_steps": -1,
}


@dataclass(eq=False)
class TrainingArgumentsCall:
    """A ``TrainingArguments(...)`` call: the Trainer builds its loaders from it."""

    node: cst.Call
    scope: Scope
    #: The class as written (``TrainingArguments``, ``Seq2SeqTrainingArguments``).
    name: str
    args: dict[str, cst.Arg]
    #: A ``*args`` or ``**kwargs`` may hide any argument.
    opaque: bool

    def value(self, name: str) -> Any:
        """The argument's value, MISSING when certainly absent, else UNKNOWN."""
        arg = self.args.get(name)
        if arg is not None:
            return evaluate(arg.value, self.scope)
        return UNKNOWN if self.opaque else MISSING

    def effective(self, name: str) -> Any:
        """Like value(), with a missing argument replaced by the framework's default."""
        value = self.value(name)
        return TRAINING_DEFAULTS[name] if value is MISSING else value

    def origin(self, name: str) -> Origin | None:
        """Where the argument's value comes from, when it is an overridable default."""
        arg = self.args.get(name)
        return origin(arg.value, self.scope) if arg is not None else None
