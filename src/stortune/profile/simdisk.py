"""A disk with a head, in user space: a FUSE file system whose files answer like a hard disk.

This VM's disks behave like flash (sequential and random access within a few percent of each
other), so a profiler that should find a sequential advantage has nothing to find on them, and
no rotational device, device mapper or nbd is available here. FUSE is: every file of this file
system is held in memory and served as if it were its own disk, through the kernel's real I/O
path (fio, O_DIRECT, the VFS, FUSE's request splitting), with a position-dependent latency:

    service = seek(|offset - head|) + length / bandwidth,
    seek(d) = 0 when d == 0, else settle + stroke * sqrt(d / file size),

the square-root seek curve of a disk arm (Ruemmler and Wilkes, "An introduction to disk drive
modelling", 1994). A request that starts where the previous one ended pays no seek, so a
sequential pass costs only transfer time and a random one a seek per request. Each file has
its own head and queue (one disk per file), so MPI workers on one machine, each with its own
file, have a disk each, as the paper's nodes did. Mounted with ``direct_io``: no page cache.

    python -m stortune.profile.simdisk MOUNTPOINT [--settle-ms 1] [--stroke-ms 6]
        [--bandwidth-mib 200]

(the defaults: a random request seeks 4.2 ms on average, a small 10,000 rpm disk's seek)

runs in the foreground until the mount point is unmounted (``umount MOUNTPOINT``) or the
process is stopped (SIGINT/SIGTERM unmount it); `mounted` does all of it around a block of
code. `expected_access_ms` gives the curves a profiler should find.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stortune.errors import TargetError

FUSE_CHUNK = 128 * 1024  # the kernel hands a FUSE file system at most this much per request


@dataclass(frozen=True)
class DiskModel:
    """The latency model of one file's disk (see the module doc)."""

    settle_ms: float = 1.0
    stroke_ms: float = 6.0
    bandwidth_mib: float = 200.0

    def seek_ms(self, distance: int, span: int) -> float:
        if distance == 0:
            return 0.0
        return self.settle_ms + self.stroke_ms * math.sqrt(min(1.0, distance / max(span, 1)))

    def transfer_ms(self, length: int) -> float:
        return 1000.0 * length / (self.bandwidth_mib * 2**20)

    def expected_access_ms(self, size: int, pattern: str) -> float:
        """The mean access time of an fio pass at request `size` (no FUSE or fio overhead): a
        random request seeks over the distance between two uniform positions, whose square
        root has mean 8/15 of the span's."""
        transfer = self.transfer_ms(size)
        if pattern.startswith("rand"):
            return transfer + self.settle_ms + self.stroke_ms * 8 / 15
        return transfer


@dataclass
class _File:
    data: bytearray = field(default_factory=bytearray)
    head: int = 0
    busy_until: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    ctime: float = field(default_factory=time.time)


