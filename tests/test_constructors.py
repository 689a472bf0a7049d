"""The parser's node constructors (loadlint.cst.constructors): what they build
must be what libcst's own constructors build; in place only while loadlint
parses, they check every node as libcst's do, but those the parsing thread
builds."""

from __future__ import annotations

import contextlib
import inspect
import subprocess
import sys
import threading
from typing import Iterator

import libcst as cst
import pytest

from loadlint.cst import slicing
from loadlint.cst.constructors import constructors
from tests.texts import FIXTURES, REPO, decoded

CONSTRUCTORS = constructors(cst)

#: Syntax the fixtures may lack; every statement and expression kind once.
SYNTAX = '''\
from __future__ import annotations
import os.path as p, sys
from . import x as y
@decorator(1)
class C(Base, metaclass=M):
    """Doc."""
    a: int = 1
    def f[T](self, x: T, /, y=2, *args, z: int, **kw) -> T: ...
    async def g(self):
        async with a as b, c:
            async for i in aiter():
                await i
        return [x async for x in y if x]
type Alias[K] = dict[K, int]
def h():
    global G
    x = 1
    def inner():
        nonlocal x
        x += 1
    yield from inner()
    yield
    lambda a, *b, c=1, **d: (a, b, c, d)
    del x
try:
    pass
except* ValueError as e:
    raise RuntimeError("x") from e
else:
    pass
finally:
    pass
try:
    assert x, "message"
except (KeyError, IndexError):
    pass
with (open("a") as f, open("b") as g):
    print(f"{f!r:>{width}} {g=} {{}}", rb"\\n", 0x1F, 1_000.5e-3j, ...)
match command.split():
    case [action, *rest] if rest:
        pass
    case {"key": value, **others}:
        pass
    case Point(x=0, y=_) | None:
        pass
    case "literal" | -1 | 1 + 2j | a.b:
        pass
    case _:
        pass
while not (a is b and c is not d or e in f and g not in h):
    x = a if b else c
    x[1:2:3], y[::], z[...] = -a, +b, ~c
    x @= y ** z // w % v << 1 >> 2 & 3 | 4 ^ 5
    if (n := len(x)) > 10: break
    elif n <= 3 != 4 >= 5 < 6 == 7: continue
    else: pass
for i, (j, *k) in enumerate({1: 2, **m}.items()): {*s, 1}; (yield); [*a, b]; x, = y; print(*a, **b, c=d)
{k: v for k, v in d.items()}; {s for s in t}; (g for g in h); [l for l in m for n in o if p]
x: list[int]
x = y = z = 1; import a; from b import (c, d,)
if True:
\tpass  # tab
'''


def _texts() -> list[tuple[str, str]]:
    texts = decoded(FIXTURES + sorted((REPO / "loadlint" / "facts").glob("*.py")))
    return [("syntax", SYNTAX), ("crlf", SYNTAX.replace("\n", "\r\n")), ("non-ascii", "caf\u00e9 = '\u00e9t\u00e9'\n"), *texts]


@pytest.fixture
def prepared() -> Iterator[None]:
    slicing.prepare()
    with slicing.fast_nodes():  # as in a run
        yield


@contextlib.contextmanager
def libcsts_own() -> Iterator[None]:
    """libcst's own constructors in place meanwhile: the reference."""
    installed = slicing._fast or []
    for cls, original, _ in installed:
        cls.__init__ = original  # type: ignore[misc]
    try:
        yield
    finally:
        for cls, _, fast in installed:
            cls.__init__ = fast  # type: ignore[misc]


def _invalid_call() -> cst.Call:
    return cst.Call(func=cst.Name("f"), lpar=[cst.LeftParen()])  # unbalanced parentheses


@pytest.mark.usefixtures("prepared")
def test_the_trees_are_libcsts() -> None:
    checked = 0
    for name, text in _texts():
        try:
            with libcsts_own():
                expected = cst.parse_module(text)
        except cst.ParserSyntaxError:
            with pytest.raises(cst.ParserSyntaxError):
                slicing.parse_module(text)
            continue
        got = slicing.parse_module(text)
        assert got.deep_equals(expected), name
        assert got.code == text, name
        checked += 1
    assert checked > 100


def test_each_constructor_takes_what_libcsts_takes() -> None:
    for cls, original, fast in CONSTRUCTORS:
        theirs, ours = inspect.signature(original).parameters, inspect.signature(fast).parameters
        assert list(theirs) == list(ours), cls
        for name, param in theirs.items():
            # A default factory's marker included: a caller may pass what the signature shows.
            assert ours[name].default is param.default, (cls, name)
        assert inspect.signature(fast) == inspect.signature(original), cls  # annotations too
        assert (fast.__qualname__, fast.__module__) == (original.__qualname__, original.__module__)


