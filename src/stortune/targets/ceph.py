"""The ``ceph`` target: a Ceph cluster's RADOS layer under rados bench (SAPPHIRE's setting).

Two modes:

- ``local``: stortune makes a mini-cluster of `osds` OSDs in its own directory under the state
  directory (`cephcluster.local`: 127.0.0.1 only, auth off, small memory), waits for health, and
  removes it (daemons stopped by pid, files deleted) at teardown.
- ``existing``: a cluster given by a ceph.conf (and keyring) and one of its pools. Only runtime
  options unless `allow_restart` (then daemons are restarted with `restart_command`); never a
  re-format, never a pool deleted; every option changed is put back at teardown.

Applying a config: options that differ from the space's defaults (the values the cluster runs
with) go to the monitor's config database (``config set``; one place, so nothing in a ceph.conf
shadows them), each in the sections of the daemons that read it (an OSD option under ``osd``, a
common one under ``mon``, ``mgr``, ``osd`` and the benchmark's client ``client.bench``; client
options under ``client.bench``), never under ``global``: stortune's own control connection
(``client.admin``) must not receive tuned values (a changed ``librados_thread_count`` pushed to
it at runtime aborts it with "Resource deadlock avoided"); daemons that read a changed startup
option are restarted, the OSDs re-created
(a fresh local cluster) for options read at mkfs, the bench pool re-made for ``pg_per_osd``;
then every OSD must be up, every PG active+clean and the cluster HEALTH_OK within
`health_timeout`, and each daemon must report the new values. A config that fails any of that
is a failed trial (TargetError) and the cluster is brought back to the default config first.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stortune.ceph import perf
from stortune.ceph.client import CephClient, asok_command
from stortune.ceph.conf import (
    BASELINE,
    format_value,
    render_ceph_conf,
    same_value,
)
from stortune.ceph.health import status, wait_healthy
from stortune.ceph.local import DEFAULT_OSD_SIZE, LocalCluster, recover_stale
from stortune.errors import StortuneError, TargetError
from stortune.space import Config, Cost, Space
from stortune.system import syscmd, sysmetrics
from stortune.system.journal import MachineLock, default_state_dir
from stortune.system.sysmetrics import SystemSampler
from stortune.targets.base import Target, TargetSettings, require_root, setting
from stortune.units import parse_size
from stortune.workloads.base import Measurement, Need, Venue, Workload

if TYPE_CHECKING:
    from stortune.targets.install import InstallFile

MODES = ("local", "existing")
POOL_LAYER = "pool"
DAEMON_LAYERS = {"osd": ("osd",), "mon": ("mon",), "mgr": ("mgr",), "common": ("mon", "mgr", "osd")}
BENCH_CLIENT = "client.bench"  # the name rados bench runs under: it gets the client options
LAYER_SECTIONS = {
    "osd": ("osd",),
    "mon": ("mon",),
    "mgr": ("mgr",),
    "client": (BENCH_CLIENT,),
    "common": ("mon", "mgr", "osd", BENCH_CLIENT),
}
_instances = itertools.count()
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CephSettings(TargetSettings):
    osds: int = setting(2, flag="--osds", help="ceph: OSDs of the local mini-cluster.")
    conf: str | None = setting(
        None,
        flag="--ceph-conf",
        implies=True,
        help="ceph: tune the existing cluster this ceph.conf names (runtime options only unless "
        "--allow-restart; pools are never deleted) instead of a local mini-cluster.",
    )
    keyring: str | None = setting(
        None, flag="--keyring", help="ceph: the existing cluster's keyring."
    )
    allow_restart: bool = setting(
        False,
        flag="--allow-restart",
        help="ceph: with --ceph-conf, allow restarting the cluster's daemons for startup options.",
    )
    health_timeout: float = setting(
        180.0,
        flag="--health-timeout",
        help="ceph: seconds a changed cluster may take to become healthy before the config "
        "counts as failed.",
    )
    mode: str | None = setting(None)  # local or existing (default: existing when conf is given)
    osd_size: str = setting(DEFAULT_OSD_SIZE)
    state_dir: str = setting(factory=default_state_dir)
    pool: str = setting("stortune-bench")
    restart_command: str | None = setting(None)


class CephTarget(Target):
    """A Ceph cluster measured with rados bench (see the module docstring)."""

    kind = "ceph"
    Settings = CephSettings
    summary = "a local Ceph mini-cluster, or an existing one with --ceph-conf (root)"
    provides = frozenset({Need.RADOS_POOL})
    default_workloads = ("rados-rand",)
    default_space = "ceph"
    default_objective = "bw_mbs:max"
    settings: CephSettings
    daemon_layers: dict[str, tuple[str, ...]] = DAEMON_LAYERS  # layer -> daemon kinds reading it
    layer_sections: dict[str, tuple[str, ...]] = LAYER_SECTIONS  # layer -> config sections

    @classmethod
    def system_files(cls, config: Config, space: Space) -> list[InstallFile]:
        """The changed options as ceph.conf sections, each under the daemon that reads it."""
        from stortune.targets.install import InstallFile

        text = ceph_conf_section(config, space)
        if not text.strip():
            return []
        return [InstallFile("ceph.conf", "merge these sections into /etc/ceph/ceph.conf", text)]

    def __init__(
        self,
        space: Space | str | None = None,
        settings: CephSettings | None = None,
        **values: Any,
    ) -> None:
        for key in ("conf", "keyring", "state_dir"):
            if isinstance(values.get(key), os.PathLike):
                values[key] = os.fspath(values[key])
        super().__init__(space, settings, **values)
        s = self.settings
        mode = s.mode or ("existing" if s.conf else "local")
        if mode not in MODES:
            raise TargetError(f"ceph target mode {mode!r}: choose from {', '.join(MODES)}")
        if mode == "existing" and s.conf is None:
            raise TargetError("the existing mode needs the cluster's ceph.conf (conf=...)")
        self.settings = s = replace(s, mode=mode)
        self.mode = mode
        self.osds = int(s.osds)
        self.osd_size = s.osd_size
        self._osd_bytes = parse_size(s.osd_size)
        self.state_dir = Path(s.state_dir)
        self.conf = Path(s.conf) if s.conf is not None else None
        self.keyring = Path(s.keyring) if s.keyring is not None else None
        self.pool = s.pool
        self.allow_restart = bool(s.allow_restart)
        self.restart_command = s.restart_command
        self.health_timeout = float(s.health_timeout)
        self._lock = MachineLock(self.state_dir)
        self._cluster: LocalCluster | None = None
        self._client: CephClient | None = None
        self._found: dict[str, tuple[str, str]] = {}  # name -> (section, value) at the start
        self._db: dict[str, str] = {}  # what this target wrote to the config database
        self._pg_per_osd: int | None = None
        self._tolerated: frozenset[str] = frozenset()
        self._osd_ids: list[int] = []
        self._restarted: set[str] = set()  # existing-mode daemons restarted by this target

    def preflight(self) -> None:
        if self.mode == "local":
            require_root("the ceph target's local mini-cluster")

    @property
    def client(self) -> CephClient:
        if self._client is None:
            raise TargetError("the ceph target is not set up")
        return self._client

    @property
    def osd_ids(self) -> list[int]:
        return list(self._osd_ids)

    @property
    def cluster(self) -> LocalCluster | None:
        """The local mini-cluster (None in the existing mode or before setup)."""
        return self._cluster

    # ---- life cycle -----------------------------------------------------------------------
    def setup(self) -> None:
        if self._client is not None:
            return
        if self.mode == "local":
            self._setup_local()
        else:
            self._setup_existing()

    def _setup_local(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            recover_stale(self.state_dir)
            root = self.state_dir / f"ceph-{os.getpid()}-{next(_instances)}"
            self._cluster = self._new_cluster(root)
            self._client = self._cluster.client
            self._found = {name: ("global", value) for name, value in BASELINE.items()}
            self._bootstrap({}, self._default_pg())
        except BaseException:
            self.teardown()
            raise

    def _bootstrap(self, settings: Mapping[str, str], pg_per_osd: int) -> None:
        """A fresh local cluster whose config database holds the baseline and `settings`."""
        assert self._cluster is not None
        self._db = {**self._found_values(), **settings}
        self._cluster.create(self._db, {name: self.sections_of(name) for name in self._db})
        self._osd_ids = list(range(self.osds))
        self._make_pool(pg_per_osd)
        wait_healthy(self.client, self.health_timeout, self.osds, alive=self._cluster.check_alive)

    def _setup_existing(self) -> None:
        assert self.conf is not None
        self._client = CephClient(self.conf, self.keyring)
        self._check_existing()
        self._osd_ids = [int(i) for i in self.client.json("osd", "ls") or []]
        self._pg_per_osd = self._default_pg()  # the pool as it is counts as the default
        self._tolerated = status(self.client).checks  # standing warnings are not ours
        sections = {"global", "client", *itertools.chain(*self.layer_sections.values())}
        for entry in self.client.json("config", "dump") or []:
            section, name = entry.get("section", ""), entry.get("name", "")
            if name in self.space and section in sections:
                self._found[name] = (section, str(entry.get("value", "")))
        self._db = self._found_values()

    def _check_existing(self) -> None:
        """What the existing cluster must have before anything is changed: the bench pool."""
        pools = self.client.json("osd", "pool", "ls") or []
        if self.pool not in pools:
            raise TargetError(
                f"pool {self.pool!r} does not exist on the cluster of {self.conf} "
                "(the existing mode never creates or deletes pools: make it first)"
            )

    def _found_values(self) -> dict[str, str]:
        return {name: value for name, (_, value) in self._found.items()}

    def teardown(self) -> None:
        """Local: stop every daemon and remove the cluster. Existing: put back every option
        this target changed (restarting daemons when restarts are allowed)."""
        try:
            if self._cluster is not None:
                killed = self._cluster.destroy()
                if killed:
                    raise TargetError(f"{', '.join(killed)} ignored SIGTERM and were killed")
            elif self._client is not None:
                self._revert_existing()
        finally:
            self._cluster = None
            self._client = None
            self._db = {}
            self._pg_per_osd = None
            self._lock.release()

    # ---- apply ----------------------------------------------------------------------------
    def _full_config(self, config: Config) -> tuple[Config, Space]:
        """The whole config (a subspace's held values too), checked against hard bounds."""
        return self.space.full_config(config), self.space.root  # a subspace holds the others

    def settings_for(self, config: Config) -> dict[str, str]:
        """The config database entries a config needs: every option whose value differs from
        the space's default, and every option the cluster had set when we found it."""
        values, space = self._full_config(config)
        return self._settings(values, space)

    def _settings(self, values: Config, space: Space) -> dict[str, str]:
        out = self._found_values()  # kept as found unless the config says otherwise
        for name, value in values.items():
            p = space[name]
            if p.layer == POOL_LAYER or p.applied_by_workload:
                continue
            if value != p.default or name in self._found:
                out[name] = format_value(value)
        return out

    def apply(self, config: Config) -> None:
        values, space = self._full_config(config)
        self.setup()
        wanted = self._settings(values, space)
        pg = int(values.get("pg_per_osd", self._default_pg()))
        changed = {n for n in set(wanted) | set(self._db) if wanted.get(n) != self._db.get(n)}
        if not changed and pg == self._pg_per_osd:
            return
        params = [space[n] for n in changed if n in space]
        costs = {p.cost for p in params}
        layers = {p.layer for p in params if p.cost is Cost.RESTART}
        daemons = self._daemons(layers)
        self._check_allowed(costs, daemons, pg)
        try:
            if Cost.REFORMAT in costs:
                self._rebuild(wanted, pg)
            else:
                self._write(wanted)
                self._restart(daemons)
                if pg != self._pg_per_osd:
                    self._remake_pool(pg)
                self._wait_healthy()
            self._verify(wanted, changed, space)
        except StortuneError as exc:
            self._back_to_default(daemons)
            raise TargetError(f"{exc} (the cluster is back at the default config)") from exc

    def _check_allowed(self, costs: set[Cost], daemons: list[str], pg: int) -> None:
        if self.mode == "local":
            return
        if Cost.REFORMAT in costs:
            raise TargetError(
                "this config changes options read only when an OSD is made; "
                "the existing mode never re-creates OSDs"
            )
        if pg != self._default_pg() and pg != self._pg_per_osd:
            raise TargetError("pg_per_osd can only be tuned on a local cluster")
        if daemons and not self.allow_restart:
            raise TargetError(
                f"this config changes startup options of {', '.join(sorted(daemons))}; "
                "allow restarts (--allow-restart) or tune runtime options only"
            )

    def _daemons(self, layers: set[str]) -> list[str]:
        kinds = {kind for layer in layers for kind in self.daemon_layers.get(layer, ())}
        if self._cluster is not None:
            return [d for d in self._cluster.daemons if d.split(".")[0] in kinds]
        names = []
        if "osd" in kinds:
            names += [f"osd.{i}" for i in self._osd_ids]
        for kind in sorted(kinds - {"osd"}):
            names += [f"{kind}.{n}" for n in self._daemon_names(kind)]
        return names

    def _daemon_names(self, kind: str) -> list[str]:
        if kind == "mon":
            return [m["name"] for m in (self.client.json("mon", "dump") or {}).get("mons", [])]
        if kind == "mgr":
            data = self.client.json("mgr", "dump") or {}
            return [data["active_name"]] if data.get("active_name") else []
        raise TargetError(f"this target cannot name an existing cluster's {kind} daemons")

    def sections_of(self, name: str) -> tuple[str, ...]:
        """Where an option goes in the config database: the section it was found in, else the
        sections of its layer's readers (module docstring), else global."""
        if name in self._found:
            return (self._found[name][0],)
        space = self.space.root
        layer = space[name].layer if name in space else ""
        return self.layer_sections.get(layer, ("global",))

    def _write(self, wanted: Mapping[str, str]) -> None:
        """Bring the config database to `wanted` (which always holds the found settings)."""
        sections: dict[str, dict[str, str]] = {}
        for name, value in wanted.items():
            if self._db.get(name) != value:
                for section in self.sections_of(name):
                    sections.setdefault(section, {})[name] = value
        removed: dict[str, list[str]] = {}
        for name in self._db:
            if name not in wanted:
                for section in self.sections_of(name):
                    removed.setdefault(section, []).append(name)
        self._db = {**self._db, **wanted}  # until done, anything either holds may be set
        for section, settings in sections.items():
            log.info("ceph config set in %s: %s", section, settings)
            self.client.config_set(settings, who=section)
        for section, names in removed.items():
            log.info("ceph config rm in %s: %s", section, ", ".join(names))
            self.client.config_rm(names, who=section)
        self._db = dict(wanted)

    def _restart(self, daemons: list[str]) -> None:
        if not daemons:
            return
        log.info("restarting %s", ", ".join(daemons))
        if self._cluster is not None:
            self._cluster.restart(daemons)
            return
        if not self.restart_command:
            raise TargetError("restarting daemons of an existing cluster needs restart_command")
        for daemon in daemons:
            kind, ident = daemon.split(".", 1)
            template = shlex.split(self.restart_command)
            argv = [a.format(daemon=daemon, type=kind, id=ident) for a in template]
            syscmd.run(argv, f"restarting {daemon}", timeout=self.health_timeout)
            self._restarted.add(daemon)

    def _wait_healthy(self) -> None:
        alive = self._cluster.check_alive if self._cluster is not None else None
        osds = self.osds if self._cluster is not None else len(self._osd_ids)
        wait_healthy(self.client, self.health_timeout, osds, self._tolerated, alive)

    def _verify(self, wanted: Mapping[str, str], changed: set[str], space: Space) -> None:
        """Each daemon must run with the values it was given (a daemon that dropped or
        refused a value is a failed config, not a measurement of it)."""
        by_daemon: dict[str, list[str]] = {}
        for name in sorted(changed & set(wanted) & set(space.names)):
            layer = space[name].layer
            # Monitors and managers read some common startup options (thp, heartbeat_interval)
            # only from ceph.conf, before the config database: those count on the OSDs.
            readers = {"osd"} if layer == "common" else {layer}
            for daemon in self._daemons(readers) if layer in self.daemon_layers else ():
                by_daemon.setdefault(daemon, []).append(name)
        # Runtime values arrive with the next config push, and a restarted manager opens its
        # admin socket a little after the cluster counts it as active.
        deadline = time.monotonic() + 30.0
        for daemon, names in by_daemon.items():
            while True:
                try:
                    running = self.running_config(daemon)
                except TargetError as exc:
                    running, problem = {}, str(exc)
                else:
                    wrong = [n for n in names if not same_value(running.get(n, ""), wanted[n])]
                    shown = ", ".join(f"{n}={running.get(n, '?')}" for n in wrong[:3])
                    problem = f"{daemon} does not run with the config: {shown}" if wrong else ""
                if not problem:
                    break
                if time.monotonic() > deadline:
                    raise TargetError(problem)
                time.sleep(0.5)

    def running_config(self, daemon: str) -> dict[str, str]:
        """Every option's value in a running daemon, asked of the daemon itself (its admin
        socket, or ``ceph tell``), not of the manager, which learns it only later."""
        if self._cluster is not None:
            data = asok_command(self._cluster.asok(daemon), "config show")
        else:
            data = self.client.json("tell", daemon, "config", "show")
        if not isinstance(data, dict):
            raise TargetError(f"{daemon}: config show gave no mapping")
        return {k: str(v) for k, v in data.items()}

    def _back_to_default(self, restarted: list[str]) -> None:
        """After a failed config: the found settings back, the daemons that were restarted (or
        died) restarted, health; a local cluster that still does not recover is rebuilt."""
        try:
            self._write(self._found_values())
            dead = self._cluster.dead() if self._cluster is not None else []
            self._restart(sorted(set(restarted) | set(dead)))
            if self._cluster is not None and self._pg_per_osd != self._default_pg():
                self._remake_pool(self._default_pg())
            self._wait_healthy()
        except StortuneError as exc:
            if self._cluster is None:
                raise TargetError(f"the cluster did not recover: {exc}") from exc
            self._rebuild({}, self._default_pg())

    def _revert_existing(self) -> None:
        """Put back what was found; daemons restarted with tuned startup options are
        restarted again so that they run as they did."""
        if self._db != self._found_values():
            self._write(self._found_values())
        if self._restarted:
            self._restart(sorted(self._restarted))
            self._wait_healthy()

    # ---- local cluster and pool -----------------------------------------------------------
    def _rebuild(self, settings: Mapping[str, str], pg_per_osd: int) -> None:
        """A fresh local cluster (same directory) with `settings`: what options read at OSD
        creation need, and the last resort when a cluster does not recover."""
        assert self._cluster is not None
        old = self._cluster
        old.destroy()
        self._cluster = self._new_cluster(old.root)
        self._client = self._cluster.client
        self._bootstrap(settings, pg_per_osd)

    def _new_cluster(self, root: Path) -> LocalCluster:
        return LocalCluster(root, self.osds, self._osd_bytes)

    def _default_pg(self) -> int:
        space = self.space.root
        return int(space["pg_per_osd"].default) if "pg_per_osd" in space else 32

    def _make_pool(self, pg_per_osd: int) -> None:
        assert self._cluster is not None
        raw = max(1, pg_per_osd * self.osds)  # replica 1
        pg_num = 2 ** round(math.log2(raw))
        self._cluster.make_pool(self.pool, pg_num)
        self._pg_per_osd = pg_per_osd

    def _remake_pool(self, pg_per_osd: int) -> None:
        assert self._cluster is not None
        self._cluster.delete_pool(self.pool)
        self._pg_per_osd = None
        self._make_pool(pg_per_osd)

    # ---- run ------------------------------------------------------------------------------
    def attempt(
        self, workload: Workload | None = None, timeout: float | None = None, repetition: int = 0
    ) -> Measurement:
        self.check_workload(workload)
        self.setup()
        try:
            self._wait_healthy()
        except TargetError as exc:
            return Measurement.failed(f"before the run: {exc}")
        return super().attempt(workload, timeout, repetition)

    def venue(self, workload: Workload) -> Venue:
        return Venue(
            rados=[*self.client.rados_argv(self.pool), "--name", BENCH_CLIENT],
            samplers=[SystemSampler(self._own_disks()), perf.ClusterSampler(self)],
        )

    def after_run(self, workload: Workload, measurement: Measurement) -> None:
        measurement.info.update(mode=self.mode, osds=len(self._osd_ids), pool=self.pool)

    def state_after(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """The run's cluster-side and system metrics."""
        return {k: v for k, v in metrics.items() if k.startswith(("ceph.", "sys."))}

    def _own_disks(self) -> list[str]:
        """The disk under a local cluster's OSD files: its I/O is the benchmark's, not a
        disturbance (an existing cluster's disks are not on this machine)."""
        if self._cluster is None:
            return []
        disk = sysmetrics.disk_of(self._cluster.root)
        return [disk] if disk else []

    def live_state(self) -> dict[str, float]:
        """System gauges now, beside the last run's cluster-side metrics (per-OSD perf
        counters, commit/apply latency, daemon CPU and memory)."""
        return sysmetrics.snapshot()

    def perf_dump(self, osd: int) -> dict[str, Any]:
        """An OSD's perf counters: through its admin socket locally, ``ceph tell`` otherwise."""
        if self._cluster is not None:
            data = asok_command(self._cluster.asok(f"osd.{osd}"), "perf dump")
        else:
            data = self.client.json("tell", f"osd.{osd}", "perf", "dump")
        return data if isinstance(data, dict) else {}

    def osd_perf(self) -> Any:
        """``ceph osd perf``: commit and apply latency per OSD."""
        return self.client.json("osd", "perf")

    def daemon_usage(self) -> dict[str, tuple[float, float] | None]:
        """CPU seconds and resident MB of a local cluster's daemons (empty for an existing
        cluster, whose processes may be elsewhere)."""
        return perf.snapshot_usage(self._cluster.pids) if self._cluster is not None else {}


def ceph_conf_section(config: Config, space: Space, header: str = "") -> str:
    """A config as ceph.conf sections ([global], [osd], [mon], ...), each option under the
    daemon that reads it, only the options that differ from the space's defaults; for
    ``stortune recommend`` and for pasting into a production cluster's ceph.conf."""
    parent = space.root
    full = space.full_config(config)
    changed = {n: v for n, v in full.items() if v != parent[n].default}
    layers = {n: parent[n].layer for n in changed}
    return render_ceph_conf(changed, layers, header)
