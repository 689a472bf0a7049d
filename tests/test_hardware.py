"""Hardware detection, targets, profile resolution and the worker suggestion."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from loadlint.hardware import detect as hardware
from loadlint.hardware.detect import (
    GIB,
    Probes,
    TargetError,
    detect,
    parse_target,
    ranks_per_node,
    resolve_profile,
    suggest_num_workers,
    validate_target,
)
from loadlint.hardware.present import format_profile, profile_to_dict
from loadlint.types import GPU, HardwareProfile, Target

MIB = 1024**2
ALLOWED = "(allowed: cpus, gpus, memory, shm, platform, python, torch)"


# --------------------------------------------------------------------------
# fakes
# --------------------------------------------------------------------------


def fake_psutil(physical=8, total=64 * GIB, available=32 * GIB):
    module = types.SimpleNamespace()
    module.cpu_count = lambda logical=True: physical
    module.virtual_memory = lambda: types.SimpleNamespace(total=total, available=available)
    return module


class NVMLError(Exception):
    pass


def fake_pynvml(devices=(("NVIDIA H100 80GB HBM3", 80 * GIB),), init_error=False, count_error=False):
    calls = []

    def init():
        calls.append("init")
        if init_error:
            raise NVMLError("Driver Not Loaded")

    def count():
        if count_error:
            raise NVMLError("Unknown Error")
        return len(devices)

    module = types.SimpleNamespace(calls=calls)
    module.nvmlInit = init
    module.nvmlShutdown = lambda: calls.append("shutdown")
    module.nvmlDeviceGetCount = count
    module.nvmlDeviceGetHandleByIndex = lambda i: i
    module.nvmlDeviceGetName = lambda h: devices[h][0]
    module.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=devices[h][1])
    return module


def importer(**modules):
    """import_module replacement: the named fakes, ImportError for the rest."""

    def import_module(name):
        module = modules.get(name)
        if module is None:
            raise ImportError(f"No module named {name!r}")
        return module

    return import_module


def probes(cpus=16, affinity=16, psutil=None, pynvml=None, platform="linux", python=(3, 11)):
    return Probes(
        cpu_count=lambda: cpus,
        affinity=lambda: affinity,
        import_module=importer(psutil=psutil, pynvml=pynvml),
        platform=platform,
        python=python,
    )


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --------------------------------------------------------------------------
# detection: CPUs and cgroups
# --------------------------------------------------------------------------


def test_detect_without_proc_uses_cpu_count_and_affinity(tmp_path):
    profile = detect(tmp_path, probes=probes(cpus=16, affinity=6))
    assert profile.logical_cpus == 16
    assert profile.affinity_cpus == 6
    assert profile.cgroup_cpus is None
    assert profile.usable_cpus == 6


def test_detect_cgroup_v2_quota(tmp_path):
    write(tmp_path, "proc/self/cgroup", "0::/kubepods/pod1/ctr\n")
    write(tmp_path, "sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "250000 100000\n")
    profile = detect(tmp_path, probes=probes(cpus=16, affinity=16))
    assert profile.cgroup_cpus == 2.5
    assert profile.usable_cpus == 2  # rounded down


def test_detect_cgroup_v2_unlimited(tmp_path):
    write(tmp_path, "proc/self/cgroup", "0::/\n")
    write(tmp_path, "sys/fs/cgroup/cpu.max", "max 100000\n")
    profile = detect(tmp_path, probes=probes(cpus=16, affinity=16))
    assert profile.cgroup_cpus is None
    assert profile.usable_cpus == 16


def test_detect_cgroup_v2_parent_quota_is_tighter(tmp_path):
    write(tmp_path, "proc/self/cgroup", "0::/pod/ctr\n")
    write(tmp_path, "sys/fs/cgroup/pod/cpu.max", "400000 100000\n")
    write(tmp_path, "sys/fs/cgroup/pod/ctr/cpu.max", "max 100000\n")
    assert detect(tmp_path, probes=probes()).cgroup_cpus == 4.0


def test_detect_cgroup_v2_path_not_visible_falls_back_to_mount_root(tmp_path):
    # No cgroup namespace: /proc/self/cgroup names a host path not mounted here.
    write(tmp_path, "proc/self/cgroup", "0::/system.slice/docker-abc.scope\n")
    write(tmp_path, "sys/fs/cgroup/cpu.max", "300000 100000\n")
    assert detect(tmp_path, probes=probes()).cgroup_cpus == 3.0


def test_detect_cgroup_v2_via_mountinfo(tmp_path):
    write(tmp_path, "proc/self/cgroup", "0::/ctr/inner\n")
    write(
        tmp_path,
        "proc/self/mountinfo",
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "41 31 0:38 /ctr /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n",
    )
    write(tmp_path, "sys/fs/cgroup/inner/cpu.max", "150000 100000\n")
    profile = detect(tmp_path, probes=probes(cpus=8, affinity=8))
    assert profile.cgroup_cpus == 1.5
    assert profile.usable_cpus == 1


def test_detect_cgroup_v1_quota(tmp_path):
    write(tmp_path, "proc/self/cgroup", "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/\n")
    write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "400000\n")
    write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    profile = detect(tmp_path, probes=probes(cpus=32, affinity=32))
    assert profile.cgroup_cpus == 4.0
    assert profile.usable_cpus == 4


def test_detect_cgroup_v1_unlimited(tmp_path):
    write(tmp_path, "proc/self/cgroup", "1:cpu:/\n")
    write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
    write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n")
    assert detect(tmp_path, probes=probes()).cgroup_cpus is None


def test_detect_cgroup_v1_via_mountinfo_hybrid(tmp_path):
    # Hybrid host: cpu on v1, an empty v2 tree mounted at .../unified.
    write(tmp_path, "proc/self/cgroup", "1:cpu:/job\n0::/\n")
    write(
        tmp_path,
        "proc/self/mountinfo",
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
    )
    write(tmp_path, "sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "50000\n")
    write(tmp_path, "sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n")
    (tmp_path / "sys/fs/cgroup/unified").mkdir(parents=True)
    profile = detect(tmp_path, probes=probes(cpus=4, affinity=4))
    assert profile.cgroup_cpus == 0.5
    assert profile.usable_cpus == 1  # a fractional quota still runs one process


def test_detect_garbage_cgroup_files_are_ignored(tmp_path):
    write(tmp_path, "proc/self/cgroup", "nonsense\n0::/\n")
    write(tmp_path, "sys/fs/cgroup/cpu.max", "lots 0\n")
    assert detect(tmp_path, probes=probes()).cgroup_cpus is None


def test_detect_failing_probes_leave_fields_none(tmp_path):
    def boom():
        raise OSError("nope")

    broken = Probes(cpu_count=lambda: None, affinity=boom, import_module=importer())
    profile = detect(tmp_path, probes=broken)
    assert profile.logical_cpus is None
    assert profile.affinity_cpus is None
    assert profile.physical_cores is None
    assert profile.memory_total is None
    assert profile.memory_available is None
    assert profile.usable_cpus == 1


def test_detect_psutil_memory_and_physical(tmp_path):
    psutil = fake_psutil(physical=8, total=64 * GIB, available=40 * GIB)
    profile = detect(tmp_path, probes=probes(psutil=psutil))
    assert profile.physical_cores == 8
    assert profile.memory_total == 64 * GIB
    assert profile.memory_available == 40 * GIB


def test_detect_psutil_raising_leaves_none(tmp_path):
    psutil = types.SimpleNamespace(cpu_count=lambda logical=True: 1 / 0, virtual_memory=lambda: 1 / 0)
    profile = detect(tmp_path, probes=probes(psutil=psutil))
    assert profile.physical_cores is None
    assert profile.memory_total is None


def test_detect_shm(tmp_path):
    assert detect(tmp_path, probes=probes()).shm_bytes is None
    (tmp_path / "dev/shm").mkdir(parents=True)
    assert detect(tmp_path, probes=probes()).shm_bytes > 0


@pytest.mark.parametrize(
    ("platform", "expected"),
    [("linux", "linux"), ("darwin", "macos"), ("win32", "windows"), ("freebsd14", "linux")],
)
def test_detect_platform_and_python(tmp_path, platform, expected):
    profile = detect(tmp_path, probes=probes(platform=platform, python=(3, 13)))
    assert profile.platform == expected
    assert profile.python == "3.13"


# --------------------------------------------------------------------------
# detection: NVML
# --------------------------------------------------------------------------


def driver(root: Path) -> Path:
    """A root whose /proc shows NVIDIA's kernel driver."""
    (root / "proc" / "driver" / "nvidia").mkdir(parents=True)
    return root


