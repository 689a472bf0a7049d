"""The program-point rule for every kind of value besides parsed
namespaces (tests/adversarial/test_value_flow.py): config objects, ``**kw``
dicts, devices and samplers, with changes placed just before or after the
read, in loops, in other functions and in odd spellings; and names bound or
changed thousands of times stay cheap."""

from __future__ import annotations

import textwrap
import time

import pytest

from loadlint.api import check_source
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.workspace.config import Settings

PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.12"))


def codes(source: str, select: tuple[str, ...]) -> list[tuple[int, str]]:
    findings = check_source(textwrap.dedent(source), "train.py", settings=Settings(select=select), profile=PROFILE)
    return [(f.location.row, f.code) for f in findings]


CONFIG = """
from dataclasses import dataclass
from torch.utils.data import DataLoader

@dataclass
class Config:
    workers: int = 32

def main(ds, flag):
    cfg = Config()
{before}    loader = DataLoader(ds, num_workers=cfg.workers)
{after}
"""


@pytest.mark.parametrize("before", [
    "    cfg.workers = 2\n",
    "    if flag:\n        cfg.workers = 2\n",
    "    cfg.workers += 0\n",
    "    cfg.workers: int = 2\n",
    "    setattr(cfg, 'workers', 2)\n",
    "    vars(cfg).update(workers=2)\n",
    "    other = cfg\n    other.workers = 2\n",
])
def test_a_config_changed_before_the_read_stays_unknown(before: str) -> None:
    assert codes(CONFIG.format(before=before, after=""), ("LL203",)) == []


@pytest.mark.parametrize("after", [
    "    cfg.workers = 2\n",
    "    cfg.workers += 1\n",
    "    print(vars(cfg))\n",
])
def test_a_config_changed_after_the_read_keeps_its_default(after: str) -> None:
    assert codes(CONFIG.format(before="", after=after), ("LL203",)) == [(11, "LL203")]


def test_a_module_that_calls_setattr_leaves_its_configs_unknown_anywhere() -> None:
    # setattr's attribute is a string the analysis does not follow: the module's configs stay unknown.
    assert codes(CONFIG.format(before="", after="    setattr(cfg, 'workers', 2)\n"), ("LL203",)) == []


def test_a_config_written_in_another_function_stays_unknown() -> None:
    source = CONFIG.format(before="", after="") + "\ndef tune(c):\n    c.workers = 1\n"
    assert codes(source, ("LL203",)) == []


def test_a_config_written_after_the_read_in_a_while_loop_stays_unknown() -> None:
    source = CONFIG.format(before="    while flag:\n    ", after="        cfg.workers = 1\n")
    assert codes(source, ("LL203",)) == []


KWARGS = """
from torch.utils.data import DataLoader

def main(ds, flag):
    kw = {{"num_workers": 32}}
{body}
"""


@pytest.mark.parametrize("body, expected", [
    # After the call, outside any loop around it: the call read 32.
    ("    loader = DataLoader(ds, **kw)\n    kw['num_workers'] = 1\n", [(6, "LL203")]),
    ("    loader = DataLoader(ds, **kw)\n    kw.update(num_workers=1)\n", [(6, "LL203")]),
    # In a loop around both: the next pass reads the change.
    ("    for e in range(2):\n        loader = DataLoader(ds, **kw)\n        kw['num_workers'] = 1\n", []),
    ("    while flag:\n        loader = DataLoader(ds, **kw)\n        kw.clear()\n", []),
    ("    for e in range(2):\n        loader = DataLoader(ds, **kw)\n        if flag:\n            kw.pop('num_workers')\n", []),
])
def test_a_kwargs_dict_changed_after_the_call(body: str, expected: list[tuple[int, str]]) -> None:
    assert codes(KWARGS.format(body=body), ("LL203",)) == expected


DEVICE = """
from torch.utils.data import DataLoader

def main(ds, flag):
{before}    loader = DataLoader(ds, num_workers=2, pin_memory=True)
    for b in loader:
        b = b.to(device)
{after}
"""


@pytest.mark.parametrize("before, after, expected", [
    ('    device = "cpu"\n', '    device = "cuda"\n', []),
    ('    device = "cuda"\n', '    device = "cpu"\n', [(8, "LL205")]),
    ('    device = "cuda"\n    device = "cpu"\n', "", []),
    ('    device = "cpu"\n    if flag:\n        device = "cuda"\n', "", [(10, "LL205")]),
    ('    device = "cpu"\n    for i in range(2):\n        device = "cuda"\n', "", [(10, "LL205")]),
    ('    device = "cpu"\n    try:\n        device = "cuda:0"\n    except Exception:\n        pass\n', "", [(12, "LL205")]),
])
def test_a_device_is_the_binding_that_reaches_the_copy(before: str, after: str, expected: list[tuple[int, str]]) -> None:
    assert codes(DEVICE.format(before=before, after=after), ("LL205",)) == expected


