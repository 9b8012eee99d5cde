"""Figures of the importance analysis, after Carver's Figures 1, 2, 3 and 5 and a Lasso path.

Every function draws one figure and writes it as PNG and SVG next to each other (`path`'s
suffix is ignored), returning the files written. Figures are built with matplotlib's object API
(`Figure`, rendered by the Agg canvas), not pyplot: no display is needed and the process-wide
pyplot backend and figure registry are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import rcParams
from matplotlib.figure import Figure

from stortune.datasets import Dataset
from stortune.enums import Direction
from stortune.importance.carver import DEFAULT_BINS, CarverResult, encode, fixed_sets
from stortune.importance.common import metric_frame
from stortune.importance.lasso import LassoResult
from stortune.importance.study import StudyResult

FORMATS = ("png", "svg")
RANK_STYLES = ("-", "--", ":", "-.")


def save(fig: Figure, path: str | Path) -> list[Path]:
    """Write `fig` as PNG and SVG beside each other."""
    base = Path(path).with_suffix("")
    base.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in FORMATS:
        out = base.with_suffix(f".{fmt}")
        fig.savefig(out, dpi=120, bbox_inches="tight")
        written.append(out)
    return written


def _grid(n: int, width: float = 3.2, height: float = 2.6) -> tuple[Figure, np.ndarray]:
    cols = min(3, n)
    rows = -(-n // cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat


def _direction_note(direction: str) -> str:
    return " (lower is better)" if direction == Direction.MIN else ""


def plot_boxplots(
    dataset: Dataset,
    path: str | Path,
    params: Sequence[str] | None = None,
    metric: str | None = None,
    bins: int = DEFAULT_BINS,
) -> list[Path]:
    """Carver Fig. 1: the metric's spread for each value (or bin) of each parameter."""
    name, frame = metric_frame(dataset, metric)
    names = list(params) if params is not None else list(dataset.params)
    enc = encode(frame, names, bins)
    y = frame[name].to_numpy(dtype=float)
    fig, axes = _grid(len(names))
    for j, (ax, param) in enumerate(zip(axes, names, strict=False)):
        groups = [y[enc.codes[:, j] == k] for k in range(len(enc.labels[j]))]
        ax.boxplot(groups, tick_labels=enc.labels[j])
        ax.set_title(param, fontsize=9)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.set_ylabel(name + _direction_note(dataset.direction(name)), fontsize=8)
    return save(fig, path)


def plot_steps(result: CarverResult, path: str | Path, max_bars: int = 30) -> list[Path]:
    """Carver Fig. 2: PI, then CPI given the parameters picked before, for the best candidates."""
    steps = result.steps
    rows = max(1, len(steps))
    width = max(6, 0.45 * min(max_bars, len(result.params)))
    fig = Figure(figsize=(width, 2.6 * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, 1))
    if not steps:
        axes[0].text(0.5, 0.5, f"nothing selected ({result.stop})", ha="center", va="center")
        axes[0].set_axis_off()
    for i, (ax, step) in enumerate(zip(axes, steps, strict=True)):
        names = sorted(step.scores, key=lambda n: -step.scores[n])[:max_bars]
        colors = ["tab:red" if n == step.param else "tab:gray" for n in names]
        ax.bar(names, [step.scores[n] for n in names], color=colors)
        ax.set_ylabel(step.kind, fontsize=8)
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        given = f" | {', '.join(result.selected[:i])}" if i else ""
        ax.set_title(f"#{i + 1}: {step.param}   ({step.kind}(X{given}))", fontsize=9)
    fig.suptitle(f"{result.metric}{_direction_note(result.direction)}: greedy selection")
    return save(fig, path)


def plot_fixed_sets(
    dataset: Dataset,
    path: str | Path,
    params: Sequence[str] | None = None,
    max_fixed: int = 2,
    metric: str | None = None,
    bins: int = DEFAULT_BINS,
) -> list[Path]:
    """Carver Fig. 3: mean vs RSD of every set that fixes 1..`max_fixed` parameters."""
    sets = fixed_sets(dataset, params, max_fixed, metric, bins)
    name = str(dataset.y(metric).name)
    fig = Figure(figsize=(6, 4.2))
    ax = fig.subplots()
    for n_fixed, group in sets.groupby("n_fixed"):
        ax.scatter(
            group["mean"],
            100 * group["rsd"],
            s=12 + 10 * n_fixed,
            alpha=0.6,
            zorder=10 - n_fixed,
            label=f"N = {n_fixed}",
        )
    ax.set_xlabel(f"mean {name}{_direction_note(dataset.direction(name))}")
    ax.set_ylabel("RSD (%)")
    ax.legend()
    return save(fig, path)


def plot_study(studies: Sequence[StudyResult], path: str | Path) -> list[Path]:
    """Carver Fig. 5: share of trials finding the truth's k-th parameter vs sample fraction."""
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    colors = rcParams["axes.prop_cycle"].by_key()["color"]
    for i, study in enumerate(studies):
        rates = study.success()
        for k in range(study.depth):
            ax.plot(
                np.array(study.fractions) * 100,
                rates[:, k],
                RANK_STYLES[k % len(RANK_STYLES)],
                color=colors[i % len(colors)],
                marker="o",
                markersize=3,
                label=f"{study.method}: #{k + 1} {study.truth[k] if k < len(study.truth) else '-'}",
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("share of the dataset (%)")
    ax.set_ylabel("share of trials finding it")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7)
    return save(fig, path)


def plot_lasso_path(result: LassoResult, path: str | Path, label_top: int = 8) -> list[Path]:
    """Coefficient paths against alpha, coloured by parameter, the CV-chosen alpha marked."""
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    alphas = np.asarray(result.alphas)
    top = result.ranking[:label_top]
    colors = rcParams["axes.prop_cycle"].by_key()["color"]
    for row, param in zip(result.path, result.column_param, strict=True):
        if param in top:
            ax.plot(alphas, row, color=colors[top.index(param) % len(colors)], lw=1.2)
        else:
            ax.plot(alphas, row, color="lightgray", lw=0.6)
    for i, param in enumerate(top):
        ax.plot([], [], color=colors[i % len(colors)], label=param)
    ax.axvline(result.alpha_cv, color="black", ls="--", lw=0.8, label="CV alpha")
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("alpha")
    ax.set_ylabel(f"coefficient (standardised {result.metric})")
    ax.legend(fontsize=7)
    return save(fig, path)
