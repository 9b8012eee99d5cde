"""A memory cgroup that caps the benchmark's page cache (Carver's S2 setting: 4 GiB of RAM for a
10 GiB working set, so that I/O reaches the device).

cgroup v2 (``memory.max``) is tried first, then v1 (``memory.limit_in_bytes``): which one works
depends on the machine (MEASURING.md found v1 working and v2 without a memory controller), so
both are tried rather than assumed. The cgroup is made under the cgroup this process is already
in, so whatever accounts for this process also accounts for the benchmark.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from stortune.errors import TargetError
from stortune.system.mounts import mount_table

_PAGE = 4096


def _own_path(v2: bool) -> str:
    """This process's cgroup path in the v2 hierarchy, or in the v1 memory hierarchy."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if v2 and hierarchy == "0" and controllers == "":
            return path
        if not v2 and "memory" in controllers.split(","):
            return path
    raise TargetError("this process is in no " + ("cgroup v2" if v2 else "v1 memory cgroup"))


def _mount_point(v2: bool) -> Path:
    for entry in mount_table():
        if v2 and entry.fstype == "cgroup2":
            return Path(entry.mount_point)
        if not v2 and entry.fstype == "cgroup" and "memory" in entry.super_options.split(","):
            return Path(entry.mount_point)
    raise TargetError("no " + ("cgroup2" if v2 else "cgroup v1 memory") + " hierarchy mounted")


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        reason = os.strerror(exc.errno or 0)
        raise TargetError(f"cannot write {value!r} to {path}: {reason}") from None


def _make(parent: Path, name: str, limit_file: str, limit: int) -> Path:
    child = parent / name
    try:
        child.mkdir()
    except OSError as exc:
        raise TargetError(f"cannot create cgroup {child}: {os.strerror(exc.errno or 0)}") from None
    try:
        _write(child / limit_file, str(limit))
        kept = (child / limit_file).read_text().strip()
        if kept == "max" or abs(int(kept) - limit) >= _PAGE:
            raise TargetError(f"{child / limit_file} kept {kept} instead of {limit}")
    except (TargetError, OSError, ValueError):
        remove(child)
        raise
    return child


def _create_v2(name: str, limit: int) -> Path:
    parent = _mount_point(True) / _own_path(True).lstrip("/")
    if "memory" not in (parent / "cgroup.controllers").read_text().split():
        raise TargetError(f"cgroup v2 at {parent} offers no memory controller")
    if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
        _write(parent / "cgroup.subtree_control", "+memory")
    return _make(parent, name, "memory.max", limit)


def _create_v1(name: str, limit: int) -> Path:
    parent = _mount_point(False) / _own_path(False).lstrip("/")
    return _make(parent, name, "memory.limit_in_bytes", limit)


def create_memory_cgroup(name: str, limit: int) -> Path:
    """A new cgroup whose memory (page cache included) is capped at `limit` bytes; its folder.

    Processes join it by writing their pid to its ``cgroup.procs``."""
    problems = []
    for create in (_create_v2, _create_v1):
        try:
            return create(name, limit)
        except (TargetError, OSError) as exc:
            problems.append(str(exc))
    raise TargetError("cannot cap memory with a cgroup: " + "; ".join(problems))


def remove(path: Path | str, wait: float = 10.0) -> None:
    """Remove a cgroup once its processes are gone (a killed benchmark may take a moment)."""
    path = Path(path)
    deadline = time.monotonic() + wait
    while path.exists():
        try:
            path.rmdir()
            return
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise TargetError(
                    f"cannot remove cgroup {path}: {os.strerror(exc.errno or 0)}"
                ) from None
            time.sleep(0.25)
