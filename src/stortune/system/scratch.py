"""Scratch folders in the temporary folder, each named after the process that owns it.

A process killed with SIGKILL removes nothing, so every scratch folder it had (a command
target's workdir, a fio run's job file and report, the raw-device probe's report) would stay in
the temporary folder for good. A scratch folder's name therefore says who made it:
``stortune-KIND-NS-PID-START-xxxxxxxx``, with the pid namespace, the pid and the process's start
time (clock ticks after boot, /proc/PID/stat). The first scratch folder a process makes removes
those whose owner is gone: no process of that pid, a zombie, or a process started at another
time (the pid was reused). Folders of a live process, of another pid namespace (a container
sharing the folder, whose pids this one cannot see), of another user, of an owner this process
cannot tell about, or named otherwise (an older release's) are left alone.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

from stortune.system.processes import process_stat


class ScratchKind(StrEnum):
    """What a scratch folder holds."""

    COMMAND = "cmd"  # a command target's {workdir}, for a whole campaign
    FIO = "fio"  # a fio job file and its report, for one run
    RAW = "raw"  # the raw-device bandwidth probe's report
    PGBENCH = "pg"  # pgbench's per-transaction log and the server's log, for one run
    DBBENCH = "rocks"  # db_bench's output, for one run


_NAME = re.compile(
    rf"stortune-(?:{'|'.join(k.value for k in ScratchKind)})-(\d+)-(\d+)-(\d+)-[A-Za-z0-9_]+"
)
_swept: set[str] = set()  # temporary folders this process has cleaned already


@contextmanager
def scratch_folder(kind: ScratchKind) -> Iterator[Path]:
    """A new scratch folder, removed with what it holds when the block ends."""
    path = make_scratch_folder(kind)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_scratch_folder(kind: ScratchKind) -> Path:
    """A new scratch folder named after this process, which removes it; the first one a
    process makes removes first the folders killed processes left (module doc)."""
    root = tempfile.gettempdir()
    if root not in _swept:
        _swept.add(root)
        remove_stale(Path(root))
    ns, pid, start = _identity(os.getpid())
    return Path(tempfile.mkdtemp(prefix=f"stortune-{kind}-{ns}-{pid}-{start}-", dir=root))


def remove_stale(root: Path) -> list[Path]:
    """Remove the scratch folders in `root` whose owner is gone (module doc); the ones removed."""
    removed = []
    uid = os.geteuid()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    for entry in entries:
        found = _NAME.fullmatch(entry.name)
        if found is None:
            continue
        try:
            mine = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not mine or mine.st_uid != uid:
            continue
        ns, pid, start = (int(group) for group in found.groups())
        if _owner_gone(ns, pid, start):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed


def _owner_gone(ns: int, pid: int, start: int) -> bool:
    """Whether the process that named a folder (ns, pid, start) has certainly ended."""
    own_ns = _identity(os.getpid())[0]
    if not (own_ns and ns == own_ns and start):
        return False  # another pid namespace's pid, or no /proc to tell by
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # another user's process of that pid: its start time cannot be read
    stat = process_stat(pid)
    if stat is None:
        return False
    state, started = stat
    return state == "Z" or started != start


@functools.cache
def _identity(pid: int) -> tuple[int, int, int]:
    """This process's pid namespace (0: unknown), pid and start time (keyed by the pid, so a
    forked child names its folders after itself)."""
    try:
        ns = int(re.sub(r"\D", "", os.readlink("/proc/self/ns/pid")) or 0)
    except OSError:
        ns = 0
    stat = process_stat(pid)
    return ns, pid, stat[1] if stat else 0
