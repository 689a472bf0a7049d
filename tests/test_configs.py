"""Config objects (yacs ``CfgNode`` trees, dataclass configs): defaults
resolve where a loader reads them, and what may change them stays unknown.

The golden project ``tests/fixtures/projects/config_yacs`` holds the
project-wide shapes; here, the edits that must flip a finding.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from loadlint.api import check_source
from loadlint.engine.summaries import summarise_text
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.workspace.config import Settings
from tests.test_project import PROJECTS, check

PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,memory=64,shm=16,platform=linux,python=3.12"))

YACS = """
from yacs.config import CfgNode as CN
from torch.utils.data import DataLoader
_C = CN()
_C.DATA = CN()
_C.DATA.NUM_WORKERS = 16
_C.TEST = CN()
_C.TEST.NUM_WORKERS = 16
def main():
    cfg = _C.clone()
    {extra}
    return DataLoader(ds, batch_size=4, num_workers=cfg.DATA.NUM_WORKERS)
"""


def codes(source: str) -> list[str]:
    findings = check_source(textwrap.dedent(source), "train.py", settings=Settings(select=("LL203",)), profile=PROFILE)
    return [f"{f.code} {f.message}" for f in findings]


def test_a_yacs_default_is_named_in_the_message() -> None:
    assert codes(YACS.format(extra="cfg.freeze()")) == [
        "LL203 `num_workers=16` (with the default `_C.DATA.NUM_WORKERS = 16`) on 8 usable CPUs: workers compete "
        "for cores and memory; use `num_workers=4` (target: 8 CPUs, 1 GPU)"
    ]


@pytest.mark.parametrize(
    "extra",
    [
        "cfg.DATA.NUM_WORKERS = 2",
        "cfg.DATA.NUM_WORKERS += 0",
        "cfg.DATA = CN()",
        'cfg.merge_from_list(["DATA.NUM_WORKERS", "2"])',
        'setattr(cfg.DATA, "NUM_WORKERS", 2)',
    ],
)
def test_what_may_change_a_yacs_default_keeps_it_unknown(extra: str) -> None:
    assert codes(YACS.format(extra=extra)) == []


def test_another_nodes_attribute_of_the_same_name_leaves_the_default() -> None:
    assert len(codes(YACS.format(extra="cfg.TEST.NUM_WORKERS = 2"))) == 1


def test_a_tree_built_from_a_dict_or_under_a_condition_stays_unknown() -> None:
    from_dict = YACS.replace("_C.DATA = CN()", "_C.DATA = CN(BASE)")
    assert codes(from_dict.format(extra="pass")) == []
    conditional = YACS.replace("_C.DATA.NUM_WORKERS = 16", "if FAST:\n    _C.DATA.NUM_WORKERS = 16")
    assert codes(conditional.format(extra="pass")) == []


DATACLASS = """
from dataclasses import dataclass
from torch.utils.data import DataLoader
@dataclass
class DataConfig:
    num_workers: int = 16
{extra}
def build(cfg: DataConfig):
    return DataLoader(ds, batch_size=4, num_workers=cfg.num_workers)