def test_detect_without_a_driver_does_not_load_nvml(tmp_path):
    nvml = fake_pynvml(devices=(("NVIDIA A100-SXM4-40GB", 40 * GIB),))
    profile = detect(tmp_path, probes=probes(pynvml=nvml))
    assert (profile.gpu_count, profile.gpus) == (0, ())
    assert nvml.calls == []
    # Elsewhere than Linux there is no such file to look at: NVML decides.
    profile = detect(tmp_path, probes=probes(pynvml=nvml, platform="win32"))
    assert profile.gpu_count == 1
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidiactl").write_text("")
    assert detect(tmp_path, probes=probes(pynvml=fake_pynvml())).gpu_count == 1


def test_detect_nvml_gpus(tmp_path):
    driver(tmp_path)
    nvml = fake_pynvml(devices=(("NVIDIA A100-SXM4-40GB", 40 * GIB), (b"Tesla V100", 16 * GIB)))
    profile = detect(tmp_path, probes=probes(pynvml=nvml))
    assert profile.gpu_count == 2
    assert profile.gpus == (GPU("NVIDIA A100-SXM4-40GB", 40 * GIB), GPU("Tesla V100", 16 * GIB))
    assert nvml.calls == ["init", "shutdown"]


def test_detect_nvml_missing_module_means_no_gpu(tmp_path):
    profile = detect(tmp_path, probes=probes(pynvml=None))
    assert (profile.gpu_count, profile.gpus) == (0, ())


