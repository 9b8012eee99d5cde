"""What /proc says about a process, for telling a live owner of a lease or a scratch folder
from a dead one."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def process_stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and start time in clock ticks after boot (None: unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """CPU time a process has used so far, user and system (None: unreadable or gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    """Whether a process of this pid space runs (a zombie, killed but not reaped, does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it lives
    stat = process_stat(pid)
    return stat is None or stat[0] != "Z"


def started_at(pid: int) -> int | None:
    """A process's start time in clock ticks after boot: with its pid, what names it across
    pid reuse (None: no such process)."""
    stat = process_stat(pid)
    return stat[1] if stat is not None else None


def stop_process(pid: int, started: int | None, signals: tuple[int, ...], wait: float) -> bool:
    """Send `signals` in turn to the process `pid` if it is still the one that started at
    `started`, waiting up to `wait` seconds after each for it to end; True once it has."""
    for sig in (*signals, signal.SIGKILL):
        if not pid_alive(pid) or (started is not None and started_at(pid) != started):
            return True
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return True
            time.sleep(0.05)
    return not pid_alive(pid)


def descendants(root: int) -> set[int]:
    """The processes below `root` (children, theirs, ...), from /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int(entry.joinpath("stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    out: set[int] = set()
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in out:
                out.add(child)
                pending.append(child)
    return out


def io_counters(pid: int) -> dict[str, int]:
    """A process's /proc/PID/io counters (rchar, wchar, read_bytes, write_bytes, ...);
    OSError or ValueError when it ended or the file is unreadable."""
    text = Path(f"/proc/{pid}/io").read_text()
    return {key: int(value) for key, value in (line.split(": ", 1) for line in text.splitlines())}
