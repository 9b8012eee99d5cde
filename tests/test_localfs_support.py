"""Shared helpers of the localfs tests (no tests here): root checks and a system guard that
undoes every loop device, mount, cgroup and sysfs/sysctl setting a test makes, also when the test
fails or the target under test is broken."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(
    not ROOT, reason="needs root: loop devices, mkfs, mount, sysfs and sysctl writes"
)
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")

VM_SETTINGS = (
    "dirty_ratio",
    "dirty_background_ratio",
    "dirty_expire_centisecs",
    "dirty_writeback_centisecs",
    "vfs_cache_pressure",
)
QUEUE_SETTINGS = ("scheduler", "read_ahead_kb", "nr_requests")
QUICK = {"runtime": 2, "size": "16m"}  # fio runs of the localfs tests


def read_setting(path: Path | str) -> str:
    text = Path(path).read_text().strip()
    if "[" in text:
        return text.split("[", 1)[1].split("]", 1)[0]
    return text


def loop_devices_of(folder: Path) -> dict[str, str]:
    """Loop device -> backing file, for backing files under `folder`."""
    out = {}
    for entry in Path("/sys/block").glob("loop*"):
        backing = entry / "loop" / "backing_file"
        if backing.exists():
            name = backing.read_text().strip().removesuffix(" (deleted)")
            if name.startswith(str(folder)):
                out[f"/dev/{entry.name}"] = name
    return out


def mounts_under(folder: Path) -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point.startswith(str(folder)):
            points.append(point)
    return points


def queue_settings(device: str) -> dict[str, str]:
    queue = Path("/sys/block", Path(device).name, "queue")
    return {key: read_setting(queue / key) for key in QUEUE_SETTINGS}


def loop_queues() -> dict[str, dict[str, str]]:
    """Every loop device's queue settings, by device path."""
    return {f"/dev/{d.name}": queue_settings(d.name) for d in Path("/sys/block").glob("loop*")}


def _write(path: Path, value: str) -> None:
    with contextlib.suppress(OSError):
        path.write_text(value)


def guarded_state_dir(tmp_path: Path) -> Iterator[Path]:
    """For a fixture: a state directory under tmp_path; afterwards everything made there is
    undone, whatever the target under test left."""
    vm = {key: read_setting(f"/proc/sys/vm/{key}") for key in VM_SETTINGS}
    loops = loop_queues()
    yield tmp_path / "state"
    time.sleep(0.1)
    for point in sorted(mounts_under(tmp_path), reverse=True):
        if subprocess.run(["umount", point], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
    for device in loop_devices_of(tmp_path):
        queue = Path("/sys/block", Path(device).name, "queue")
        for key in ("scheduler", "nr_requests", "read_ahead_kb"):  # scheduler resets the others
            _write(queue / key, loops.get(device, {}).get(key, ""))
        subprocess.run(["losetup", "--detach", device], capture_output=True, check=False)
    for key, value in vm.items():
        if read_setting(f"/proc/sys/vm/{key}") != value:
            _write(Path(f"/proc/sys/vm/{key}"), value)
    for group in Path("/sys/fs/cgroup").glob(f"**/stortune-{os.getpid()}-*"):
        with contextlib.suppress(OSError):
            group.rmdir()


def processes_under(folder: Path, program: str | None = None) -> list[int]:
    """Processes (of `program`, by name, if given) working in `folder`: their working
    directory is under it (a server chdirs to its data folder, its backends too) or an argument
    names it (db_bench --db=...)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if program is not None and (proc / "comm").read_text().strip() != program:
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if cwd.startswith(str(folder)) or any(str(folder).encode() in a for a in argv):
            found.append(int(proc.name))
    return found


def wait_for(condition: Callable[[], object], seconds: float) -> bool:
    """Whether `condition` holds within `seconds` (polled every 0.1 s)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())