def test_detect_nvml_init_failure_means_no_gpu(tmp_path):
    driver(tmp_path)
    nvml = fake_pynvml(init_error=True)
    profile = detect(tmp_path, probes=probes(pynvml=nvml))
    assert (profile.gpu_count, profile.gpus) == (0, ())


def test_detect_nvml_count_failure_is_unknown(tmp_path):
    driver(tmp_path)
    nvml = fake_pynvml(count_error=True)
    profile = detect(tmp_path, probes=probes(pynvml=nvml))
    assert (profile.gpu_count, profile.gpus) == (None, ())
    assert nvml.calls == ["init", "shutdown"]


def test_detect_nvml_device_failure_keeps_count(tmp_path):
    driver(tmp_path)
    nvml = fake_pynvml(devices=(("A", GIB), ("B", GIB)))

    def name(handle):
        if handle == 1:
            raise NVMLError("GPU is lost")
        return "A"

    nvml.nvmlDeviceGetName = name
    nvml.nvmlDeviceGetMemoryInfo = lambda h: 1 / 0
    profile = detect(tmp_path, probes=probes(pynvml=nvml))
    assert profile.gpu_count == 2
    assert profile.gpus == (GPU("A", None), GPU("unknown", None))


def test_detect_nvml_false_skips_nvml(tmp_path):
    nvml = fake_pynvml()
    profile = detect(tmp_path, nvml=False, probes=probes(pynvml=nvml))
    assert profile.gpu_count is None
    assert nvml.calls == []


def test_detect_real_pynvml_via_sys_modules(tmp_path, monkeypatch):
    # The default import hook goes through sys.modules like any import.
    driver(tmp_path)
    nvml = fake_pynvml(devices=(("NVIDIA L4", 24 * GIB),))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    profile = detect(tmp_path, probes=Probes(cpu_count=lambda: 4, affinity=lambda: 4))
    assert profile.gpu_count == 1
    assert profile.gpus[0].name == "NVIDIA L4"


# --------------------------------------------------------------------------
# this machine
# --------------------------------------------------------------------------


def test_detect_this_machine_is_sane():
    profile = detect()
    assert profile.usable_cpus >= 1
    assert profile.logical_cpus is None or profile.usable_cpus <= profile.logical_cpus
    assert profile.platform in {"linux", "macos", "windows"}
    assert profile.python == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert profile.gpu_count is None or profile.gpu_count == len(profile.gpus)
    json.dumps(profile_to_dict(profile))
    assert "usable CPUs:" in format_profile(profile)


