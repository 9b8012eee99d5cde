"""Starting a benchmark's processes: argv lists, a memory cap, an unprivileged user, no orphans.

Every benchmark program (fio, pgbench, a PostgreSQL server, db_bench) is started through one small
Python launcher rather than a shell, so no value is ever parsed as shell syntax. The launcher
joins the run's cgroup (as root: a memory cap holds for everything the program and its children
do), then drops to an unprivileged user when asked (a PostgreSQL server refuses to run as root),
then asks the kernel to kill it when stortune dies (PR_SET_PDEATHSIG, set after the user change,
which clears it), and execs the program.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from stortune.errors import TargetError
from stortune.system.syscmd import kill_group

# argv: parent pid, cgroup.procs file (or ""), uid (or ""), gid (or ""), the command.
_LAUNCHER = (
    "import ctypes,os,sys\n"
    "sys.argv[2] and open(sys.argv[2], 'w').write(str(os.getpid()))\n"
    "if sys.argv[3]:\n"
    "    os.setgroups([]); os.setgid(int(sys.argv[4])); os.setuid(int(sys.argv[3]))\n"
    "ctypes.CDLL(None).prctl(1, 9)\n"
    "os.getppid() == int(sys.argv[1]) or sys.exit(70)\n"
    "os.execvp(sys.argv[5], sys.argv[5:])\n"
)


@dataclass(frozen=True)
class User:
    """An unprivileged account to run a program as."""

    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def named(cls, name: str) -> User:
        """The account `name`; TargetError when the machine has none."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise TargetError(f"there is no user {name!r} on this machine") from None
        return cls(name, entry.pw_uid, entry.pw_gid, entry.pw_dir)

    def owns(self, path: str | os.PathLike[str]) -> None:
        """Hand `path` (a folder the program works in) to this user."""
        os.chown(path, self.uid, self.gid)


def launch_argv(
    command: Sequence[str], procs: str | os.PathLike[str] = "", user: User | None = None
) -> list[str]:
    """The argv that runs `command` in the cgroup whose ``cgroup.procs`` is `procs` (if any),
    as `user` (if any), killed when this process dies."""
    ids = (str(user.uid), str(user.gid)) if user is not None else ("", "")
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), str(procs), *ids,
            *command]  # fmt: skip


def procs_file(cgroup: str | os.PathLike[str] | None) -> str:
    """The ``cgroup.procs`` file of a run's cgroup folder, "" for none."""
    return os.path.join(cgroup, "cgroup.procs") if cgroup is not None else ""


def run_group(
    argv: Sequence[str], directory: str | os.PathLike[str], timeout: float
) -> subprocess.CompletedProcess[str] | None:
    """Run in `directory` in a new process group; None when `timeout` passed and the whole
    group (the program and anything it forked) was killed."""
    proc = subprocess.Popen(
        argv,
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.communicate()
        return None
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
