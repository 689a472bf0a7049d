"""The collector, the resolver and the helpers the rules share."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from loadlint.facts.collect import collect
from loadlint.engine.fixes import Builder, apply_edits
from loadlint.engine.positions import Positions
from loadlint.facts.resolve import MISSING, UNKNOWN
from loadlint.rules import worker_hazards
from loadlint.rules.base import Context, FixSpec, RuleSettings
from loadlint.rules.ll007_unpicklable_worker_function import pickle_problems
from loadlint.rules.ll103_worker_rng_duplication import shared_rng
from loadlint.rules.ll104_unsharded_iterable_dataset import unsharded_iterable
from loadlint.rules.ll105_cuda_in_worker import cuda_in_worker
from loadlint.facts.arguments import sampler_presence
from loadlint.rules.shared import spawn_reason, torch_before_2
from loadlint.types import HardwareProfile

LINUX_311 = HardwareProfile(usable_cpus=4, platform="linux", python="3.11", declared=frozenset({"platform", "python"}))


def info_of(code: str):
    return collect(cst.parse_module(textwrap.dedent(code)))


def only_call(code: str):
    info = info_of(code)
    assert len(info.calls) == 1, info.calls
    return info, info.calls[0]


# -- import forms --------------------------------------------------------------

@pytest.mark.parametrize("code", [
    "import torch\ntorch.utils.data.DataLoader(ds)",
    "from torch.utils.data import DataLoader\nDataLoader(ds)",
    "from torch.utils.data import DataLoader as DL\nDL(ds)",
    "import torch.utils.data as tud\ntud.DataLoader(ds)",
    "from torch.utils import data\ndata.DataLoader(ds)",
    "import torch as T\nT.utils.data.DataLoader(ds)",
    "import torch\ntorch.utils.data.dataloader.DataLoader(ds)",
    "from torch.utils.data.dataloader import DataLoader\nDataLoader(ds)",
    "import torch.utils.data\ntorch.utils.data.DataLoader(ds)",
])
def test_every_import_form_is_found(code):
    assert len(info_of(code).calls) == 1


@pytest.mark.parametrize("code", [
    "from mylib import DataLoader\nDataLoader(ds)",
    "class Pipeline:\n    def build(self):\n        return self.DataLoader(ds)",
    "from torch.utils.data import DataLoader\nclass DataLoader:\n    pass\nDataLoader(ds)",
    "DataLoader(ds)",
])
def test_other_dataloaders_are_not_found(code):
    assert info_of(code).calls == []


def test_positional_arguments_map_to_parameters():
    _, call = only_call("from torch.utils.data import DataLoader\nDataLoader(ds, 8, True, None, None, 3)")
    assert call.value("batch_size") == 8
    assert call.value("shuffle") is True
    assert call.value("num_workers") == 3
    assert call.value("pin_memory") is MISSING
    assert call.effective("pin_memory") is False


def test_values_resolve_through_names_and_arithmetic():
    _, call = only_call("""
        from torch.utils.data import DataLoader
        WORLD = 4
        def main():
            per_rank = 64 // WORLD
            return DataLoader(ds, batch_size=per_rank, num_workers=args.workers)
    """)
    assert call.value("batch_size") == 16
    assert call.value("num_workers") is UNKNOWN


def test_kwargs_dict_resolves_key_by_key_and_opaque_kwargs_hide_everything():
    _, call = only_call("""
        from torch.utils.data import DataLoader
        def main():
            kw = {"batch_size": 8}
            kw.update({"num_workers": 2})
            kw["pin_memory"] = True
            return DataLoader(ds, **kw)
    """)
    assert (call.value("batch_size"), call.value("num_workers"), call.value("pin_memory")) == (8, 2, True)
    assert call.value("timeout") is MISSING
    _, opaque = only_call("from torch.utils.data import DataLoader\ndef f(**kw):\n    return DataLoader(ds, **kw)")
    assert opaque.value("timeout") is UNKNOWN


def test_scope_of_a_dict_key_is_the_dicts_function():
    # The dict's values are read where the dict was written: `mp` is the
    # outer function's "spawn", not the inner function's "fork".
    _, call = only_call("""
        from torch.utils.data import DataLoader
        def outer():
            mp = "spawn"
            kw = {"multiprocessing_context": mp}
            def inner():
                mp = "fork"
                return DataLoader(ds, num_workers=2, **kw)
    """)
    assert call.scope.name == "inner"
    assert call.scope_of("multiprocessing_context").name == "outer"
    assert call.scope_of("num_workers") is call.scope_of("timeout") is call.scope
    assert call.value("multiprocessing_context") == "spawn"
    assert spawn_reason(LINUX_311, call) == '`multiprocessing_context="spawn"`'


#: The limits of ``**dict`` resolution as docs/rule-authors.md states them:
#: (function body after ``DataLoader`` is imported, timeout's value).
DICT_LIMITS = {
    "literal at the call": ("return DataLoader(ds, **{'timeout': 5})", 5),
    "bound once here": ("kw = {'timeout': 5}\n    return DataLoader(ds, **kw)", 5),
    "update with a name": ("a = {'timeout': 5}\n    kw = {}\n    kw.update(a)\n    return DataLoader(ds, **kw)", 5),
    "conditional key": ("kw = {}\n    if c:\n        kw['timeout'] = 5\n    return DataLoader(ds, **kw)", UNKNOWN),
    "dict() of keywords": ("kw = dict(timeout=5)\n    return DataLoader(ds, **kw)", 5),
    "dict() of a mapping": ("kw = dict(base, timeout=5)\n    return DataLoader(ds, **kw)", UNKNOWN),
    "key not a literal": ("k = 'timeout'\n    return DataLoader(ds, **{k: 5})", UNKNOWN),
    "update with keywords": ("kw = {}\n    kw.update(timeout=5)\n    return DataLoader(ds, **kw)", UNKNOWN),
    "pop": ("kw = {'timeout': 5}\n    kw.pop('timeout')\n    return DataLoader(ds, **kw)", UNKNOWN),
    "bound twice": ("kw = {}\n    if c:\n        kw = {'timeout': 5}\n    return DataLoader(ds, **kw)", UNKNOWN),
    "a parameter": ("return DataLoader(ds, **c)", UNKNOWN),
    "a call": ("return DataLoader(ds, **make())", UNKNOWN),
    "changed after the call": ("kw = {}\n    loader = DataLoader(ds, **kw)\n    kw['timeout'] = 5", MISSING),
    # Not seen: changes through another name or a function.
    "alias": ("kw = {}\n    alias = kw\n    alias['timeout'] = 5\n    return DataLoader(ds, **kw)", MISSING),
    "filled by a function": ("kw = {}\n    fill(kw)\n    return DataLoader(ds, **kw)", MISSING),
}


@pytest.mark.parametrize("case", sorted(DICT_LIMITS))
def test_the_documented_limits_of_dict_resolution(case):
    body, expected = DICT_LIMITS[case]
    _, call = only_call(f"from torch.utils.data import DataLoader\ndef f(c):\n    {body}\n")
    assert call.value("timeout") is expected if expected in (UNKNOWN, MISSING) else call.value("timeout") == expected


def test_a_module_level_dict_is_opaque():
    _, call = only_call("from torch.utils.data import DataLoader\nkw = {'timeout': 5}\nDataLoader(ds, **kw)\n")
    assert call.opaque_kwargs and call.value("timeout") is UNKNOWN


# -- records added for the rule catalog ---------------------------------------

def test_lambdas_record_params_names_and_cuda():
    info = info_of("""
        import torch
        from torch.utils.data import DataLoader
        def main(scale):
            f = lambda b: torch.stack(b).cuda() * scale
            return DataLoader(ds, num_workers=2, collate_fn=f)
    """)
    (facts,) = info.names.lambdas.values()
    assert facts.params == {"b"}
    assert {"torch", "scale", "b"} <= facts.names_used
    assert facts in info.accelerator.cuda_code
    assert facts.scope.kind == "function"


def test_definitions_are_keyed_by_scope():
    info = info_of("""
        def outer():
            def inner():
                pass
            class Local:
                pass
            return inner
        def top():
            pass
    """)
    info = info.names
    outer = info.defs[(id(info.module_scope), "outer")]
    assert not outer.nested
    assert info.defs[(id(outer.scope), "inner")].nested
    assert info.class_defs[(id(outer.scope), "Local")].nested
    assert info.definition("inner", outer.scope) is info.defs[(id(outer.scope), "inner")]
    assert info.definition("top", outer.scope) is info.defs[(id(info.module_scope), "top")]
    assert info.definition("missing", outer.scope) is None


def test_calls_with_lambdas_and_names_inside_constructor_calls():
    info = info_of("""
        from torchvision import transforms
        tf = transforms.Compose([transforms.Lambda(lambda x: x), transforms.ToTensor()])
        ds = Images(root, transform=tf)
        print(len(ds))
    """)
    info = info.names
    assert len(info.calls_with_lambda) == 2  # Compose(...) and Lambda(...)
    recorded = [names for names in info.call_names.values() if "tf" in names]
    assert recorded and {"root", "Images"} <= recorded[0]
    # print() is not constructor-like: its names are not kept.
    assert not any(names == {"print", "len", "ds"} for names in info.call_names.values())


def test_attribute_assignments_keep_the_statement():
    info = info_of("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds)
        loader.batch_size = 4
    """)
    (assignment,) = info.loaders.attr_assignments
    assert assignment.attr == "batch_size" and assignment.key == info.calls[0].key
    assert isinstance(assignment.statement, cst.Assign)


