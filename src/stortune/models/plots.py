"""The figure files of `stortune model evaluate --plots`: predicted against measured, and the
error CDF (the paper's Fig. 8), each as PNG and SVG.

`stortune.plots.models` draws them (the report draws predicted against measured the same way);
this module feeds them a technique's predictions and writes the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stortune.models.evaluation import error_cdf
from stortune.plots import models as figures
from stortune.plots.render import save


def plot_predicted_vs_measured(
    y: Any, prediction: Any, stem: str | Path, title: str = "", metric: str = "metric"
) -> list[Path]:
    """Predictions against measurements, with the y = x line; returns the files."""
    return save(figures.predicted_vs_measured(y, prediction, metric, title), stem)


def plot_error_cdf(
    results: Mapping[str, tuple[Any, Any]], stem: str | Path, title: str = ""
) -> list[Path]:
    """The CDF of relative errors, one curve per technique ({name: (measured, predicted)})."""
    cdfs = {name: error_cdf(y, prediction) for name, (y, prediction) in results.items()}
    return save(figures.error_cdf(cdfs, title), stem)