"""


def test_a_parameter_annotated_with_a_dataclass_reads_its_default() -> None:
    assert len(codes(DATACLASS.format(extra="default = DataConfig()"))) == 1
    # Never made here with its defaults: another module may make it with arguments.
    assert codes(DATACLASS.format(extra="")) == []


def test_a_yacs_leaf_written_through_another_name_stays_unknown() -> None:
    assert codes(YACS.format(extra="data = cfg.DATA\n    data.NUM_WORKERS = 2")) == []


@pytest.mark.parametrize(
    "extra",
    [
        # Constructed with arguments somewhere: the parameter may hold any.
        "default = DataConfig()\nsmall = DataConfig(num_workers=2)",
        "default = DataConfig()\ndef fast(cfg):\n    cfg.num_workers = 0",
        # A field set again when the object is made.
        "default = DataConfig()\ndef __post_init__(self):\n    self.num_workers = 2",
    ],
)
def test_what_may_change_a_dataclass_default_keeps_it_unknown(extra: str) -> None:
    assert codes(DATACLASS.format(extra=extra)) == []


def test_a_class_that_is_not_a_dataclass_gives_nothing() -> None:
    assert codes(DATACLASS.format(extra="default = DataConfig()").replace("@dataclass\n", "")) == []


def test_a_module_level_tree_is_exported_with_where_each_default_is() -> None:
    summary = summarise_text(textwrap.dedent(YACS.format(extra="pass")) + "cfg = _C\n")
    assert summary is not None
    options = summary["constants"]["cfg"]["options"]
    assert options["DATA.NUM_WORKERS"]["value"] == 16
    assert options["DATA.NUM_WORKERS"]["text"] == "the default `_C.DATA.NUM_WORKERS = 16`"
    assert type(options["DATA.NUM_WORKERS"]["at"]) is int


def test_a_write_in_any_project_module_keeps_an_imported_default_unknown(tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(PROJECTS / "config_yacs", project)
    assert "evaluate.py" not in check(project, "--no-cache", ".")
    (project / "tools" / "override.py").unlink()
    out = check(project, "--no-cache", ".")
    assert "evaluate.py:8:14: LL203 `num_workers=16` (with the default `_C.TEST.NUM_WORKERS = 16` from configs/defaults.py:10)" in out
    # And a write to the attribute read makes train.py's default unknown.
    (project / "tools" / "other.py").write_text("from configs.defaults import cfg\ncfg.DATA.NUM_WORKERS = 4\n")
    assert "train.py:17:14: LL203" not in check(project, "--no-cache", ".")


def test_editing_a_yaml_config_changes_the_finding_on_a_warm_run(tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(PROJECTS / "config_yaml", project)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    first = check(project, *cache, ".")
    assert "train.py:11:14: LL203 `num_workers=16` (with the default `data.num_workers: 16` from conf/config.yaml:8)" in first
    config = project / "conf" / "config.yaml"
    config.write_text(config.read_text().replace("num_workers: 16  #", "num_workers: 4  #"))
    assert "train.py:11:14: LL203" not in check(project, *cache, ".")
    config.write_text(config.read_text().replace("num_workers: 4  #", "num_workers: 24  #"))
    assert "`num_workers=24` (with the default `data.num_workers: 24` from conf/config.yaml:8)" in check(project, *cache, ".")


@pytest.mark.parametrize(
    "edit",
    [
        # A defaults list whose groups come after the file's own values.
        ("  - _self_\n", "  - _self_\n  - data: big\n"),
        # Not in the subset the reader follows: the whole file is unknown.
        ("seed: 42\n", "seed: &s 42\nother: *s\n\tbad: 1\n"),
        # The key in a string: ``OmegaConf.update(cfg, "data.num_workers", 2)``.
        None,
    ],
    ids=["composed-after", "outside-the-subset", "key-in-a-string"],
)
def test_what_may_change_a_yaml_value_keeps_it_unknown(tmp_path: Path, edit: tuple[str, str] | None) -> None:
    project = tmp_path / "p"
    shutil.copytree(PROJECTS / "config_yaml", project)
    if edit is None:
        (project / "tools.py").write_text('from omegaconf import OmegaConf\ndef fast(cfg):\n    OmegaConf.update(cfg, "data.num_workers", 2)\n')
    else:
        config = project / "conf" / "config.yaml"
        config.write_text(config.read_text().replace(*edit))
    assert "train.py:11:14: LL203" not in check(project, "--no-cache", ".")


def test_a_yaml_config_outside_the_project_is_not_read(tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(PROJECTS / "config_yaml", project)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.yaml").write_text((project / "conf" / "config.yaml").read_text())
    (project / "conf" / "config.yaml").unlink()
    (project / "conf" / "config.yaml").symlink_to(outside / "config.yaml")
    assert "train.py:11:14: LL203" not in check(project, "--no-cache", ".")


def test_omegaconf_load_finds_the_file_beside_the_script_or_at_the_root(tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(PROJECTS / "config_yaml", project)
    assert "notebook_style.py:10:14: LL201" in check(project, "--no-cache", ".")
    # The same path at both places with different contents: which one runs depends on the folder.
    (project / "sub").mkdir()
    (project / "sub" / "config.yaml").write_text("loader:\n  workers: 8\n")
    (project / "sub" / "notebook_style.py").write_text((project / "notebook_style.py").read_text())
    out = check(project, "--no-cache", ".")
    assert "sub/notebook_style.py:10:14: LL201" not in out and "notebook_style.py:10:14: LL201" in out


def test_a_long_line_costs_linear_time() -> None:
    import time

    source = "from dataclasses import dataclass\nfrom torch.utils.data import DataLoader\nx = '" + ".a:" * 200_000 + "'\n"
    start = time.perf_counter()
    codes(source)
    assert time.perf_counter() - start < 1
