"""Property test: DataLoader calls in generated layouts (one line, one
argument per line with or without a trailing comma, hanging indent, comments
after arguments and on lines of their own, inside a function or not).

For every one: the fixed module parses, the fixed codes are gone on a
re-check, fixing again changes nothing, and the text outside the call is
unchanged.
"""

from __future__ import annotations

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadlint.engine.decision import fix_text

from loadlint.types import Options
from loadlint.types import HardwareProfile

PROFILE = HardwareProfile(
    usable_cpus=8, gpu_count=1, platform="linux", python="3.11",
    declared=frozenset({"cpus", "gpus", "platform", "python"}),
)
CODES = frozenset({"LL201", "LL202", "LL203"})
OPTIONS = Options(CODES, lambda: PROFILE)

#: Optional keyword arguments and the values they may take.
KEYWORDS = {
    "batch_size": st.sampled_from(["4", "32", "BATCH"]),
    "shuffle": st.sampled_from(["True", "False"]),
    "num_workers": st.sampled_from(["0", "2", "64"]),
    "pin_memory": st.sampled_from(["False", "True"]),
    "drop_last": st.sampled_from(["True", "False"]),
}
COMMENTS = st.one_of(st.none(), st.sampled_from(["# note", "# batch: 32 (fits)", "#"]))


@st.composite
def calls(draw) -> tuple[str, str, str]:
    """(prefix, call statement, suffix): the call statement alone varies."""
    names = draw(st.lists(st.sampled_from(sorted(KEYWORDS)), unique=True, max_size=5))
    args = ["dataset"] + [f"{name}={draw(KEYWORDS[name])}" for name in names]
    layout = draw(st.sampled_from(["one-line", "per-line", "per-line-comma", "hanging", "one-line-comma"]))
    in_function = draw(st.booleans())
    indent = "    " if in_function else ""
    head = f"{indent}loader = DataLoader("
    if layout in ("one-line", "one-line-comma"):
        call = head + ", ".join(args) + ("," if layout == "one-line-comma" else "") + ")"
        comment = draw(COMMENTS)
        if comment:
            call += "  " + comment
    elif layout == "hanging":
        pad = " " * len(head)
        parts = []
        for i, arg in enumerate(args):
            last = i == len(args) - 1
            line = (head if i == 0 else pad) + arg + (")" if last else ",")
            comment = draw(COMMENTS)
            parts.append(line + (f"  {comment}" if comment else ""))
        call = "\n".join(parts)
    else:
        inner = indent + draw(st.sampled_from(["    ", "        ", "\t"]))
        parts = [head]
        for i, arg in enumerate(args):
            last = i == len(args) - 1
            own = draw(COMMENTS)
            if own and i:
                parts.append(f"{inner}{own}")
            comma = "," if (not last or layout == "per-line-comma") else ""
            comment = draw(COMMENTS)
            parts.append(f"{inner}{arg}{comma}" + (f"  {comment}" if comment else ""))
        parts.append(indent + ")")
        call = "\n".join(parts)
    prefix = "from torch.utils.data import DataLoader\n\nBATCH = 16\n\n"
    if in_function:
        prefix += "def build(dataset):\n"
    suffix = "\n"
    if in_function:
        suffix += "    return loader\n"
    if draw(st.booleans()):
        suffix += "\nmodel.cuda()  # the loader feeds a GPU\n"
    return prefix, call, suffix


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls(), st.booleans())
def test_fixes_in_any_layout(parts: tuple[str, str, str], crlf: bool) -> None:
    prefix, call, suffix = parts
    newline = "\r\n" if crlf else "\n"
    prefix, call, suffix = (p.replace("\n", newline) for p in (prefix, call, suffix))
    text = prefix + call + suffix
    cst.parse_module(text)  # the generator makes valid code

    fixed, remaining, applied = fix_text(text, "x.py", OPTIONS, unsafe=True)

    cst.parse_module(fixed)
    compile(fixed, "x.py", "exec")
    assert not [f for f in remaining if f.code in applied], remaining
    assert not [f for f in remaining if f.fix is not None]
    again, _, applied_again = fix_text(fixed, "x.py", OPTIONS, unsafe=True)
    assert again == fixed and not applied_again
    # Only the call statement changed.
    assert fixed.startswith(prefix) and fixed.endswith(suffix)
    if crlf:
        assert "\n" not in fixed.replace("\r\n", "")
    # Comments inside the call survive.
    for comment in ("# note", "# batch: 32 (fits)"):
        assert call.count(comment) == fixed.count(comment)
