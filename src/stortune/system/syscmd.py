"""Running system tools (losetup, mkfs, mount) with argv lists and one-line errors.

No shell is ever involved: a parameter value is one argv item, whatever it contains. A tool that
fails becomes a TargetError naming what was being done and the tool's most telling line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from typing import Any

from stortune.errors import TargetError

# Root's tools live in the sbin directories, which a user's PATH may lack.
_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL to a process started in its own session and everything it started, if it is
    still there (a benchmark client or ceph-fuse: no daemon whose data needs a clean stop)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def which(tool: str) -> str | None:
    """The path of a system tool, looking in the sbin directories too."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    return shutil.which(tool, path=path)


def run(argv: Sequence[str], what: str, timeout: float = 300.0) -> str:
    """Run `argv`; return its stdout, or raise TargetError("WHAT: TOOL: LINE")."""
    tool = which(argv[0])
    if tool is None:
        raise TargetError(f"{what}: {argv[0]} is not installed (see scripts/install-system.sh)")
    try:
        proc = subprocess.run(
            [tool, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise TargetError(f"{what}: {argv[0]} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        raise TargetError(f"{what}: {argv[0]} failed: {last_line(proc.stderr, proc.stdout)}")
    return proc.stdout


def last_line(*texts: str) -> str:
    """The last non-empty line of the first text that has one (a tool's verdict)."""
    for text in texts:
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if lines:
            return lines[-1][:300]
    return "(no message)"
