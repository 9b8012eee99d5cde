"""The tuning curve: the best value so far against evaluations, for one or more campaigns."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from stortune.plots.render import figure
from stortune.plots.style import FAILED, color, lower_is_better

Curve = tuple[Sequence[float | None], Sequence[float]]  # each evaluation's value, best so far


def tuning_curves(
    curves: Mapping[str, Curve],
    direction: str,
    metric: str,
    default: float | None = None,
    remeasured: tuple[float, float] | None = None,
    failed: Sequence[int] = (),
    first_label: str = "default (first evaluation)",
) -> Figure:
    """Best so far against evaluations for each campaign (the first one's evaluations as dots);
    the first evaluation's value (`default`, labelled `first_label`: a campaign tuned after a
    ranking starts from the held values, not the default) and the re-measured default and best
    means as lines; the first campaign's failed evaluations (0-based indices) as crosses along
    the bottom."""
    fig = figure(7.0, 3.2)
    ax = fig.subplots()
    floor = math.inf
    for i, (label, (values, best)) in enumerate(curves.items()):
        xs = [k + 1 for k, v in enumerate(values) if v is not None]
        ys = [v for v in values if v is not None]
        floor = min(floor, *ys) if ys else floor
        if i == 0:
            ax.plot(xs, ys, "o", color=color(i), alpha=0.35, markersize=4, label="evaluation")
        ax.step(range(1, len(best) + 1), best, where="post", color=color(i), label=label)
    if default is not None:
        ax.axhline(default, color="#888", linestyle=":", label=first_label)
    if remeasured is not None:
        ax.axhline(remeasured[0], color="#c60", linestyle="--", label="default, re-measured")
        ax.axhline(remeasured[1], color="#063", linestyle="--", label="best, re-measured")
    if failed:
        y = floor if math.isfinite(floor) else 0.0
        ax.plot([k + 1 for k in failed], [y] * len(failed), "x", color=FAILED, label="failed")
    ax.set_xlabel("evaluations")
    ax.set_ylabel(metric + lower_is_better(direction))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=7)
    return fig
