"""Mounting and unmounting, and what /proc/self/mountinfo says is mounted where."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from stortune.errors import TargetError
from stortune.system import syscmd


@dataclass(frozen=True)
class MountEntry:
    majmin: str  # "254:0" (0:N for file systems without a block device)
    mount_point: str
    fstype: str
    source: str
    super_options: str = ""


def _unescape(text: str) -> str:
    """mountinfo escapes spaces and the like as octal (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def mount_table() -> list[MountEntry]:
    entries = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 2:
                options = tail[2] if len(tail) > 2 else ""
                entries.append(
                    MountEntry(fields[2], _unescape(fields[4]), tail[0], tail[1], options)
                )
    return entries


def is_mounted(mount_point: Path | str) -> bool:
    target = os.path.realpath(mount_point)
    return any(e.mount_point == target for e in mount_table())


def mount(device: str, mount_point: Path, fstype: str, options: str) -> None:
    """Mount, or raise TargetError with the kernel's own reason (mount(8) only says to look
    in dmesg)."""
    argv = ["mount", "-t", fstype]
    if options:
        argv += ["-o", options]
    mark = _kernel_log_size()
    try:
        syscmd.run([*argv, device, str(mount_point)], f"mounting {fstype} on {device}")
    except TargetError as exc:
        reason = _kernel_says(mark, Path(device).name)
        if reason:
            raise TargetError(f"mounting {fstype} -o {options or 'defaults'}: {reason}") from None
        raise exc from None


def _kernel_log_size() -> int:
    return len(_kernel_log())


def _kernel_log() -> list[str]:
    try:
        proc = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return proc.stdout.splitlines()


def _kernel_says(mark: int, device: str) -> str:
    """The kernel's latest line about `device` since `mark` (its reason for refusing)."""
    lines = [line for line in _kernel_log()[mark:] if device in line]
    return re.sub(r"^\[[^\]]*\]\s*", "", lines[-1]).strip() if lines else ""


def umount(mount_point: Path | str, wait: float = 10.0) -> None:
    """Unmount, retrying while the file system is busy (a killed benchmark still exiting);
    after `wait` seconds detach it lazily, so that teardown always gets through."""
    deadline = time.monotonic() + wait
    while is_mounted(mount_point):
        try:
            syscmd.run(["umount", str(mount_point)], f"unmounting {mount_point}")
            return
        except TargetError:
            if time.monotonic() >= deadline:
                syscmd.run(["umount", "--lazy", str(mount_point)], f"unmounting {mount_point}")
                return
            time.sleep(0.25)
