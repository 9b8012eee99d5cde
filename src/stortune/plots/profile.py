"""Figures of a device profile (SeRRa): access time against request size, the sequential to
random throughput ratios, and an estimated profile's ratios over the full profile's.

The ratio curve is drawn by one function (`_ratio_lines`) wherever it appears: in the report's
profile section, beside the access times of `stortune profile --plot`, and in
`stortune profile-compare --plot`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from stortune.plots.render import figure
from stortune.plots.style import COLORS
from stortune.profile.design import OPERATIONS
from stortune.units import human_size

OP_COLORS = {"read": COLORS[0], "write": COLORS[1]}
KINDS = (("sequential", "-", "o"), ("random", "--", "x"))  # an operation's (seq, random) patterns
_SIZE_TICKS = FuncFormatter(lambda x, _pos: human_size(int(x)) if x >= 1 else "")


def ratios(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """The sequential-to-random throughput ratio per request size, reads and writes; `rows` are
    a profile's ``curve`` (size, and ratio per operation)."""
    fig = figure(6.0, 3.2)
    ax = fig.subplots()
    for op in OPERATIONS:
        _ratio_lines(ax, rows, op)
    _ratio_axis(ax)
    return fig


def access_times(profile: Mapping[str, Any]) -> Figure:
    """Read and write access times (lines: the profile's curve; marks: every run) and the
    ratios, titled with what was profiled and how long it took."""
    fig = figure(13.0, 3.8)
    axes = fig.subplots(1, 3)
    rows = profile["curve"]
    sizes = [row["size"] for row in rows]
    runs = profile["measurements"]
    label = "estimate" if profile["mode"] == "estimated" else "mean"
    for ax, (op, patterns) in zip(axes, OPERATIONS.items(), strict=False):
        for pattern, (kind, style, mark) in zip(patterns, KINDS, strict=True):
            ax.plot(
                sizes,
                [_value(row["access_ms"].get(pattern)) for row in rows],
                style,
                color=OP_COLORS[op],
                label=f"{kind} ({label})",
            )
            mine = [r for r in runs if r["pattern"] == pattern]
            ax.plot(
                [r["size"] for r in mine],
                [r["access_ms"] for r in mine],
                mark,
                color=OP_COLORS[op],
                alpha=0.5,
                markersize=4,
                label=f"{kind} (runs)",
            )
        ax.set_title(f"{op} access time", fontsize=10)
        ax.set_ylabel("ms per request")
        _size_axis(ax)
        ax.legend(fontsize=7)
    for op in OPERATIONS:
        _ratio_lines(axes[2], rows, op)
    axes[2].set_title("sequential / random throughput", fontsize=10)
    _ratio_axis(axes[2])
    target = profile["target"]
    fig.suptitle(
        f"{profile['mode']} profile of {target['path']} ({target['file_size'] >> 20} MiB "
        f"accessed, {profile['elapsed_s']:.0f} s)",
        fontsize=10,
    )
    return fig


def compare(estimated: Mapping[str, Any], full: Mapping[str, Any]) -> Figure:
    """The estimated profile's ratios over the full profile's, one axes per operation."""
    fig = figure(9.0, 3.6)
    axes = fig.subplots(1, 2)
    for ax, op in zip(axes, OPERATIONS, strict=True):
        for profile, name, style in ((full, "full", "-"), (estimated, "estimated", "--")):
            label = f"{name} ({profile['elapsed_s']:.0f} s)"
            _ratio_lines(ax, profile["curve"], op, label, style)
        ax.set_title(f"{op}: sequential / random throughput", fontsize=10)
        _ratio_axis(ax)
    return fig


def _ratio_lines(
    ax: Any, rows: Sequence[Mapping[str, Any]], op: str, label: str = "", style: str = "-"
) -> None:
    """One operation's ratio per size, shaded over its interval where the profile has one;
    nothing when the profile did not measure it."""
    values = [(row.get("ratio") or {}).get(op) for row in rows]
    if all(v is None for v in values):
        return
    sizes = [row["size"] for row in rows]
    ax.plot(sizes, [_value(v) for v in values], style, color=OP_COLORS[op], label=label or op)
    bands = [(row.get("ratio_ci") or {}).get(op) for row in rows]
    if any(bands):
        low = [_value(b[0] if b else None) for b in bands]
        high = [_value(b[1] if b else None) for b in bands]
        ax.fill_between(sizes, low, high, color=OP_COLORS[op], alpha=0.15, lw=0)


def _ratio_axis(ax: Any) -> None:
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylabel("sequential / random throughput")
    _size_axis(ax)
    ax.legend(fontsize=7)


def _size_axis(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(_SIZE_TICKS)
    ax.set_xlabel("request size")
    ax.grid(True, alpha=0.3)


def _value(value: float | None) -> float:
    return math.nan if value is None else value