def _serve(file: _File, model: DiskModel, offset: int, length: int) -> None:
    """Wait as long as the disk would: queue behind earlier requests, seek, transfer."""
    with file.lock:
        span = max(len(file.data), offset + length)
        service = model.seek_ms(abs(offset - file.head), span) + model.transfer_ms(length)
        start = max(time.monotonic(), file.busy_until)
        file.busy_until = start + service / 1000.0
        file.head = offset + length
        done = file.busy_until
    delay = done - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def make_operations(model: DiskModel) -> Any:
    """The FUSE operations of a flat, in-memory file system whose files are disks."""
    from fuse import FuseOSError, Operations

    class SimDisk(Operations):  # type: ignore[misc]
        def __init__(self) -> None:
            self.files: dict[str, _File] = {}
            self.table_lock = threading.Lock()  # not `lock`: that is FUSE's flock operation

        def _file(self, path: str) -> _File:
            try:
                return self.files[path]
            except KeyError:
                raise FuseOSError(errno.ENOENT) from None

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            now = time.time()
            if path == "/":
                return {
                    "st_mode": stat.S_IFDIR | 0o755,
                    "st_nlink": 2,
                    "st_mtime": now,
                    "st_atime": now,
                    "st_ctime": now,
                }
            file = self._file(path)
            size = len(file.data)
            return {
                "st_mode": stat.S_IFREG | 0o644,
                "st_nlink": 1,
                "st_size": size,
                "st_blocks": (size + 511) // 512,
                "st_mtime": now,
                "st_atime": now,
                "st_ctime": file.ctime,
                "st_blksize": 4096,
            }

        def readdir(self, path: str, fh: int) -> list[str]:
            with self.table_lock:
                names = [name.lstrip("/") for name in self.files]
            return [".", "..", *names]

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            if path.count("/") > 1:
                raise FuseOSError(errno.EPERM)
            with self.table_lock:
                self.files.setdefault(path, _File())
            return 0

        def open(self, path: str, flags: int) -> int:
            self._file(path)
            return 0

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            file = self._file(path)
            with file.lock:
                del file.data[length:]
                file.data.extend(bytes(length - len(file.data)))

        def unlink(self, path: str) -> None:
            with self.table_lock:
                self._file(path)
                del self.files[path]

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            file = self._file(path)
            length = max(0, min(size, len(file.data) - offset))
            _serve(file, model, offset, length)
            return bytes(file.data[offset : offset + length])

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            file = self._file(path)
            _serve(file, model, offset, len(data))
            with file.lock:
                end = offset + len(data)
                if end > len(file.data):
                    file.data.extend(bytes(end - len(file.data)))
                file.data[offset:end] = data
            return len(data)

        def statfs(self, path: str) -> dict[str, int]:
            blocks = 1 << 22  # 16 GiB of 4 KiB blocks: memory is the real limit
            with self.table_lock:
                used = sum(len(f.data) for f in self.files.values()) // 4096
            return {
                "f_bsize": 4096,
                "f_frsize": 4096,
                "f_blocks": blocks,
                "f_bfree": blocks - used,
                "f_bavail": blocks - used,
                "f_namemax": 255,
            }

        def chmod(self, path: str, mode: int) -> int:
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            return 0

        def utimens(self, path: str, times: Any = None) -> int:
            return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def release(self, path: str, fh: int) -> int:
            return 0

    return SimDisk()


def is_mounted(directory: Path) -> bool:
    target = str(directory.resolve())
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


@contextlib.contextmanager
def mounted(directory: Path, model: DiskModel = DiskModel(), wait: float = 15.0) -> Iterator[Path]:
    """The simulated disk mounted on `directory` (an empty folder) for the block; unmounted
    and its process gone afterwards, whatever happened inside."""
    if is_mounted(directory):
        raise TargetError(f"{directory} is already a mount point")
    argv = [sys.executable, "-m", "stortune.profile.simdisk", str(directory)]
    argv += ["--settle-ms", str(model.settle_ms), "--stroke-ms", str(model.stroke_ms)]
    argv += ["--bandwidth-mib", str(model.bandwidth_mib)]
    # its messages go to a file: a pipe nobody reads while the disk serves would fill and
    # block the file system, and every process waiting on it
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, text=True)
        try:
            _wait_for_mount(directory, process, log, wait)
            yield directory
        finally:
            if is_mounted(directory) and subprocess.run(["umount", str(directory)]).returncode:
                subprocess.run(["umount", "--lazy", str(directory)], check=False)
            _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM first (libfuse unmounts on it), SIGKILL only when that is not heard."""
    for signal_process in (process.terminate, process.kill):
        if process.poll() is not None:
            return
        signal_process()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue


def _wait_for_mount(directory: Path, process: subprocess.Popen[str], log: Any, wait: float) -> None:
    deadline = time.monotonic() + wait
    while not is_mounted(directory):
        if process.poll() is not None or time.monotonic() > deadline:
            error = "did not mount in time" if process.poll() is None else "exited"
            log.seek(0)
            last = log.read().strip().splitlines()[-1:]
            raise TargetError(f"the simulated disk {error}: {' '.join(last)}".rstrip(": "))
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mountpoint")
    parser.add_argument("--settle-ms", type=float, default=DiskModel.settle_ms)
    parser.add_argument("--stroke-ms", type=float, default=DiskModel.stroke_ms)
    parser.add_argument("--bandwidth-mib", type=float, default=DiskModel.bandwidth_mib)
    args = parser.parse_args(argv)
    if not os.path.isdir(args.mountpoint):
        print(f"simdisk: {args.mountpoint} is not a directory", file=sys.stderr)
        return 2
    try:
        from fuse import FUSE
    except (ImportError, OSError) as exc:  # fusepy missing, or libfuse.so.2 not installed
        print(f"simdisk: FUSE is not available here: {exc}", file=sys.stderr)
        return 2
    model = DiskModel(args.settle_ms, args.stroke_ms, args.bandwidth_mib)
    FUSE(
        make_operations(model),
        args.mountpoint,
        foreground=True,
        direct_io=True,
        fsname="stortune-simdisk",
        max_read=FUSE_CHUNK,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
