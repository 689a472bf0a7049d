"""Guarded reads and writes beyond ``check``'s own: ``init``'s
``pyproject.toml``, the YAML files a script loads, the lines SARIF and
GitLab fingerprint.  The hostile repository is ``world``'s (see
``test_untrusted_repository.py``): nothing outside written or revealed,
bounded time and memory.
"""

from __future__ import annotations

import os

import pytest

from tests.adversarial.test_untrusted_repository import LOADER, clean_of, run, snapshot, world  # noqa: F401

INIT = ("init", "--target", "cpus=8,gpus=1")


# -- init: no write through a link, no read of a FIFO ----------------------------------


def test_init_does_not_append_through_a_link_out_of_the_project(world):
    repo, outside = world
    (outside / "pyproject.toml").write_text('[project]\nname = "victim"\n')
    (repo / "pyproject.toml").symlink_to(outside / "pyproject.toml")
    before = snapshot(outside)
    ran = run(repo, *INIT)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == "loadlint: error: cannot write pyproject.toml: link leads outside the project\n"
    clean_of(outside, before, ran)


def test_init_refuses_a_dangling_link_alike_whether_its_target_is_there(world):
    repo, outside = world
    (repo / "pyproject.toml").symlink_to(outside / "created.toml")
    before = snapshot(outside)
    missing = run(repo, *INIT)
    assert not (outside / "created.toml").exists()
    clean_of(outside, before, missing)
    (outside / "created.toml").write_text("")
    present = run(repo, *INIT)
    assert (outside / "created.toml").read_text() == ""
    # The same answer: it tells nothing of what is outside.
    assert (missing.code, missing.out, missing.err) == (present.code, present.out, present.err) == (
        2, "", "loadlint: error: cannot write pyproject.toml: link leads outside the project\n"
    )


def test_init_does_not_block_on_a_fifo(world):
    repo, _ = world
    os.mkfifo(repo / "pyproject.toml")
    ran = run(repo, *INIT, timeout=10)
    assert (ran.code, ran.out) == (2, "")
    assert ran.err == "loadlint: error: cannot write pyproject.toml: not a regular file\n"


def test_init_writes_through_a_link_inside_the_project(world):
    repo, _ = world
    (repo / "config").mkdir()
    (repo / "config" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (repo / "pyproject.toml").symlink_to("config/pyproject.toml")
    ran = run(repo, *INIT)
    assert ran.code == 0, ran.err
    assert (repo / "pyproject.toml").is_symlink()
    assert (repo / "config" / "pyproject.toml").read_text() == (
        '[project]\nname = "x"\n\n[tool.loadlint.target]\ncpus = 8\ngpus = 1\n'
    )


# -- YAML beside the code: a path out of the project is never looked at ---------------


OMEGA = """from omegaconf import OmegaConf
from torch.utils.data import DataLoader

cfg = OmegaConf.load("../config.yaml")

if __name__ == "__main__":
    loader = DataLoader(dataset, batch_size=64, num_workers=cfg.loader.workers)
    for epoch in range(3):
        for batch in loader:
            pass
"""


@pytest.mark.parametrize("shape", ["climbs-out", "link-out"])
def test_a_yaml_path_out_of_the_project_is_no_existence_oracle(world, shape):
    """``sub/train.py`` loads a YAML file that is the project's from one of
    the folders it may run in and outside from the other (a path climbing
    out, a link out).  Whether the outside file exists must change nothing."""
    repo, outside = world
    (repo / "pyproject.toml").write_text('[tool.loadlint]\nselect = ["ALL"]\n[tool.loadlint.target]\ncpus = 8\n')
    (repo / "config.yaml").write_text("loader:\n  workers: 0\n")
    (repo / "sub").mkdir()
    if shape == "climbs-out":
        (repo / "sub" / "train.py").write_text(OMEGA)
        planted = repo.parent / "config.yaml"
    else:
        # Beside the script a link out, at the root the project's file.
        (repo / "sub" / "train.py").write_text(OMEGA.replace("../config.yaml", "config.yaml"))
        (repo / "sub" / "config.yaml").symlink_to(outside / "settings.yaml")
        planted = outside / "settings.yaml"
    args = ("check", "--no-cache", ".", "--output-format", "concise")
    absent = run(repo, *args)
    planted.write_text(f"loader:\n  workers: 0\nkey: {os.path.basename(str(planted))}\n")
    try:
        present = run(repo, *args)
    finally:
        planted.unlink()
    assert (present.code, present.out, present.err) == (absent.code, absent.out, absent.err)
    assert "from config.yaml" not in absent.out and "settings.yaml" not in absent.out


# -- fingerprints: a refused file is not read again ----------------------------------------


def test_fingerprints_do_not_read_a_huge_refused_file(world):
    repo, _ = world
    (repo / "m.py").write_text(LOADER)
    with open(repo / "big.py", "wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GiB that costs no disk
    for fmt in ("sarif", "gitlab"):
        ran = run(repo, "check", "--no-cache", ".", "--output-format", fmt, timeout=10)
        assert ran.code == 1 and "file too large" in ran.out
        assert ran.peak_kb < 200 * 1024, f"{fmt}: peak {ran.peak_kb // 1024} MB"


def test_fingerprints_do_not_block_on_a_named_fifo(world):
    repo, _ = world
    (repo / "m.py").write_text(LOADER)
    os.mkfifo(repo / "pipe.py")
    for fmt in ("sarif", "gitlab"):
        ran = run(repo, "check", "--no-cache", "pipe.py", "m.py", "--output-format", fmt, timeout=10)
        assert ran.code == 1 and "not a regular file" in ran.out


def test_a_yaml_path_out_of_the_project_is_refused_before_any_stat(tmp_path, monkeypatch):
    from loadlint.project.config_files import candidates

    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    looked: list[str] = []
    for name in ("stat", "lstat"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda path, *a, _real=real, **k: looked.append(os.fspath(path)) or _real(path, *a, **k))
    script = str(root / "sub" / "train.py")
    assert candidates(script, {"kind": "load", "file": "../../X.yaml"}, root) == []
    assert candidates(script, {"kind": "load", "file": "../config.yaml"}, root) == []
    assert candidates(script, {"kind": "hydra", "file": "../../conf/config.yaml"}, root) == []
    assert looked == []
    assert candidates(script, {"kind": "load", "file": "config.yaml"}, root) == [str(root / "sub" / "config.yaml"), str(root / "config.yaml")]
