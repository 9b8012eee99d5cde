"""Waiting for a cluster to serve: every OSD up and in, every PG active+clean, HEALTH_OK.

One ``ceph status`` per poll answers all three. A PG that was active+clean before its OSD
restarted is reported ``stale+active+clean`` once the OSD is marked down, so an exact
``active+clean`` after the new incarnation is up is fresh, not a leftover.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from stortune.ceph.client import CephClient
from stortune.errors import TargetError


@dataclass(frozen=True)
class Health:
    """What one ``ceph status`` said about serving."""

    status: str
    checks: frozenset[str]
    osds_up: int
    osds_in: int
    pgs: int
    pgs_clean: int

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Health:
        health = data.get("health") or {}
        osdmap = data.get("osdmap") or {}
        osdmap = osdmap.get("osdmap", osdmap)  # older releases nest it once more
        pgmap = data.get("pgmap") or {}
        clean = sum(
            int(s.get("count", 0))
            for s in pgmap.get("pgs_by_state") or []
            if s.get("state_name") == "active+clean"
        )
        return cls(
            status=str(health.get("status", "unknown")),
            checks=frozenset((health.get("checks") or {}).keys()),
            osds_up=int(osdmap.get("num_up_osds", 0)),
            osds_in=int(osdmap.get("num_in_osds", 0)),
            pgs=int(pgmap.get("num_pgs", 0)),
            pgs_clean=clean,
        )

    def problem(self, osds: int | None, allowed: Collection[str]) -> str | None:
        """Why the cluster does not serve yet (None when it does)."""
        if osds is not None and (self.osds_up < osds or self.osds_in < osds):
            return f"{self.osds_up} of {osds} OSDs up, {self.osds_in} in"
        if self.pgs_clean < self.pgs:
            return f"{self.pgs_clean} of {self.pgs} PGs active+clean"
        extra = sorted(self.checks - set(allowed))
        if extra:
            return f"{self.status}: {', '.join(extra)}"
        return None


def status(client: CephClient) -> Health:
    return Health.parse(client.json("status", timeout=30))


def wait_healthy(
    client: CephClient,
    timeout: float,
    osds: int | None = None,
    allowed: Collection[str] = (),
    alive: Callable[[], None] | None = None,
) -> float:
    """Wait until the cluster serves; return the seconds it took. `osds` is how many OSDs must
    be up (None: any), `allowed` the health checks tolerated (an existing cluster's standing
    warnings), `alive` raises when a daemon died (no point waiting for it)."""
    started = time.monotonic()
    problem = "no answer"
    while True:
        if alive is not None:
            alive()
        try:
            problem = status(client).problem(osds, allowed)
        except TargetError as exc:
            problem = str(exc)
        if problem is None:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TargetError(f"cluster not healthy after {timeout:g} s: {problem}")
        time.sleep(0.5)


def fullest_osd(client: CephClient) -> tuple[float, float]:
    """The fullest OSD's used share and the cluster's nearfull ratio, past which Ceph warns;
    writes block altogether at the full ratio, and a ceph-fuse client then waits for ever."""
    usage = client.json("osd", "df", timeout=30) or {}
    used = max((float(n.get("utilization", 0.0)) for n in usage.get("nodes", [])), default=0.0)
    ratios = client.json("osd", "dump", timeout=30) or {}
    return used / 100.0, float(ratios.get("nearfull_ratio") or 0.85)
