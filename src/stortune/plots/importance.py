"""Figures of the importance analysis: Carver's Figures 1, 2, 3 and 5, and a Lasso path.

Each takes what it draws already computed (`stortune.importance` ranks and groups): the page of
a report and the files of `stortune rank --plots` show the same figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure

from stortune.plots.render import figure
from stortune.plots.style import MUTED, color, lower_is_better

if TYPE_CHECKING:
    import pandas as pd

    from stortune.importance.carver import CarverStep
    from stortune.importance.study import StudyResult

CHOSEN = "#d1495b"
RANK_STYLES = ("-", "--", ":", "-.")


def carver_steps(
    steps: Sequence[CarverStep], metric: str, direction: str, stop: str = "", max_bars: int = 10
) -> Figure:
    """Carver Fig. 2: per greedy step the PI (then the CPI given the parameters chosen before)
    of the best candidates, the chosen one in red; with no step, why nothing was chosen."""
    rows = max(1, len(steps))
    fig = figure(5.2, 1.0 + 1.6 * rows)
    axes = np.atleast_1d(fig.subplots(rows, 1))
    fig.suptitle(f"{metric}{lower_is_better(direction)}: greedy selection", fontsize=10)
    if not steps:
        axes[0].text(0.5, 0.5, f"nothing selected ({stop})", ha="center", va="center")
        axes[0].set_axis_off()
        return fig
    for i, (ax, step) in enumerate(zip(axes, steps, strict=True)):
        names = sorted(step.scores, key=lambda n: -step.scores[n])[:max_bars][::-1]
        colors = [CHOSEN if n == step.param else MUTED for n in names]
        ax.barh(names, [step.scores[n] for n in names], color=colors)
        given = f" | {', '.join(s.param for s in steps[:i])}" if i else ""
        ax.set_title(f"#{i + 1}: {step.param}   ({step.kind}(X{given}))", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[-1].set_xlabel("variance reduction (PI, then CPI given the chosen)", fontsize=8)
    return fig


def lasso_path(
    alphas: Sequence[float],
    path: np.ndarray,
    column_param: Sequence[str],
    ranking: Sequence[str],
    alpha_cv: float,
    metric: str,
    label_top: int = 8,
) -> Figure:
    """Lasso coefficient paths against alpha (strongest penalty left), one colour for each of
    the `label_top` leading parameters, the others grey; the cross-validated alpha marked."""
    fig = figure(5.6, 3.8)
    ax = fig.subplots()
    top = list(ranking[:label_top])
    for row, param in zip(path, column_param, strict=True):
        if param in top:
            ax.plot(alphas, row, color=color(top.index(param)), lw=1.3)
        else:
            ax.plot(alphas, row, color=MUTED, lw=0.7)
    for i, param in enumerate(top):
        ax.plot([], [], color=color(i), label=param)
    ax.axvline(alpha_cv, color="black", ls="--", lw=0.8, label="CV alpha")
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("alpha (penalty)")
    ax.set_ylabel(f"standardised coefficient ({metric})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return fig


def boxplots(groups: Mapping[str, tuple[Sequence[str], Sequence[Any]]], ylabel: str) -> Figure:
    """Carver Fig. 1: the metric's spread for each value (or bin) of each parameter; `groups`
    maps a parameter to its value labels and the metric's values at each."""
    fig, axes = _grid(len(groups))
    for ax, (param, (labels, values)) in zip(axes, groups.items(), strict=False):
        ax.boxplot(list(values), tick_labels=list(labels))
        ax.set_title(param, fontsize=9)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.set_ylabel(ylabel, fontsize=8)
    return fig


def fixed_sets(sets: pd.DataFrame, metric: str, direction: str) -> Figure:
    """Carver Fig. 3: mean against RSD of every set that fixes some parameters (`sets`: columns
    n_fixed, mean and rsd, as `stortune.importance.fixed_sets` makes them)."""
    fig = figure(6.0, 4.2)
    ax = fig.subplots()
    for n_fixed, group in sets.groupby("n_fixed"):
        ax.scatter(
            group["mean"],
            100 * group["rsd"],
            s=12 + 10 * n_fixed,
            alpha=0.6,
            color=color(int(n_fixed) - 1),
            zorder=10 - n_fixed,
            label=f"N = {n_fixed}",
        )
    ax.set_xlabel(f"mean {metric}{lower_is_better(direction)}")
    ax.set_ylabel("RSD (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def subsample_study(studies: Sequence[StudyResult]) -> Figure:
    """Carver Fig. 5: the share of trials finding the full data's k-th parameter against the
    share of the data, one colour per study (method) and one line style per rank."""
    fig = figure(6.5, 4.2)
    ax = fig.subplots()
    for i, study in enumerate(studies):
        rates = study.success()
        for k in range(study.depth):
            name = study.truth[k] if k < len(study.truth) else "-"
            ax.plot(
                np.array(study.fractions) * 100,
                rates[:, k],
                RANK_STYLES[k % len(RANK_STYLES)],
                color=color(i),
                marker="o",
                markersize=3,
                label=f"{study.method}: #{k + 1} {name}",
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("share of the dataset (%)")
    ax.set_ylabel("share of trials finding it")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _grid(n: int, width: float = 3.2, height: float = 2.6) -> tuple[Figure, Any]:
    """Up to three small axes a row; the unused ones hidden."""
    cols = max(1, min(3, n))
    rows = max(1, -(-n // cols))
    fig = figure(width * cols, height * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat
