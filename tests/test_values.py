"""Values with provenance: command-line defaults resolved within one module."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from loadlint.facts.collect import collect
from loadlint.facts.resolve import UNKNOWN, origin


def workers(code: str) -> tuple[object, str | None]:
    """(value, origin text) of the last DataLoader's ``num_workers``."""
    facts = collect(cst.parse_module(textwrap.dedent(code)))
    call = facts.calls[-1]
    found = origin(call.expr("num_workers"), call.scope)
    return call.value("num_workers"), found.text if found else None


ARGPARSE = """
    import argparse
    from torch.utils.data import DataLoader
    parser = argparse.ArgumentParser()
"""


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ('parser.add_argument("-j", "--workers", default=16, type=int)\nargs = parser.parse_args()\n'
         "DataLoader(ds, num_workers=args.workers)", (16, "with the default `--workers 16`")),
        ('parser.add_argument("--nw", dest="num_workers", default="4", type=int)\nargs = parser.parse_args()\n'
         "DataLoader(ds, num_workers=args.num_workers)", (4, "with the default `--nw 4`")),
        ('parser.add_argument("--workers", default=2)\nargs, _ = parser.parse_known_args()\n'
         'DataLoader(ds, num_workers=vars(args)["workers"])', (2, "with the default `--workers 2`")),
        ('parser.add_argument("--workers", default=2)\nargs = parser.parse_known_args()[0]\n'
         "n = args.workers\nDataLoader(ds, num_workers=n)", (2, "with the default `--workers 2`")),
        # Subparsers that agree, set_defaults overriding.
        ('sub = parser.add_subparsers()\nfit = sub.add_parser("fit")\nfit.add_argument("--workers", default=3)\n'
         "args = parser.parse_args()\nDataLoader(ds, num_workers=args.workers)", (3, "with the default `--workers 3`")),
        ('parser.add_argument("--workers", default=3)\nparser.set_defaults(workers=5)\nargs = parser.parse_args()\n'
         "DataLoader(ds, num_workers=args.workers)", (5, "with the default `workers=5`")),
        # A local function returning the namespace, and one taking it.
        ('def parse():\n    parser.add_argument("--workers", default=6)\n    return parser.parse_args()\n'
         "def main(opts):\n    return DataLoader(ds, num_workers=opts.workers)\nmain(parse())",
         (6, "with the default `--workers 6`")),
        ('parser.add_argument("--pin", action="store_true")\nparser.add_argument("--workers", default=0)\n'
         "args = parser.parse_args()\nDataLoader(ds, num_workers=args.workers)", (0, "with the default `--workers 0`")),
        # Unknown: no default, required, a call, changed, parsed from a list, a caller passing something else.
        ('parser.add_argument("--workers", type=int)\nargs = parser.parse_args()\n'
         "DataLoader(ds, num_workers=args.workers)", (UNKNOWN, None)),
        ('parser.add_argument("--workers", default=4, required=True)\nargs = parser.parse_args()\n'
         "DataLoader(ds, num_workers=args.workers)", (UNKNOWN, None)),
        ('parser.add_argument("--workers", default=get())\nargs = parser.parse_args()\n'
         "DataLoader(ds, num_workers=args.workers)", (UNKNOWN, None)),
        ('parser.add_argument("--workers", default=4)\nargs = parser.parse_args()\nargs.workers = 0\n'
         "DataLoader(ds, num_workers=args.workers)", (UNKNOWN, None)),
        ('parser.add_argument("--workers", default=4)\nargs = parser.parse_args()\nsetattr(args, "workers", 0)\n'
         "DataLoader(ds, num_workers=args.workers)", (UNKNOWN, None)),
        ('parser.add_argument("--workers", default=4)\nargs = parser.parse_args(["--workers", "1"])\n'
         "DataLoader(ds, num_workers=args.workers)", (UNKNOWN, None)),
        ('parser.add_argument("--workers", default=4)\ndef main(args):\n    return DataLoader(ds, num_workers=args.workers)\n'
         "main(parser.parse_args())\nmain(other)", (UNKNOWN, None)),
        ('parser.add_argument("--workers", default=4)\nargs = parser.parse_args()\nif x:\n    args = load()\n'
         "DataLoader(ds, num_workers=args.workers)", (UNKNOWN, None)),
    ],
)
def test_argparse_defaults(code: str, expected: tuple[object, str | None]) -> None:
    value, text = workers(textwrap.dedent(ARGPARSE) + code)
    assert (value, text) == expected


def test_dataclass_parsers() -> None:
    code = """
        from dataclasses import dataclass, field
        import tyro
        from torch.utils.data import DataLoader
        from transformers import HfArgumentParser, TrainingArguments
        @dataclass
        class Data:
            workers: int = field(default=12, metadata={"help": "loader workers"})
        @dataclass
        class Loop:
            workers: int = 2
        data_args, training_args = HfArgumentParser((Data, TrainingArguments)).parse_args_into_dataclasses()
        a = DataLoader(ds, num_workers=data_args.workers)
        b = DataLoader(ds, num_workers=training_args.dataloader_num_workers)
        cfg = tyro.cli(Loop)
        c = DataLoader(ds, num_workers=cfg.workers)
    """
    facts = collect(cst.parse_module(textwrap.dedent(code)))
    values = [call.value("num_workers") for call in facts.calls]
    assert values[0] == 12 and values[1] is UNKNOWN and values[2] == 2
    found = origin(facts.calls[0].expr("num_workers"), facts.calls[0].scope)
    assert found is not None and found.text == "with the default `Data.workers = 12`"


def test_module_values_are_exported_as_plain_data() -> None:
    code = """
        import argparse
        NUM_WORKERS = 4
        BATCH = NUM_WORKERS * 8
        ROOT = get_root()
        def get_args_parser():
            parser = argparse.ArgumentParser()
            parser.add_argument("-j", "--workers", default=NUM_WORKERS, type=int)
            return parser
        args = get_args_parser().parse_args()
    """
    values = collect(cst.parse_module(textwrap.dedent(code))).cli.values
    assert values.constants == {"NUM_WORKERS": 4, "BATCH": 32}
    assert values.parser_functions == {"get_args_parser": {"workers": (4, "with the default `--workers 4`")}}
    assert values.namespaces == {"args": {"workers": (4, "with the default `--workers 4`")}}


def test_parameter_defaults_every_call_relies_on() -> None:
    code = """
        from torch.utils.data import DataLoader
        def build(ds, batch_size=32, *, workers=2):
            return DataLoader(ds, batch_size=batch_size, num_workers=workers)
        def given(ds, workers=2):
            return DataLoader(ds, num_workers=workers)
        build(a, 8)
        build(b)
        given(a)
        given(b, 4)
    """
    facts = collect(cst.parse_module(textwrap.dedent(code)))
    built, passed = facts.calls
    assert built.value("num_workers") == 2 and built.value("batch_size") is UNKNOWN
    found = origin(built.expr("num_workers"), built.scope)
    assert found is not None and found.text == "with the default `workers=2` of `build()`"
    assert passed.value("num_workers") is UNKNOWN
