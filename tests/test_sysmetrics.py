"""Which disk a path lives on: a local Ceph cluster's OSD files make I/O on that disk the
benchmark's own, not a disturbance."""

from __future__ import annotations

import os
from pathlib import Path

from stortune.measure.sysmetrics import _hardware_disks, disk_of


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
