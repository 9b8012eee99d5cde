"""A journal of what a target created or changed, so that all of it can be undone.

Every image, loop device, mount, cgroup and sysfs/sysctl change is written (and fsync'd) to a
journal file in the state directory *before* it is made (a benchmark's server as soon as it is
started: its pid names it). Undoing the entries in reverse order is the target's teardown;
undoing only the settings is its clean-up after a failed apply; and a journal whose owner died
(its flock is free) is undone by the next target that starts, so that a SIGKILL or power cut
never leaves vm.dirty_ratio, a loop device or a database server behind.

A machine lock in the same directory lets one target at a time change machine-wide settings and
measure (MEASURING.md: anything else doing I/O spoils a run).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import logging
import os
from pathlib import Path
from typing import Any

from stortune.errors import StortuneError, TargetError
from stortune.system import cgroup, loopdev, mounts, sysconf
from stortune.system.lock import exclusive_flock
from stortune.system.processes import stop_process

_counter = itertools.count()
log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = "/var/lib/stortune"


def default_state_dir() -> str:
    """Where images, mount points, clusters and journals live: $STORTUNE_STATE_DIR, else
    /var/lib/stortune (a test, or a benchmark beside another, may have its own)."""
    return os.environ.get("STORTUNE_STATE_DIR") or DEFAULT_STATE_DIR


class Journal:
    """An open journal, locked by this process for as long as it lives."""

    def __init__(self, path: Path, fd: int, entries: list[dict[str, Any]] | None = None) -> None:
        self.path = path
        self._fd = fd
        self.entries: list[dict[str, Any]] = entries or []

    @classmethod
    def create(cls, state_dir: Path) -> Journal:
        stem = f"journal-{os.getpid()}-{next(_counter)}"
        temporary = state_dir / f".{stem}.new"
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = state_dir / f"{stem}.jsonl"
        os.rename(temporary, path)  # visible to recovery only once locked
        return cls(path, fd)

    def record(self, op: str, **fields: Any) -> None:
        """Remember a change before making it."""
        entry = {"op": op, **fields}
        os.write(self._fd, (json.dumps(entry) + "\n").encode())
        os.fsync(self._fd)
        self.entries.append(entry)

    def undo(self, ops: set[str] | None = None) -> list[str]:
        """Undo the entries (of `ops`, or all) newest first; return what could not be undone.
        Undone entries leave the journal; failed ones stay for the next try."""
        problems, kept = [], []
        for entry in _undo_order(self.entries):
            if ops is not None and entry["op"] not in ops:
                kept.append(entry)
                continue
            try:
                _undo(entry)
            except (StortuneError, OSError) as exc:
                problems.append(str(exc))
                kept.append(entry)
        self.entries = list(reversed(kept))
        self._rewrite()
        return problems

    def _rewrite(self) -> None:
        os.ftruncate(self._fd, 0)
        os.write(self._fd, "".join(json.dumps(e) + "\n" for e in self.entries).encode())
        os.fsync(self._fd)

    def close(self) -> None:
        """Delete the journal when everything was undone, else leave it for recovery."""
        if self._fd < 0:
            return
        if not self.entries:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        os.close(self._fd)
        self._fd = -1


def _undo_order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Newest first, except that a queue's scheduler goes back before the queue's other
    settings: their originals were taken under it, and some (nr_requests) only fit it."""
    newest = list(reversed(entries))

    def rank(item: tuple[int, dict[str, Any]]) -> tuple[int, int]:
        index, entry = item
        path = Path(str(entry.get("path", "")))
        queue = entry["op"] == "setting" and path.parent.name in ("queue", "iosched")
        if not queue:
            return (index, 0)
        first = min(
            i
            for i, e in enumerate(newest)
            if e["op"] == "setting" and _queue_of(e) == _queue_of(entry)
        )
        return (first, 0 if path.name == "scheduler" else 1)

    return [e for _, e in sorted(enumerate(newest), key=rank)]


