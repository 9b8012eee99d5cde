"""The ``cephfs`` target: CephFS on a local Ceph mini-cluster, mounted with ceph-fuse, for
Magpie's setting (the static parameters of a distributed file system under file workloads).

stortune makes the cluster (the ``ceph`` target's mini-cluster plus one MDS), the file system
and the mount, and removes all of it at teardown; the mount is journalled in the state folder
before it is made, so the next target unmounts it after a crash (the cluster itself is removed
by `recover_stale`, as for the ``ceph`` target). Parameters by what applying them costs, the
cheapest applied last:

- layout (``ceph.dir.layout``: stripe unit, stripe count, object size; Lustre's striping): set
  on a fresh benchmark directory for each run, so the workload's files are written anew with
  it; files already written keep theirs.
- client (ceph-fuse's ``client_*`` and ``fuse_*`` options, in the config database under the
  mount's client name): a remount.
- mds, osd, common: the ``ceph`` target's way (config database, the daemons that read a startup
  option restarted, health and the MDS's active rank awaited, each daemon checked to run with
  its value); the mount is made again after a restart.

A value Ceph refuses (a layout whose object size is not a multiple of its stripe unit, an option
a daemon will not take) makes the trial fail with Ceph's reason, and the cluster goes back to the
default config. A run never waits for ever on the cluster: none starts on an OSD past the nearfull
ratio, and ceph-fuse is killed (`DaemonWatch`) when a daemon dies mid-run or the run outlives its
time limit, since a blocked FUSE flush holds the workload in the kernel; the next apply restarts
the dead daemons and mounts again.

An existing CephFS (``--ceph-conf``, ``--fs-name`` when the cluster has several): stortune mounts
it with ceph-fuse as ``client.ID`` (``--fuse-id``; its key in ``--keyring`` when the cluster uses
auth) under its state folder and writes only in a directory of its own,
``stortune-HOST-PID``, removed at teardown (a crashed run's is removed by the next target on the
same host). It never creates or deletes a file system or a pool. Layouts and client options
apply as above; MDS and OSD options need ``--allow-restart`` and a restart command, as for the
``ceph`` target; every option changed is put back at teardown. The state comes from the
cluster's exporters named by URL (``--mgr-exporter``, ``--node-exporter``) and ceph-fuse's
counters, else from ``ceph tell`` perf dumps and this machine's /proc.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from stortune.ceph import perf
from stortune.ceph.client import asok_command, short_socket_path
from stortune.ceph.fs import (
    FS_NAME,
    LAYOUT_FIELDS,
    FuseMount,
    active_mds,
    filesystems,
    make_filesystem,
    set_layout,
    wait_active,
)
from stortune.ceph.health import fullest_osd, status
from stortune.ceph.local import LocalCluster, free_port
from stortune.errors import StortuneError, TargetError
from stortune.space import Config, Space
from stortune.system.exporters import CEPH_FAMILIES, NODE_FAMILIES, Exporter, ExporterSampler
from stortune.system.journal import Journal, StateFolder
from stortune.targets.base import setting
from stortune.targets.ceph import DAEMON_LAYERS, LAYER_SECTIONS, CephSettings, CephTarget
from stortune.workloads.base import Measurement, Need, Venue, Workload

if TYPE_CHECKING:
    from stortune.targets.install import InstallFile

LAYOUT_LAYER = "layout"
FUSE_ID = "fuse"  # ceph-fuse mounts as client.fuse: the client options' section
NODE_EXPORTER = "exporter.node"
READY_SAMPLES = ("ceph_osd_op_w_total", "node_cpu_seconds_total")  # served: the exporter is up
EXPORTER_WAIT = 60.0
COLLECTED = ("mgr.", "node.", "fuse.")  # the state: real collectors and the client
FALLBACK = ("ceph.", "sys.")  # stortune's own sampling, when no exporter answers
FUSE_COUNTERS = {  # ceph-fuse's perf dump: the client side of Magpie's state
    ("objecter", "op_active"): False,  # requests in flight to the OSDs (a gauge)
    ("objecter", "op_r"): True,
    ("objecter", "op_w"): True,
    ("objecter", "op_send_bytes"): True,
    ("objectcacher-libcephfs", "cache_ops_hit"): True,
    ("objectcacher-libcephfs", "cache_ops_miss"): True,
    ("objectcacher-libcephfs", "data_flushed"): True,
}
DEFAULT_LAYOUT = {"stripe_unit": 4 << 20, "stripe_count": 1, "object_size": 4 << 20}
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_ID = re.compile(r"[A-Za-z0-9_.-]+")
_instances = itertools.count()
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CephFSSettings(CephSettings):
    """The ``ceph`` target's settings, the mount's, and an existing cluster's exporters."""

    fs_name: str | None = setting(
        None,
        flag="--fs-name",
        help="cephfs: with --ceph-conf, the file system to mount \\[default: the cluster's "
        "only one].",
    )
    fuse_id: str = setting(
        FUSE_ID,
        flag="--fuse-id",
        help="cephfs: the client ID ceph-fuse mounts as (its key in --keyring when the cluster "
        "uses auth); tuned client options go to client.ID in the config database.",
    )
    mgr_exporter: str | None = setting(
        None,
        flag="--mgr-exporter",
        help="cephfs: with --ceph-conf, the URL of the cluster's ceph-mgr prometheus module "
        "(http://HOST:9283/metrics), for the tuner's state.",
    )
    node_exporter: str | None = setting(
        None,
        flag="--node-exporter",
        help="cephfs: with --ceph-conf, the URL of a prometheus-node-exporter on a server of "
        "the cluster (http://HOST:9100/metrics), for the tuner's state.",
    )


