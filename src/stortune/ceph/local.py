"""A Ceph mini-cluster in one directory: one monitor, one manager, BlueStore OSDs on files, and
a metadata server when CephFS is wanted (`mds`).

Everything lives under the root directory (ceph.conf, monmap, mon/mgr/osd data, run dir with
admin sockets, logs; the sockets move to a short folder in the temporary folder when the root is
too deep for a socket's path) and listens on 127.0.0.1 only, the monitor on a free port. Daemons
run in the foreground of their own session (no systemd here), started by this module and stopped
by the pid it recorded in ``cluster.json``, with SIGTERM (SIGKILL leaves BlueStore to recover on
the next start). A process whose command line does not name this cluster's ceph.conf is never
signalled, whatever pid was recorded.

The owner holds an flock on ``owner.lock``; a cluster whose owner died (and which was not made
to outlive its owner, ``persistent``) is stopped and removed by `recover_stale`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from stortune.ceph.client import CephClient, short_socket_folder
from stortune.ceph.conf import plumbing_conf
from stortune.errors import TargetError
from stortune.system import syscmd
from stortune.units import parse_size

log = logging.getLogger(__name__)

BINARIES = {"mon": "ceph-mon", "mgr": "ceph-mgr", "osd": "ceph-osd", "mds": "ceph-mds"}
MDS = "mds.a"
STATE_FILE = "cluster.json"
_STOP_SECONDS = 60.0
_ABORT_REASON = re.compile(
    r"FAILED ceph_assert|ceph_abort_msg|what\(\):|terminate called|Assertion .* failed"
)


def _is_error_line(line: str) -> bool:
    return "ERROR" in line or " -1 " in line or "error" in line.lower()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# BlueStore's RocksDB takes room of its own: deferred small writes pass through its WAL
# (a tuned deferred throttle of 512 MiB asked BlueFS for 281 MiB at once), and compaction
# swings it between 0.6 and 1.5 GiB under rewritten files, which aborted BlueFS on 2 GiB
# OSDs. The image file is sparse: 8 GiB costs what is written.
DEFAULT_OSD_SIZE = "8g"


class LocalCluster:
    """A mini-cluster of `osds` OSDs, each on a `block_size`-byte file, in `root`."""

    def __init__(
        self,
        root: Path,
        osds: int = 2,
        block_size: int = parse_size(DEFAULT_OSD_SIZE),
        persistent: bool = False,
        mds: bool = False,
    ) -> None:
        if osds < 1:
            raise TargetError(f"a local cluster needs at least 1 OSD, not {osds}")
        self.root = Path(root).absolute()  # daemons run in it: relative paths would break
        self.osds = int(osds)
        self.block_size = int(block_size)
        self.persistent = bool(persistent)
        self.mds = bool(mds)
        self.conf = self.root / "ceph.conf"
        self.client = CephClient(self.conf)
        self.pids: dict[str, int] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._owner = -1

    @property
    def daemons(self) -> list[str]:
        osds = [f"osd.{i}" for i in range(self.osds)]
        return ["mon.a", "mgr.x", *osds, *([MDS] if self.mds else [])]

    @property
    def sockets(self) -> Path:
        """The daemons' admin sockets' folder: run/ in the root, or a short one in the temporary
        folder when a socket's path in run/ would be too long to bind (a deep root): a daemon
        given such a path makes no socket and says so only in its log."""
        return short_socket_folder(self.root / "run")

    def asok(self, name: str) -> Path:
        return self.sockets / f"ceph-{name}.asok"

    # ---- creation -------------------------------------------------------------------------
    def create(
        self, settings: Mapping[str, str], sections: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        """Make and start a fresh cluster whose config database holds `settings` before any
        OSD is made (options that only take effect at mkfs need that), each option in the
        `sections` named for it (default: global)."""
        if self.root.exists() and any(p.name != "owner.lock" for p in self.root.iterdir()):
            raise TargetError(f"{self.root} is not empty: refusing to make a cluster there")
        for sub in ("mon/a", "mgr/x", "mds/a", "run", "log", "crash"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.sockets.mkdir(parents=True, exist_ok=True)
        self.lock_owner()
        fsid = str(uuid.uuid4())
        address = f"127.0.0.1:{free_port()}"
        log.info(
            "creating a Ceph cluster of %d OSD(s) in %s, monitor on %s",
            self.osds,
            self.root,
            address,
        )
        self.conf.write_text(plumbing_conf(self.root, fsid, address, self.block_size, self.sockets))
        self._save()
        monmap = self.root / "monmap"
        argv = ["monmaptool", "--create", "--fsid", fsid, "--addv", "a", f"[v2:{address}]"]
        syscmd.run([*argv, str(monmap)], "making the monmap")
        syscmd.run(
            ["ceph-mon", "-c", str(self.conf), "-i", "a", "--mkfs", "--monmap", str(monmap)],
            "making the monitor",
        )
        self.start(["mon.a"])
        by_section: dict[str, dict[str, str]] = {}
        for name, value in settings.items():
            for section in (sections or {}).get(name, ("global",)):
                by_section.setdefault(section, {})[name] = value
        for section, values in by_section.items():
            self.client.config_set(values, who=section)
        self.start(["mgr.x"])
        self._make_osds()
        if self.mds:
            self.start([MDS])  # a standby until a file system is made

    def _make_osds(self) -> None:
        uuids = [str(uuid.uuid4()) for _ in range(self.osds)]
        answers = self.client.mon_commands(
            [{"prefix": "osd new", "uuid": u, "format": "json"} for u in uuids]
        )
        ids = []
        for status, output, message in answers:
            if status != 0:
                raise TargetError(f"ceph osd new: {message.strip() or status}")
            data = json.loads(output)
            ids.append(int(data["osdid"] if isinstance(data, dict) else data))
        if ids != list(range(self.osds)):
            raise TargetError(f"ceph osd new gave ids {ids}, expected 0..{self.osds - 1}")
        mkfs = {}
        for osd, osd_uuid in zip(ids, uuids, strict=True):
            (self.root / "osd" / str(osd)).mkdir(parents=True, exist_ok=True)
            argv = ["ceph-osd", "-c", str(self.conf), "-i", str(osd), "--mkfs"]
            mkfs[osd] = self._spawn(f"osd.{osd}.mkfs", [*argv, "--osd-uuid", osd_uuid])
        for osd, proc in mkfs.items():  # in parallel: each mkfs takes seconds
            if proc.wait(timeout=300) != 0:
                raise TargetError(f"making osd.{osd} failed: {self.log_line(f'osd.{osd}.mkfs')}")
        self.start([f"osd.{i}" for i in ids])

    # ---- daemons --------------------------------------------------------------------------
    def _spawn(self, label: str, argv: list[str]) -> subprocess.Popen[bytes]:
        tool = syscmd.which(argv[0])
        if tool is None:
            raise TargetError(f"{argv[0]} is not installed (see scripts/install-system.sh)")
        with open(self.root / "log" / f"{label}.out", "ab") as out:
            return subprocess.Popen(
                [tool, *argv[1:]],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,  # a Ctrl-C meant for stortune does not reach them
            )

    def start(self, names: Iterable[str]) -> None:
        self.sockets.mkdir(parents=True, exist_ok=True)  # a temporary one may have been cleared
        for name in names:
            kind, ident = name.split(".", 1)
            proc = self._spawn(name, [BINARIES[kind], "-c", str(self.conf), "-i", ident, "-f"])
            self._procs[name] = proc
            self.pids[name] = proc.pid
        self._save()

    def start_process(self, name: str, argv: list[str]) -> None:
        """A helper process of the cluster (a metrics exporter), stopped and removed with it;
        its command line must name a path under the cluster's directory (so that a recorded
        pid is only ever signalled while it is still this process)."""
        if not any(str(self.root) in arg for arg in argv):
            raise TargetError(f"{name}: its command line must name {self.root}")
        proc = self._spawn(name, argv)
        self._procs[name] = proc
        self.pids[name] = proc.pid
        self._save()

    def running(self, name: str) -> bool:
        proc = self._procs.get(name)
        if proc is not None:
            return proc.poll() is None
        pid = self.pids.get(name)
        return pid is not None and _is_ours(pid, self.root)

    def dead(self) -> list[str]:
        """Ceph daemons that were started and have exited (a helper process is not one)."""
        daemons = set(self.daemons)
        return [name for name in self.pids if name in daemons and not self.running(name)]

    def check_alive(self) -> None:
        """Raise naming a daemon that exited and the last line it logged."""
        for name in self.dead():
            raise TargetError(f"{name} exited: {self.log_line(name)}")

    def log_line(self, name: str) -> str:
        """The most telling line a daemon logged: the assertion or exception that aborted it,
        else its last error, else its last line ("Caught signal (Aborted)" says nothing)."""
        texts = []
        for path in (self.root / "log" / f"{name}.out", self.root / "log" / f"ceph-{name}.log"):
            with contextlib.suppress(OSError):
                texts.append(path.read_text(errors="replace")[-20000:])
        text = _ANSI.sub("", "\n".join(texts))
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        for telling in (_ABORT_REASON.search, _is_error_line):
            for line in reversed(lines):
                if telling(line):
                    return line[-300:]
        return lines[-1][-300:] if lines else "(nothing logged)"

    def stop(self, names: Iterable[str]) -> list[str]:
        """SIGTERM the daemons and wait for them; return those that needed SIGKILL. The MDS
        goes first, alone: it flushes its journal to the OSDs on the way down, and waits a
        minute for OSDs that stopped beside it."""
        names = [n for n in names if n in self.pids]
        if MDS in names and len(names) > 1:
            return self.stop([MDS]) + self.stop([n for n in names if n != MDS])
        for name in names:
            if self.running(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pids[name], signal.SIGTERM)
        killed = []
        deadline = time.monotonic() + _STOP_SECONDS
        for name in names:
            while self.running(name) and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.running(name):  # last resort: it ignored SIGTERM for a minute
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pids[name], signal.SIGKILL)
                killed.append(name)
                while self.running(name):
                    time.sleep(0.1)
            self.pids.pop(name, None)
            self._procs.pop(name, None)
        self._save()
        return killed

    def restart(self, names: Iterable[str]) -> None:
        names = list(names)
        log.info("restarting %s", ", ".join(names))
        self.stop(names)
        self.start(names)

    # ---- pools ----------------------------------------------------------------------------
    def make_pool(self, pool: str, pg_num: int) -> None:
        self.client.ceph("osd", "pool", "create", pool, str(pg_num), str(pg_num))
        self.client.ceph("osd", "pool", "application", "enable", pool, "rados")

    def delete_pool(self, pool: str) -> None:
        self.client.ceph("osd", "pool", "rm", pool, pool, "--yes-i-really-really-mean-it")

    # ---- ownership and removal ------------------------------------------------------------
    def lock_owner(self) -> None:
        if self._owner >= 0:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "owner.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise TargetError(f"another process owns the cluster in {self.root}") from None
        self._owner = fd

    def release_owner(self) -> None:
        """Let the cluster outlive this object (a persistent one, made by `ceph up`)."""
        if self._owner >= 0:
            os.close(self._owner)
            self._owner = -1

    def destroy(self) -> list[str]:
        """Stop every daemon and remove the directory; return the daemons that needed SIGKILL."""
        log.info("stopping %s and removing %s", ", ".join(self.pids) or "no daemon", self.root)
        if MDS in self.pids and self.running(MDS):  # its journal goes with the directory
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pids[MDS], signal.SIGKILL)
        killed = self.stop(list(self.pids))
        self.release_owner()
        shutil.rmtree(self.root, ignore_errors=True)
        if not self.sockets.is_relative_to(self.root):
            shutil.rmtree(self.sockets, ignore_errors=True)
        return killed

    def _save(self) -> None:
        state = {
            "osds": self.osds,
            "persistent": self.persistent,
            "mds": self.mds,
            "pids": self.pids,
        }
        temporary = self.root / f".{STATE_FILE}.new"
        temporary.write_text(json.dumps(state))
        os.replace(temporary, self.root / STATE_FILE)

    @classmethod
    def attach(cls, root: Path) -> LocalCluster:
        """The cluster recorded in `root` (made by another process)."""
        try:
            state = json.loads((Path(root) / STATE_FILE).read_text())
        except (OSError, ValueError):
            raise TargetError(f"{root} holds no stortune ceph cluster ({STATE_FILE})") from None
        cluster = cls(
            Path(root),
            int(state.get("osds", 1)),
            persistent=state.get("persistent"),
            mds=bool(state.get("mds")),
        )
        cluster.pids = {str(k): int(v) for k, v in (state.get("pids") or {}).items()}
        return cluster


def recover_stale(state_dir: Path) -> list[str]:
    """Stop and remove the clusters under `state_dir` whose owner died (persistent ones stay);
    return what was removed."""
    removed = []
    for root in sorted(Path(state_dir).glob("ceph-*")):
        if not (root / STATE_FILE).exists():
            continue
        try:
            cluster = LocalCluster.attach(root)
        except TargetError:
            continue
        if cluster.persistent:
            continue
        try:
            cluster.lock_owner()
        except TargetError:
            continue  # its owner is alive
        cluster.destroy()
        removed.append(str(root))
    return removed


def _is_ours(pid: int, root: Path) -> bool:
    """Whether `pid` is a live (not zombie) process started with a path under our directory
    (the daemons name its ceph.conf)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    return any(str(root).encode() in arg for arg in cmdline)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
