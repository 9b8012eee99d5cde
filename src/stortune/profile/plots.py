"""Figures of a profile: access time against request size (the curve and every measured run)
and the sequential-to-random ratios; and an estimate beside its full reference.

Drawn with matplotlib's object API on the Agg canvas (no display, pyplot left alone) and
written as PNG and SVG beside each other, like the importance figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from stortune.importance.plots import save
from stortune.profile.design import OPERATIONS
from stortune.units import human_size

COLORS = {"read": "tab:blue", "write": "tab:red"}
_SIZE_TICKS = FuncFormatter(lambda x, _pos: human_size(int(x)) if x >= 1 else "")


def plot_profile(profile: Mapping[str, Any], path: str | Path) -> list[Path]:
    """Read and write access times (line: the profile's curve; dots: the runs) and the ratios."""
    fig = Figure(figsize=(13, 3.8), layout="constrained")
    axes = fig.subplots(1, 3)
    rows = profile["curve"]
    sizes = [row["size"] for row in rows]
    runs = profile["measurements"]
    label = "estimate" if profile["mode"] == "estimated" else "mean"
    for ax, (op, patterns) in zip(axes, OPERATIONS.items(), strict=False):
        for pattern, style in zip(patterns, ("-", "--"), strict=True):
            kind = "sequential" if style == "-" else "random"
            ax.plot(
                sizes,
                [row["access_ms"].get(pattern) for row in rows],
                style,
                color=COLORS[op],
                label=f"{kind} ({label})",
            )
            mine = [r for r in runs if r["pattern"] == pattern]
            ax.plot(
                [r["size"] for r in mine],
                [r["access_ms"] for r in mine],
                "o" if style == "-" else "x",
                color=COLORS[op],
                alpha=0.5,
                markersize=4,
                label=f"{kind} (runs)",
            )
        ax.set_title(f"{op} access time")
        ax.set_ylabel("ms per request")
        _size_axis(ax)
        ax.legend(fontsize=7)
    ratio_ax = axes[2]
    for op in OPERATIONS:
        ratio_ax.plot(sizes, [row["ratio"].get(op) for row in rows], color=COLORS[op], label=op)
    ratio_ax.axhline(1.0, color="grey", linewidth=0.8)
    ratio_ax.set_title("sequential / random throughput")
    ratio_ax.set_ylabel("ratio")
    _size_axis(ratio_ax)
    ratio_ax.legend(fontsize=7)
    target = profile["target"]
    fig.suptitle(
        f"{profile['mode']} profile of {target['path']} ({target['file_size'] >> 20} MiB accessed, "
        f"{profile['elapsed_s']:.0f} s)",
        fontsize=10,
    )
    return save(fig, path)


def plot_compare(
    estimated: Mapping[str, Any], full: Mapping[str, Any], path: str | Path
) -> list[Path]:
    """The estimated ratios over the full profile's, per operation."""
    fig = Figure(figsize=(9, 3.6), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, op in zip(axes, OPERATIONS, strict=True):
        for profile, style, name in ((full, "-", "full"), (estimated, "--", "estimated")):
            rows = [row for row in profile["curve"] if op in row["ratio"]]
            ax.plot(
                [row["size"] for row in rows],
                [row["ratio"][op] for row in rows],
                style,
                color=COLORS[op],
                label=f"{name} ({profile['elapsed_s']:.0f} s)",
            )
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_title(f"{op}: sequential / random throughput")
        _size_axis(ax)
        ax.legend(fontsize=7)
    return save(fig, path)


def _size_axis(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(_SIZE_TICKS)
    ax.set_xlabel("request size")
    ax.grid(True, alpha=0.3)
