"""LL201's silence on pre-tokenized Hugging Face rows padded by a collate
function (``loadlint.facts.pretokenized``), for names bound more than once
as Hugging Face's ``*_no_trainer`` example scripts bind them."""

from __future__ import annotations

import textwrap

import pytest

from loadlint.api import check_source
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.workspace.config import Settings

PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.12"))

SCRIPT = """
from torch.utils.data import DataLoader
from transformers import DataCollatorWithPadding, default_data_collator

def main(args):
    processed_datasets = raw_datasets.map(preprocess, batched=True)
    if args.pad_to_max_length:
        data_collator = default_data_collator
    else:
        data_collator = {other}
    eval_dataset = processed_datasets["validation_matched" if args.task_name == "mnli" else "validation"]
    train_loader = DataLoader(processed_datasets["train"], shuffle=True, collate_fn=data_collator, batch_size=8)
    eval_loader = DataLoader(eval_dataset, collate_fn=data_collator, batch_size=8)
    if args.task_name == "mnli":
        eval_dataset = {rebound}
        eval_loader = DataLoader(eval_dataset, collate_fn=data_collator, batch_size=8)
"""


def ll201_rows(other: str, rebound: str) -> list[int]:
    source = textwrap.dedent(SCRIPT.format(other=other, rebound=rebound))
    findings = check_source(source, "train.py", settings=Settings(select=("LL201",)), profile=PROFILE)
    return [f.location.row for f in findings]


def test_names_bound_in_branches_and_again_are_padded_rows() -> None:
    assert ll201_rows("DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8)",
                      'processed_datasets["validation_mismatched"]') == []


@pytest.mark.parametrize(
    ("other", "rebound", "rows"),
    [
        # One branch binds a collate function that does more than pad: every loader is reported.
        ("augment_and_pad", 'processed_datasets["validation_mismatched"]', [12, 13, 16]),
        # The split is chosen by a value the code cannot see.
        ("DataCollatorWithPadding(tokenizer)", "processed_datasets[args.split]", [13, 16]),
        # Bound again to something else than rows.
        ("DataCollatorWithPadding(tokenizer)", "load_images(args.eval_dir)", [13, 16]),
    ],
)
def test_a_binding_that_is_not_a_padding_shape_keeps_the_finding(other: str, rebound: str, rows: list[int]) -> None:
    assert ll201_rows(other, rebound) == rows


# The torchtext-era notebooks' shape (bentrevett's sentiment analysis):
# rows mapped to token ids, made tensors, and padded by the function a
# helper returns; the loader built in a function its callers pass the rows to.
NOTEBOOK = """
import datasets
import torch
import torch.nn as nn

train_data, test_data = datasets.load_dataset("imdb", split=["train", "test"])
train_data = train_data.map(numericalize, fn_kwargs={{"vocab": vocab}})
train_data = train_data.with_format(type="torch", columns=["ids", "label"])
{test}

def get_collate_fn(pad_index):
    def collate_fn(batch):
        batch_ids = [i["ids"] for i in batch]
        batch_ids = {pad}
        batch_label = torch.stack([i["label"] for i in batch])
        return {{"ids": batch_ids, "label": batch_label}}

    return collate_fn

def get_data_loader(dataset, batch_size, pad_index, shuffle=False):
    collate_fn = get_collate_fn(pad_index)
    data_loader = torch.utils.data.DataLoader(dataset=dataset, batch_size=batch_size, collate_fn=collate_fn, shuffle=shuffle)
    return data_loader

train_data_loader = get_data_loader(train_data, 512, 0, shuffle=True)
test_data_loader = get_data_loader(test_data, 512, 0)
{after}
"""
PAD = "nn.utils.rnn.pad_sequence(batch_ids, padding_value=pad_index, batch_first=True)"
TEST = 'test_data = test_data.with_format(type="torch", columns=["ids", "label"])'


def notebook_rows(test: str = TEST, pad: str = PAD, after: str = "") -> list[int]:
    source = textwrap.dedent(NOTEBOOK.format(test=test, pad=pad, after=after))
    findings = check_source(source, "nbow.py", settings=Settings(select=("LL201",)), profile=PROFILE)
    return [f.location.row for f in findings]


