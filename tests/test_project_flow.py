"""Project analysis: loaders, devices and samplers followed through
parameters (LL202, LL205, LL102, LL013), beyond the golden projects.

The golden folders (pin_chain, pin_cli, to_transfer, sampler_chain,
sampler_set_epoch, module_next_iter, next_iter_chain) are compared by
tests/test_project.py; here: the summary's shape, the cache, a dependency
edit, and the edge cases of the device evidence.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from tests.test_project import PROJECTS, check

from loadlint.facts.summary import VERSION
from loadlint.engine.summaries import summarise_text


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").touch()
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(PROJECTS / name, root)
    (root / "expected.txt").unlink()
    return root


FACTORY = """
    from torch.utils.data import DataLoader


    def build(data):
        return DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True)
"""

DRIVER = """
    import data
    import steps


    def main(device):
        steps.run(model, data.build(ds), device)


    if __name__ == "__main__":
        main(DEVICE)
"""


def test_summary_keeps_devices_samplers_and_flags_as_json() -> None:
    text = textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader, DistributedSampler

        def build(data, shuffle):
            sampler = DistributedSampler(data, shuffle=shuffle)
            return DataLoader(data, sampler=sampler, num_workers=2)

        def step(loader, device):
            dev = torch.device("cuda")
            for x in loader:
                x.to(device)
                x.to(dev, non_blocking=True)
                x.cuda(0, 1)
    """)
    summary = summarise_text(text)
    assert summary is not None
    assert json.loads(json.dumps(summary)) == summary
    assert summary["version"] == VERSION == 12
    assert summary["flags"] == {
        "cuda": True, "cuda_code": True, "set_epoch": False, "frameworks": False, "start_methods": [],
        "unguarded_starts": False,
    }
    build = summary["functions"]["build"]
    assert build["samplers"] == [{"at": build["samplers"][0]["at"], "shuffle": {"param": "shuffle"}}]
    assert build["loaders"][0]["values"]["sampler"] == {"sampler": 0}
    uses = [u for u in summary["functions"]["step"]["uses"] if u["kind"] == "transfer"]
    assert [(u["method"], u.get("device"), u["non_blocking"], u["plain"]) for u in uses] == [
        ("to", {"param": "device"}, False, True),
        ("to", {"device": "cuda"}, True, True),
        ("cuda", None, False, False),
    ]


