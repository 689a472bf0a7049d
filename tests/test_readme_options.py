"""The README's option tables are generated from the command line: every
option of every command, with its help text.  Regenerate with
``LOADLINT_REGEN=1 python -m pytest tests/test_readme_options.py``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click

from loadlint.frontends.cli import cli

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- options: generated from the command line; do not edit by hand -->", "<!-- end of options -->"


def _rows(command: click.Command, ctx: click.Context, label: str, skip: frozenset[str]) -> list[str]:
    rows = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.name in skip or param.name == "help":
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, text = record
        if names == "--help":  # every command has it; the table says so once
            continue
        text = re.sub(r"\s+", " ", text).replace("|", "\\|")
        rows.append(f"| {label} | `{names}` | {text} |")
    return rows


def option_tables() -> str:
    """One table, a row per option of each command; ``fix`` adds only what ``check`` lacks."""
    root = click.Context(cli, info_name="loadlint")
    rows = ["| Command | Option | Meaning |", "|---|---|---|"]
    check_names: frozenset[str] = frozenset()
    # Every command the CLI has, check and fix first: a new command cannot be left out.
    names = ["check", "fix", *sorted(set(cli.list_commands(root)) - {"check", "fix"})]
    for name in names:
        command = cli.get_command(root, name)
        assert command is not None
        ctx = click.Context(command, info_name=name, parent=root)
        label = "`check`, `fix`" if name == "check" else f"`{name}`"
        rows += _rows(command, ctx, label, check_names if name == "fix" else frozenset())
        if name == "check":
            check_names = frozenset(p.name for p in command.params if p.name)
    return "\n".join([BEGIN, *rows, END])


if __name__ == "__main__":
    sys.stdout.write(option_tables())


def fresh_tables() -> str:
    """``option_tables`` in a fresh interpreter: what a user's ``--help``
    shows, whatever other tests did to this process's modules."""
    env = {**os.environ, "PYTHONPATH": str(README.parent)}
    done = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def test_readme_lists_every_option_of_every_command():
    text = README.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "README lacks the generated option tables"
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    tables = fresh_tables()
    if os.environ.get("LOADLINT_REGEN"):
        README.write_text(text[:start] + tables + text[stop:], encoding="utf-8")
        text = README.read_text(encoding="utf-8")
        start, stop = text.index(BEGIN), text.index(END) + len(END)
    stale = sorted(set(tables.splitlines()) ^ set(text[start:stop].splitlines()))
    assert not stale, "README option tables are stale (regenerate, see the module docstring):\n" + "\n".join(stale)
    assert text[start:stop] == tables


def test_the_tables_name_every_flag():
    tables = fresh_tables()
    for flag in ("-q, --quiet", "-j, --jobs", "--from-verify", "--add-noqa", "--statistics", "--target"):
        assert flag in tables, flag


def test_readme_stays_short_and_its_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 350
    for target in re.findall(r"\]\(((?:docs|rules)/[^)#]+)\)", text):
        assert (README.parent / target).is_file(), target
    for page in (README.parent / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+\.md)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).is_file(), f"{page.name}: {target}"