def test_import_is_lazy():
    code = (
        "import sys, loadlint.hardware.detect\n"
        "heavy = sorted({'psutil', 'pynvml'} & set(sys.modules))\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# --------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------


def test_parse_target_full():
    spec = "cpus=64,gpus=8,memory=512,shm=64,platform=linux,python=3.12,torch=1.13"
    assert parse_target(spec) == Target(
        cpus=64, gpus=8, memory=512 * GIB, shm=64 * GIB, platform="linux", python="3.12", torch="1.13"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512", 512 * GIB),
        ("1.5", int(1.5 * GIB)),
        ("512M", 512 * MIB),
        ("512m", 512 * MIB),
        ("2G", 2 * GIB),
        ("2GB", 2 * GIB),
        ("1.5T", int(1.5 * 1024 * GIB)),
        ("64MiB", 64 * MIB),
        ("64 MiB", 64 * MIB),
        ("4096K", 4 * MIB),
        ("1024B", 1024),
    ],
)
def test_parse_target_sizes(text, expected):
    assert parse_target(f"memory={text}").memory == expected
    assert parse_target(f"shm={text}").shm == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (" cpus = 8 , gpus=0 ,", {"cpus": 8, "gpus": 0}),
        ("CPUS=8", {"cpus": 8}),
        ("platform=darwin", {"platform": "macos"}),
        ("platform=Win32", {"platform": "windows"}),
        ("platform=Windows", {"platform": "windows"}),
        ("python=3.12.1", {"python": "3.12"}),
        ("python=3.10", {"python": "3.10"}),
        ("torch=2", {"torch": "2"}),
        ("torch=2.13", {"torch": "2.13"}),
        ("torch=2.4.1+cu121", {"torch": "2.4"}),
    ],
)
def test_parse_target_forms(spec, expected):
    assert parse_target(spec) == Target(**expected)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cpu=4", f"--target: unknown key 'cpu' {ALLOWED}"),
        ("cpus=4,gpu=1", f"--target: unknown key 'gpu' {ALLOWED}"),
        ("", "--target: empty target (expected key=value pairs, e.g. cpus=64,gpus=8, or detect)"),
        (" , ", "--target: empty target (expected key=value pairs, e.g. cpus=64,gpus=8, or detect)"),
        ("cpus", "--target: expected key=value, got 'cpus' (e.g. cpus=64,gpus=8)"),
        ("=4", "--target: expected key=value, got '=4' (e.g. cpus=64,gpus=8)"),
        ("cpus=4,cpus=8", "--target: key 'cpus' given twice"),
        ("cpus=0", "--target: invalid cpus '0' (expected a positive integer, e.g. 64)"),
        ("cpus=", "--target: invalid cpus '' (expected a positive integer, e.g. 64)"),
        ("cpus=4.5", "--target: invalid cpus '4.5' (expected a positive integer, e.g. 64)"),
        ("cpus=-2", "--target: invalid cpus '-2' (expected a positive integer, e.g. 64)"),
        ("gpus=many", "--target: invalid gpus 'many' (expected a non-negative integer, e.g. 8)"),
        (
            "memory=lots",
            "--target: invalid memory 'lots' (expected GiB as a number (512) "
            "or a size with a unit (512M, 2G, 1.5T, 64MiB))",
        ),
        (
            "memory=0",
            "--target: invalid memory '0' (expected GiB as a number (512) "
            "or a size with a unit (512M, 2G, 1.5T, 64MiB))",
        ),
        (
            "shm=64X",
            "--target: invalid shm '64X' (expected GiB as a number (512) "
            "or a size with a unit (512M, 2G, 1.5T, 64MiB))",
        ),
        (
            "shm=64iB",
            "--target: invalid shm '64iB' (expected GiB as a number (512) "
            "or a size with a unit (512M, 2G, 1.5T, 64MiB))",
        ),
        ("platform=beos", "--target: invalid platform 'beos' (expected one of linux, macos, windows)"),
        ("python=3", "--target: invalid python '3' (expected a version such as 3.12)"),
        ("python=2.7", "--target: invalid python '2.7' (expected a version such as 3.12)"),
        ("torch=latest", "--target: invalid torch 'latest' (expected a version such as 2, 2.4 or 1.13)"),
        ("torch=0.4", "--target: invalid torch '0.4' (expected a version such as 2, 2.4 or 1.13)"),
    ],
)
def test_parse_target_errors(spec, message):
    with pytest.raises(TargetError) as info:
        parse_target(spec)
    assert str(info.value) == message
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


