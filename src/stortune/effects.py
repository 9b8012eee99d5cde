"""Main effects: for each parameter, how far the metric's mean moves across its values, beside
the noise of repeated runs, so a reader sees which effects stand above the noise.

One row per parameter: the mean of the metric over all runs at each value (the other
parameters varying as the design has them), the spread (highest value mean over the lowest),
and Welch's t-test between the runs of the best and the worst value. The noise line is the
median repeat RSD of a config (over configs with at least two runs). Numeric parameters with
many distinct values are binned by quantiles, as in Carver's analysis.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats

from stortune.datasets import Dataset
from stortune.enums import Direction
from stortune.errors import DatasetError

MAX_LEVELS = 8  # numeric parameters with more distinct values are binned into quantiles


@dataclass
class Effect:
    parameter: str
    means: dict[str, float]  # value (or bin) -> mean metric
    runs: dict[str, int]
    best: str
    worst: str
    spread: float  # best mean / worst mean (>= 1 for positive metrics)
    p_value: float  # Welch's t-test, best value's runs vs worst value's

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EffectTable:
    metric: str
    direction: str
    configs: int
    runs: int
    repeat_rsd: float  # median over configs with >= 2 runs
    effects: list[Effect]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["effects"] = [e.to_dict() for e in self.effects]
        return out


def main_effects(dataset: Dataset, metric: str | None = None) -> EffectTable:
    """The effect table of `dataset` (one row per run), strongest spread first."""
    metric = metric or dataset.metrics[0]
    frame = dataset.frame.dropna(subset=[dataset.y(metric).name])
    if len(frame) < 2:
        raise DatasetError(f"{dataset.source}: fewer than 2 runs with a value of {metric!r}")
    y = frame[metric].astype(float)
    direction = dataset.direction(metric)
    effects = [_effect(name, _levels(frame[name]), y, direction) for name in dataset.params]
    effects.sort(key=lambda e: -e.spread if np.isfinite(e.spread) else 0.0)
    groups = frame.groupby(dataset.params, dropna=False, sort=False)[metric]
    rsd = (groups.std(ddof=1) / groups.mean()).where(groups.count() >= 2).dropna()
    return EffectTable(
        metric,
        direction,
        int(groups.ngroups),
        len(frame),
        float(rsd.median()) if len(rsd) else float("nan"),
        effects,
    )


def _levels(column: pd.Series) -> pd.Series:
    if pd.api.types.is_numeric_dtype(column) and column.nunique() > MAX_LEVELS:
        binned = pd.qcut(column, MAX_LEVELS // 2, duplicates="drop")
        return binned.astype(str)
    return column.astype(str)


def _effect(name: str, levels: pd.Series, y: pd.Series, direction: str) -> Effect:
    means = y.groupby(levels).mean()
    counts = y.groupby(levels).count()
    ordered = means.sort_values(ascending=direction == Direction.MIN)
    best, worst = str(ordered.index[0]), str(ordered.index[-1])
    low, high = sorted([means[best], means[worst]])
    spread = high / low if low > 0 else float("inf")
    a, b = y[levels == best], y[levels == worst]
    p = float(stats.ttest_ind(a, b, equal_var=False).pvalue) if min(len(a), len(b)) > 1 else 1.0
    return Effect(
        name,
        {str(k): float(v) for k, v in means.items()},
        {str(k): int(v) for k, v in counts.items()},
        best,
        worst,
        float(spread),
        p if np.isfinite(p) else 1.0,
    )
