"""Image files and loop devices with direct I/O.

MEASURING.md: without ``--direct-io=on`` the host page cache acts as a second cache (webserver
reads twice as fast), and mkfs discards punch holes in the image; so every attach is preceded by
allocating the whole image (`allocate`) and followed by a check that direct I/O really is on.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from stortune.errors import TargetError
from stortune.system import syscmd


def allocate(image: Path, size: int) -> None:
    """Create or resize `image` to `size` bytes and allocate every block of it (no holes)."""
    try:
        fd = os.open(image, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise TargetError(f"cannot create image {image}: {exc.strerror}") from None
    try:
        if os.fstat(fd).st_size != size:
            os.ftruncate(fd, size)
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        hint = " (not enough free space)" if exc.errno == errno.ENOSPC else ""
        raise TargetError(
            f"cannot allocate {size >> 20} MiB for {image}: {os.strerror(exc.errno or 0)}{hint}"
        ) from None
    finally:
        os.close(fd)


def attach(image: Path) -> str:
    """Attach `image` to a free loop device with direct I/O; return the device path."""
    out = syscmd.run(
        ["losetup", "--find", "--show", "--direct-io=on", str(image)], f"attaching {image}"
    )
    device = out.strip().splitlines()[-1] if out.strip() else ""
    if not device.startswith("/dev/loop"):
        raise TargetError(f"attaching {image}: losetup printed no loop device")
    dio = Path("/sys/block", Path(device).name, "loop", "dio")
    if dio.exists() and dio.read_text().strip() != "1":
        detach(device, image)
        raise TargetError(
            f"{device}: direct I/O did not take effect (the file system under {image} may not "
            "support O_DIRECT); results would measure the host page cache"
        )
    return device


def backing_file(device: str) -> str | None:
    """The image a loop device is attached to, or None when it is free."""
    path = Path("/sys/block", Path(device).name, "loop", "backing_file")
    try:
        return path.read_text().strip().removesuffix(" (deleted)")
    except OSError:
        return None


def devices_of(image: Path | str) -> list[str]:
    """The loop devices attached to `image` (found even when nobody noted their names)."""
    target = os.path.realpath(image)
    out = []
    for entry in sorted(Path("/sys/block").glob("loop*")):
        backing = backing_file(entry.name)
        if backing is not None and os.path.realpath(backing) == target:
            out.append(f"/dev/{entry.name}")
    return out


def detach(device: str, image: Path | str) -> bool:
    """Detach `device` if it is still attached to `image` (never someone else's device)."""
    backing = backing_file(device)
    if backing is None or os.path.realpath(backing) != os.path.realpath(image):
        return False
    syscmd.run(["losetup", "--detach", device], f"detaching {device}")
    return True
