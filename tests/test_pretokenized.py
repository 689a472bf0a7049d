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