class CephFSTarget(CephTarget):
    """CephFS on a local mini-cluster through ceph-fuse (see the module docstring)."""

    kind = "cephfs"
    Settings = CephFSSettings
    summary = "CephFS on a local Ceph mini-cluster or an existing one, through ceph-fuse (root)"
    provides = frozenset({Need.DIRECTORY})
    default_workloads = ("fileserver",)
    default_space = "cephfs"
    default_objective = "total.bw_mbs:max"
    settings: CephFSSettings
    daemon_layers = {**DAEMON_LAYERS, "mds": ("mds",)}

    @classmethod
    def system_files(cls, config: Config, space: Space) -> list[InstallFile]:
        """Directory layouts and ceph-fuse options have no ceph.conf home: ``name = value``
        lines, as for a target with no native form."""
        from stortune.targets.install import plain_files

        return plain_files(config, space)

    def __init__(
        self,
        space: Space | str | None = None,
        settings: CephFSSettings | None = None,
        **values: Any,
    ) -> None:
        super().__init__(space, settings, **values)
        s = self.settings
        given = [s.fs_name, s.mgr_exporter, s.node_exporter]
        if self.mode == "local" and any(v is not None for v in given):
            raise TargetError(
                "--fs-name, --mgr-exporter and --node-exporter are an existing CephFS's: "
                "give its --ceph-conf too"
            )
        if not _ID.fullmatch(s.fuse_id):
            raise TargetError(f"--fuse-id {s.fuse_id!r}: letters, digits, '_', '.', '-' only")
        self.fs_name = s.fs_name or FS_NAME
        self.fuse_client = f"client.{s.fuse_id}"
        self.layer_sections = {**LAYER_SECTIONS, "mds": ("mds",), "client": (self.fuse_client,)}
        self._folder = StateFolder(self.state_dir, lock=self._lock)
        self._journal: Journal | None = None
        self._fuse: FuseMount | None = None
        self._session: int | None = None  # the mount's client id at the MDS
        self._root: Path | None = None  # existing mode: the folder of the mount point
        self._layout = dict(DEFAULT_LAYOUT)
        self.exporters: list[Exporter] = []

    # ---- life cycle -----------------------------------------------------------------------
    def _new_cluster(self, root: Path) -> LocalCluster:
        return LocalCluster(root, self.osds, self._osd_bytes, mds=True)

    def _setup_local(self) -> None:
        self._journal = self._folder.open()  # unmounts what a crashed run left mounted
        super()._setup_local()
        try:
            self._mount()
        except BaseException:
            self.teardown()
            raise

    def _make_pool(self, pg_per_osd: int) -> None:
        """The file system instead of a rados pool (its data pool gets the PGs)."""
        assert self._cluster is not None
        pgs = 2 ** round(math.log2(max(8, pg_per_osd * self.osds)))  # replica 1
        make_filesystem(self.client, data_pgs=pgs)
        wait_active(self.client, self.health_timeout)
        self._pg_per_osd = pg_per_osd
        self._start_exporters()

    # ---- state: the exporters and the client's counters ------------------------------------
    def _start_exporters(self) -> None:
        """Ceph's mgr prometheus module and a node exporter, both on 127.0.0.1 (Magpie's
        server-side state); the node exporter lives and dies with the cluster."""
        assert self._cluster is not None
        mgr_port, node_port = free_port(), free_port()
        self.client.config_set(
            {
                "mgr/prometheus/server_addr": "127.0.0.1",
                "mgr/prometheus/server_port": str(mgr_port),
                "mgr/prometheus/scrape_interval": "1",
            },
            who="mgr",
            force=True,  # the mgr may not have reported the module's options yet
        )
        self.client.ceph("mgr", "module", "enable", "prometheus", "--force")
        textfiles = self._cluster.root / "exporter"  # names the cluster's directory (its pid)
        textfiles.mkdir(exist_ok=True)
        node = ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{node_port}"]
        node += ["--collector.disable-defaults", f"--collector.textfile.directory={textfiles}"]
        node += [f"--collector.{c}" for c in ("cpu", "meminfo", "diskstats", "loadavg")]
        try:
            self._cluster.start_process(NODE_EXPORTER, node)
        except StortuneError as exc:
            log.warning("no node exporter, /proc sampling only: %s", exc)
        self.exporters = [
            Exporter("mgr", f"http://127.0.0.1:{mgr_port}/metrics", CEPH_FAMILIES),
            Exporter("node", f"http://127.0.0.1:{node_port}/metrics", NODE_FAMILIES),
        ]
        for exporter, sample in zip(self.exporters, READY_SAMPLES, strict=True):
            if not exporter.wait_ready(sample, EXPORTER_WAIT):
                log.warning("the %s exporter does not serve %s yet", exporter.name, sample)

    def _setup_existing(self) -> None:
        self._journal = self._folder.open()  # unmounts what a crashed run left mounted
        try:
            super()._setup_existing()  # the client, the file system checked, options found
            root = self.state_dir / f"cephfs-{os.getpid()}-{next(_instances)}"
            self._journal.record("dir", path=str(root))  # what a crash leaves, undone in turn
            root.mkdir()
            self._root = root
            s = self.settings
            urls = {
                "mgr": (s.mgr_exporter, CEPH_FAMILIES),
                "node": (s.node_exporter, NODE_FAMILIES),
            }
            self.exporters = [Exporter(n, u, f) for n, (u, f) in urls.items() if u is not None]
            self._mount()
            self._remove_stale_bench_dirs()
            self.bench_root.mkdir()
        except BaseException:
            self.teardown()
            raise

    def _check_existing(self) -> None:
        """The file system exists (the only one when none is named) and has an active MDS."""
        names = filesystems(self.client)
        if self.settings.fs_name is None and len(names) == 1:
            self.fs_name = names[0]
        if self.fs_name not in names:
            known = ", ".join(names) or "none"
            raise TargetError(
                f"no CephFS {self.fs_name!r} on the cluster of {self.conf} (it has: {known}; "
                "--fs-name names one; the existing mode never creates a file system)"
            )
        if not active_mds(self.client, self.fs_name):
            raise TargetError(f"CephFS {self.fs_name!r} has no active MDS")

    def _daemon_names(self, kind: str) -> list[str]:
        if kind == "mds":
            return active_mds(self.client, self.fs_name)
        return super()._daemon_names(kind)

    def _remove_stale_bench_dirs(self) -> None:
        """Benchmark directories that dead runs on this host left in the existing CephFS."""
        prefix = f"stortune-{_host()}-"
        for old in self.mount_point.glob(f"{prefix}*"):
            pid = old.name[len(prefix) :]
            if pid.isdigit() and not _alive(int(pid)):
                log.info("removing %s, left by a run that ended without teardown", old)
                shutil.rmtree(old, ignore_errors=True)

    def teardown(self) -> None:
        try:
            if self._root is not None and self._fuse is not None and self._fuse.mounted:
                shutil.rmtree(self.bench_root, ignore_errors=True)  # ours, in their CephFS
            self._unmount()
        finally:
            try:
                super().teardown()  # the cluster and its daemons, or the options put back
            finally:
                self._fuse, self._journal, self._root = None, None, None
                self._folder.close()  # the journal's entries undone, the state folder's lock

    # ---- the mount ------------------------------------------------------------------------
    @property
    def _folder_of_mount(self) -> Path:
        if self._cluster is not None:
            return self._cluster.root
        if self._root is None:
            raise TargetError("the cephfs target is not set up")
        return self._root

    @property
    def mount_point(self) -> Path:
        return self._folder_of_mount / "mnt"

    @property
    def bench_root(self) -> Path:
        """Where runs write: the whole mount on stortune's own cluster, a directory of its
        own on an existing one."""
        if self._cluster is not None:
            return self.mount_point
        return self.mount_point / f"stortune-{_host()}-{os.getpid()}"

    def _mount(self) -> None:
        assert self._journal is not None
        wait_active(self.client, self.health_timeout, self.fs_name)
        if self._fuse is None:
            folder = self._folder_of_mount
            log_path = folder / "log" / "ceph-fuse.out" if self._cluster else folder / "fuse.out"
            if self._cluster is None:  # the cluster's folder goes with it; this one is ours
                self._journal.record("dir", path=str(self.mount_point))
                self._journal.record("file", path=str(log_path))
                self._journal.record("file", path=str(self.fuse_asok))
            self._journal.record("mount", mount_point=str(self.mount_point))
            conf = self._cluster.conf if self._cluster is not None else self.conf
            assert conf is not None
            self._fuse = FuseMount(
                conf, self.mount_point, self.fuse_client, log_path, self.fs_name, self.keyring
            )
        log.info("mounting CephFS on %s", self.mount_point)
        self._fuse.mount({"admin_socket": str(self.fuse_asok)})  # its perf counters
        self._session = self._session_id()

    def _session_id(self) -> int | None:
        """The mount's client id at the MDS (ceph-fuse's ``status``), None when not told."""
        try:
            status = asok_command(self.fuse_asok, "status")
        except TargetError:
            return None
        found = status.get("id") if isinstance(status, dict) else None
        return int(found) if isinstance(found, int) else None

    def _evict(self, session: int | None) -> None:
        """End a killed ceph-fuse's session at the MDS. Left alone, it keeps the capabilities
        on the files it had open until the MDS times it out (``session_timeout``, 60 s), and
        the next mount's first change to those files waits that long. Only this mount's own
        session is evicted, by its id, also on an existing cluster."""
        if session is None:
            return
        for name in self._daemon_names("mds"):
            try:
                self.client.ceph("tell", f"mds.{name}", "client", "evict", f"id={session}")
            except TargetError as error:  # gone already: nothing to wait for
                log.info("evicting client session %d: %s", session, error)

    def _unmount(self) -> None:
        if self._fuse is not None:
            self._fuse.unmount()

    @property
    def fuse_asok(self) -> Path:
        """ceph-fuse's admin socket: in the mount's folder, or in the temporary folder when
        that path is too long for a socket."""
        if self._cluster is not None:
            return short_socket_path(self._cluster.asok(self.fuse_client))
        return short_socket_path(self._folder_of_mount / f"{self.fuse_client}.asok")

    # ---- apply ----------------------------------------------------------------------------
    def _settings(self, values: Config, space: Space) -> dict[str, str]:
        """The config database entries: every parameter but the layout's."""
        layout = {n for n in values if n in space and space[n].layer == LAYOUT_LAYER}
        return super()._settings({k: v for k, v in values.items() if k not in layout}, space)

    @staticmethod
    def _layout_of(values: Config, space: Space) -> dict[str, int]:
        layout = dict(DEFAULT_LAYOUT)
        for name in LAYOUT_FIELDS:
            if name in space and space[name].layer == LAYOUT_LAYER:
                layout[name] = int(values[name])
        return layout

    def apply(self, config: Config) -> None:
        values, space = self._full_config(config)  # invalid configs fail before any change
        layout = self._layout_of(values, space)
        self.setup()
        self._heal()
        if self._settings(values, space) != self._db:  # a remount at least: not while mounted
            self._unmount()
            try:
                super().apply(config)
            finally:
                self._mount()
        probe = self.bench_root / ".stortune-layout"  # Ceph's own verdict on the layout now
        probe.mkdir(exist_ok=True)
        set_layout(probe, layout)
        self._layout = layout

    def _heal(self) -> None:
        """After a run a daemon died in: the dead daemons restarted, health awaited, and
        CephFS mounted again (`DaemonWatch` stopped ceph-fuse)."""
        dead = self._cluster.dead() if self._cluster is not None else []
        if dead:
            log.warning("%s died during the last run: restarting", ", ".join(dead))
            self._restart(dead)
            self._wait_healthy()
        if self._fuse is not None and not self._fuse.serving:
            self._fuse.unmount()  # what is left of the old mount, and its process reaped
            self._evict(self._session)
            self._mount()

    # ---- run ------------------------------------------------------------------------------
    def venue(self, workload: Workload) -> Venue:
        if self._fuse is None or not self._fuse.serving:
            raise TargetError("CephFS is not mounted: apply a config before running")
        used, nearfull = fullest_osd(self.client)
        if used >= nearfull:  # writes, even the MDS's, block once the full ratio is reached
            raise TargetError(
                f"an OSD is {used:.0%} full, past the cluster's nearfull ratio ({nearfull:.0%}): "
                "not running on it (a larger --osd-size gives a local cluster room)"
            )
        workdir = self.bench_root / (_NAME.sub("_", workload.name) or "workload")
        for other in self.bench_root.iterdir():  # the layout holds for files made after it
            if other.is_dir():
                shutil.rmtree(other, ignore_errors=True)
        workdir.mkdir()
        set_layout(workdir, self._layout)
        samplers = [perf.ClusterSampler(self), FuseSampler(self), ExporterSampler(self.exporters)]
        return Venue(
            directory=workdir, devices=self._own_disks(), samplers=samplers, journal=self._journal
        )

    def attempt(
        self, workload: Workload | None = None, timeout: float | None = None, repetition: int = 0
    ) -> Measurement:
        with DaemonWatch(self._cluster, self._fuse, timeout) as watch:
            try:
                measurement = super().attempt(workload, timeout, repetition)
            except (OSError, TargetError) as error:  # the mount went away under the set-up
                if isinstance(error, TargetError) and not (watch.died or watch.overdue):
                    raise
                measurement = Measurement.failed(f"the CephFS mount failed: {error}")
        if watch.died:
            assert self._cluster is not None
            lines = "; ".join(f"{d}: {self._cluster.log_line(d)}" for d in watch.died)
            return Measurement.failed(
                f"{', '.join(watch.died)} exited during the run ({lines}); ceph-fuse was "
                "stopped so that the run could end"
            )
        if watch.overdue:
            return Measurement.failed(
                f"the run was still blocked {watch.limit:.0f} s after it began, past its time "
                f"limit: ceph-fuse was stopped so that it could end (cluster: {self._health()})"
            )
        if self._fuse is not None and not self._fuse.serving:
            return Measurement.failed(f"ceph-fuse lost its mount: {self._fuse.last_line()}")
        return measurement

    def _health(self) -> str:
        """The cluster's health status and checks, in one line (for a failed run's reason)."""
        try:
            health = status(self.client)
        except StortuneError as exc:
            return f"no status: {exc}"
        return f"{health.status} {', '.join(sorted(health.checks))}".strip()

    def after_run(self, workload: Workload, measurement: Measurement) -> None:
        super().after_run(workload, measurement)
        measurement.info.pop("pool", None)
        measurement.info.update(layout=dict(self._layout))

    def state_after(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """Magpie's state: the run's server metrics from ceph-mgr's prometheus module and the
        node exporter, and its client metrics from ceph-fuse (stortune's own /proc and
        perf-dump sampling when no exporter answered)."""
        collected = {k: v for k, v in metrics.items() if k.startswith(COLLECTED)}
        if not any(k.startswith(("mgr.", "node.")) for k in collected):  # no exporter
            collected.update((k, v) for k, v in metrics.items() if k.startswith(FALLBACK))
        return collected

    def live_state(self) -> dict[str, float]:
        """None: Magpie's state is the collectors' metrics alone, without the live system
        gauges a Ceph target adds."""
        return {}

    def fuse_perf(self) -> dict[str, Any]:
        """ceph-fuse's perf counters, through its admin socket."""
        data = asok_command(self.fuse_asok, "perf dump")
        return data if isinstance(data, dict) else {}


class DaemonWatch:
    """While a run lasts, every half second: has a daemon of the local cluster died, or has
    the run outlived its time limit by `GRACE` seconds? Then ceph-fuse is killed at once. A
    mount whose OSD is gone or full otherwise holds the workload's threads in the kernel,
    unkillable by the run's own time limit, until someone stops ceph-fuse by hand."""

    GRACE = 30.0

    def __init__(
        self, cluster: LocalCluster | None, fuse: FuseMount | None, timeout: float | None
    ) -> None:
        self.cluster, self.fuse = cluster, fuse
        self.limit = math.inf if timeout is None else timeout + self.GRACE
        self.died: list[str] = []
        self.overdue = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="daemon-watch", daemon=True)

    def __enter__(self) -> DaemonWatch:
        if self.fuse is not None:
            self._started = time.monotonic()
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        assert self.fuse is not None
        while not self._done.wait(0.5):
            dead = self.cluster.dead() if self.cluster is not None else []  # theirs: not ours
            if dead:
                self.died = dead
                log.warning("%s died during a run: stopping ceph-fuse", ", ".join(dead))
            elif time.monotonic() - self._started > self.limit:
                self.overdue = True
                log.warning("a run blocked past its time limit: stopping ceph-fuse")
            else:
                continue
            self.fuse.abort()
            return


