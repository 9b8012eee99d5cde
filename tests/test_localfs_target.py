"""The localfs target on real loop devices: apply levels, refusals before mkfs, settings restored
after teardown and after a failed apply, the memory cgroup, the destructive-device guard."""

from __future__ import annotations

import os
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.localfs import (
    QUICK,
    guarded_state_dir,
    loop_devices_of,
    mounts_under,
    needs_fio,
    needs_root,
    queue_settings,
    read_setting,
)

from stortune.errors import BusyError, ConfigError, TargetError
from stortune.space import parse_space
from stortune.system import syscmd
from stortune.system.devguard import root_disks
from stortune.targets import REGISTRY, make_target
from stortune.targets.localfs import LocalFsTarget, available_filesystems
from stortune.workloads import FioWorkload

SETTINGS_SPACE = textwrap.dedent(
    """\
    name: settings
    parameters:
      scheduler: {type: categorical, values: [none, bfq], default: none, layer: block,
                  option: scheduler}
      read_ahead_kb: {type: ordinal, values: [128, 4096], default: 128, layer: block,
                      option: read_ahead_kb}
      nr_requests: {type: ordinal, values: [64, 1024], default: 64, layer: block,
                    option: nr_requests}
      dirty_ratio: {type: ordinal, values: [20, 33], default: 20, layer: vm,
                    option: vm.dirty_ratio}
      dirty_background_ratio: {type: ordinal, values: [10, 7], default: 10, layer: vm,
                               option: vm.dirty_background_ratio}
    """
)


@pytest.fixture
def system(tmp_path: Path) -> Iterator[Path]:
    yield from guarded_state_dir(tmp_path)