def test_rows_padded_by_a_helper_returned_function_are_not_a_pipeline() -> None:
    assert notebook_rows() == []
    # Rebound after the loaders are built: what they read is unchanged.
    assert notebook_rows(after='test_data = load_images("test")') == []


@pytest.mark.parametrize(
    ("test", "pad", "after"),
    [
        # The rows that reach one of the calls are the raw text.
        ("pass", PAD, ""),
        # The collate function tokenizes: loading work for workers.
        (TEST, "tokenizer(batch_ids, padding=True)", ""),
        # Bound again under a condition before the calls: either may reach them.
        (TEST + '\nif reload:\n    test_data = load_images("test")', PAD, ""),
    ],
)
def test_padded_rows_near_misses_keep_the_finding(test: str, pad: str, after: str) -> None:
    assert notebook_rows(test, pad, after) == [22 + test.count("\n")]


# accelerate's examples: the collate function chooses its padding options
# before it pads.
ACCELERATE = """
from torch.utils.data import DataLoader

def get_dataloaders(accelerator, tokenizer, datasets, batch_size):
    tokenized_datasets = datasets.map(tokenize_function, batched=True, remove_columns=["idx"])
    tokenized_datasets = tokenized_datasets.rename_column("label", "labels")

    def collate_fn(examples):
        max_length = {length}
        if accelerator.mixed_precision == "fp8":
            pad_to_multiple_of = 16
        elif accelerator.mixed_precision != "no":
            pad_to_multiple_of = 8
        else:
            pad_to_multiple_of = None
        return tokenizer.pad(examples, padding="longest", max_length=max_length, pad_to_multiple_of=pad_to_multiple_of)

    return DataLoader(tokenized_datasets["train"], shuffle=True, collate_fn=collate_fn, batch_size=batch_size)
"""


@pytest.mark.parametrize(
    ("length", "rows"),
    [
        ("128 if accelerator.distributed_type == DistributedType.XLA else None", []),
        # An option computed by a call may do the loading work itself.
        ("longest(examples)", [18]),
    ],
)
def test_a_collate_choosing_its_padding_options_pads(length: str, rows: list[int]) -> None:
    source = textwrap.dedent(ACCELERATE.format(length=length))
    findings = check_source(source, "nlp_example.py", settings=Settings(select=("LL201",)), profile=PROFILE)
    assert [f.location.row for f in findings] == rows


BRANCHES = """
from torch.utils.data import DataLoader
from transformers import DataCollatorForLanguageModeling

def mocked_dataloaders(accelerator, tokenizer, datasets):
    tokenized_datasets = datasets.map(tokenize_function, batched=True)

    def collate_fn(examples):
        {body}

    return DataLoader(tokenized_datasets["train"], shuffle=True, collate_fn=collate_fn, batch_size=2)
"""


@pytest.mark.parametrize(
    ("body", "rows"),
    [
        # One ``return`` of the padded argument per branch (accelerate's test utilities).
        ('if accelerator.distributed_type == DistributedType.XLA:\n'
         '            return tokenizer.pad(examples, padding="max_length", max_length=128)\n'
         '        return tokenizer.pad(examples, padding="longest")', []),
        # A transformers collator called on the argument (accelerate's FSDP2 benchmark).
        ("return DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=False)(examples)", []),
        # A branch that may fall off the end returns None: not a padding function.
        ('if accelerator.distributed_type == DistributedType.XLA:\n'
         '            return tokenizer.pad(examples, padding="max_length", max_length=128)', [12]),
        # One branch returns something else than the padded argument.
        ('if accelerator.distributed_type == DistributedType.XLA:\n'
         '            return load_images(examples)\n'
         '        return tokenizer.pad(examples, padding="longest")', [13]),
    ],
)
def test_each_return_pads_the_argument(body: str, rows: list[int]) -> None:
    source = textwrap.dedent(BRANCHES).format(body=body)
    findings = check_source(source, "training.py", settings=Settings(select=("LL201",)), profile=PROFILE)
    assert [f.location.row for f in findings] == rows
