"""Access-time measurements with fio: where they run (`TargetSpec`) and one run (`run_task`).

A run reads or writes a fixed-size file (or the first bytes of a scratch device) once with one
request size, O_DIRECT, synchronous I/O, one request in flight: what IOzone ``-I`` did for
SeRRa; but it stops after `max_requests` requests (fio's ``number_ios``), so that small
requests over a large file do not dominate a profile's time once their mean is settled (on a
disk that seeks 8 ms, 64 MiB of random 8 KiB requests take 65 s; 256 of them take 2 s). The
access time is fio's mean request latency; the sequential-to-random throughput ratio of a size
is then the random access time over the sequential one.

`run_task` is also what MPI workers execute: it takes only picklable values, prepares its file
the first time a process sees a target (each process, hence each node, uses its own file; a
device is checked by `devguard` on every node before anything is written to it), and reports
failures as values, so the master decides what to do.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from stortune.errors import StortuneError, TargetError
from stortune.profile.design import Task
from stortune.system import devguard
from stortune.workloads.fio import FioWorkload

FILE_PREFIX = "stortune-profile-"
# A run is killed after this plus 50 ms per request: 64 MiB of 8 KiB requests on a disk that
# takes 10 ms each needs 82 s and is given 530 s.
TIMEOUT_BASE, TIMEOUT_PER_REQUEST = 120.0, 0.05
LAYOUT_BS = 1024 * 1024


@dataclass(frozen=True)
class TargetSpec:
    """Where to measure: ``directory`` (a test file is written there) or ``device`` (a scratch
    block device, overwritten); `file_size` bytes are accessed, in at most `max_requests`
    requests per run (None: the whole file); `run_id` names this profile's files so that they
    can be found and removed."""

    kind: str
    path: str
    file_size: int
    run_id: str
    max_requests: int | None = None

    def describe(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "path": self.path,
            "file_size": self.file_size,
            "max_requests": self.max_requests,
        }


@dataclass(frozen=True)
class TaskResult:
    """One run's outcome; `access_ms` is None when it failed (`error` says why)."""

    task: Task
    access_ms: float | None
    seconds: float
    host: str
    pid: int
    load: float = 0.0
    error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "size": self.task.size,
            "pattern": self.task.pattern,
            "rep": self.task.rep,
            "access_ms": self.access_ms,
            "seconds": round(self.seconds, 4),
            "host": self.host,
            "pid": self.pid,
            "load": self.load,
        }


def check_target(spec: TargetSpec) -> None:
    """Raise TargetError when `spec` cannot be profiled on this node (before writing)."""
    if shutil.which("fio") is None:
        raise TargetError("fio is not installed (Debian: apt-get install fio)")
    if spec.kind == "device":
        dev = devguard.check_scratch_device(spec.path, destroy_data=True)
        capacity = int(Path("/sys/class/block", dev.name, "size").read_text()) * 512
        if capacity < spec.file_size:
            raise TargetError(
                f"{spec.path} holds {capacity >> 20} MiB, less than the {spec.file_size >> 20} "
                "MiB to access (lower --file-size)"
            )
        return
    directory = Path(spec.path)
    if not directory.is_dir():
        raise TargetError(f"{spec.path} is not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise TargetError(f"cannot write to {spec.path}")
    stat = os.statvfs(directory)
    free = stat.f_bavail * stat.f_frsize
    if free < spec.file_size * 1.1:
        raise TargetError(
            f"{spec.path} has {free >> 20} MiB free; the test file needs "
            f"{spec.file_size >> 20} MiB and some room (lower --file-size)"
        )


_prepared: dict[TargetSpec, Path] = {}


def _prepare(spec: TargetSpec) -> Path:
    """The file (or device) this process accesses, written once in full so that reads hit
    real data and writes overwrite allocated blocks (no holes, no unwritten extents)."""
    if spec in _prepared:
        return _prepared[spec]
    check_target(spec)
    if spec.kind == "device":
        path = Path(os.path.realpath(spec.path))
    else:
        name = f"{FILE_PREFIX}{spec.run_id}-{socket.gethostname()}-{os.getpid()}.dat"
        path = Path(spec.path, name)
        atexit.register(_remove, path)
    done = _fio(path, "write", LAYOUT_BS, spec.file_size, None, "layout")
    if done.error:
        if spec.kind == "directory":
            _remove(path)
        raise TargetError(f"cannot lay out {path}: {done.error}{_direct_hint(done.error)}")
    _prepared[spec] = path
    return path


def run_task(spec: TargetSpec, task: Task) -> TaskResult:
    """Measure `task` on `spec` (in this process and node); never raises for a failed run."""
    host, pid = socket.gethostname(), os.getpid()
    started = time.monotonic()
    try:
        path = _prepare(spec)
    except StortuneError as exc:
        return TaskResult(task, None, time.monotonic() - started, host, pid, error=str(exc))
    done = _fio(path, task.pattern, task.size, spec.file_size, spec.max_requests, "profile")
    return TaskResult(
        task, done.access_ms, time.monotonic() - started, host, pid, done.load, done.error
    )


def remove_files(spec: TargetSpec) -> None:
    """Remove this profile's test files on this node (those of local workers too)."""
    _prepared.pop(spec, None)
    if spec.kind == "directory":
        for path in Path(spec.path).glob(f"{FILE_PREFIX}{spec.run_id}-*.dat"):
            _remove(path)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@dataclass(frozen=True)
class _Run:
    access_ms: float | None
    load: float
    error: str | None


def _fio(
    path: Path, pattern: str, size: int, file_size: int, max_requests: int | None, name: str
) -> _Run:
    """One fio pass over `file_size` bytes of `path` with `size`-byte requests, stopped after
    `max_requests` of them when given."""
    requests = min(max_requests, file_size // size) if max_requests else file_size // size
    text = "\n".join(
        [
            f"[{name}]",
            "directory=${DIR}",
            f"filename={path.name}",
            f"rw={pattern}",
            f"bs={size}",
            "size=${SIZE}",
            "ioengine=psync",
            "iodepth=1",
            "direct=1",
            "fallocate=none",
            "randrepeat=0",
            *([f"number_ios={max_requests}"] if max_requests else []),
            "",
        ]
    )
    job = FioWorkload(name, size=file_size, text=text)
    timeout = TIMEOUT_BASE + TIMEOUT_PER_REQUEST * requests
    result = job.measure(path.parent, timeout=timeout)
    load = float(result.metrics.get("sys.loadavg_start", 0.0))
    if not result.ok:
        return _Run(None, load, result.error or result.status)
    direction = "write" if "write" in pattern else "read"
    access = result.metrics.get(f"{direction}.lat_mean_ms")
    if not access or access <= 0:
        return _Run(None, load, f"fio reported no {direction} requests")
    return _Run(float(access), load, None)


def _direct_hint(error: str) -> str:
    if "Invalid argument" in error or "EINVAL" in error:
        return " (does the file system support O_DIRECT? tmpfs does not)"
    return ""
