"""Figures of the paper's evaluation: predicted against measured, and the error CDF (Fig. 8).

Figures are drawn on matplotlib's Agg canvas directly, without pyplot, so that nothing here
touches the process-wide backend, and each is written as PNG and SVG.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from stortune.models.evaluation import error_cdf


def _save(figure: Figure, stem: Path) -> list[Path]:
    FigureCanvasAgg(figure)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for path in paths:
        figure.savefig(path, dpi=120, bbox_inches="tight")
    return paths


def plot_predicted_vs_measured(
    y: Any, prediction: Any, stem: str | Path, title: str = "", metric: str = "metric"
) -> list[Path]:
    """Scatter of predictions against measurements, with the y = x line; returns the files."""
    y, prediction = np.asarray(y, float), np.asarray(prediction, float)
    figure = Figure(figsize=(5, 5))
    ax = figure.add_subplot()
    ax.scatter(y, prediction, s=12, alpha=0.7)
    ends = [float(min(y.min(), prediction.min())), float(max(y.max(), prediction.max()))]
    ax.plot(ends, ends, color="black", linewidth=1, label="y = x")
    ax.set_xlabel(f"measured {metric}")
    ax.set_ylabel(f"predicted {metric}")
    ax.set_title(title)
    ax.legend(loc="upper left")
    return _save(figure, Path(stem))


def plot_error_cdf(
    results: Mapping[str, tuple[Any, Any]], stem: str | Path, title: str = ""
) -> list[Path]:
    """CDF of relative errors, one curve per technique ({name: (measured, predicted)}).

    The x-axis is logarithmic, as in the paper, so that errors of 1% and 100% both show.
    """
    figure = Figure(figsize=(6, 4))
    ax = figure.add_subplot()
    for name, (y, prediction) in results.items():
        errors, share = error_cdf(y, prediction)
        positive = errors > 0
        ax.step(errors[positive] * 100, share[positive], where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("relative error (%)")
    ax.set_ylabel("share of predictions")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    return _save(figure, Path(stem))
