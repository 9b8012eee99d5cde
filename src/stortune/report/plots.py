"""Plots for the report, rendered to inline SVG text (no files, no network).

Figures use matplotlib's object API on the SVG canvas, so pyplot's global state is left alone.
Text stays text (``svg.fonttype: none``: smaller pages, selectable labels), every figure gets
its own hash salt so that clip-path ids of several inline SVGs never collide, and the RDF
metadata block and the namespace declarations (http:// identifiers, redundant inline in HTML)
are dropped, so the page holds no URL at all.
"""

from __future__ import annotations

import io
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

# Beyond this many points a scatter is drawn as an embedded image inside the SVG: a page with
# tens of thousands of vector markers would be megabytes and slow to open.
RASTER_POINTS = 1500
COLORS = ("#1f5f8b", "#d1495b", "#66a182", "#edae49", "#8e6c8a", "#00798c", "#7a7a7a")
_SALT = itertools.count()
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')


def to_svg(fig: Figure) -> str:
    """The figure as one ``<svg>`` element, safe to embed next to others in one page."""
    FigureCanvasSVG(fig)
    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": f"stortune-{next(_SALT)}"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    text = _METADATA.sub("", text[text.index("<svg") :])
    # Inline in HTML the parser puts <svg> and xlink:href in their namespaces itself: the
    # xmlns declarations are redundant there, and without them the page holds no URL at all.
    return _XMLNS.sub("", text).replace("<svg", '<svg role="img"', 1)


def _figure(width: float = 7.0, height: float = 3.2) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def runs_over_time(runs: Sequence[Mapping[str, Any]], metric: str) -> str:
    """Each run's metric against the time since the first run, by workload, runs of the
    default and reference configs ringed; failed runs are red crosses and disturbed ones orange
    triangles along the bottom (they have no value). Runs: dicts of started_at, status,
    workload, value, and the flags default and reference."""
    fig = _figure()
    ax = fig.subplots()
    start = min(r["started_at"] for r in runs)
    span = max(r["started_at"] for r in runs) - start
    unit, scale = ("s", 1.0) if span < 120 else ("min", 60.0) if span < 7200 else ("h", 3600.0)

    def when(rows: Sequence[Mapping[str, Any]]) -> list[float]:
        return [(r["started_at"] - start) / scale for r in rows]

    ok = [r for r in runs if r["status"] == "ok" and r.get("value") is not None]
    floor = min((r["value"] for r in ok), default=0.0)
    workloads = sorted({r["workload"] for r in ok})
    for i, workload in enumerate(workloads):
        mine = [r for r in ok if r["workload"] == workload]
        label = workload if len(workloads) > 1 else "runs"
        color = COLORS[i % len(COLORS)]
        ax.plot(
            when(mine),
            [r["value"] for r in mine],
            "o",
            ms=4,
            color=color,
            label=label,
            rasterized=len(ok) > RASTER_POINTS,
        )
    for flag, color in (("default", "#c60"), ("reference", "black")):
        ringed = [r for r in ok if r.get(flag)]
        if ringed:
            ax.plot(
                when(ringed),
                [r["value"] for r in ringed],
                "o",
                markerfacecolor="none",
                color=color,
                ms=8,
                label=f"{flag} config",
            )
    for status, marker, color in (("failed", "x", "#c00000"), ("disturbed", "v", "#e08000")):
        bad = [r for r in runs if _status_group(r["status"]) == status]
        if bad:
            ax.plot(
                when(bad),
                [floor] * len(bad),
                marker,
                color=color,
                ms=8,
                linestyle="none",
                label=f"{status} ({len(bad)})",
            )
    ax.set_xlabel(f"time since the first run ({unit})")
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=7)
    return to_svg(fig)


def _status_group(status: str) -> str:
    if status == "ok":
        return "ok"
    return "disturbed" if status == "disturbed" else "failed"


def best_so_far(values: Sequence[float | None], direction: str) -> list[float]:
    """The best value after each evaluation (NaN until the first success)."""
    best, curve = None, []
    for v in values:
        if v is not None and (best is None or (v > best if direction == "max" else v < best)):
            best = v
        curve.append(best if best is not None else math.nan)
    return curve


