"""The files of the importance figures, and what Carver's boxplots show.

The figures themselves are drawn by `stortune.plots.importance` (the report draws the same
ones inline); this module turns a dataset into the groups Carver's Fig. 1 shows and keeps
`plot_study`, the file `stortune rank-study --plot` and the importance bench write.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stortune.datasets import Dataset
from stortune.importance.carver import DEFAULT_BINS, encode
from stortune.importance.common import metric_frame
from stortune.importance.study import StudyResult
from stortune.plots import importance as figures
from stortune.plots.render import save


def boxplot_groups(
    dataset: Dataset,
    params: Sequence[str] | None = None,
    metric: str | None = None,
    bins: int = DEFAULT_BINS,
) -> tuple[str, dict[str, tuple[list[str], list[np.ndarray]]]]:
    """The metric's name, and per parameter its value (or bin) labels and the metric's values
    at each, binned as Carver ranks them (repetitions averaged)."""
    name, frame = metric_frame(dataset, metric)
    names = list(params) if params is not None else list(dataset.params)
    enc = encode(frame, names, bins)
    y = frame[name].to_numpy(dtype=float)
    groups = {
        param: (enc.labels[j], [y[enc.codes[:, j] == k] for k in range(len(enc.labels[j]))])
        for j, param in enumerate(names)
    }
    return name, groups


def plot_study(studies: Sequence[StudyResult], path: str | Path) -> list[Path]:
    """Carver Fig. 5 for one or more studies, as PNG and SVG (`path`'s .png/.svg is dropped)."""
    return save(figures.subsample_study(studies), path)
