"""The `tmpfs` target: a file system in RAM, mounted with the config's options.

What a RAM file system's own options (size, inode count, transparent huge pages, swap) do to a
workload, with the disk out of the picture; a baseline for the `localfs` stack. Each config is a
fresh mount (tmpfs keeps nothing across one), recorded in the state folder's journal first, so
teardown, or the next target after a crash, unmounts it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stortune.errors import TargetError
from stortune.space import Config, Space
from stortune.system import mkfs, mounts
from stortune.system.journal import Journal, StateFolder, default_state_dir
from stortune.targets.base import Target, TargetSettings, require_root, setting
from stortune.workloads.base import Need, Venue, Workload

log = logging.getLogger(__name__)
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_instances = itertools.count()


@dataclass(frozen=True)
class TmpfsSettings(TargetSettings):
    state_dir: str = setting(factory=default_state_dir)


class TmpfsTarget(Target):
    kind = "tmpfs"
    Settings = TmpfsSettings
    summary = "a RAM file system (tmpfs) and its mount options (root)"
    provides = frozenset({Need.DIRECTORY})
    default_workloads = ("fileserver",)
    default_space = "tmpfs"
    default_objective = "total.bw_mbs:max"
    settings: TmpfsSettings

    def __init__(
        self, space: Space | str | None = None, settings: TmpfsSettings | None = None, **values: Any
    ) -> None:
        super().__init__(space, settings, **values)
        self.state_dir = Path(self.settings.state_dir)
        self._folder = StateFolder(self.state_dir)
        self._journal: Journal | None = None
        self._mount_point: Path | None = None
        self._options: str | None = None

    def preflight(self) -> None:
        require_root("the tmpfs target")

    def setup(self) -> None:
        if self._journal is not None:
            return
        self.preflight()
        self._journal = self._folder.open()
        try:
            self._mount_point = self.state_dir / f"tmpfs-{os.getpid()}-{next(_instances)}"
            self._journal.record("dir", path=str(self._mount_point))
            self._mount_point.mkdir(exist_ok=True)
            self._journal.record("mount", mount_point=str(self._mount_point))
        except BaseException:
            with contextlib.suppress(TargetError):
                self.teardown()
            raise

    def teardown(self) -> None:
        self._journal, self._mount_point, self._options = None, None, None
        self._folder.close()

    def mount_options(self, config: Config) -> str:
        """The ``-o`` string of a config (every system parameter is a tmpfs mount option)."""
        assert self.space is not None
        values = self.space.validate(config)
        options = []
        for name, value in values.items():
            p = self.space[name]
            if p.applied_by_workload:  # the runner hands these to the workload
                continue
            if p.layer != "mount":
                raise TargetError(f"parameter {name!r}: tmpfs sets mount options only")
            options.append((name, str(p.extra.get("option") or name), value))
        return mkfs.mount_options(options)

    def apply(self, config: Config) -> None:
        options = self.mount_options(config)
        self.setup()
        assert self._mount_point is not None
        if options == self._options and mounts.is_mounted(self._mount_point):
            return
        mounts.umount(self._mount_point)
        self._options = None
        log.info("mounting tmpfs on %s (-o %s)", self._mount_point, options or "defaults")
        mounts.mount("tmpfs", self._mount_point, "tmpfs", options)
        self._options = options

    def venue(self, workload: Workload) -> Venue:
        if self._mount_point is None or not mounts.is_mounted(self._mount_point):
            raise TargetError("no tmpfs is mounted: apply a config before running")
        workdir = self._mount_point / (_NAME.sub("_", workload.name) or "workload")
        for other in self._mount_point.iterdir():  # RAM is scarce: one file set at a time
            if other != workdir and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)
        workdir.mkdir(exist_ok=True)
        return Venue(directory=workdir, journal=self._journal)

    def after_run(self, workload: Workload, measurement: Any) -> None:
        measurement.info.update(mount_options=self._options)