def blkid(device: str) -> str:
    return subprocess.run(
        ["blkid", "-p", "-o", "value", "-s", "TYPE", device], capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every system tool the target runs, recorded (and really run)."""
    seen: list[list[str]] = []
    real = syscmd.run

    def spy(argv, what, timeout=300.0):
        seen.append(list(argv))
        return real(argv, what, timeout)

    monkeypatch.setattr(syscmd, "run", spy)
    return seen


def tools(seen: list[list[str]]) -> list[str]:
    return [argv[0] for argv in seen]


# ---- without root -----------------------------------------------------------------------------
def test_registered_and_spec_round_trip(tmp_path: Path) -> None:
    assert REGISTRY["localfs"] is LocalFsTarget
    target = LocalFsTarget("ext4", image_size="1g", state_dir=tmp_path, memory_limit="2g")
    spec = target.describe()
    again = make_target(spec, target.space)
    assert isinstance(again, LocalFsTarget)
    assert again.describe() == spec
    assert LocalFsTarget.from_spec({"kind": "localfs", "space": "xfs"}).space.name == "xfs"
    with pytest.raises(TargetError, match="unknown setting"):
        LocalFsTarget.from_spec({"kind": "localfs", "size": "1g"})


def test_plan_maps_layers_and_checks_values(tmp_path: Path) -> None:
    target = LocalFsTarget("xfs", state_dir=tmp_path)
    plan = target.plan(
        {"block_size": 2048, "inode_size": 1024, "log_size": 128, "atime": "noatime"}
    )
    assert plan.fs == "xfs"
    assert plan.mkfs == (
        "mkfs.xfs",
        "-f",
        "-q",
        "-K",
        "-b",
        "size=2048",
        "-i",
        "size=1024",
        "-l",
        "size=128m",
        "-d",
        "agcount=4",
    )
    assert plan.mount == "noatime,logbufs=8,logbsize=32k"
    with pytest.raises(ConfigError, match="half a block"):
        target.plan({"block_size": 1024, "inode_size": 1024})
    bad = parse_space(
        "name: bad\nparameters:\n  opt: {type: categorical, values: ['noatime', 'noatime,dax'],"
        " default: noatime, layer: mount, option: '{}'}\n"
    )
    with pytest.raises(TargetError, match="not a plain word"):
        LocalFsTarget(bad, state_dir=tmp_path).plan({"opt": "noatime,dax"})


def test_setup_needs_root_or_says_so(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: the refusal for other users cannot be seen")
    with pytest.raises(TargetError, match="needs root"):
        LocalFsTarget(state_dir=tmp_path).setup()


# ---- root ---------------------------------------------------------------------------------
@needs_root
def test_available_filesystems_are_makeable_and_mountable() -> None:
    found = available_filesystems()
    assert "ext4" in found
    kernel = Path("/proc/filesystems").read_text().split()
    assert all(fs in kernel for fs in found)


@needs_root
def test_loop_device_has_direct_io_and_a_full_image(system: Path) -> None:
    with LocalFsTarget("localfs", image_size="256m", state_dir=system) as target:
        target.setup()
        ((device, image),) = loop_devices_of(system).items()
        assert Path(f"/sys/block/{Path(device).name}/loop/dio").read_text().strip() == "1"
        assert os.stat(image).st_blocks * 512 >= 256 << 20
        with pytest.raises(TargetError, match="apply a config"):
            target.run(FioWorkload("randread", **QUICK))
    assert not loop_devices_of(system)
    assert not Path(image).exists()


@needs_root
def test_apply_does_only_what_changed_parameters_need(system: Path, commands) -> None:
    with LocalFsTarget("localfs", image_size="512m", state_dir=system) as target:
        config = target.space.default_config()
        target.apply(config)
        assert tools(commands)[-2:] == ["mkfs.ext4", "mount"]
        marker = target._mount_point / "marker"
        marker.write_text("x")
        commands.clear()
        target.apply({**config, "scheduler": "bfq", "dirty_ratio": 40})  # runtime only
        assert commands == [] and marker.exists()
        target.apply({**config, "atime": "noatime"})  # remount, same file system
        assert tools(commands) == ["umount", "mount"] and marker.exists()
        assert "noatime" in Path("/proc/self/mountinfo").read_text()
        commands.clear()
        target.apply({**config, "fs": "xfs"})  # re-format
        assert tools(commands) == ["umount", "mkfs.xfs", "mount"]
        assert not marker.exists() and blkid(target._dev) == "xfs"


@needs_root
def test_violating_config_never_reaches_mkfs(system: Path, commands) -> None:
    with LocalFsTarget("ext4", image_size="256m", state_dir=system) as target:
        target.setup()
        ((device, _),) = loop_devices_of(system).items()
        with pytest.raises(ConfigError, match="inode"):
            target.apply({"block_size": 1024, "inode_size": 4096})
        with pytest.raises(ConfigError, match="not one of"):
            target.apply({"journal_mode": "ordered,dax"})
        assert not [t for t in tools(commands) if t.startswith("mkfs")]
        assert blkid(device) == ""  # and the image is still blank
        assert not mounts_under(system)


@needs_root
@needs_fio
def test_settings_restored_after_teardown(system: Path) -> None:
    space = parse_space(SETTINGS_SPACE)
    vm_before = (
        read_setting("/proc/sys/vm/dirty_ratio"),
        read_setting("/proc/sys/vm/dirty_background_ratio"),
    )
    target = LocalFsTarget(space, fs="ext4", image_size="256m", state_dir=system)
    with target:
        target.setup()
        device = target._dev
        queue_before = queue_settings(device)
        target.apply(
            {
                "scheduler": "bfq",
                "read_ahead_kb": 4096,
                "nr_requests": 1024,
                "dirty_ratio": 33,
                "dirty_background_ratio": 7,
            }
        )
        assert queue_settings(device) == {
            "scheduler": "bfq",
            "read_ahead_kb": "4096",
            "nr_requests": "1024",
        }
        assert read_setting("/proc/sys/vm/dirty_ratio") == "33"
        measurement = target.run(FioWorkload("seqwrite", **QUICK), timeout=60)
        assert measurement.ok, measurement.error
    assert queue_settings(device) == queue_before
    assert (
        read_setting("/proc/sys/vm/dirty_ratio"),
        read_setting("/proc/sys/vm/dirty_background_ratio"),
    ) == vm_before
    assert not loop_devices_of(system) and not mounts_under(system)
    assert not list(system.glob("journal-*")) and not list(system.glob("*.img"))
    target.teardown()  # idempotent


@needs_root
def test_settings_restored_after_failed_apply(system: Path) -> None:
    """A failed apply puts every setting back as it was before the target changed it."""
    space = parse_space(SETTINGS_SPACE)
    with LocalFsTarget(space, fs="ext4", image_size="256m", state_dir=system) as target:
        target.setup()
        before = queue_settings(target._dev), read_setting("/proc/sys/vm/dirty_ratio")
        target.apply({"read_ahead_kb": 4096, "dirty_ratio": 33})
        # without a scheduler the loop device refuses 1024 requests, after read-ahead and the
        # dirty ratio were changed again
        with pytest.raises(TargetError, match="nr_requests"):
            target.apply({"read_ahead_kb": 128, "nr_requests": 1024, "dirty_ratio": 20})
        assert (queue_settings(target._dev), read_setting("/proc/sys/vm/dirty_ratio")) == before
        target.apply({"scheduler": "bfq", "nr_requests": 1024})  # and the target still works
        assert queue_settings(target._dev)["nr_requests"] == "1024"


@needs_root
@needs_fio
def test_memory_cgroup_caps_the_benchmark(system: Path) -> None:
    limit = 64 << 20
    with LocalFsTarget(
        "localfs", image_size="256m", state_dir=system, memory_limit=limit
    ) as target:
        target.apply(target.space.default_config())
        group = target._cgroup
        measurement = target.run(FioWorkload("seqread", runtime=2, size="128m"), timeout=60)
        assert measurement.ok, measurement.error
        peak_file = group / "memory.max_usage_in_bytes"
        if not peak_file.exists():
            peak_file = group / "memory.peak"
        peak = int(peak_file.read_text())
        assert 0 < peak <= limit
        state = target.state()
        assert "sys.loadavg" in state and "sys.disk_util_pct" in state
    assert not group.exists()


@needs_root
def test_one_target_at_a_time_per_state_dir(system: Path) -> None:
    with LocalFsTarget("localfs", image_size="256m", state_dir=system) as first:
        first.setup()
        with pytest.raises(BusyError, match="one benchmark at a time"):
            LocalFsTarget("localfs", image_size="256m", state_dir=system).setup()


# ---- the destructive-device guard -------------------------------------------------------------
@pytest.fixture
def scratch(system: Path):
    """A loop device over a blank image of our own, standing in for a user's scratch disk."""
    system.mkdir(parents=True, exist_ok=True)
    image = system.parent / "scratch.img"
    subprocess.run(["fallocate", "-l", "320m", str(image)], check=True)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()
    yield device  # the system fixture detaches it


@needs_root
def test_guard_refuses_the_root_disk(system: Path) -> None:
    disks = sorted(root_disks())
    assert disks, "the root file system's disk was not found"
    for disk in disks:
        with pytest.raises(TargetError, match="root file system's disk"):
            LocalFsTarget(device=f"/dev/{disk}", destroy_data=True, state_dir=system).setup()


@needs_root
def test_guard_refuses_a_mounted_device(system: Path, scratch: str) -> None:
    subprocess.run(["mkfs.ext4", "-q", "-F", scratch], check=True)
    point = system.parent / "mounted"
    point.mkdir()
    subprocess.run(["mount", scratch, str(point)], check=True)
    with pytest.raises(TargetError, match="mounted at"):
        LocalFsTarget(device=scratch, destroy_data=True, state_dir=system).setup()
    subprocess.run(["umount", str(point)], check=True)
    with pytest.raises(TargetError, match="holds ext4.*--destroy-data"):
        LocalFsTarget(device=scratch, state_dir=system).setup()


@needs_root
def test_blank_scratch_device_is_formatted_and_left_attached(system: Path, scratch: str) -> None:
    before = queue_settings(scratch)
    with LocalFsTarget("localfs", device=scratch, state_dir=system) as target:
        target.apply({"scheduler": "mq-deadline", "fs": "btrfs"})
        assert blkid(scratch) == "btrfs"
    assert scratch in loop_devices_of(system.parent)  # the user's device stays attached
    assert queue_settings(scratch) == before


@needs_root
def test_a_vm_setting_another_process_rewrote_is_found_and_written_back(system: Path) -> None:
    space = parse_space(SETTINGS_SPACE)
    target = LocalFsTarget(space, fs="ext4", image_size="256m", state_dir=system)
    with target:
        target.setup()
        target.apply({"dirty_ratio": 33})
        assert target.reassert() == []
        Path("/proc/sys/vm/dirty_ratio").write_text("21\n")  # another tuner, on the same machine
        assert target.reassert() == ["vm.dirty_ratio = 21 (applied: 33)"]
        assert read_setting("/proc/sys/vm/dirty_ratio") == "33"
        assert target.reassert() == []
