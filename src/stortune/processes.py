"""What /proc says about a process, for telling a live owner of a lease or a scratch folder
from a dead one."""

from __future__ import annotations

import os
from pathlib import Path


def process_stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and start time in clock ticks after boot (None: unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return fields[0], int(fields[19])
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
