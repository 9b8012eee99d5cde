"""The small-sample protocol (DeepPerf, ICSE'19): train on N random rows, test on all the others.

Storage runs are expensive, so users hold tens of measurements, not thousands. The protocol
answers "how wrong is this model after N runs": each repeat draws N rows at random, fits on them
and scores the mean relative error on every remaining row; the repeats give a mean and a 95%
confidence interval (Student's t over the repeat means).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import BaseEstimator
from threadpoolctl import threadpool_limits

from stortune.models.metrics import mean_relative_error


@dataclass
class SmallSampleResult:
    """Per-repeat errors (fractions) and fit times of one estimator at one training size."""

    train_size: int
    mre: list[float] = field(default_factory=list)
    fit_seconds: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return float(np.mean(self.mre)) if self.mre else float("nan")

    @property
    def ci95(self) -> tuple[float, float]:
        """95% interval of the mean MRE over repeats (NaN with fewer than two)."""
        values = np.asarray(self.mre, float)
        if len(values) < 2:
            return float("nan"), float("nan")
        half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
        return float(values.mean() - half), float(values.mean() + half)

    def as_dict(self) -> dict[str, Any]:
        low, high = self.ci95
        return {**asdict(self), "mean": self.mean, "ci_low": low, "ci_high": high}


def train_subsets(n_rows: int, train_size: int, repeats: int, seed: int = 0) -> list[np.ndarray]:
    """`repeats` random training sets of `train_size` rows, reproducible by seed."""
    if not 2 <= train_size < n_rows:
        raise ValueError(f"train size must be between 2 and {n_rows - 1} (the table has {n_rows})")
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    rng = np.random.default_rng(seed)
    return [np.sort(rng.choice(n_rows, size=train_size, replace=False)) for _ in range(repeats)]


def small_sample_protocol(
    make_estimator: Callable[[], BaseEstimator],
    X: pd.DataFrame,
    y: Any,
    train_size: int,
    repeats: int = 10,
    seed: int = 0,
    subsets: list[np.ndarray] | None = None,
) -> SmallSampleResult:
    """Fit a fresh estimator on each training subset; MRE on all the rows left out.

    `subsets` (from `train_subsets`) lets several estimators share the same draws, so that
    their errors are paired.
    """
    target = np.asarray(y, dtype=float)
    draws = subsets if subsets is not None else train_subsets(len(X), train_size, repeats, seed)
    result = SmallSampleResult(train_size)
    for train in draws:
        test = np.setdiff1d(np.arange(len(X)), train, assume_unique=True)
        with threadpool_limits(limits=1):
            started = time.perf_counter()
            model = make_estimator().fit(X.iloc[train], target[train])
            result.fit_seconds.append(time.perf_counter() - started)
            prediction = model.predict(X.iloc[test])
        result.mre.append(mean_relative_error(target[test], prediction))
    return result
