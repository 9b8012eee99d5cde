"""The cephfs target on an existing CephFS (``--ceph-conf``): a real 1-OSD cluster with an MDS
and a file system, made here as a user's cluster would be, which the target must leave as it
found it. It mounts the file system, writes only in a directory of its own, applies layouts and
client options (put back at teardown), refuses restarts it was not allowed, and leaves the
user's files, the file system and the config database as they were, with nothing mounted; a
run killed with SIGKILL leaves neither mount nor directory once the next target starts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ensure_ceph
from fixtures.cephfs import WRITE, leftovers

from stortune.ceph.conf import BASELINE
from stortune.ceph.fs import (
    FS_NAME,
    FuseMount,
    filesystems,
    make_filesystem,
    read_layout,
    wait_active,
)
from stortune.ceph.health import wait_healthy
from stortune.ceph.local import LocalCluster
from stortune.errors import TargetError
from stortune.system import mounts
from stortune.targets.cephfs import CephFSTarget

USER_FILE = "projects/report.txt"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A user's cluster with a file in its CephFS, removed at the end whatever happened."""
    ensure_ceph()
    root = Path(tempfile.mkdtemp(prefix="stortune-cephfs-existing-"))
    cluster = LocalCluster(root / "cluster", osds=1, mds=True)
    try:
        cluster.create(BASELINE)
        make_filesystem(cluster.client, data_pgs=8)
        wait_active(cluster.client, 120)
        wait_healthy(cluster.client, 120, 1)
        with user_mount(cluster) as mnt:
            (mnt / USER_FILE).parent.mkdir()
            (mnt / USER_FILE).write_text("the user's data\n")
        yield cluster
    finally:
        cluster.destroy()
        shutil.rmtree(root, ignore_errors=True)


class user_mount:  # noqa: N801 - a context manager read as a phrase
    """The user's own ceph-fuse mount of their file system, to look at it from outside."""

    def __init__(self, cluster: LocalCluster) -> None:
        mnt = cluster.root / "user-mnt"
        self.fuse = FuseMount(cluster.conf, mnt, "client.admin", cluster.root / "user-fuse.out")

    def __enter__(self) -> Path:
        self.fuse.mount()
        return self.fuse.mount_point

    def __exit__(self, *exc: object) -> None:
        self.fuse.unmount()


def client_options(cluster: LocalCluster) -> dict[str, str]:
    dump = cluster.client.json("config", "dump") or []
    return {e["name"]: e["value"] for e in dump if e["section"].startswith("client")}


def test_an_existing_cephfs_is_tuned_and_left_as_it_was(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    target = CephFSTarget("cephfs", conf=str(cluster.conf), state_dir=state, health_timeout=120)
    assert target.mode == "existing"
    try:
        target.setup()
        assert target.fs_name == FS_NAME  # the cluster's only file system
        assert (target.mount_point / USER_FILE).read_text() == "the user's data\n"
        assert target.bench_root.parent == target.mount_point

        config = dict(target.space.default_config(), stripe_count=4, client_oc_size=104857600)
        target.apply(config)
        assert client_options(cluster)["client_oc_size"] == "104857600"
        measurement = target.run(WRITE, timeout=120)
        assert measurement.ok, measurement.error
        assert measurement.metrics["fuse.op_w.per_s"] > 0  # ceph-fuse's own counters
        files = [p for p in (target.bench_root / WRITE.name).rglob("*") if p.is_file()]
        assert files and read_layout(files[0])["stripe_count"] == 4

        restart = dict(config, osd_op_num_shards=2)  # read when the OSD starts: a restart
        with pytest.raises(TargetError, match="--allow-restart"):
            target.apply(restart)
        assert target.running_config("osd.0")["osd_op_num_shards"] != "2"
        assert target.run(WRITE, timeout=120).ok  # still mounted after the refusal
    finally:
        target.teardown()
    assert filesystems(cluster.client) == [FS_NAME]
    assert "client_oc_size" not in client_options(cluster)  # put back as found
    assert not [m for m in mounts.mount_table() if str(state) in str(m.mount_point)]
    assert leftovers(str(state)) == ([], "")
    with user_mount(cluster) as mnt:
        assert sorted(p.name for p in mnt.iterdir()) == ["projects"]  # our directory is gone
        assert (mnt / USER_FILE).read_text() == "the user's data\n"


KILLED = """
import sys, time
from stortune.targets.cephfs import CephFSTarget
target = CephFSTarget("cephfs", conf=sys.argv[1], state_dir=sys.argv[2], health_timeout=120)
target.setup()
(target.bench_root / "file").write_text("written by a run that dies")
print(target.bench_root.name, flush=True)
time.sleep(600)
"""


def test_a_killed_run_on_an_existing_cephfs_leaves_nothing_once_the_next_starts(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    argv = [sys.executable, "-c", KILLED, str(cluster.conf), str(state)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        left = proc.stdout.readline().strip()
        assert left.startswith("stortune-")
        os.killpg(proc.pid, signal.SIGKILL)  # its mount and its directory stay
        proc.wait()
        assert leftovers(str(state))[0]
        target = CephFSTarget("cephfs", conf=str(cluster.conf), state_dir=state)
        try:
            target.setup()  # unmounts the dead run's mount, removes its directory
            assert not (target.mount_point / left).exists()
            assert [p.name for p in state.glob("cephfs-*")] == [target.mount_point.parent.name]
        finally:
            target.teardown()
        assert leftovers(str(state)) == ([], "")
        with user_mount(cluster) as mnt:
            assert sorted(p.name for p in mnt.iterdir()) == ["projects"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def test_an_existing_cluster_without_that_file_system_is_refused(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    target = CephFSTarget(
        "cephfs", conf=str(cluster.conf), fs_name="other", state_dir=tmp_path / "s"
    )
    with pytest.raises(TargetError, match="no CephFS 'other' .*it has: stortunefs"):
        target.setup()
    assert filesystems(cluster.client) == [FS_NAME]


def test_existing_cluster_options_need_its_conf() -> None:
    with pytest.raises(TargetError, match="give its --ceph-conf"):
        CephFSTarget("cephfs", fs_name="cephfs")
