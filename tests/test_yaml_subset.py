"""The safe YAML subset reader: what it reads agrees with a YAML loader,
and what it does not follow is unknown, never guessed."""

from __future__ import annotations

import pytest

from loadlint.sources.yaml_subset import Scalar, Unknown, parse

CONFIG = """\
# comment
defaults:
  - data: imagenet
  - _self_
seed: 42  # trailing comment
name: "resnet # not a comment"
data:
  root: /datasets/x
  num_workers: 8
  ratio: 0.5
  big: 1e3
  pin: true
  off: False
  nothing: null
  tilde: ~
  empty:
  quoted: 'single'
  nested:
    deeper: 3
model:
  layers: [1, 2]
  interp: ${data.num_workers}
  yes_no: yes
after: 3
"""


def plain(tree):
    out = {}
    for key, node in tree.items():
        if key.startswith("\0"):
            continue  # a key some loaders read as a boolean: no attribute reads it
        if isinstance(node, dict):
            out[key] = plain(node)
        elif isinstance(node, Scalar):
            out[key] = node.value
    return out


def test_the_subset_agrees_with_a_yaml_loader_on_what_it_reads() -> None:
    yaml = pytest.importorskip("yaml")
    tree = parse(CONFIG)
    assert tree is not None
    expected = yaml.safe_load(CONFIG)
    ours = plain(tree)
    # Every value read is the loader's; only what is unknown is left out.
    assert ours["data"] == {k: v for k, v in expected["data"].items() if k not in ("big", False)}
    assert "big" not in ours["data"] and "off" not in ours["data"]
    assert ours["seed"] == 42 and ours["name"] == "resnet # not a comment" and ours["after"] == 3
    assert "layers" not in ours["model"] and "interp" not in ours["model"] and "yes_no" not in ours["model"]


def test_lines_and_unknowns_are_kept() -> None:
    tree = parse(CONFIG)
    assert tree is not None
    data = tree["data"]
    assert isinstance(data, dict) and data["num_workers"] == Scalar(8, 9)
    defaults = tree["defaults"]
    assert isinstance(defaults, Unknown) and defaults.items == ["data: imagenet", "_self_"]
    assert isinstance(tree["model"], dict) and isinstance(tree["model"]["interp"], Unknown)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\n  b: 2\n",  # a continuation the reader does not follow
        "a:\n\tb: 1\n",  # tabs
        "a: 1\na: 2\n",  # a duplicate key
        "a: 1\n---\nb: 2\n",  # two documents
        "a: 'open\n",  # an open quote
        "- 1\n- 2\n",  # a list at the top
        "%YAML 1.2\na: 1\n",  # a directive
        "a: 1\nb\n",  # not a key
    ],
)
def test_a_text_outside_the_subset_is_unknown_whole(text: str) -> None:
    assert parse(text) is None


def test_a_list_item_spread_over_lines_has_no_items() -> None:
    tree = parse("defaults:\n  - data:\n      x: 1\n  - _self_\nb: 2\n")
    assert tree is not None and isinstance(tree["defaults"], Unknown) and tree["defaults"].items is None
    assert tree["b"] == Scalar(2, 5)
