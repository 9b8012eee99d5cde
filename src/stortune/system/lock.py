"""One stortune benchmark at a time per machine.

Anything else doing I/O spoils a run (MEASURING.md), and two stortune campaigns measuring at once
spoil each other. Every loop that measures a real system holds an exclusive `flock` on
``benchmark.lock`` in the lock folder (``$STORTUNE_LOCK_DIR``, else /run/lock/stortune as root,
else ~/.cache/stortune). The kernel drops the lock when the process dies, so a crash never
leaves it stuck; the file names the holder for the error message.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path
from types import TracebackType

from stortune.errors import BusyError, StortuneError
from stortune.system.reentry import Held


def lock_dir() -> Path:
    """$STORTUNE_LOCK_DIR; as root /run/lock/stortune; else ~/.cache/stortune, or, when there
    is no writable home, a folder of this user's in the temporary folder."""
    if os.environ.get("STORTUNE_LOCK_DIR"):
        return Path(os.environ["STORTUNE_LOCK_DIR"])
    if os.geteuid() == 0:
        return Path("/run/lock/stortune")
    candidates = []
    with contextlib.suppress(RuntimeError, KeyError):  # no HOME and no passwd entry
        candidates.append(Path.home() / ".cache" / "stortune")
    candidates.append(Path(tempfile.gettempdir()) / f"stortune-{os.geteuid()}")
    for candidate in candidates:
        try:
            candidate.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(candidate, os.W_OK):
            return candidate
    raise StortuneError("no writable folder for the benchmark lock: set STORTUNE_LOCK_DIR to one")


def exclusive_flock(path: Path, holder: str, busy: str) -> int:
    """Open `path` and take an exclusive flock without waiting; write `holder` into it.
    When someone else holds it, raise BusyError: `busy` with ``{holder}`` filled by what the
    holder wrote. Returns the open descriptor (closing it releases the lock)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StortuneError(
            f"cannot open the lock {path}: {exc.strerror} (STORTUNE_LOCK_DIR sets its folder)"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        other = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise BusyError(busy.format(holder=other)) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{holder}\n".encode(), 0)
    return fd


_held: Held[Path, int] = Held()  # lock path -> the fd this process holds it by


class BenchmarkLock:
    """Context manager holding the machine's benchmark lock; `what` names the holder.

    Re-entrant within a process: a loop and the target it drives may both take it. A
    `node` of a cluster holds its own (``benchmark-NODE.lock``): each node measures its own
    device, and several test nodes may share one machine when a user tries a cluster out."""

    def __init__(self, what: str, node: str | None = None) -> None:
        self.what = what
        self.node = node
        self.path = lock_dir() / (f"benchmark-{node}.lock" if node else "benchmark.lock")

    def __enter__(self) -> BenchmarkLock:
        busy = (
            "another stortune benchmark is measuring on this machine ({holder}); one at a "
            f"time, since they would spoil each other's runs (lock: {self.path})"
        )
        if self.node:
            busy = (
                f"node {self.node} is running already ({{holder}}): one process per node; give "
                f"this one another name (lock: {self.path})"
            )
        _held.take(
            self.path,
            lambda: exclusive_flock(self.path, f"pid {os.getpid()}, {self.what}", busy),
        )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        fd = _held.release(self.path)
        if fd is not None:
            os.ftruncate(fd, 0)
            os.close(fd)