def test_one_traversal_with_the_fast_walker():
    import loadlint.facts.collect as callsites

    calls = []
    original = callsites.walk_units

    def counting(node, visitor):
        calls.append(node)
        return original(node, visitor)

    callsites.walk_units = counting
    try:
        collect(cst.parse_module("from torch.utils.data import DataLoader\nDataLoader(ds)\n"))
    finally:
        callsites.walk_units = original
    assert len(calls) == 1


# -- shared helpers -------------------------------------------------------------

@pytest.mark.parametrize("profile, context, expected", [
    (LINUX_311, None, None),
    (LINUX_311, '"spawn"', '`multiprocessing_context="spawn"`'),
    (LINUX_311, 'mp.get_context("forkserver")', '`multiprocessing_context="forkserver"`'),
    (HardwareProfile(usable_cpus=4, platform="macos", declared=frozenset({"platform", "python"})), '"fork"', None),
    (HardwareProfile(usable_cpus=4, platform="macos", declared=frozenset({"platform", "python"})), None,
     "the target platform is macos, where workers are spawned"),
    (HardwareProfile(usable_cpus=4, platform="windows", declared=frozenset({"platform"})), None,
     "the target platform is windows, where workers are spawned"),
    (HardwareProfile(usable_cpus=4, python="3.14", declared=frozenset({"platform", "python"})), None,
     "Python 3.14 on Linux starts workers with forkserver"),
    (HardwareProfile(usable_cpus=4, declared=frozenset({"platform"})), None,
     "no target Python is declared, and from 3.14 Linux starts workers with forkserver"),
    (HardwareProfile(usable_cpus=4), None, "no target platform is declared, and macOS and Windows spawn workers"),
])
def test_spawn_reason_is_the_one_start_method_decision(profile, context, expected):
    extra = f", multiprocessing_context={context}" if context else ""
    info, call = only_call(f"import multiprocessing as mp\nfrom torch.utils.data import DataLoader\nDataLoader(ds{extra})")
    assert spawn_reason(profile, call, info.loaders.start_methods) == expected