def test_module_level_iterators_are_summarised_with_their_guard() -> None:
    text = textwrap.dedent("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2)
        it = iter(loader)
        for x in iter(loader):
            pass
        if __name__ == "__main__":
            batch = next(iter(loader))
    """)
    summary = summarise_text(text)
    assert summary is not None
    uses = summary["functions"]["<module>"]["uses"]
    assert sorted((u["kind"], u["guarded"]) for u in uses) == [("iter", False), ("iter_call", False), ("next_iter", True)]


def test_warm_run_repeats_the_cold_findings(tmp_path: Path) -> None:
    for name in ("pin_chain", "to_transfer", "sampler_chain", "module_next_iter"):
        root = copy(tmp_path, name)
        cache = ["--cache-dir", str(tmp_path / f"cache-{name}")]
        cold = check(root, *cache, ".")
        assert cold == (PROJECTS / name / "expected.txt").read_text(encoding="utf-8")
        assert check(root, *cache, ".") == cold


def test_transfer_edit_in_a_dependency_changes_the_factory_finding(tmp_path: Path) -> None:
    root = copy(tmp_path, "pin_chain")
    cache = ["--cache-dir", str(tmp_path / "cache")]
    before = check(root, *cache, "data_setup.py")
    assert before.count("LL202") == 2 and "`engine.train_step` (engine.py:7)" in before
    train = root / "train.py"
    train.write_text(train.read_text().replace('"cuda" if torch.cuda.is_available() else "cpu"', '"cpu"'))
    assert "LL202" not in check(root, *cache, "data_setup.py")


def test_staged_file_gets_only_its_own_project_findings(tmp_path: Path) -> None:
    root = copy(tmp_path, "to_transfer")
    out = check(root, "--no-cache", "engine.py")
    assert out.count("LL205") == 2 and all(line.startswith("engine.py:") for line in out.splitlines())
    assert check(root, "--no-cache", "data_setup.py") == ""


def test_unknown_device_counts_only_with_the_modules_cuda_evidence(tmp_path: Path) -> None:
    steps = """
        def run(model, loader, device):
            for x, y in loader:
                model(x.to(device))
    """
    silent = project(tmp_path, {"data.py": FACTORY, "steps.py": steps, "train.py": DRIVER})
    assert check(silent, "--no-cache", ".") == ""
    (silent / "steps.py").write_text(textwrap.dedent(steps) + "\n\nmodel.cuda()\n", encoding="utf-8")
    out = check(silent, "--no-cache", ".")
    assert out.startswith("data.py:6:12: LL202 [*] `pin_memory` is not set") and "`steps.run` (steps.py:4)" in out
    # A pinned loader: LL205 needs the device to be CUDA, the module's evidence is not enough.
    (silent / "data.py").write_text(textwrap.dedent(FACTORY).replace("num_workers=2", "num_workers=2, pin_memory=True"))
    assert check(silent, "--no-cache", ".") == ""


def test_cpu_device_stays_silent_despite_cuda_evidence(tmp_path: Path) -> None:
    steps = """
        import torch

        torch.cuda.synchronize()


        def run(model, loader, device):
            for x, y in loader:
                model(x.to(device))
    """
    root = project(tmp_path, {"data.py": FACTORY, "steps.py": steps, "train.py": DRIVER.replace("DEVICE", '"cpu"')})
    assert check(root, "--no-cache", ".") == ""
    (root / "train.py").write_text(textwrap.dedent(DRIVER.replace("DEVICE", '"cuda:1"')), encoding="utf-8")
    assert "LL202" in check(root, "--no-cache", ".")


def test_cuda_in_the_factorys_module_is_left_to_the_single_file_rule(tmp_path: Path) -> None:
    factory = textwrap.dedent(FACTORY) + "\n\nmodel = Net().cuda()\n"
    steps = """
        def run(model, loader, device):
            for x, y in loader:
                model(x.cuda())
    """
    root = project(tmp_path, {"data.py": factory, "steps.py": steps, "train.py": DRIVER})
    out = check(root, "--no-cache", ".")
    # One finding, the file's own (no chain in its message).
    assert out.count("LL202") == 1 and "moved to the GPU by" not in out


def test_set_epoch_in_any_module_on_the_path_silences_ll102(tmp_path: Path) -> None:
    factory = """
        from torch.utils.data import DataLoader, DistributedSampler


        def build(data):
            return DataLoader(data, sampler=DistributedSampler(data), num_workers=2, persistent_workers=True)
    """
    steps = """
        def run(model, loader, epochs):
            for epoch in range(epochs):
                for batch in loader:
                    model(batch)
    """
    driver = """
        import data
        import steps


        def main():
            loader = data.build(ds)
            steps.run(model, loader, 3)
    """
    root = project(tmp_path, {"data.py": factory, "steps.py": steps, "train.py": driver})
    out = check(root, "--no-cache", ".")
    assert out.startswith("data.py:6:37: LL102 `DistributedSampler` shuffles with the same seed every epoch")
    assert out.rstrip().endswith("iterated every epoch by `steps.run` (steps.py:4) called from train.py:8)")
    # The driver sets the epoch (through the loader): silent.
    (root / "train.py").write_text(textwrap.dedent(driver) + "    loader.sampler.set_epoch(0)\n", encoding="utf-8")
    assert check(root, "--no-cache", ".") == ""
    # A noqa comment on the sampler's line.
    (root / "train.py").write_text(textwrap.dedent(driver), encoding="utf-8")
    (root / "data.py").write_text(textwrap.dedent(factory).replace("persistent_workers=True)", "persistent_workers=True)  # noqa: LL102"))
    assert check(root, "--no-cache", ".") == ""


def test_module_level_call_that_makes_an_iterator_in_a_callee(tmp_path: Path) -> None:
    steps = """
        def peek(loader):
            batches = iter(loader)
            return next(batches)
    """
    driver = """
        import data
        import steps

        loader = data.build(ds)
        steps.peek(loader)
    """
    root = project(tmp_path, {"data.py": FACTORY, "steps.py": steps, "train.py": driver})
    out = check(root, "--no-cache", ".")
    assert out.startswith(
        "train.py:6:1: LL013 this call reaches `iter(...)` of a loader with 2 workers (steps.py:3, in `peek`) without"
    )
    guarded = textwrap.dedent(driver).replace("steps.peek(loader)", 'if __name__ == "__main__":\n    steps.peek(loader)')
    (root / "train.py").write_text(guarded, encoding="utf-8")
    assert check(root, "--no-cache", ".") == ""


@pytest.mark.parametrize("text,found", [
    (b"from data_setup import create_dataloaders\n", True),
    (b"from going_modular import data_setup, engine\n", True),
    (b"from going_modular import (\n    utils,\n    data_setup,\n)\n", True),
    (b"import going_modular.data_setup as ds\n", True),
    (b"    from .data_setup import make\n", True),
    (b'{"source": [\n    "import os\\n",\n    "from data_setup import make\\n"\n]}', True),  # a notebook's JSON
    (b"from data_setup_v2 import make\n", False),
    (b"import my_data_setup\n", False),
    (b"x = 1  # from data_setup import make\n", False),
    (b"print('from data_setup import make')\n", False),
    (b'  "x = 1\\n  from data_setup import make\\n",\n', True),  # after a JSON line's escape
    (b'\t"import data_setup\\n",\n', True),
    (b"from\tdata_setup\n", True),
    (b"reimport data_setup\nfromage = data_setup\n", False),
    (b"import os, sys; x = 1\nfrom y import (a,\n  data_setup)\n", True),
])
def test_imports_one_of_finds_import_statements_naming_a_module(text, found):
    from loadlint.project import imports_one_of

    assert imports_one_of(text, re.compile(rb"\b(?:data_setup|engine)\b")) is found


def test_imports_one_of_agrees_with_a_scan_of_every_position():
    """It tries the import pattern only before a keyword; the pattern tried
    everywhere (as ``finditer`` does) finds the same statements."""
    from loadlint.project import _IMPORT, _RUN, imports_one_of

    def everywhere(data: bytes, modules: re.Pattern[bytes]) -> bool:
        return any(
            match.start(g) >= 0 and modules.search(data, *match.span(g)) is not None
            for match in _IMPORT.finditer(data) for g in (1, 2, 3)
        ) or any(modules.search(data, *match.span(1)) is not None for match in _RUN.finditer(data))

    fixtures = Path(__file__).parent / "fixtures"
    texts = [p.read_bytes() for p in sorted(fixtures.rglob("*.py")) + sorted(fixtures.rglob("*.ipynb"))]
    words = sorted({w for t in texts for w in re.findall(rb"(?:from|import)[ \t]+\(?[ \t]*([A-Za-z_]\w*)", t)})
    assert len(texts) > 100 and len(words) > 30
    for chosen in (words[::7], words[1::11], words[2::13], [b"torch"], [b"data"]):
        modules = re.compile(rb"\b(?:" + b"|".join(re.escape(w) for w in chosen) + rb")\b")
        assert [imports_one_of(t, modules) for t in texts] == [everywhere(t, modules) for t in texts]


def test_a_worker_count_written_as_a_call_stays_a_value_beside_a_helpers_sampler(tmp_path: Path) -> None:
    # Loader arguments are described after the calls are numbered (a sampler
    # may be a helper's result); ``num_workers=os.cpu_count()`` stays the CPU count.
    root = project(tmp_path, {
        "steps.py": """
            def train_step(loader):
                for batch in loader:
                    pass
        """,
        "train.py": """
            import os
            from torch.utils.data import DataLoader
            import steps

            def main(ds):
                loader = DataLoader(ds, batch_size=8, num_workers=os.cpu_count())
                for epoch in range(3):
                    steps.train_step(loader)

            if __name__ == "__main__":
                main(None)
        """,
    })
    out = check(root, "--no-cache", ".")
    assert out.startswith("train.py:7:14: LL204 [*] `persistent_workers` is not set: `os.cpu_count()` workers")
    summary = summarise_text((root / "train.py").read_text())
    assert summary is not None
    assert summary["functions"]["main"]["loaders"][0]["values"]["num_workers"] == {"cpu_count": True}
