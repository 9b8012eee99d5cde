"""Figures of model accuracy: predicted against measured, and the error CDF (the paper's Fig. 8)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from stortune.plots.render import figure
from stortune.plots.style import color


def predicted_vs_measured(measured: Any, predicted: Any, metric: str, title: str = "") -> Figure:
    """Predictions against measurements (out of fold, or on held-out rows), with y = x."""
    y, p = np.asarray(measured, float), np.asarray(predicted, float)
    fig = figure(4.4, 4.2)
    ax = fig.subplots()
    ax.scatter(y, p, s=14, alpha=0.75, color=color(0))
    both = np.concatenate([y, p])
    ends = [float(np.nanmin(both)), float(np.nanmax(both))]
    ax.plot(ends, ends, color="black", lw=1, label="y = x")
    ax.set_xlabel(f"measured {metric}")
    ax.set_ylabel(f"predicted {metric}")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=7)
    return fig


def error_cdf(cdfs: Mapping[str, tuple[Any, Any]], title: str = "") -> Figure:
    """The CDF of relative errors, one curve per technique ({name: (sorted errors, share)},
    as `stortune.models.evaluation.error_cdf` gives them). The x-axis is logarithmic, as in the
    paper, so that errors of 1% and 100% both show; a zero error has no place on it."""
    fig = figure(6.0, 4.0)
    ax = fig.subplots()
    for i, (name, (errors, share)) in enumerate(cdfs.items()):
        errors, share = np.asarray(errors, float), np.asarray(share, float)
        positive = errors > 0
        ax.step(errors[positive] * 100, share[positive], where="post", color=color(i), label=name)
    ax.set_xscale("log")
    ax.set_xlabel("relative error (%)")
    ax.set_ylabel("share of predictions")
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=7)
    return fig
