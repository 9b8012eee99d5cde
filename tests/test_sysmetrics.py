"""Which disk a path lives on: a local Ceph cluster's OSD files make I/O on that disk the
benchmark's own, not a disturbance; and the bytes a run moves at its device and at the disk
under it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stortune.system.sysmetrics import (
    DeviceSampler,
    ProcessIoSampler,
    _hardware_disks,
    disk_of,
)


def test_disk_of_names_the_whole_disk_under_a_path(tmp_path: Path) -> None:
    disk = disk_of(tmp_path)
    st = os.stat(tmp_path)
    node = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if node.exists():
        assert disk is not None and Path(f"/sys/block/{disk}").exists()  # a disk, no partition
        assert not (Path(f"/sys/block/{disk}") / "partition").exists()
    else:
        assert disk is None  # tmpfs or overlay: no block device


def test_disk_of_is_none_off_block_devices() -> None:
    assert disk_of("/proc") is None
    assert disk_of("/no/such/path") is None


def test_the_root_file_system_sits_on_a_disk_the_sampler_knows() -> None:
    disk = disk_of("/")
    if disk is not None and _hardware_disks():
        assert disk in _hardware_disks() or disk.startswith(("dm-", "md", "loop"))


def test_device_sampler_says_nothing_of_devices_it_cannot_see() -> None:
    sampler = DeviceSampler("/dev/no-such-device", backing="no-such-disk").start()
    assert sampler.stop() == {}
    assert DeviceSampler("/dev/vda", backing="vda").backing is None  # no disk under itself


@pytest.fixture
def loop_over_file(tmp_path: Path) -> Iterator[str]:
    """A loop device with direct I/O over a 32 MiB file in tmp_path, detached afterwards."""
    image = tmp_path / "sampled.img"
    subprocess.run(["fallocate", "-l", "32m", str(image)], check=True)
    device = subprocess.run(
        ["losetup", "--find", "--show", "--direct-io=on", str(image)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="loop devices need root")
def test_device_sampler_counts_the_bytes_at_the_device_and_the_disk_under_it(
    tmp_path: Path, loop_over_file: str
) -> None:
    backing = disk_of(tmp_path)
    sampler = DeviceSampler(loop_over_file, backing).start()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={loop_over_file}", "bs=1M", "count=8", "oflag=direct"],
        capture_output=True,
        check=True,
    )
    subprocess.run(
        ["dd", f"if={loop_over_file}", "of=/dev/null", "bs=1M", "count=4", "iflag=direct"],
        capture_output=True,
        check=True,
    )
    out = sampler.stop()
    assert out["device.write_mb"] == pytest.approx(8.0)
    assert out["device.read_mb"] == pytest.approx(4.0)
    if backing is None:  # tmp_path on tmpfs: no disk under the image
        assert "device.backing_write_mb" not in out
    else:  # the disk's whole traffic: ours through the loop device, and whatever else ran
        assert out["device.backing_write_mb"] >= 8.0 * 0.99
        assert out["device.backing_read_mb"] >= 4.0 * 0.99


def test_an_applications_own_io_is_counted_over_its_processes_even_those_that_ended(
    tmp_path: Path,
) -> None:
    """What a program's processes moved through system calls (the bytes a device share is
    computed over), summed over processes that ended during the phase, others' excluded."""
    program = tmp_path / "iotest"  # a process named iotest: python under another name
    program.symlink_to(sys.executable)
    script = (
        "import time\n"
        "data = open('/dev/zero', 'rb', buffering=0).read(8 << 20)\n"
        "open('/dev/null', 'wb', buffering=0).write(data)\n"
        "time.sleep(0.5)\n"
    )
    sampler = ProcessIoSampler("iotest", interval=0.05).start()
    for _ in range(2):  # two processes, both gone before stop()
        subprocess.run([str(program), "-c", script], check=True)
    subprocess.run([sys.executable, "-c", script], check=True)  # another program: not counted
    moved = sampler.stop()
    assert 16.0 <= moved["workload.read_mb"] <= 22.0  # 2 x 8 MiB, and python's own modules
    assert 16.0 <= moved["workload.write_mb"] <= 16.5