def test_set_start_method_in_the_module_counts():
    info, call = only_call("""
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        mp.set_start_method("forkserver")
        DataLoader(ds)
    """)
    assert spawn_reason(LINUX_311, call, info.loaders.start_methods) == '`set_start_method("forkserver")`'


def test_torch_version_switch():
    assert torch_before_2(HardwareProfile(usable_cpus=1, torch="1.13"))
    assert not torch_before_2(HardwareProfile(usable_cpus=1))
    assert not torch_before_2(HardwareProfile(usable_cpus=1, torch="2.4"))


@pytest.mark.parametrize("expr, expected", [
    ("DistributedSampler(ds)", "always"),
    ("DistributedSampler(ds) if dist else None", "conditional"),
    ("None", None),
    ("make_sampler(ds)", None),
    ("sampler_param", None),
    ("[0, 1]", "always"),
])
def test_sampler_presence(expr, expected):
    _, call = only_call(f"from torch.utils.data import DataLoader\ndef f(sampler_param):\n    DataLoader(ds, sampler={expr})")
    assert sampler_presence(call.expr("sampler"), call.scope) == expected


def test_pickle_problems_and_captured_names():
    info, call = only_call("""
        from torch.utils.data import DataLoader
        def main(pad):
            def collate(batch):
                return batch + [pad]
            def init(worker_id):
                return worker_id
            return DataLoader(ds, num_workers=2, collate_fn=collate, worker_init_fn=init)
    """)
    collate, init = pickle_problems(Context(info, RuleSettings(LINUX_311)), call)
    assert collate.param == "collate_fn" and collate.captures == {"pad"}
    assert init.param == "worker_init_fn" and init.captures == frozenset()
    assert isinstance(init.movable, cst.FunctionDef)


