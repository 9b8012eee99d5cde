"""The `localfs` target: the machine's own storage stack, from mkfs to vm sysctls.

By default the file system lives on a loop device (direct I/O) over an image file in the state
directory; or on a scratch block device the user names (``device=/dev/X``), which is checked by
`devguard` before anything is written to it. A config is applied layer by layer, doing only what
its changed parameters need (a parameter's ``apply`` cost, and its layer: mkfs needs a
re-format, mount a remount, block and vm settings only a write):

- ``mkfs``: the file system (option ``fstype``) and its mkfs options; re-format.
- ``mount``: mount options; umount and mount again.
- ``block``: /sys/block/DEV/queue/ATTRIBUTE (scheduler, read_ahead_kb, nr_requests, ...).
- ``vm``: /proc/sys settings named like ``vm.dirty_ratio`` (machine-wide).

Everything created or changed is journaled first (`journal`), undone by `teardown`, after a
failed apply (settings), and by the next target when this one dies. Runs drop the page cache
first and may cap the benchmark's memory with a cgroup (Carver's small-RAM setting).

Whether a run reached the device (`stortune.targets.device`): before its first mkfs the target
measures its device's raw bandwidth by direct fio (an image it formats anyway, or a named device
only with ``destroy_data``), once per device and state folder; each run then counts the bytes at
the device and at the disk under the image, and carries the ``device.*`` metrics.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stortune.errors import TargetError
from stortune.space import Config, Cost, Parameter, Space
from stortune.system import cgroup, devguard, loopdev, mkfs, mounts, syscmd, sysconf, sysmetrics
from stortune.system.journal import Journal, StateFolder, default_state_dir
from stortune.targets import device as devmetrics
from stortune.targets.base import Target, TargetSettings, require_root, setting
from stortune.units import parse_size
from stortune.workloads.base import Measurement, Need, Venue, Workload

if TYPE_CHECKING:
    from stortune.targets.install import InstallFile

log = logging.getLogger(__name__)

LAYERS = ("mkfs", "mount", "block", "vm")
_RANK = {Cost.RUNTIME: 0, Cost.REWRITE: 0, Cost.REMOUNT: 1, Cost.RESTART: 1, Cost.REFORMAT: 2}
_LAYER_RANK = {"mkfs": 2, "mount": 1, "block": 0, "vm": 0}
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_instances = itertools.count()

available_filesystems = mkfs.available_filesystems


@dataclass(frozen=True)
class Plan:
    """What a config means for each layer, computed (and checked) before anything is done."""

    fs: str
    mkfs: tuple[str, ...]  # mkfs argv without the device
    mount: str  # -o options
    block: tuple[tuple[str, str], ...]  # (queue attribute, value), scheduler first
    vm: tuple[tuple[str, str], ...]  # (sysctl name, value)


@dataclass(frozen=True)
class LocalFsSettings(TargetSettings):
    image_size: str = setting(
        "4g", flag="--image-size", help="localfs: size of the loop image file."
    )
    device: str | None = setting(
        None,
        flag="--device",
        help="localfs: use this scratch block device instead of an image file "
        "(needs --destroy-data; refused when mounted or the root disk).",
    )
    destroy_data: bool = setting(
        False,
        flag="--destroy-data",
        help="localfs: allow formatting the --device (its data is lost).",
    )
    memory_limit: str | None = setting(
        None,
        flag="--memory-limit",
        help="localfs: cap the benchmark's page cache with a memory cgroup (e.g. 512m).",
    )
    fs: str | None = setting(None)  # the file system when the space has no fstype parameter
    image: str | None = setting(None)  # the image file (default: one in the state folder)
    state_dir: str = setting(factory=default_state_dir)
    keep_image: bool = setting(False)
    drop_caches: bool = setting(True)


class LocalFsTarget(Target):
    """A file system on a loop device (or a scratch device) with block and vm settings."""

    kind = "localfs"
    Settings = LocalFsSettings
    summary = "a loop-device file system with its block and vm settings (root)"
    provides = frozenset({Need.DIRECTORY})
    default_workloads = ("fileserver",)
    default_space = "localfs"
    default_objective = "total.bw_mbs:max"
    settings: LocalFsSettings

    @classmethod
    def system_files(cls, config: Config, space: Space) -> list[InstallFile]:
        """mkfs command, fstab line, sysctl.d, and the block queue as tmpfiles.d and udev."""
        from stortune.targets.install import localfs_files

        return localfs_files(config, space)

    def __init__(
        self,
        space: Space | str | None = None,
        settings: LocalFsSettings | None = None,
        **values: Any,
    ) -> None:
        for key in ("image", "state_dir", "image_size", "memory_limit"):
            if isinstance(values.get(key), os.PathLike | int):
                values[key] = str(values[key]) if key != "image_size" else values[key]
        super().__init__(space, settings, **values)
        s = self.settings
        self.fs = s.fs
        self.image = Path(s.image) if s.image is not None else None
        self.image_size = s.image_size
        self._image_bytes = parse_size(s.image_size)
        self.device = s.device
        self.destroy_data = bool(s.destroy_data)
        if s.device is not None and s.image is not None:
            raise TargetError("give either a device or an image, not both")
        self.state_dir = Path(s.state_dir)
        self.keep_image = bool(s.keep_image)
        self.drop_caches = bool(s.drop_caches)
        self.memory_limit = s.memory_limit
        self._memory_bytes = parse_size(s.memory_limit) if s.memory_limit is not None else None
        self._instance = f"{os.getpid()}-{next(_instances)}"
        self._folder = StateFolder(self.state_dir)
        self._journal: Journal | None = None
        self._dev: str | None = None  # the block device the file system is on
        self._backing: str | None = None  # the disk under the image (None for a named device)
        self._raw: devmetrics.RawBandwidth | None = None  # the device's raw bandwidth
        self._queue: Path | None = None
        self._image_path: Path | None = None
        self._mount_point: Path | None = None
        self._cgroup: Path | None = None
        self._formatted: Plan | None = None  # the plan whose mkfs made the current fs
        self._mounted_with: str | None = None
        self._applied: Config = {}
        self._originals: dict[str, str] = {}

    def preflight(self) -> None:
        """No root, or a device that must not be formatted: said before anything is locked."""
        require_root("the localfs target")
        if self.device is not None:
            devguard.check_scratch_device(self.device, self.destroy_data)

    # ---- life cycle -----------------------------------------------------------------------
    def setup(self) -> None:
        if self._journal is not None:
            return
        self.preflight()
        self._journal = self._folder.open()
        try:
            self._attach()
            self._mount_point = self.state_dir / f"mnt-{self._instance}"
            self._journal.record("dir", path=str(self._mount_point))
            self._mount_point.mkdir(exist_ok=True)
            if self._memory_bytes is not None:
                # Journaled just after creation: which hierarchy works is only known by trying,
                # and a cgroup left empty by a crash in between costs nothing.
                name = f"stortune-{self._instance}"
                self._cgroup = cgroup.create_memory_cgroup(name, self._memory_bytes)
                self._journal.record("cgroup", path=str(self._cgroup))
        except BaseException:
            with contextlib.suppress(TargetError):
                self.teardown()
            raise

    def _attach(self) -> None:
        assert self._journal is not None
        if self.device is not None:
            dev = devguard.check_scratch_device(self.device, self.destroy_data)
            self._dev, self._queue = dev.path, dev.queue_dir
            if self.destroy_data:  # its data may go: raw fio writes on it before mkfs does
                size = devmetrics.block_size_bytes(dev.path)
                self._measure_raw(devmetrics.device_key(dev.path, size), size)
            return
        image = self.image or self.state_dir / f"localfs-{self._instance}.img"
        self._journal.record("image", path=str(image), keep=self.keep_image)
        loopdev.allocate(image, self._image_bytes)
        self._journal.record("loop", image=str(image))
        self._dev = loopdev.attach(image)
        log.info("attached %s (%s bytes) as %s", image, self._image_bytes, self._dev)
        self._queue = Path("/sys/block", Path(self._dev).name, "queue")
        self._image_path = image
        self._backing = sysmetrics.disk_of(image)
        key = devmetrics.image_key(image, self._image_bytes, self._backing)
        self._measure_raw(key, self._image_bytes)

    def _measure_raw(self, key: str, size: int) -> None:
        """The device's raw bandwidth, kept from an earlier target or measured now (before any
        mkfs: it overwrites the device); runs go without it when fio cannot measure it."""
        if not devmetrics.raw_enabled():
            return
        assert self._dev is not None
        try:
            self._raw = devmetrics.raw_bandwidth(
                self.state_dir, key, self._dev, size, self._backing
            )
        except (TargetError, OSError) as exc:
            log.warning("runs on %s go without its raw bandwidth: %s", self._dev, exc)

    def teardown(self) -> None:
        """Undo everything (settings, mount, cgroup, loop device, image); safe to call twice
        and after a partial setup."""
        self._journal = None
        self._dev = self._queue = self._image_path = self._mount_point = self._cgroup = None
        self._backing, self._raw = None, None
        self._formatted, self._mounted_with, self._applied = None, None, {}
        self._originals = {}
        self._folder.close()

    # ---- apply ----------------------------------------------------------------------------
    def _full_config(self, config: Config) -> tuple[Config, Space]:
        return self.space.full_config(config), self.space.root  # a subspace holds the others

    def plan(self, config: Config) -> Plan:
        """Check a config against the space and the machine and say what it sets; raises
        ConfigError/TargetError before anything is touched."""
        return self._plan(*self._full_config(config))

    def changes(self, config: Config) -> Plan:
        """What a production system must change from its defaults to hold `config`: the
        plan of the parameters away from their space defaults, with mkfs free of the
        benchmark's own flags (-F, -q, nodiscard, ...)."""
        values, space = self._full_config(config)
        changed = {name for name, value in values.items() if value != space[name].default}
        return self._plan(values, space, only=changed)

    def _plan(self, values: Config, space: Space, only: set[str] | None = None) -> Plan:
        """`only`: just these parameters, for production (see `changes`)."""
        params = [space[name] for name in values if not space[name].applied_by_workload]
        fs = self._default_fs(space)
        for p in params:
            if p.layer == "mkfs" and p.extra.get("option") == mkfs.FSTYPE:
                fs = str(values[p.name])
        if fs not in mkfs.available_filesystems():
            have = ", ".join(mkfs.available_filesystems()) or "none"
            raise TargetError(f"file system {fs!r} cannot be made and mounted here ({have} can)")
        layers: dict[str, list[tuple[str, str, Any]]] = {layer: [] for layer in LAYERS}
        for p in params:
            option = self._option(p, fs)
            omitted = "omit" in p.extra and values[p.name] == p.extra["omit"]
            chosen = only is None or p.name in only
            if option != mkfs.FSTYPE and not omitted and chosen:  # omit: a value setting nothing
                layers[p.layer].append((p.name, option, values[p.name]))
        block = [
            (str(sysconf.queue_path(Path(), o)), sysconf.format_value(v))
            for _, o, v in layers["block"]
        ]
        block.sort(key=lambda item: item[0] != "scheduler")  # a scheduler switch resets others
        vm = [(o, sysconf.format_value(v)) for _, o, v in layers["vm"]]
        for name, _ in vm:
            sysconf.sysctl_path(name)
        argv = mkfs.mkfs_argv(fs, "", layers["mkfs"], benchmark=only is None)[:-1]
        return Plan(fs, tuple(argv), mkfs.mount_options(layers["mount"]), tuple(block), tuple(vm))

    def _default_fs(self, space: Space) -> str:
        """Without an ``fstype`` parameter: the target's `fs`, else the file system the space
        is named after (the bundled xfs and btrfs spaces), else ext4."""
        if self.fs is not None:
            return self.fs
        return space.name if space.name in mkfs.MKFS_BASE else "ext4"

    def _option(self, p: Parameter, fs: str) -> str:
        if p.layer not in LAYERS:
            raise TargetError(
                f"parameter {p.name!r}: layer {p.layer!r} is not one localfs sets "
                f"({', '.join(LAYERS)})"
            )
        option = mkfs.option_for(p.extra.get("option"), fs, p.name)
        if option is None:
            raise TargetError(f"parameter {p.name!r} has no option for file system {fs}")
        return option

    def apply(self, config: Config) -> None:
        values, space = self._full_config(config)
        plan = self._plan(values, space)
        self.setup()
        level = self._level(plan, values, space)
        self._applied = {}  # until this apply is complete, every parameter counts as changed
        try:
            if level >= 2:
                self._formatted = None
                self._format(plan)
            if level >= 1 or not self._is_mounted():
                self._mount(plan)
            self._settings(plan)
        except BaseException as exc:
            assert self._journal is not None
            problems = self._journal.undo({"setting"})
            self._originals = {}
            if problems:
                raise TargetError(f"apply failed and settings stay changed: {problems[0]}") from exc
            raise
        self._applied = values

    def _level(self, plan: Plan, values: Config, space: Space) -> int:
        """2: re-format, 1: remount, 0: settings only."""
        if self._formatted is None or self._formatted.mkfs != plan.mkfs:
            return 2
        level = 1 if plan.mount != self._mounted_with else 0
        for name, value in values.items():
            p = space[name]
            if self._applied.get(name, object()) != value and not p.applied_by_workload:
                level = max(level, _RANK[p.cost], _LAYER_RANK.get(p.layer, 0))
        return level

    def _is_mounted(self) -> bool:
        return self._mount_point is not None and mounts.is_mounted(self._mount_point)

    def _format(self, plan: Plan) -> None:
        assert self._dev is not None and self._mount_point is not None
        mounts.umount(self._mount_point)
        self._mounted_with = None
        if self.device is not None:
            devguard.check_scratch_device(self.device, True)  # still not mounted or held
        else:
            assert self._image_path is not None
            loopdev.allocate(self._image_path, self._image_bytes)  # fill holes punched so far
        log.info("formatting %s: %s", self._dev, " ".join([*plan.mkfs, self._dev]))
        syscmd.run([*plan.mkfs, self._dev], f"formatting {self._dev} as {plan.fs}")
        self._formatted = plan

    def _mount(self, plan: Plan) -> None:
        assert self._dev is not None and self._mount_point is not None and self._journal
        mounts.umount(self._mount_point)
        if not any(e["op"] == "mount" for e in self._journal.entries):
            self._journal.record("mount", mount_point=str(self._mount_point))
        log.info(
            "mounting %s on %s (%s, -o %s)",
            self._dev,
            self._mount_point,
            plan.fs,
            plan.mount or "defaults",
        )
        mounts.mount(self._dev, self._mount_point, plan.fs, plan.mount)
        self._mounted_with = plan.mount

    def _settings(self, plan: Plan) -> None:
        """Bring every block and vm setting to the plan's value; settings changed earlier that
        the plan no longer names go back to their original values."""
        assert self._queue is not None
        wanted = [(sysconf.queue_path(self._queue, a), v, True) for a, v in plan.block]
        wanted += [(sysconf.sysctl_path(n), v, False) for n, v in plan.vm]
        named = {str(path) for path, _, _ in wanted}
        for path_text, original in list(self._originals.items()):
            path = Path(path_text)
            if path.parent.name == "iosched" and not path.exists():
                del self._originals[path_text]  # its scheduler is gone, and its tunables
                continue
            if path_text not in named and sysconf.read(path) != original:
                log.info("restoring %s = %s", path_text, original)
                sysconf.write(Path(path_text), original)
        for path, value, on_device in wanted:
            current = sysconf.read(path)
            if current == value:
                continue
            if path.name == "scheduler" and str(path) not in self._originals:
                # Switching the scheduler resets the queue's other settings (nr_requests): keep
                # them as they are under the device's own scheduler, the values to go back to.
                for other, _, queue in wanted:
                    if queue and other.parent == path.parent and other != path:
                        self._remember(other, sysconf.read(other), queue)
            self._remember(path, current, on_device)
            log.info("writing %s = %s (was %s)", path, value, current)
            sysconf.write(path, value)

    def reassert(self) -> list[str]:
        """The vm sysctls of the applied plan that something else wrote since (they are the
        whole machine's, and another process may tune them too), written back."""
        if not self._applied:  # nothing applied, or an apply that did not complete
            return []
        plan = self.plan(self._applied)
        changed = []
        for name, value in plan.vm:
            current = sysconf.read(sysconf.sysctl_path(name))
            if current != value:
                changed.append(f"{name} = {current} (applied: {value})")
        if changed:
            self._settings(plan)
        return changed

    def _remember(self, path: Path, current: str, on_device: bool) -> None:
        """Journal a setting's original value before its first change."""
        if str(path) in self._originals:
            return
        owner = (
            {"device": self._dev, "image": str(self._image_path)}
            if (on_device and self._image_path is not None)
            else {}
        )
        assert self._journal is not None
        self._journal.record("setting", path=str(path), old=current, **owner)
        self._originals[str(path)] = current

    # ---- run ------------------------------------------------------------------------------
    def venue(self, workload: Workload) -> Venue:
        """A directory of its own on the mounted file system, room for its files, the cgroup
        and the device; the page cache is dropped between set-up and measurement."""
        if not self._is_mounted() or self._mount_point is None:
            raise TargetError("no file system is mounted: apply a config before running")
        workdir = self._mount_point / (_NAME.sub("_", workload.name) or "workload")
        workdir.mkdir(exist_ok=True)
        self._make_room(workdir, workload.footprint_bytes)
        return Venue(
            directory=workdir,
            cgroup=self._cgroup,
            devices=[self._dev] if self._dev else [],
            samplers=[sysmetrics.DeviceSampler(self._dev, self._backing)] if self._dev else [],
            before_measure=_drop_caches if self.drop_caches else (lambda: None),
            journal=self._journal,
        )

    def after_run(self, workload: Workload, measurement: Measurement) -> None:
        """The run's record: fs, device, options; and whether the run reached the device
        (``device.*``, `stortune.targets.device`)."""
        measurement.info.update(
            fs=self._formatted.fs if self._formatted else None,
            device=self._dev,
            mount_options=self._mounted_with,
            memory_limit=self.memory_limit,
        )
        if measurement.ok:
            measurement.metrics.update(devmetrics.accounting(measurement.metrics, self._raw))
            if self._raw is not None:
                measurement.info.update(device_raw_measured=self._raw.measured)

    def _make_room(self, workdir: Path, size: int) -> None:
        """Other workloads' file sets go when this one's would not fit beside them."""
        stats = os.statvfs(workdir)
        if stats.f_bavail * stats.f_frsize >= 1.3 * size:
            return
        for other in workdir.parent.iterdir():
            if other != workdir and other.is_dir() and other.name != "lost+found":
                shutil.rmtree(other, ignore_errors=True)

    def live_state(self) -> dict[str, float]:
        """Current gauges (load, memory, dirty pages), beside the last run's system metrics."""
        return sysmetrics.snapshot()

    def state_after(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """The run's system metrics."""
        return {k: v for k, v in metrics.items() if k.startswith("sys.")}


def _drop_caches() -> None:
    """Write dirty data back and empty the page cache, so each run starts cold."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3")
    except OSError as exc:
        raise TargetError(f"cannot drop caches: {exc.strerror}") from None