SOURCE = "pyproject.toml [tool.loadlint.target]"


def test_validate_target_toml_values():
    table = {
        "cpus": 64,
        "gpus": 8,
        "memory": 512,
        "shm": "64G",
        "platform": "darwin",
        "python": "3.12",
        "torch": 2,
    }
    assert validate_target(table, SOURCE) == Target(
        cpus=64, gpus=8, memory=512 * GIB, shm=64 * GIB, platform="macos", python="3.12", torch="2"
    )
    assert validate_target({"memory": 0.5}, SOURCE) == Target(memory=GIB // 2)
    assert validate_target({}, SOURCE) == Target()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"ram": 4}, f"{SOURCE}: unknown key 'ram' {ALLOWED}"),
        ({"cpus": True}, f"{SOURCE}: invalid cpus True (expected a positive integer, e.g. 64)"),
        ({"cpus": 6.0}, f"{SOURCE}: invalid cpus 6.0 (expected a positive integer, e.g. 64)"),
        ({"gpus": -1}, f"{SOURCE}: invalid gpus -1 (expected a non-negative integer, e.g. 8)"),
        (
            {"memory": float("inf")},
            f"{SOURCE}: invalid memory inf (expected GiB as a number (512) "
            "or a size with a unit (512M, 2G, 1.5T, 64MiB))",
        ),
        (
            {"shm": [64]},
            f"{SOURCE}: invalid shm [64] (expected GiB as a number (512) "
            "or a size with a unit (512M, 2G, 1.5T, 64MiB))",
        ),
        ({"platform": 1}, f"{SOURCE}: invalid platform 1 (expected one of linux, macos, windows)"),
        (
            {"python": 3.1},
            f"{SOURCE}: invalid python 3.1 (expected a version such as 3.12; quote it, "
            "a TOML number drops trailing zeros (3.10 reads as 3.1))",
        ),
        (
            {"torch": 2.1},
            f"{SOURCE}: invalid torch 2.1 (expected a version such as 2, 2.4 or 1.13; quote it, "
            "a TOML number drops trailing zeros (3.10 reads as 3.1))",
        ),
        ([("cpus", 4)], f"{SOURCE}: expected a table of key = value pairs, got list"),
    ],
)
def test_validate_target_errors(table, message):
    with pytest.raises(TargetError) as info:
        validate_target(table, SOURCE)
    assert str(info.value) == message


# --------------------------------------------------------------------------
# resolve_profile
# --------------------------------------------------------------------------


DETECTED = HardwareProfile(
    usable_cpus=4,
    logical_cpus=8,
    physical_cores=4,
    affinity_cpus=8,
    cgroup_cpus=4.0,
    memory_total=32 * GIB,
    memory_available=20 * GIB,
    shm_bytes=16 * GIB,
    gpus=(GPU("NVIDIA L4", 24 * GIB),),
    gpu_count=1,
    platform="macos",
    python="3.11",
)


class Detector:
    def __init__(self, profile=DETECTED):
        self.profile = profile
        self.calls = []

    def __call__(self, *, nvml=True):
        self.calls.append(nvml)
        profile = self.profile
        if not nvml:
            profile = hardware.dataclasses.replace(profile, gpus=(), gpu_count=None)
        return profile


def test_resolve_without_target_is_detection():
    detector = Detector()
    assert resolve_profile(None, detector) == DETECTED
    assert resolve_profile(Target(), detector) == DETECTED
    assert detector.calls == [True, True]


