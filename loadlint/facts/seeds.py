"""Sampler seeds that differ per rank: ``DistributedSampler(ds, seed=args.seed + rank)``.

Every rank's ``DistributedSampler`` must draw the same permutation and take
its own slice of it; a seed that mixes in the rank gives each rank its own
permutation, so the slices overlap and some samples are never drawn.
"""

from __future__ import annotations

import libcst as cst

from loadlint.facts.resolve import Scope, dotted_name, follow_name, string_value

#: Calls whose result is the process's rank (``dist.get_rank()``, torch_xla's ordinal).
_RANK_CALLS = frozenset({"get_rank", "get_local_rank", "get_global_rank", "get_ordinal", "get_local_ordinal"})
#: Attributes that hold the process's rank (accelerate, Lightning, Fabric).
_RANK_ATTRIBUTES = frozenset({"process_index", "local_process_index", "global_rank", "local_rank"})
_RANK_ENV = frozenset({"RANK", "LOCAL_RANK"})
#: ``DistributedSampler(dataset, num_replicas, rank, shuffle, seed, drop_last)``.
_SHUFFLE_POSITION, _SEED_POSITION = 3, 4


def sampler_argument(node: cst.Call, name: str) -> cst.Arg | None:
    """The ``shuffle`` or ``seed`` argument of a ``DistributedSampler(...)`` call."""
    position = _SEED_POSITION if name == "seed" else _SHUFFLE_POSITION
    positional = [a for a in node.args if a.keyword is None and not a.star]
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return positional[position] if len(positional) > position else None


def _is_rank(node: cst.BaseExpression) -> bool:
    if type(node) is cst.Call:
        name = dotted_name(node.func) or ""
        if name in ("int", "str") and len(node.args) == 1:
            return _is_rank(node.args[0].value)
        # ``os.environ.get("RANK", 0)``
        if name.endswith("environ.get") and node.args:
            key = node.args[0].value
            return type(key) is cst.SimpleString and string_value(key) in _RANK_ENV
        return name.rsplit(".", 1)[-1] in _RANK_CALLS
    if type(node) is cst.Subscript and len(node.slice) == 1:
        index = node.slice[0].slice
        subscript = index.value if type(index) is cst.Index else None
        return type(subscript) is cst.SimpleString and string_value(subscript) in _RANK_ENV
    last = (dotted_name(node) or "").rsplit(".", 1)[-1].lower()
    if last in _RANK_ATTRIBUTES:
        return True
    # ``node_rank`` is the same on every process of a node; a group's rank is not the process's.
    return last.endswith("rank") and "node" not in last and "group" not in last and "world" not in last


def rank_term(node: cst.BaseExpression, scope: Scope | None, depth: int = 0) -> cst.BaseExpression | None:
    """The part of an expression that is the process's rank (``rank`` in
    ``args.seed + rank``), following names bound once; None when there is none."""
    if depth > 8:
        return None
    if _is_rank(node):
        return node
    if type(node) is cst.Name:
        target, owner = follow_name(node, scope)
        if target is not node and rank_term(target, owner, depth + 1) is not None:
            return node
        return None
    if type(node) is cst.BinaryOperation:
        return rank_term(node.left, scope, depth + 1) or rank_term(node.right, scope, depth + 1)
    if type(node) is cst.Call and (dotted_name(node.func) or "") in ("int", "abs", "hash"):
        for arg in node.args:
            found = rank_term(arg.value, scope, depth + 1)
            if found is not None:
                return found
    return None


def per_rank_seed(node: cst.Call, scope: Scope) -> tuple[cst.Arg, cst.BaseExpression] | None:
    """(the seed argument, its rank term) of a ``DistributedSampler(...)``
    whose seed differs per rank, or None."""
    arg = sampler_argument(node, "seed")
    if arg is None:
        return None
    term = rank_term(arg.value, scope)
    return (arg, term) if term is not None else None


def seed_without_rank(seed: cst.BaseExpression, term: cst.BaseExpression) -> cst.BaseExpression | None:
    """``args.seed`` for ``args.seed + rank`` (or ``rank + args.seed``): the
    seed with its rank term dropped, when the rank is one side of a ``+``."""
    if type(seed) is not cst.BinaryOperation or type(seed.operator) is not cst.Add:
        return None
    if seed.right is term:
        return seed.left
    if seed.left is term:
        return seed.right
    return None
