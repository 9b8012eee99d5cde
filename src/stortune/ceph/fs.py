"""CephFS on a cluster: the file system, its ceph-fuse mount, and directory layouts.

* `make_filesystem`: a metadata and a data pool and ``ceph fs new``; one MDS and no standby
  wanted (a one-host cluster has none to give; the warning would keep it out of HEALTH_OK).
* `FuseMount`: ceph-fuse in the foreground of its own session, started with the client's name
  (so the client options in the config database under that name apply) and its options as argv
  elements (never through a shell); mounted is when the kernel shows the mount point mounted.
  Unmounting is ``umount`` (the journal's undo does the same after a crash); ceph-fuse then ends.
  `FuseMount.abort` kills ceph-fuse instead, when the cluster behind it died mid-run.
* Layouts (Lustre's striping in CephFS): ``ceph.dir.layout`` of a directory, set as one xattr
  so that the order of stripe unit and object size never matters; files made in the directory
  afterwards take it, files already there keep theirs, so a new layout means rewritten files.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from stortune.ceph.client import CephClient
from stortune.errors import TargetError
from stortune.system import mounts, syscmd

FS_NAME = "stortunefs"
METADATA_POOL = "stortunefs-metadata"
DATA_POOL = "stortunefs-data"
LAYOUT_FIELDS = ("stripe_unit", "stripe_count", "object_size")
_MOUNT_SECONDS = 60.0
_STOP_SECONDS = 30.0


def make_filesystem(client: CephClient, data_pgs: int = 32, metadata_pgs: int = 8) -> None:
    """The file system and its pools (the cluster's MDS becomes its active rank)."""
    client.ceph("osd", "pool", "create", METADATA_POOL, str(metadata_pgs), str(metadata_pgs))
    client.ceph("osd", "pool", "create", DATA_POOL, str(data_pgs), str(data_pgs))
    client.ceph("fs", "new", FS_NAME, METADATA_POOL, DATA_POOL)
    client.ceph("fs", "set", FS_NAME, "standby_count_wanted", "0")


def filesystems(client: CephClient) -> list[str]:
    """The names of the cluster's file systems."""
    return [str(fs.get("name", "")) for fs in client.json("fs", "ls") or []]


def active_mds(client: CephClient, fs_name: str = FS_NAME) -> list[str]:
    """Names of the MDS daemons that hold an active rank of the file system."""
    dump = client.json("fs", "dump") or {}
    names = []
    for fs in dump.get("filesystems", []):
        mdsmap = fs.get("mdsmap", {})
        if mdsmap.get("fs_name") != fs_name:
            continue
        names += [i["name"] for i in mdsmap.get("info", {}).values() if i["state"] == "up:active"]
    return names


def wait_active(client: CephClient, timeout: float, fs_name: str = FS_NAME) -> None:
    """Wait until an MDS is active for the file system (TargetError after `timeout`)."""
    deadline = time.monotonic() + timeout
    while not active_mds(client, fs_name):
        if time.monotonic() > deadline:
            raise TargetError(f"no MDS became active for {fs_name} within {timeout:.0f} s")
        time.sleep(0.5)


class FuseMount:
    """One ceph-fuse mount of the file system (see the module doc)."""

    def __init__(
        self,
        conf: Path,
        mount_point: Path,
        name: str,
        log: Path,
        fs_name: str = FS_NAME,
        keyring: Path | None = None,
    ) -> None:
        self.conf = conf
        self.mount_point = mount_point
        self.name = name
        self.log = log
        self.fs_name = fs_name
        self.keyring = keyring
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def mounted(self) -> bool:
        return mounts.is_mounted(self.mount_point)

    @property
    def serving(self) -> bool:
        """Mounted, and ceph-fuse still there to answer (a killed one leaves its mount)."""
        return self._proc is not None and self._proc.poll() is None and self.mounted

    def mount(self, options: Mapping[str, str] | None = None) -> None:
        """Mount with `options` given to ceph-fuse (``--name=value``); TargetError with
        ceph-fuse's own last line when it exits or does not mount in time."""
        tool = syscmd.which("ceph-fuse")
        if tool is None:
            raise TargetError("ceph-fuse is not installed (see scripts/install-system.sh)")
        self.mount_point.mkdir(parents=True, exist_ok=True)
        argv = [tool, "-c", str(self.conf), "-n", self.name, "-f", f"--client_fs={self.fs_name}"]
        if self.keyring is not None:
            argv += ["-k", str(self.keyring)]
        argv += [f"--{key}={value}" for key, value in (options or {}).items()]
        argv.append(str(self.mount_point))
        with open(self.log, "ab") as out:
            self._proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + _MOUNT_SECONDS
        while not self.mounted:
            if self._proc.poll() is not None:
                self._proc = None
                raise TargetError(f"ceph-fuse exited before mounting: {self.last_line()}")
            if time.monotonic() > deadline:
                self.unmount()
                raise TargetError(f"ceph-fuse did not mount within {_MOUNT_SECONDS:.0f} s")
            time.sleep(0.1)

    def unmount(self) -> None:
        """Unmount and wait for ceph-fuse to end (SIGKILL after half a minute)."""
        mounts.umount(self.mount_point)
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            syscmd.kill_group(proc)
            proc.wait()

    def abort(self) -> None:
        """Kill ceph-fuse: the kernel then fails the requests it was serving, so that a process
        blocked on a cluster that can no longer answer (a dead OSD) gets an error and ends."""
        if self._proc is not None:
            syscmd.kill_group(self._proc)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def last_line(self) -> str:
        with contextlib.suppress(OSError):
            lines = [x.strip() for x in self.log.read_text(errors="replace").splitlines()]
            lines = [x for x in lines if x]
            if lines:
                return lines[-1][-300:]
        return "(nothing logged)"


def set_layout(directory: Path, layout: Mapping[str, int]) -> None:
    """Give `directory` this layout (every field of `LAYOUT_FIELDS`; TargetError with the
    reason when CephFS refuses it, e.g. an object size that is not a multiple of the unit)."""
    text = " ".join(f"{field}={int(layout[field])}" for field in LAYOUT_FIELDS)
    try:
        os.setxattr(directory, "ceph.dir.layout", text.encode())
    except OSError as exc:
        raise TargetError(f"CephFS refused the layout {text}: {exc.strerror}") from None


def read_layout(path: Path) -> dict[str, int]:
    """A directory's or a file's layout, as CephFS reports it."""
    attribute = "ceph.dir.layout" if Path(path).is_dir() else "ceph.file.layout"
    try:
        text = os.getxattr(path, attribute).decode()
    except OSError as exc:
        raise TargetError(f"{path}: no CephFS layout ({exc.strerror})") from None
    fields = dict(item.split("=", 1) for item in text.split())
    return {field: int(fields[field]) for field in LAYOUT_FIELDS}