PERF_PATIENCE = 5.0  # seconds a perf dump of ceph-fuse is asked for before a run goes without


class FuseSampler:
    """ceph-fuse's counters over a run (`FUSE_COUNTERS`: rates, and gauges at the end) and the
    share of a core its process used."""

    def __init__(self, target: CephFSTarget) -> None:
        self.target = target
        self._before: dict[str, Any] = {}
        self._usage: tuple[float, float] | None = None
        self._started = 0.0

    def _pid(self) -> int | None:
        fuse = self.target._fuse
        return None if fuse is None else fuse.pid

    def _perf(self) -> dict[str, Any]:
        """ceph-fuse's counters, asked again for a few seconds: a ceph-fuse just remounted may
        not have made its admin socket yet, and a busy one can miss a request. {} if none came."""
        deadline = time.monotonic() + PERF_PATIENCE
        while True:
            try:
                return self.target.fuse_perf()
            except StortuneError:
                if time.monotonic() > deadline:
                    return {}
                time.sleep(0.2)

    def start(self) -> FuseSampler:
        self._before = self._perf()
        pid = self._pid()
        self._usage = perf.process_usage(pid) if pid else None
        self._started = time.monotonic()
        return self

    def stop(self) -> dict[str, float]:
        seconds = max(time.monotonic() - self._started, 1e-6)
        after = self._perf()
        if not after:
            return {}
        out: dict[str, float] = {}
        for (section, counter), is_counter in FUSE_COUNTERS.items():
            end = after.get(section, {}).get(counter)
            if not isinstance(end, int | float):
                continue
            if not is_counter:
                out[f"fuse.{counter}"] = float(end)
                continue
            start = self._before.get(section, {}).get(counter)
            if isinstance(start, int | float):
                out[f"fuse.{counter}.per_s"] = max(0.0, end - start) / seconds
        pid = self._pid()
        end_usage = perf.process_usage(pid) if pid else None
        if end_usage is not None:
            out["fuse.rss_mb"] = end_usage[1]
            if self._usage is not None:
                out["fuse.cpu_pct"] = 100.0 * (end_usage[0] - self._usage[0]) / seconds
        return out


def _host() -> str:
    return _NAME.sub("_", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    """Whether a process of this host has this pid (a benchmark directory's owner)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True
