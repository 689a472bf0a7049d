"""A parsed namespace read at its program point: changes spelled in odd
ways, placed just before or just after the read, in loops, in other
functions and under other names.  A change that may run before the read
keeps the value unknown (silence); one that runs only after it does not."""

from __future__ import annotations

import textwrap

import pytest

from loadlint.api import check_source
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.workspace.config import Settings

PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.12"))

HEAD = """
import argparse
from torch.utils.data import DataLoader

def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=32)
    return parser.parse_args()

def main():
    args = parse()
"""
READ = "    loader = DataLoader(ds, num_workers=args.workers)\n"
FOUND = "`num_workers=32` (with the default `--workers 32`) on 8 usable CPUs"


def ll203(body: str) -> list[str]:
    source = textwrap.dedent(HEAD) + body
    findings = check_source(source, "train.py", settings=Settings(select=("LL203",)), profile=PROFILE)
    return [f.message for f in findings]


@pytest.mark.parametrize("change", [
    "    args.workers = 2\n",
    "    args.workers += 2\n",
    "    setattr(args, 'workers', 2)\n",
    "    vars(args).update(workers=2)\n",
    "    args.__dict__['workers'] = 2\n",
    "    kept = vars(args)\n",
    "    if flag:\n        args.workers = 2\n",
    "    while flag:\n        args.workers = 2\n",
])
def test_a_change_before_the_read_keeps_it_unknown(change: str) -> None:
    assert ll203(change + READ) == []


@pytest.mark.parametrize("change", [
    "    args.workers = 2\n",
    "    setattr(args, 'workers', 2)\n",
    "    vars(args).update(workers=2)\n",
    "    print(args.__dict__)\n",
    "    tracker = dict(vars(args))\n",
    "    if flag:\n        args.workers = 2\n",
])
def test_a_change_after_the_read_leaves_the_default(change: str) -> None:
    messages = ll203(READ + change)
    assert len(messages) == 1 and messages[0].startswith(FOUND)


def test_a_change_after_the_read_in_a_loop_around_both_reaches_it() -> None:
    body = "    for epoch in range(3):\n    " + READ + "        args.workers = 2\n"
    assert ll203(body) == []


def test_a_change_in_a_while_loop_around_both_reaches_it() -> None:
    body = "    while flag:\n    " + READ + "        vars(args).update(workers=2)\n"
    assert ll203(body) == []


def test_the_read_is_the_assignment_that_copies_the_value() -> None:
    # ``workers = args.workers`` reads the namespace there, before the change.
    body = "    workers = args.workers\n    args.workers = 2\n    loader = DataLoader(ds, num_workers=workers)\n"
    messages = ll203(body)
    assert len(messages) == 1 and messages[0].startswith("`num_workers=32`")


def test_a_change_in_another_function_reaches_every_read() -> None:
    body = READ + "\ndef tweak(args):\n    args.workers = 2\n"
    assert ll203(body) == []


def test_vars_of_the_same_name_in_another_function_is_another_value() -> None:
    body = READ + "\ndef other(args):\n    vars(args).update(workers=2)\n"
    messages = ll203(body)
    assert len(messages) == 1 and messages[0].startswith(FOUND)


def test_an_alias_changed_before_the_read_keeps_it_unknown() -> None:
    body = "    opts = args\n    vars(opts).update(workers=2)\n    loader = DataLoader(ds, num_workers=opts.workers)\n"
    assert ll203(body) == []


def test_a_constant_key_read_of_vars_is_a_read() -> None:
    body = "    loader = DataLoader(ds, num_workers=vars(args)['workers'])\n    vars(args).update(workers=2)\n"
    messages = ll203(body)
    assert len(messages) == 1 and messages[0].startswith(FOUND)


def test_a_namespace_returned_by_a_helper_keeps_the_default_until_changed() -> None:
    # diffusers' train_text_to_image.py: ``args = parse_args()`` in main(),
    # ``tracker_config = dict(vars(args))`` after the loader.
    source = textwrap.dedent(HEAD).replace("return parser.parse_args()", "args = parser.parse_args()\n    return args")
    body = READ + "    tracker_config = dict(vars(args))\n"
    findings = check_source(source + body, "train.py", settings=Settings(select=("LL203",)), profile=PROFILE)
    assert [f.message[:len(FOUND)] for f in findings] == [FOUND]
    before = source + "    tracker_config = dict(vars(args))\n" + READ
    assert check_source(before, "train.py", settings=Settings(select=("LL203",)), profile=PROFILE) == []