def test_resolve_target_overrides_and_detection_fills():
    detector = Detector()
    profile = resolve_profile(Target(cpus=64, memory=512 * GIB, python="3.12"), detector)
    assert detector.calls == [True]
    assert profile.declared == {"cpus", "memory", "python"}
    # declared
    assert profile.usable_cpus == 64
    assert profile.logical_cpus == 64
    assert profile.memory_total == 512 * GIB
    assert profile.python == "3.12"
    # this machine's CPU details say nothing about the declared machine
    assert profile.physical_cores is None
    assert profile.affinity_cpus is None
    assert profile.cgroup_cpus is None
    assert profile.memory_available is None
    # detected
    assert profile.shm_bytes == 16 * GIB
    assert profile.gpu_count == 1
    assert profile.gpus == DETECTED.gpus
    assert profile.platform == "macos"


def test_resolve_gpus_declared_skips_nvml():
    detector = Detector()
    profile = resolve_profile(Target(gpus=8), detector)
    assert detector.calls == [False]
    assert profile.gpu_count == 8
    assert profile.gpus == ()
    assert profile.usable_cpus == 4


def test_resolve_gpus_declared_never_touches_real_nvml(tmp_path):
    nvml = fake_pynvml()
    fake = probes(pynvml=nvml, psutil=fake_psutil())
    profile = resolve_profile(Target(gpus=2), lambda nvml: detect(tmp_path, nvml=nvml, probes=fake))
    assert nvml.calls == []
    assert profile.gpu_count == 2


def test_resolve_complete_target_does_not_detect():
    def detector(**kwargs):
        raise AssertionError("detector called")

    target = parse_target("cpus=128,gpus=8,memory=1T,shm=64,platform=linux,python=3.12")
    profile = resolve_profile(target, detector)
    assert profile.usable_cpus == 128
    assert profile.gpu_count == 8
    assert profile.memory_total == 1024 * GIB
    assert profile.shm_bytes == 64 * GIB
    assert profile.platform == "linux"
    assert profile.python == "3.12"
    assert profile.torch == "2"
    assert profile.declared == {"cpus", "gpus", "memory", "shm", "platform", "python"}


def test_resolve_torch_alone_still_detects():
    detector = Detector()
    profile = resolve_profile(Target(torch="1.13"), detector)
    assert detector.calls == [True]
    assert profile.torch == "1.13"
    assert profile.usable_cpus == 4


# --------------------------------------------------------------------------
# ranks_per_node and suggest_num_workers
# --------------------------------------------------------------------------


def make(cpus, gpus=0, **fields):
    return HardwareProfile(usable_cpus=cpus, logical_cpus=cpus, gpu_count=gpus, **fields)


@pytest.mark.parametrize(
    ("gpus", "distributed", "expected"),
    [(0, False, 1), (0, True, 1), (1, True, 1), (8, False, 1), (8, True, 8), (None, True, 1)],
)
def test_ranks_per_node(gpus, distributed, expected):
    assert ranks_per_node(make(16, gpus), distributed) == expected


@pytest.mark.parametrize(
    ("cpus", "gpus", "expected"),
    [
        # A single rank on a small machine: a worker per CPU (measured, README).
        (1, 0, 1),
        (2, 0, 2),
        (2, 1, 2),
        (3, 0, 2),
        (2, 8, 1),
        (16, 0, 15),
        (16, 1, 15),
        (16, 8, 1),
        (128, 0, 127),
        (128, 1, 127),
        (128, 8, 15),
    ],
)
def test_suggest_num_workers_matrix(cpus, gpus, expected):
    profile = make(cpus, gpus)
    ranks = ranks_per_node(profile, distributed=gpus > 1)
    assert suggest_num_workers(profile, ranks) == expected


@pytest.mark.parametrize(
    ("cpus", "physical", "gpus", "expected"),
    [(2, 1, 0, 1), (16, 8, 0, 8), (16, 8, 8, 1), (128, 64, 1, 64), (128, 64, 8, 8)],
)
def test_suggest_num_workers_physical_cap(cpus, physical, gpus, expected):
    profile = make(cpus, gpus, physical_cores=physical)
    assert suggest_num_workers(profile, ranks_per_node(profile, gpus > 1)) == expected


@pytest.mark.parametrize(
    ("batch_size", "expected"),
    [(None, 15), (0, 15), (1, 1), (4, 4), (15, 15), (256, 15)],
)
def test_suggest_num_workers_batch_cap(batch_size, expected):
    assert suggest_num_workers(make(16), 1, batch_size=batch_size) == expected


