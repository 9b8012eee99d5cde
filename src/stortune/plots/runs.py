"""Every run of a campaign against time: drift, failures and disturbed runs show up here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from stortune.enums import RunStatus
from stortune.plots.render import figure
from stortune.plots.style import DISTURBED, FAILED, color

# Beyond this many points a scatter is drawn as an embedded image inside the SVG: a page with
# tens of thousands of vector markers would be megabytes and slow to open.
RASTER_POINTS = 1500
RINGS = (("default", "#c60"), ("reference", "black"))
MISSES = ((RunStatus.FAILED, "x", FAILED), (RunStatus.DISTURBED, "v", DISTURBED))


def runs_over_time(runs: Sequence[Mapping[str, Any]], metric: str) -> Figure:
    """Each run's metric against the time since the first run, by workload, runs of the
    default and reference configs ringed; failed runs are red crosses and disturbed ones orange
    triangles along the bottom (they have no value). Runs: dicts of started_at, status,
    workload, value, and the flags default and reference."""
    fig = figure(7.0, 3.2)
    ax = fig.subplots()
    start = min(r["started_at"] for r in runs)
    span = max(r["started_at"] for r in runs) - start
    unit, scale = ("s", 1.0) if span < 120 else ("min", 60.0) if span < 7200 else ("h", 3600.0)

    def when(rows: Sequence[Mapping[str, Any]]) -> list[float]:
        return [(r["started_at"] - start) / scale for r in rows]

    ok = [r for r in runs if r["status"] == RunStatus.OK and r.get("value") is not None]
    floor = min((r["value"] for r in ok), default=0.0)
    workloads = sorted({r["workload"] for r in ok})
    for i, workload in enumerate(workloads):
        mine = [r for r in ok if r["workload"] == workload]
        ax.plot(
            when(mine),
            [r["value"] for r in mine],
            "o",
            ms=4,
            color=color(i),
            label=workload if len(workloads) > 1 else "runs",
            rasterized=len(ok) > RASTER_POINTS,
        )
    for flag, ring in RINGS:
        ringed = [r for r in ok if r.get(flag)]
        if ringed:
            ax.plot(
                when(ringed),
                [r["value"] for r in ringed],
                "o",
                markerfacecolor="none",
                color=ring,
                ms=8,
                label=f"{flag} config",
            )
    for group, marker, mark in MISSES:
        bad = [r for r in runs if _group(r["status"]) == group]
        if bad:
            ax.plot(
                when(bad),
                [floor] * len(bad),
                marker,
                color=mark,
                ms=8,
                linestyle="none",
                label=f"{group} ({len(bad)})",
            )
    ax.set_xlabel(f"time since the first run ({unit})")
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=7)
    return fig


def _group(status: str) -> RunStatus:
    """ok, disturbed, or failed (a timeout is a failure too)."""
    if status == RunStatus.OK:
        return RunStatus.OK
    return RunStatus.DISTURBED if status == RunStatus.DISTURBED else RunStatus.FAILED