def test_parameters_and_module_functions_are_picklable():
    info, call = only_call("""
        from torch.utils.data import DataLoader
        def collate(batch):
            return batch
        def build(ds, worker_init_fn):
            return DataLoader(ds, num_workers=2, collate_fn=collate, worker_init_fn=worker_init_fn)
    """)
    assert pickle_problems(Context(info, RuleSettings(LINUX_311)), call) == []


def test_worker_condition_helpers():
    info, call = only_call("""
        import numpy as np
        import torch
        from torch.utils.data import DataLoader, IterableDataset
        class Stream(IterableDataset):
            def __init__(self):
                self.rng = np.random.default_rng()
            def __iter__(self):
                yield torch.zeros(2, device="cuda") + self.rng.random()
        DataLoader(Stream(), num_workers=2)
    """)
    ctx = Context(info, RuleSettings(LINUX_311))
    assert unsharded_iterable(ctx, call) == "Stream"
    assert cuda_in_worker(ctx, call) == "`Stream.__iter__`"
    assert shared_rng(ctx, call) == ("Stream.__iter__", "self.rng")


def test_worker_hazards_agree_with_the_start_method():
    code = "from torch.utils.data import DataLoader\nDataLoader(ds, collate_fn=lambda b: b)"
    info, call = only_call(code)
    assert worker_hazards(Context(info, RuleSettings(LINUX_311)), call) == []
    portable = Context(info, RuleSettings(HardwareProfile(usable_cpus=4)))
    (reason,) = worker_hazards(portable, call)
    assert reason.startswith("`collate_fn` is a lambda")


# -- FixSpec.hoist --------------------------------------------------------------

def _apply(code: str, spec_for) -> str:
    module = cst.parse_module(code)
    info = collect(module)
    positions = Positions(module, code)
    spec = spec_for(module, info)
    return apply_edits(code, Builder(module, positions).edits([spec]))


def test_hoist_a_lambda_before_its_top_level_statement():
    code = "import x\n\n\n@decorator\ndef main():\n    return f(lambda b: b)\n"

    def spec(module, info):
        (lam,) = [facts.node for facts in info.names.lambdas.values()]
        return FixSpec("safe", "", replace=[(lam, "_f")], hoist=[(lam, "def _f(b):\n    return b\n\n\n")])

    assert _apply(code, spec) == "import x\n\n\ndef _f(b):\n    return b\n\n\n@decorator\ndef main():\n    return f(_f)\n"


def test_hoist_moves_a_nested_def_and_keeps_line_endings():
    code = "def main():\r\n    def inner(b):\r\n        return b\r\n    return inner\r\n"

    def spec(module, info):
        inner = next(fn.node for fn in info.names.functions if fn.name == "inner")
        return FixSpec("safe", "", hoist=[(inner, "def inner(b):\n    return b\n\n\n")])

    assert _apply(code, spec) == "def inner(b):\r\n    return b\r\n\r\n\r\ndef main():\r\n    return inner\r\n"


def test_the_cursors_parts_hooks_on_the_same_node_are_joined():
    # Cursor is made of one class per concern.  A hook of a part that Cursor
    # overrides must call the part's (else that concern silently stops
    # seeing the node), and a hook two parts define must be joined by Cursor.
    import inspect

    from loadlint.facts.control import FlowCursor
    from loadlint.facts.cursor import Cursor
    from loadlint.facts.scopes import ScopeCursor

    def hooks(cls):
        return {n for n in vars(cls) if n.startswith(("visit_", "leave_"))}

    assert hooks(ScopeCursor) & hooks(FlowCursor) <= hooks(Cursor)
    joined = 0
    for part in (ScopeCursor, FlowCursor):
        for name in hooks(part) & hooks(Cursor):
            assert f"{part.__name__}.{name}(self, " in inspect.getsource(getattr(Cursor, name)), name
            joined += 1
    assert joined == 3  # visit_FunctionDef, leave_FunctionDef, visit_For
