"""The linear .gitignore matcher: git's semantics, pathspec's answers on
ordinary patterns, and no backtracking on the patterns that make a regex
backtrack."""

from __future__ import annotations

import time

import pathspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadlint.workspace.discover import _GitIgnore, _compiled
from loadlint.workspace.wildmatch import LinearSpec, star_runs

# "[!a]" is left out: pathspec lets it match "/", git does not.
ATOMS = ["a", "b", "*", "?", "/", "[ab]", "**", "ab", "\\*", "[a-c]"]
NAMES = ["a", "b", "ab", "ba", "aab", "c", "*", "bb"]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(ATOMS), min_size=1, max_size=5).map("".join), min_size=1, max_size=3),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=4),
    st.booleans(),
)
def test_agrees_with_pathspec_on_patterns_without_negation(raw, names, is_dir):
    # A segment of three or more stars is git's ``**`` (git check-ignore:
    # ``***/a`` ignores ``a``); pathspec reads it as one segment's ``*``.
    # A line ending in ``**/`` matches folders only (git check-ignore:
    # ``a/**/`` leaves the file ``a/a``); pathspec matches the file too.
    lines = [line for line in raw if "//" not in line and line != "/" and not line.endswith("**/")
             and not any(len(part) > 2 and set(part) == {"*"} for part in line.split("/"))]
    if not lines:
        return
    rel = "/".join(names) + ("/" if is_dir else "")
    assert (LinearSpec(lines).decide(rel) is True) == pathspec.GitIgnoreSpec.from_lines(lines).match_file(rel)


@pytest.mark.parametrize(
    ("line", "rel", "ignored"),
    [
        ("*.pyc", "a/b/x.pyc", True),
        ("/build", "build/x.py", True),
        ("/build", "src/build/x.py", False),
        ("docs/", "docs", False),  # a file named docs: the pattern wants a folder
        ("docs/", "docs/", True),
        ("docs/", "docs/a.py", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("**/foo", "x/foo", True),
        ("abc/**", "abc/x.py", True),
        ("ab/**", "ab/", True),  # git check-ignore: the folder itself too (Hypothesis found it)
        ("ab/**", "ab", False),
        ("a/***", "a/", True),  # more stars in a whole segment read as two (Hypothesis found it)
        ("a/***", "a/b/f.py", True),
        ("a/***/b", "a/x/b", True),
        ("***/a", "a", True),  # git check-ignore; pathspec says no (Hypothesis found it)
        ("***/a", "d/a", True),
        ("a***", "a/g.py", True),
        ("a/**/", "a/a", False),  # git check-ignore: folders only; pathspec says yes (Hypothesis found it)
        ("a/**/", "a/", True),
        ("a/**/", "a/b/", True),
        ("a/**/", "a/b/c", True),
        ("[!a]x", "/x", False),
        ("\\#x", "#x", True),
        ("# comment", "# comment", False),
        ("a\\ ", "a ", True),
        ("a  ", "a", True),
    ],
)
def test_git_semantics(line, rel, ignored):
    assert (LinearSpec([line]).decide(rel) is True) is ignored


def test_last_matching_line_wins():
    spec = LinearSpec(["*.py", "!keep.py"])
    assert spec.decide("x.py") is True
    assert spec.decide("keep.py") is False
    assert spec.decide("x.txt") is None


def test_star_runs():
    assert star_runs("*a*a**b") == 3
    assert star_runs("build/") == 0


def test_backtracking_pattern_ends_fast():
    # With pathspec's regex this pattern takes tens of seconds on 34 "a"s
    # and grows exponentially with each one more.
    line = "*a" * 12 + "*b"
    spec, anything = _compiled([line])
    start = time.perf_counter()
    for n in range(30, 300, 10):
        assert not _GitIgnore.ignored("/r/" + "a" * n, False, [(None, (spec, anything, "/r/"))])  # type: ignore[list-item]
    assert time.perf_counter() - start < 1.0