@pytest.mark.parametrize(
    ("memory_gib", "ranks", "expected"),
    [(None, 1, 127), (512, 1, 127), (64, 1, 64), (64, 8, 8), (4, 8, 1), (0.5, 1, 1)],
)
def test_suggest_num_workers_memory_cap(memory_gib, ranks, expected):
    memory = None if memory_gib is None else int(memory_gib * GIB)
    profile = make(128, 8, memory_total=memory)
    assert suggest_num_workers(profile, ranks) == expected


def test_suggest_num_workers_all_caps_and_bad_ranks():
    profile = make(64, 4, physical_cores=32, memory_total=24 * GIB)
    # cpu: 64//4-1 = 15, physical: 32//4 = 8, memory: 24//4 = 6, batch: 5
    assert suggest_num_workers(profile, 4) == 6
    assert suggest_num_workers(profile, 4, batch_size=5) == 5
    assert suggest_num_workers(profile, 0) == suggest_num_workers(profile, 1)


# --------------------------------------------------------------------------
# presentation
# --------------------------------------------------------------------------


def test_profile_to_dict_is_json_ready():
    data = profile_to_dict(DETECTED)
    assert json.loads(json.dumps(data)) == data
    assert data["usable_cpus"] == 4
    assert data["memory_total"] == 32 * GIB
    assert data["memory_total_gib"] == 32.0
    assert data["shm_gib"] == 16.0
    assert data["gpus"] == [{"name": "NVIDIA L4", "memory_bytes": 24 * GIB, "memory_gib": 24.0}]
    assert data["declared"] == []
    assert data["label"] == DETECTED.label
    assert data["suggested_num_workers"] == {"single_process": 3, "per_rank_ddp": None, "ddp_ranks": None}


def test_profile_to_dict_ddp_suggestion():
    profile = resolve_profile(parse_target("cpus=128,gpus=8,memory=1T,shm=64,platform=linux,python=3.12"))
    data = profile_to_dict(profile)
    assert data["suggested_num_workers"] == {"single_process": 127, "per_rank_ddp": 15, "ddp_ranks": 8}
    assert data["declared"] == ["cpus", "gpus", "memory", "platform", "python", "shm"]
    assert data["memory_available"] is None


def rows(text):
    return {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in text.splitlines()}


def test_format_profile_detected():
    text = format_profile(DETECTED)
    lines = text.splitlines()
    values = rows(text)
    assert values["logical CPUs"] == "8"
    assert values["physical cores"] == "4"
    assert values["CPU affinity"] == "8"
    assert values["cgroup CPU quota"] == "4 CPUs"
    assert values["usable CPUs"] == "4"
    assert values["memory total"] == "32.0 GiB"
    assert values["memory available"] == "20.0 GiB"
    assert values["/dev/shm"] == "16.0 GiB"
    assert values["GPUs"] == "1"
    assert values["GPU 0"] == "NVIDIA L4 (24.0 GiB)"
    assert values["platform"] == "macos"
    assert values["Python"] == "3.11"
    assert values["num_workers"] == "3 (one process)"
    assert "num_workers/rank" not in values
    # values are aligned in one column
    assert len({line.index(line.split(":", 1)[1].strip()) for line in lines if not line.startswith("  ")}) == 1


def test_format_profile_no_driver_and_unknowns():
    profile = HardwareProfile(usable_cpus=1, gpu_count=0)
    values = rows(format_profile(profile))
    assert values["GPUs"] == "none (no NVIDIA driver or GPU found)"
    assert values["logical CPUs"] == "unknown"
    assert values["memory total"] == "unknown"
    assert values["/dev/shm"] == "none"
    assert values["cgroup CPU quota"] == "no limit"
    assert values["torch"] == "2 (assumed)"


def test_format_profile_declared_ddp():
    profile = resolve_profile(parse_target("cpus=16,gpus=8,memory=64,shm=8,platform=linux,python=3.12"))
    values = rows(format_profile(profile))
    assert values["usable CPUs"] == "16 (target)"
    assert values["GPUs"] == "8 (target)"
    assert values["memory total"] == "64.0 GiB (target)"
    assert values["memory available"] == "unknown"
    assert values["num_workers"] == "15 (one process)"
    assert values["num_workers/rank"] == "1 (DDP, 8 ranks)"
