"""The README's option tables are generated from the command line: every
option of every command, with its help text.  Regenerate with
``LOADLINT_REGEN=1 python -m pytest tests/test_readme_options.py``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

from loadlint.cli import cli

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- options: generated from the command line; do not edit by hand -->", "<!-- end of options -->"


def _rows(command: click.Command, ctx: click.Context, skip: frozenset[str] = frozenset()) -> list[str]:
    rows = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.name in skip or param.name == "help":
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, text = record
        text = re.sub(r"\s+", " ", text).replace("|", "\\|")
        rows.append(f"| `{names}` | {text} |")
    return rows


def option_tables() -> str:
    """One table per command; ``fix`` lists only what ``check`` lacks."""
    root = click.Context(cli, info_name="loadlint")
    out = [BEGIN]
    check_names: frozenset[str] = frozenset()
    for name in ("check", "fix", "hardware", "init", "rule", "clean", "verify", "lsp"):
        command = cli.get_command(root, name)
        assert command is not None
        ctx = click.Context(command, info_name=name, parent=root)
        rows = _rows(command, ctx, check_names if name == "fix" else frozenset())
        if name == "check":
            check_names = frozenset(p.name for p in command.params if p.name and p.name != "help")
        if not rows:
            continue
        title = "`loadlint fix` (the options of `check`, and)" if name == "fix" else f"`loadlint {name}`"
        out += ["", f"#### {title}", "", "| Option | Meaning |", "|---|---|", *rows]
    out.append(END)
    return "\n".join(out)


def test_readme_lists_every_option_of_every_command():
    text = README.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "README lacks the generated option tables"
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    if os.environ.get("LOADLINT_REGEN"):
        README.write_text(text[:start] + option_tables() + text[stop:], encoding="utf-8")
        text = README.read_text(encoding="utf-8")
        start, stop = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:stop] == option_tables(), "README option tables are stale: regenerate (see module docstring)"


def test_the_tables_name_every_flag():
    tables = option_tables()
    for flag in ("-q, --quiet", "-j, --jobs", "--from-verify", "--add-noqa", "--statistics", "--target"):
        assert flag in tables, flag
