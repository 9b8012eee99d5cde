"""The cephfs target on a real 1-OSD mini-cluster with an MDS and a ceph-fuse mount: it mounts
and runs a file workload; each layout parameter reaches the files (read back with getfattr);
client options remount and MDS/OSD options restart; a layout Ceph refuses is a failed apply
with Ceph's reason; an OSD that dies mid-run fails that run instead of hanging it, and the
next apply restarts the OSD and mounts again; a nearly full cluster is not run on, and a run
blocked past its time limit (every OSD op paused) is ended; teardown leaves no mount, process or
file; and a run killed with SIGKILL leaves nothing once the next target starts. The state folder
is deeper than a Unix socket's path allows, as a user's may be: the admin sockets (of the
daemons and of ceph-fuse) move to a short folder, and all of the above still works.

The tests share one module-scoped target (bring-up is the slow part) and run in file order; the
fixture tears it down even when a test fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ensure_ceph
from fixtures.cephfs import WRITE, leftovers

from stortune.ceph.fs import active_mds, read_layout
from stortune.ceph.health import fullest_osd
from stortune.errors import TargetError
from stortune.space import Space, load_space
from stortune.system import mounts
from stortune.targets.cephfs import CephFSTarget, DaemonWatch
from stortune.tuners.ddpg import MAX_METRICS
from stortune.workloads.base import Venue
from stortune.workloads.fio import FioWorkload

STATE_DIR = Path(tempfile.mkdtemp(prefix="stortune-cephfs-tests-")) / ("deep-folder-" * 4)


def unconstrained() -> Space:
    """The bundled space without its constraints, so that a layout CephFS refuses gets to it."""
    bundled = load_space("cephfs")
    return Space("cephfs-test", list(bundled.parameters))


def getfattr(path: Path, name: str) -> str:
    out = subprocess.run(
        ["getfattr", "--only-values", "-n", name, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@pytest.fixture(scope="module")
def target() -> Iterator[CephFSTarget]:
    ensure_ceph()
    target = CephFSTarget(unconstrained(), osds=1, state_dir=STATE_DIR, health_timeout=120)
    try:
        started = time.monotonic()
        target.setup()
        print(f"cluster, MDS and mount up in {time.monotonic() - started:.1f} s")
        yield target
    finally:
        target.teardown()


def test_mounts_and_runs_a_file_workload_with_cluster_state(target: CephFSTarget) -> None:
    assert mounts.is_mounted(target.mount_point)
    target.apply(target.space.default_config())
    measurement = target.run(WRITE, timeout=120)
    assert measurement.ok, measurement.error
    assert measurement.metrics["write.bw_mbs"] > 0
    assert measurement.info["layout"] == {
        "stripe_unit": 4 << 20,
        "stripe_count": 1,
        "object_size": 4 << 20,
    }
    metrics = measurement.metrics
    assert metrics["ceph.osd.0.rss_mb"] > 0 and "ceph.mds.a.cpu_pct" in metrics  # daemons
    # Magpie's state from the real collectors: ceph-mgr's prometheus module (server side), the
    # node exporter (the machine), ceph-fuse's admin socket (the client)
    assert metrics["mgr.ceph_osd_op_w_total{ceph_daemon=osd.0}.per_s"] > 0
    assert "mgr.ceph_mds_inodes{ceph_daemon=mds.a}" in metrics
    assert any(k.startswith("node.node_cpu_seconds_total{") for k in metrics)
    assert metrics["node.node_memory_MemAvailable_bytes"] > 0
    assert metrics["fuse.op_w.per_s"] > 0 and "fuse.op_active" in metrics
    assert metrics["fuse.cpu_pct"] > 0
    state = target.state()  # DDPG's: the collectors' metrics, no more than it takes
    assert "mgr.ceph_mds_inodes{ceph_daemon=mds.a}" in state and "fuse.op_active" in state
    assert not any(k.startswith(("sys.", "ceph.")) for k in state)
    assert len(state) <= MAX_METRICS


@pytest.mark.parametrize(
    ("name", "value"),
    [("stripe_unit", 1 << 20), ("stripe_count", 4), ("object_size", 16 << 20)],
)
def test_each_layout_parameter_reaches_the_files(
    target: CephFSTarget, name: str, value: int
) -> None:
    config = dict(target.space.default_config(), **{name: value})
    target.apply(config)
    measurement = target.run(WRITE, timeout=120)
    assert measurement.ok, measurement.error
    files = [p for p in (target.mount_point / WRITE.name).rglob("*") if p.is_file()]
    assert files
    assert getfattr(files[0], f"ceph.file.layout.{name}") == str(value)
    assert read_layout(files[0])[name] == value


def test_client_options_remount_and_daemon_options_restart(target: CephFSTarget) -> None:
    assert target.cluster is not None
    fuse_before = target._fuse.pid if target._fuse is not None else None
    mds_before = target.cluster.pids["mds.a"]
    config = dict(target.space.default_config(), client_oc_size=104857600)
    target.apply(config)
    assert target._fuse is not None and target._fuse.pid != fuse_before  # remounted
    assert target.cluster.pids["mds.a"] == mds_before  # no daemon restarted for it
    osd_before = target.cluster.pids["osd.0"]
    config["mds_log_max_segments"] = 32  # an MDS option read at runtime: no restart
    target.apply(config)
    assert target.cluster.pids["mds.a"] == mds_before
    assert target.running_config("mds.a")["mds_log_max_segments"] == "32"
    config["osd_op_num_shards"] = 2  # read when the OSD starts: a restart
    target.apply(config)
    assert target.cluster.pids["osd.0"] != osd_before
    assert target.running_config("osd.0")["osd_op_num_shards"] == "2"
    assert target.run(WRITE, timeout=120).ok


def test_a_layout_ceph_refuses_is_a_failed_apply_with_its_reason(target: CephFSTarget) -> None:
    bad = dict(target.space.default_config(), stripe_unit=4 << 20, object_size=1 << 20)
    with pytest.raises(TargetError, match="CephFS refused the layout .*Invalid argument"):
        target.apply(bad)
    target.apply(target.space.default_config())  # the target goes on with a good one
    assert target.run(WRITE, timeout=120).ok


def test_an_osd_dying_mid_run_fails_the_run_and_the_next_apply_heals(
    target: CephFSTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert target.cluster is not None
    target.apply(target.space.default_config())
    osd, venue = target.cluster.pids["osd.0"], target.venue
    killer = threading.Timer(2.0, os.kill, (osd, signal.SIGKILL))

    def killed_once_fio_runs(workload: FioWorkload) -> Venue:
        made = venue(workload)  # after the pre-run checks, however slow a busy machine is
        killer.start()
        return made

    monkeypatch.setattr(target, "venue", killed_once_fio_runs)
    try:  # without the watch, fio's threads wait in the kernel for an OSD that never answers
        measurement = target.run(FioWorkload("seqwrite", runtime=30), timeout=600)
    finally:
        killer.cancel()
        monkeypatch.undo()
    assert not measurement.ok
    assert measurement.error is not None and "osd.0 exited during the run" in measurement.error
    killed = target._session
    target.apply(target.space.default_config())
    assert target.cluster.pids["osd.0"] != osd  # restarted
    assert mounts.is_mounted(target.mount_point)
    # the killed mount's session is evicted, not left to hold its files' caps for a minute
    assert killed is not None and target._session not in (None, killed)
    assert killed not in mds_sessions(target)
    assert target.run(WRITE, timeout=120).ok


def test_an_osd_dying_while_a_run_is_set_up_fails_the_run(
    target: CephFSTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert target.cluster is not None
    target.apply(target.space.default_config())
    osd, venue = target.cluster.pids["osd.0"], target.venue

    def after_the_watch_stopped_the_mount(workload: FioWorkload) -> Venue:
        os.kill(osd, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while target._fuse is not None and target._fuse.serving and time.monotonic() < deadline:
            time.sleep(0.1)
        return venue(workload)  # its mkdir meets a mount that is gone

    monkeypatch.setattr(target, "venue", after_the_watch_stopped_the_mount)
    measurement = target.run(WRITE, timeout=120)
    assert not measurement.ok
    assert measurement.error is not None and "osd.0 exited during the run" in measurement.error
    monkeypatch.undo()
    target.apply(target.space.default_config())  # heals: the next test meets a whole cluster
    assert target.cluster.pids["osd.0"] != osd
    assert target.run(WRITE, timeout=120).ok


def mds_sessions(target: CephFSTarget) -> set[int]:
    """The client ids of the active MDS's sessions."""
    (name,) = active_mds(target.client)
    return {int(s["id"]) for s in target.client.json("tell", f"mds.{name}", "session", "ls")}


