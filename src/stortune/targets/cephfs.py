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
default config. An existing CephFS (``--ceph-conf``) is not supported yet: the target refuses it.
"""

from __future__ import annotations

import logging
import math
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stortune.errors import StortuneError, TargetError
from stortune.measure.exporters import CEPH_FAMILIES, NODE_FAMILIES, Exporter, ExporterSampler
from stortune.space import Config, Space
from stortune.targets.ceph import DAEMON_LAYERS, LAYER_SECTIONS, CephSettings, CephTarget
from stortune.targets.cephcluster import perf
from stortune.targets.cephcluster.client import asok_command
from stortune.targets.cephcluster.fs import (
    LAYOUT_FIELDS,
    FuseMount,
    make_filesystem,
    set_layout,
    wait_active,
)
from stortune.targets.cephcluster.local import LocalCluster, free_port
from stortune.targets.journal import Journal, StateFolder
from stortune.workloads.base import Measurement, Need, Venue, Workload

LAYOUT_LAYER = "layout"
FUSE_CLIENT = "client.fuse"  # the name ceph-fuse mounts with: the client options' section
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
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CephFSSettings(CephSettings):
    """The ``ceph`` target's settings (local mode only)."""


class CephFSTarget(CephTarget):
    """CephFS on a local mini-cluster through ceph-fuse (see the module docstring)."""

    kind = "cephfs"
    Settings = CephFSSettings
    summary = "CephFS on a local Ceph mini-cluster, mounted with ceph-fuse (root)"
    provides = frozenset({Need.DIRECTORY})
    default_workloads = ("fileserver",)
    default_space = "cephfs"
    daemon_layers = {**DAEMON_LAYERS, "mds": ("mds",)}
    layer_sections = {**LAYER_SECTIONS, "mds": ("mds",), "client": (FUSE_CLIENT,)}

    def __init__(
        self,
        space: Space | str | None = None,
        settings: CephFSSettings | None = None,
        **values: Any,
    ) -> None:
        super().__init__(space, settings, **values)
        if self.mode != "local":
            raise TargetError(
                "the cephfs target runs on a local mini-cluster it makes itself; "
                "an existing CephFS (--ceph-conf) is not supported yet"
            )
        self._folder = StateFolder(self.state_dir, lock=self._lock)
        self._journal: Journal | None = None
        self._fuse: FuseMount | None = None
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

    def teardown(self) -> None:
        try:
            self._unmount()
        finally:
            try:
                super().teardown()  # the cluster and its daemons
            finally:
                self._fuse, self._journal = None, None
                self._folder.close()  # the journal's mount entry, the state folder's lock

    # ---- the mount ------------------------------------------------------------------------
    @property
    def mount_point(self) -> Path:
        assert self._cluster is not None
        return self._cluster.root / "mnt"

    def _mount(self) -> None:
        assert self._cluster is not None and self._journal is not None
        wait_active(self.client, self.health_timeout)
        conf = self._cluster.conf
        if f"[{FUSE_CLIENT}]" not in conf.read_text():  # a rebuilt cluster has a fresh file
            with conf.open("a") as out:  # ceph-fuse's admin socket: its perf counters
                out.write(f"[{FUSE_CLIENT}]\nadmin_socket = {self._cluster.asok(FUSE_CLIENT)}\n")
        if self._fuse is None:
            self._journal.record("mount", mount_point=str(self.mount_point))
            log_path = self._cluster.root / "log" / "ceph-fuse.out"
            self._fuse = FuseMount(self._cluster.conf, self.mount_point, FUSE_CLIENT, log_path)
        log.info("mounting CephFS on %s", self.mount_point)
        self._fuse.mount()

    def _unmount(self) -> None:
        if self._fuse is not None:
            self._fuse.unmount()

    @property
    def fuse_asok(self) -> Path:
        assert self._cluster is not None
        return self._cluster.asok(FUSE_CLIENT)

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
        if self._settings(values, space) != self._db:  # a remount at least: not while mounted
            self._unmount()
            try:
                super().apply(config)
            finally:
                self._mount()
        probe = self.mount_point / ".stortune-layout"  # Ceph's own verdict on the layout now
        probe.mkdir(exist_ok=True)
        set_layout(probe, layout)
        self._layout = layout

    # ---- run ------------------------------------------------------------------------------
    def venue(self, workload: Workload) -> Venue:
        if self._fuse is None or not self._fuse.mounted:
            raise TargetError("CephFS is not mounted: apply a config before running")
        workdir = self.mount_point / (_NAME.sub("_", workload.name) or "workload")
        for other in self.mount_point.iterdir():  # the layout holds for files made after it
            if other.is_dir():
                shutil.rmtree(other, ignore_errors=True)
        workdir.mkdir()
        set_layout(workdir, self._layout)
        samplers = [perf.ClusterSampler(self), FuseSampler(self), ExporterSampler(self.exporters)]
        return Venue(directory=workdir, devices=self._own_disks(), samplers=samplers)

    def run(
        self, workload: Workload | None = None, timeout: float | None = None, repetition: int = 0
    ) -> Measurement:
        measurement = super().run(workload, timeout, repetition)
        if self._fuse is not None and not self._fuse.mounted:
            return Measurement.failed(f"ceph-fuse lost its mount: {self._fuse.last_line()}")
        return measurement

    def after_run(self, workload: Workload, measurement: Measurement) -> None:
        super().after_run(workload, measurement)
        measurement.info.pop("pool", None)
        measurement.info.update(layout=dict(self._layout))
        if measurement.ok:
            metrics = measurement.metrics.items()
            collected = {k: v for k, v in metrics if k.startswith(COLLECTED)}
            if not any(k.startswith(("mgr.", "node.")) for k in collected):  # no exporter
                collected.update((k, v) for k, v in metrics if k.startswith(FALLBACK))
            self._last = collected

    def state(self) -> dict[str, float]:
        """Magpie's state: the last run's server metrics from ceph-mgr's prometheus module
        and the node exporter, and its client metrics from ceph-fuse (stortune's own /proc
        and perf-dump sampling when no exporter answered)."""
        return dict(self._last)

    def fuse_perf(self) -> dict[str, Any]:
        """ceph-fuse's perf counters, through its admin socket."""
        data = asok_command(self.fuse_asok, "perf dump")
        return data if isinstance(data, dict) else {}


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

    def start(self) -> FuseSampler:
        try:
            self._before = self.target.fuse_perf()
        except StortuneError:
            self._before = {}
        pid = self._pid()
        self._usage = perf.process_usage(pid) if pid else None
        self._started = time.monotonic()
        return self

    def stop(self) -> dict[str, float]:
        seconds = max(time.monotonic() - self._started, 1e-6)
        try:
            after = self.target.fuse_perf()
        except StortuneError:
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
