"""The guard in front of formatting a block device the user names.

Formatting destroys a device's data, so a device is refused (one clear line) when it is mounted
or used as swap (itself or one of its partitions), held by device-mapper/md (``holders``), the
disk the root file system lives on (or a partition of it), or when it holds a file system or
partition table (blkid) and the user did not say ``destroy_data``.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from stortune.errors import TargetError
from stortune.system import syscmd
from stortune.system.mounts import mount_table

_SYS_DEV = Path("/sys/dev/block")
_SYS_CLASS = Path("/sys/class/block")


@dataclass(frozen=True)
class BlockDevice:
    path: str
    name: str  # kernel name: sdb1, loop3
    majmin: str
    disk: str  # the whole disk's name (== name unless a partition)

    @property
    def queue_dir(self) -> Path:
        """Where the block-layer settings live (a partition's are its disk's)."""
        return _SYS_CLASS / self.disk / "queue"


def block_device(path: str) -> BlockDevice:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise TargetError(f"device {path}: {exc.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise TargetError(f"device {path} is not a block device")
    majmin = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    return _from_majmin(majmin, path)


def _from_majmin(majmin: str, path: str = "") -> BlockDevice:
    sys_dir = Path(os.path.realpath(_SYS_DEV / majmin))
    name = sys_dir.name
    disk = sys_dir.parent.name if (sys_dir / "partition").exists() else name
    return BlockDevice(path or f"/dev/{name}", name, majmin, disk)


def _partitions(disk: str) -> list[str]:
    base = _SYS_CLASS / disk
    root = Path(os.path.realpath(base))
    return sorted(p.name for p in root.iterdir() if (p / "partition").exists())


def _leaf_disks(name: str, seen: set[str] | None = None) -> set[str]:
    """The whole disks under a device, through device-mapper/md slaves."""
    seen = seen if seen is not None else set()
    if name in seen:
        return set()
    seen.add(name)
    sys_dir = Path(os.path.realpath(_SYS_CLASS / name))
    if (sys_dir / "partition").exists():
        return _leaf_disks(sys_dir.parent.name, seen)
    slaves = sys_dir / "slaves"
    below = sorted(p.name for p in slaves.iterdir()) if slaves.is_dir() else []
    if not below:
        return {name}
    return set().union(*(_leaf_disks(s, seen) for s in below))


def root_disks() -> set[str]:
    """The whole disks the root file system lives on."""
    for entry in mount_table():
        if entry.mount_point != "/":
            continue
        majmin = entry.majmin
        if majmin.startswith("0:") and entry.source.startswith("/dev/"):
            try:
                st = os.stat(entry.source)
                majmin = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
            except OSError:
                continue
        if (_SYS_DEV / majmin).exists():
            return _leaf_disks(_from_majmin(majmin).name)
    return set()


def _swaps() -> set[str]:
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {os.path.realpath(line.split()[0]) for line in lines if line.split()}


def signature(path: str) -> str | None:
    """What blkid finds on the device (a file system type or partition table), if anything."""
    tool = syscmd.which("blkid")
    if tool is None:
        raise TargetError("blkid is not installed: cannot check the device is blank")
    proc = subprocess.run(
        [tool, "-p", "-o", "export", path], capture_output=True, text=True, check=False
    )
    if proc.returncode == 2:  # nothing found
        return None
    if proc.returncode != 0:
        raise TargetError(f"blkid cannot probe {path}: {syscmd.last_line(proc.stderr)}")
    fields = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return fields.get("TYPE") or fields.get("PTTYPE") or "an unknown signature"


def check_scratch_device(path: str, destroy_data: bool) -> BlockDevice:
    """The device, if it may be formatted; else TargetError saying why not."""
    dev = block_device(path)
    if dev.disk in root_disks():
        raise TargetError(
            f"refusing {path}: it is the root file system's disk /dev/{dev.disk} "
            "(or a partition of it)"
        )
    names = [dev.name] + (_partitions(dev.disk) if dev.name == dev.disk else [])
    majmins = {_from_majmin_name(n) for n in names}
    for entry in mount_table():
        if entry.majmin in majmins:
            raise TargetError(f"refusing {path}: it is mounted at {entry.mount_point}")
    swaps = _swaps()
    for name in names:
        if os.path.realpath(f"/dev/{name}") in swaps:
            raise TargetError(f"refusing {path}: /dev/{name} is in use as swap")
        holders = _SYS_CLASS / name / "holders"
        held = sorted(p.name for p in holders.iterdir()) if holders.is_dir() else []
        if held:
            raise TargetError(f"refusing {path}: /dev/{name} is in use by {', '.join(held)}")
    found = signature(path)
    if found is not None and not destroy_data:
        raise TargetError(
            f"refusing {path}: it holds {found}; give --destroy-data to format it anyway"
        )
    return dev


def _from_majmin_name(name: str) -> str:
    return (_SYS_CLASS / name / "dev").read_text().strip()