def test_a_device_bound_in_the_loop_after_the_copy_reaches_the_next_pass() -> None:
    source = """
        from torch.utils.data import DataLoader
        device = "cpu"
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for epoch in range(2):
            for b in loader:
                b = b.to(device)
            device = "cuda"
    """
    assert codes(source, ("LL205",)) == [(7, "LL205")]


SAMPLER = """
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

def main(ds, flag):
{before}    loader = DataLoader(ds, sampler=sampler, num_workers=2)
    for epoch in range(3):
        for b in loader:
            pass
"""


@pytest.mark.parametrize("before, expected", [
    ("    sampler = DistributedSampler(ds)\n    sampler = RandomSampler(ds)\n", []),
    ("    sampler = DistributedSampler(ds)\n    if flag:\n        sampler = RandomSampler(ds)\n", [(5, "LL102")]),
    ("    sampler = RandomSampler(ds)\n    sampler = DistributedSampler(ds)\n", [(6, "LL102")]),
])
def test_a_sampler_bound_over_before_the_loader_is_not_its_sampler(before: str, expected: list[tuple[int, str]]) -> None:
    assert codes(SAMPLER.format(before=before), ("LL102",)) == expected


def test_thousands_of_bindings_and_changes_stay_cheap() -> None:
    lines = ["from torch.utils.data import DataLoader", "def main(ds):", "    kw = {'num_workers': 2}"]
    # A name bound 2,000 times is unknown (each copy read 2,000 times took 98 s
    # when every binding's kind was asked); past 256 changes any change counts.
    lines += ["    device = 'cuda'"] * 2000
    lines += ["    kw['timeout'] = 1"] * 300
    lines += ["    loader = DataLoader(ds, pin_memory=True, **kw)"] * 3
    lines += ["    for b in loader:"] + ["        b.to(device)"] * 2000
    started = time.perf_counter()
    found = codes("\n".join(lines) + "\n", ("LL205", "LL203"))
    assert time.perf_counter() - started < 20
    assert found == []


BRANCHES = """
from torch.utils.data import DataLoader

def main(ds, flag, other):
    device = "{first}"
    loader = DataLoader(ds, num_workers=2, pin_memory=True)
    if flag:
        device = "{second}"
    {branch}
        for b in loader:
            b = b.to(device)
"""


@pytest.mark.parametrize("first, second, branch, expected", [
    # An if and its else share one statement: the if branch's binding does not run on the else's path.
    ("cuda", "cpu", "else:", [(11, "LL205")]),
    ("cpu", "cuda", "else:", []),
    ("cuda", "cpu", "elif other:", [(11, "LL205")]),
    ("cpu", "cuda", "elif other:", []),
    # In the if branch itself, its own binding is the one that reaches.
    ("cuda", "cpu", "if other:", []),
    ("cpu", "cuda", "if other:", [(11, "LL205")]),
])
def test_a_binding_in_one_branch_does_not_reach_the_other(
    first: str, second: str, branch: str, expected: list[tuple[int, str]]
) -> None:
    source = BRANCHES.format(first=first, second=second, branch=branch)
    if branch == "if other:":
        # Nested in the if branch, after its binding.
        source = source.replace("    if other:\n        for b in loader:\n            b = b.to(device)",
                                "        if other:\n            for b in loader:\n                b = b.to(device)")
    assert codes(source, ("LL205",)) == expected


def test_a_binding_in_one_branch_reaches_the_other_on_the_next_pass() -> None:
    source = """
        from torch.utils.data import DataLoader
        device = "cpu"
        loader = DataLoader(ds, num_workers=2, pin_memory=True)
        for epoch in range(2):
            if epoch:
                for b in loader:
                    b = b.to(device)
            else:
                device = "cuda"
    """
    assert codes(source, ("LL205",)) == [(8, "LL205")]


def test_a_sampler_bound_over_in_the_other_branch_is_still_the_loaders() -> None:
    source = """
        from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

        def main(ds, flag):
            sampler = DistributedSampler(ds)
            if flag:
                sampler = RandomSampler(ds)
            else:
                loader = DataLoader(ds, sampler=sampler, num_workers=2)
                for epoch in range(3):
                    for b in loader:
                        pass
    """
    assert codes(source, ("LL102",)) == [(5, "LL102")]


DATASETS = """
from torch.utils.data import DataLoader, TensorDataset

def main(ids, folder, flag):
    ds = {first}
    if flag:
        ds = {second}
    else:
        loader = DataLoader(ds, batch_size=8)
    return loader
"""


@pytest.mark.parametrize("first, second, expected", [
    # accelerate's sp-alst.py: the else branch's loader reads only what reaches it.
    ("TensorDataset(ids)", "folder", []),
    ("folder", "TensorDataset(ids)", [(9, "LL201")]),
])
def test_a_dataset_is_the_binding_that_reaches_the_loader(first: str, second: str, expected: list[tuple[int, str]]) -> None:
    assert codes(DATASETS.format(first=first, second=second), ("LL201",)) == expected