def _queue_of(entry: dict[str, Any]) -> str:
    path = Path(str(entry.get("path", "")))
    queue = path.parent.parent if path.parent.name == "iosched" else path.parent
    return str(queue) if queue.name == "queue" else str(path)


def _undo(entry: dict[str, Any]) -> None:
    op = entry["op"]
    if op == "setting":
        image = entry.get("image")
        if image is not None:  # a loop device's setting: only while it is ours or free
            backing = loopdev.backing_file(entry["device"])
            if backing is not None and os.path.realpath(backing) != os.path.realpath(image):
                return
        path = Path(entry["path"])
        if path.parent.name == "iosched" and not path.exists():
            return  # a scheduler's tunable: switching the scheduler discarded it already
        if sysconf.read(path) != entry["old"]:
            sysconf.write(path, entry["old"])
    elif op == "mount":
        mounts.umount(entry["mount_point"])
    elif op == "loop":
        for device in loopdev.devices_of(entry["image"]):
            loopdev.detach(device, entry["image"])
    elif op in ("image", "file"):  # a loop image, or a file a target made (a log, a socket)
        if not entry.get("keep"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry["path"])
    elif op == "dir":
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(entry["path"])
    elif op == "cgroup":
        cgroup.remove(entry["path"])
    elif op == "server":  # a benchmark's server (PostgreSQL): stopped, its own way first
        signals = tuple(int(s) for s in entry.get("signals", ()))
        if not stop_process(int(entry["pid"]), entry.get("started"), signals, 10.0):
            raise TargetError(f"cannot stop the server of pid {entry['pid']}")
    else:
        raise TargetError(f"journal entry of unknown kind {op!r}")


def recover(state_dir: Path) -> list[str]:
    """Undo the journals of targets that died; return what could not be undone."""
    problems = []
    for path in sorted(state_dir.glob("journal-*.jsonl")):
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # its owner is alive
            continue
        entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        journal = Journal(path, fd, entries)
        problems += [f"{path.name}: {p}" for p in journal.undo()]
        journal.close()
    return problems


class StateFolder:
    """A target's hold on its state folder, for as long as it is set up: the folder's lock,
    the undoing of what dead targets left there, and a journal of its own changes."""

    def __init__(self, path: Path, lock: MachineLock | None = None) -> None:
        self.path = path
        self._lock = lock or MachineLock(path)  # a target that holds the lock already shares it
        self.journal: Journal | None = None

    def open(self) -> Journal:
        """Lock the folder, undo crashed runs' changes, start a journal (TargetError when the
        crashed changes cannot be undone: nothing is done over them)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            problems = recover(self.path)
            if problems:
                raise TargetError(f"cannot undo a crashed run's changes: {'; '.join(problems)}")
            self.journal = Journal.create(self.path)
        except BaseException:
            self._lock.release()
            raise
        return self.journal

    def close(self) -> None:
        """Undo every change journaled, release the folder; TargetError naming what could not
        be undone (kept in the journal for the next target to retry)."""
        journal, self.journal = self.journal, None
        problems: list[str] = []
        if journal is not None:
            log.info("undoing %d change(s) of %s", len(journal.entries), journal.path)
            problems = journal.undo()
            journal.close()
        self._lock.release()
        if problems and journal is not None:
            raise TargetError(
                f"teardown could not undo: {'; '.join(problems)} (kept in {journal.path}; "
                "the next target retries)"
            )


class MachineLock:
    """An exclusive flock on STATE_DIR/localfs.lock, released when the process ends: one
    process at a time owns the target's state folder (its journal, images and mounts)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "localfs.lock"
        self._fd = -1

    def acquire(self) -> None:
        if self._fd >= 0:
            return
        self._fd = exclusive_flock(
            self.path,
            str(os.getpid()),
            "another stortune target (pid {holder}) holds "
            + f"{self.path}; one benchmark at a time",
        )

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
