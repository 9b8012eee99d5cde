"""What the ranking methods share: the rows they rank and JSON-safe output."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from stortune.datasets import Dataset
from stortune.errors import DatasetError, StortuneError


class RankError(StortuneError):
    """The ranking options do not fit together."""


def metric_frame(dataset: Dataset, metric: str | None) -> tuple[str, pd.DataFrame]:
    """Configurations with a value for the metric, repetitions averaged (as Carver does)."""
    name = str(dataset.y(metric).name)
    frame = dataset.aggregated().frame.dropna(subset=[name]).reset_index(drop=True)
    if len(frame) < 2:
        raise DatasetError(f"{dataset.source or 'dataset'}: fewer than 2 rows with {name}")
    return name, frame


def jsonable(obj: Any) -> Any:
    """Plain JSON types: numpy scalars/arrays unwrapped, NaN and infinities as null."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