def test_every_node_the_parser_builds_has_one() -> None:
    seen: set[type] = set()

    class Types(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            seen.add(type(node))
            return True

    cst.parse_module(SYNTAX).visit(Types())
    covered = {cls for cls, _, _ in CONSTRUCTORS}
    assert seen - covered == set()
    assert len(seen) > 100


@pytest.mark.usefixtures("prepared")
def test_defaults_and_factories_fill_what_a_caller_leaves_out() -> None:
    fast = {cls: made for cls, _, made in slicing._fast or []}

    def build() -> list[cst.CSTNode]:
        return [cst.AssignTarget(target=cst.Name("x")), cst.Attribute(value=cst.Name("a"), attr=cst.Name("b")), cst.Float("1.0")]

    assert vars(cst.AssignTarget)["__init__"] is fast[cst.AssignTarget]
    with slicing.parser_nodes(check_names=False):
        during = build()
    after, again = build(), build()
    with libcsts_own():
        theirs = build()
    for ours in (during, after):
        for got, want in zip(ours, theirs):
            assert got.deep_equals(want)
    # A default factory makes a node per call, as libcst's constructor does.
    assert after[0].whitespace_before_equal is not again[0].whitespace_before_equal
    # The signature's marker, passed explicitly, is the factory's value too.
    marker = inspect.signature(cst.Tuple).parameters["lpar"].default
    built = cst.Tuple(elements=[], lpar=marker, rpar=marker)
    with libcsts_own():
        assert built.deep_equals(cst.Tuple(elements=[], lpar=marker, rpar=marker))
    assert built.lpar is not marker and all(type(paren) is cst.LeftParen for paren in built.lpar)


@pytest.mark.usefixtures("prepared")
def test_outside_a_parse_every_node_is_checked() -> None:
    fast = {cls: made for cls, _, made in slicing._fast or []}
    with pytest.raises(cst.CSTValidationError):
        _invalid_call()
    slicing.parse_module("x = 1\n")
    with pytest.raises(cst.ParserSyntaxError):
        slicing.parse_module("x = (\n")
    with pytest.raises(cst.CSTValidationError):
        _invalid_call()
    with pytest.raises(cst.CSTValidationError, match="not a valid identifier"):
        cst.Name("1x")
    # Installed once: no class is touched by a parse.
    assert all(vars(cls)["__init__"] is made for cls, made in fast.items())


@pytest.mark.usefixtures("prepared")
def test_during_a_parse_nodes_go_unchecked_names_when_asked() -> None:
    with slicing.parser_nodes(check_names=False):
        _invalid_call()
        cst.Name("1x")
    with slicing.parser_nodes(check_names=True):
        _invalid_call()
        with pytest.raises(cst.CSTValidationError):
            cst.Name("1x")
        # A parse of ASCII text starting meanwhile keeps the names checked.
        with slicing.parser_nodes(check_names=False):
            with pytest.raises(cst.CSTValidationError):
                cst.Name("1x")
    with pytest.raises(cst.CSTValidationError):
        _invalid_call()


@pytest.mark.usefixtures("prepared")
def test_parses_in_threads_leave_every_node_checked() -> None:
    text = SYNTAX * 3
    with libcsts_own():
        expected = cst.parse_module(text)
    failures: list[str] = []

    def parse() -> None:
        for _ in range(5):
            if not slicing.parse_module(text).deep_equals(expected):
                failures.append("differs")

    threads = [threading.Thread(target=parse) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with pytest.raises(cst.CSTValidationError):
        _invalid_call()


#: Run in a fresh process: libcst's constructors until the fast ones are made.
BEFORE_AND_AFTER = r"""
import libcst as cst
from loadlint.cst import slicing

def invalid():
    try:
        cst.Call(func=cst.Name("f"), lpar=[cst.LeftParen()])
    except cst.CSTValidationError:
        return "checked"
    return "unchecked"

slicing.PREPARE_AFTER = 50
original = vars(cst.Call)["__init__"]
slicing.parse_module("x = 1\n" * 5)
assert slicing._fast is None and vars(cst.Call)["__init__"] is original, "made too soon"
try:
    slicing.parse_module("\U0002ebf0 = 1\n")
except (cst.CSTValidationError, cst.ParserSyntaxError):  # libcst 1.4's tokenizer rejects it itself
    pass
else:
    raise AssertionError("a name went unchecked before they were made")
print(invalid())
with slicing.parser_nodes(check_names=False):
    print(invalid())
    slicing.prepare()  # made while a parse runs: it still checks nothing
    print(invalid())
print(invalid())
with slicing.fast_nodes():
    assert vars(cst.Call)["__init__"] is not original, "not installed"
    print(invalid())
assert vars(cst.Call)["__init__"] is original, "not restored"
"""


def test_a_process_makes_them_once_and_checks_as_before() -> None:
    out = subprocess.run([sys.executable, "-c", BEFORE_AND_AFTER], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == ["checked", "unchecked", "unchecked", "checked", "checked"]


@pytest.mark.usefixtures("prepared")
def test_names_are_still_checked_in_text_that_is_not_ascii() -> None:
    # libcst's node check rejects it; libcst 1.4's tokenizer already does.
    with pytest.raises((cst.CSTValidationError, cst.ParserSyntaxError), match="not a valid identifier"):
        slicing.parse_module("\U0002ebf0 = 1\n")
    assert slicing.parse_module("\u00e9t\u00e9 = 1\n").code == "\u00e9t\u00e9 = 1\n"