def tuning_curves(
    curves: Mapping[str, Sequence[float | None]],
    direction: str,
    metric: str,
    default: float | None = None,
    remeasured: tuple[float, float] | None = None,
    failed: Sequence[int] = (),
) -> str:
    """Best so far against evaluations for each campaign (the first one's evaluations as dots);
    the default's first value and the re-measured default and best means as lines."""
    fig = _figure()
    ax = fig.subplots()
    floor = math.inf
    for i, (label, values) in enumerate(curves.items()):
        color = COLORS[i % len(COLORS)]
        xs = [k + 1 for k, v in enumerate(values) if v is not None]
        ys = [v for v in values if v is not None]
        floor = min(floor, *ys) if ys else floor
        if i == 0:
            ax.plot(xs, ys, "o", color=color, alpha=0.35, markersize=4, label="evaluation")
        steps = best_so_far(values, direction)
        ax.step(range(1, len(values) + 1), steps, where="post", color=color, label=label)
    if default is not None:
        ax.axhline(default, color="#888", linestyle=":", label="default (first evaluation)")
    if remeasured is not None:
        ax.axhline(remeasured[0], color="#c60", linestyle="--", label="default, re-measured")
        ax.axhline(remeasured[1], color="#063", linestyle="--", label="best, re-measured")
    if failed:
        y = floor if math.isfinite(floor) else 0.0
        ax.plot([k + 1 for k in failed], [y] * len(failed), "x", color="#c00000", label="failed")
    ax.set_xlabel("evaluations")
    ax.set_ylabel(metric + (" (lower is better)" if direction == "min" else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=7)
    return to_svg(fig)


def carver_steps(steps: Sequence[Any], max_bars: int = 8) -> str:
    """Carver's greedy steps (his Fig. 2): per step the PI/CPI of the best candidates, the
    chosen parameter in red."""
    rows = max(1, len(steps))
    fig = _figure(4.6, 1.2 + 1.5 * rows)
    axes = np.atleast_1d(fig.subplots(rows, 1))
    for i, (ax, step) in enumerate(zip(axes, steps, strict=False)):
        names = sorted(step.scores, key=lambda n: -step.scores[n])[:max_bars]
        colors = ["#d1495b" if n == step.param else "#9aa" for n in names]
        ax.barh(names[::-1], [step.scores[n] for n in names][::-1], color=colors[::-1])
        ax.set_title(f"step {i + 1}: {step.param} ({step.kind})", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[-1].set_xlabel("variance reduction (PI, then CPI given the chosen)", fontsize=8)
    return to_svg(fig)


def lasso_path(
    alphas: Sequence[float],
    path: np.ndarray,
    column_param: Sequence[str],
    ranking: Sequence[str],
    alpha_cv: float,
    label_top: int = 6,
) -> str:
    """Lasso coefficient paths against alpha (strongest penalty left), the CV alpha marked."""
    fig = _figure(4.6, 3.6)
    ax = fig.subplots()
    top = list(ranking[:label_top])
    for row, param in zip(path, column_param, strict=True):
        if param in top:
            ax.plot(alphas, row, color=COLORS[top.index(param) % len(COLORS)], lw=1.3)
        else:
            ax.plot(alphas, row, color="#ccc", lw=0.7)
    for i, param in enumerate(top):
        ax.plot([], [], color=COLORS[i % len(COLORS)], label=param)
    ax.axvline(alpha_cv, color="black", ls="--", lw=0.8, label="CV alpha")
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("alpha (penalty)")
    ax.set_ylabel("standardised coefficient")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return to_svg(fig)


def predicted_vs_measured(measured: Sequence[float], predicted: Sequence[float], label: str) -> str:
    """Out-of-fold predictions against measurements, with the y = x line."""
    y, p = np.asarray(measured, float), np.asarray(predicted, float)
    fig = _figure(4.2, 4.0)
    ax = fig.subplots()
    ax.scatter(y, p, s=14, alpha=0.75, color=COLORS[0])
    ends = [float(min(y.min(), p.min())), float(max(y.max(), p.max()))]
    ax.plot(ends, ends, color="black", lw=1, label="y = x")
    ax.set_xlabel(f"measured {label}")
    ax.set_ylabel(f"predicted {label}")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=7)
    return to_svg(fig)


def profile_ratios(rows: Sequence[Mapping[str, Any]]) -> str:
    """A device profile's sequential-to-random throughput ratio per request size."""
    from matplotlib.ticker import FuncFormatter

    from stortune.units import human_size

    fig = _figure(6.0, 3.2)
    ax = fig.subplots()
    sizes = [row["size"] for row in rows]
    for i, op in enumerate(("read", "write")):
        values = [row.get("ratio", {}).get(op) for row in rows]
        if any(v is not None for v in values):
            ax.plot(
                sizes, [math.nan if v is None else v for v in values], color=COLORS[i], label=op
            )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: human_size(int(x)) if x >= 1 else ""))
    ax.set_xlabel("request size")
    ax.set_ylabel("sequential / random throughput")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return to_svg(fig)