def test_a_nearly_full_cluster_is_not_run_on(target: CephFSTarget) -> None:
    target.apply(target.space.default_config())  # whatever the tests before left
    deadline = time.monotonic() + 60  # an OSD just restarted reports 0% used for a while
    while fullest_osd(target.client)[0] <= 0.0001 and time.monotonic() < deadline:
        time.sleep(1)
    target.client.ceph("osd", "set-nearfull-ratio", "0.0001")  # as if the OSD were filling
    try:
        with pytest.raises(TargetError, match=r"past the cluster's nearfull ratio \(0%\)"):
            target.run(WRITE, timeout=120)
    finally:
        target.client.ceph("osd", "set-nearfull-ratio", "0.85")
    assert target.run(WRITE, timeout=120).ok


def test_a_run_blocked_past_its_time_limit_is_ended(
    target: CephFSTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(DaemonWatch, "GRACE", 4.0)
    target.apply(target.space.default_config())
    pause = threading.Timer(1.0, target.client.ceph, ("osd", "pause"))
    venue = target.venue

    def paused_soon(workload: FioWorkload) -> Venue:
        # after the pre-run health check (which would wait out a paused cluster), not before
        made = venue(workload)
        if pause.ident is None:
            pause.start()  # every OSD op waits: fio's last flush then blocks in the kernel
        return made

    monkeypatch.setattr(target, "venue", paused_soon)
    started = time.monotonic()
    try:
        measurement = target.run(FioWorkload("seqwrite", runtime=30), timeout=8)
    finally:
        pause.cancel()
        if pause.ident is not None:
            pause.join()
        target.client.ceph("osd", "unpause")
    assert time.monotonic() - started < 60
    assert not measurement.ok
    assert measurement.error is not None and "past its time limit" in measurement.error
    assert "OSDMAP_FLAGS" in measurement.error  # the health check that says why (pause)
    target.apply(target.space.default_config())  # mounted again
    assert target.run(WRITE, timeout=120).ok


def test_teardown_leaves_no_mount_no_process_and_no_file(target: CephFSTarget) -> None:
    assert target.cluster is not None
    root, sockets = target.cluster.root, target.cluster.sockets
    assert not sockets.is_relative_to(root)  # the deep state folder moved them
    target.teardown()
    assert not root.exists() and not sockets.exists()
    assert [p.name for p in STATE_DIR.iterdir()] == ["localfs.lock"]
    assert leftovers(str(STATE_DIR)) == ([], "")


KILLED = """
import sys, time
from stortune.targets.cephfs import CephFSTarget, DaemonWatch
target = CephFSTarget("cephfs", osds=1, state_dir=sys.argv[1], health_timeout=120)
target.setup()
print("mounted", flush=True)
time.sleep(600)
"""


def test_a_killed_run_leaves_nothing_once_the_next_target_starts(tmp_path: Path) -> None:
    ensure_ceph()
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(state)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "mounted"
        os.killpg(proc.pid, signal.SIGKILL)  # stortune dies; its daemons and mount stay
        proc.wait()
        mounted, _ = leftovers(str(state))
        assert mounted  # the crash left the mount behind
        target = CephFSTarget("cephfs", osds=1, state_dir=state, health_timeout=120)
        try:
            target.setup()  # undoes the crashed run's mount, removes its cluster
            clusters = sorted(p.name for p in state.glob("ceph-*"))
            assert target.cluster is not None and clusters == [target.cluster.root.name]
        finally:
            target.teardown()
        assert leftovers(str(state)) == ([], "")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
