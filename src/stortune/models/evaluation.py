"""The paper's evaluation protocol (section 6): goodness of fit, interpolation and extrapolation
scenarios, the error CDF, and a paired t-test of optimised against default hyperparameters.

The paper measured fresh configurations for its scenarios; from a dataset we hold rows out
instead. Interpolation: random rows whose values lie inside what the training rows span.
Extrapolation: per numeric parameter, train on the rows on one side of a cut, test beyond it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import ttest_rel
from sklearn.base import BaseEstimator, clone
from threadpoolctl import threadpool_limits

from stortune.models.crossval import cv_errors, cv_folds
from stortune.models.metrics import mean_relative_error, relative_errors


@dataclass(frozen=True)
class Scenario:
    """Which rows train a model and which test it, and why."""

    name: str
    train: np.ndarray
    test: np.ndarray
    parameter: str = ""
    side: str = ""
    cut: float = float("nan")


@dataclass(frozen=True)
class PairedTest:
    """Paired t-test of two error samples over the same folds (H0: equal mean error)."""

    statistic: float
    pvalue: float
    mean_a: float
    mean_b: float

    @property
    def reduction(self) -> float:
        """Relative change of the mean error from b to a (the paper's Figure 13 measure)."""
        return (self.mean_a - self.mean_b) / self.mean_b if self.mean_b else float("nan")


def error_cdf(y: Any, prediction: Any) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF of the relative errors: sorted errors and the share at or below each."""
    errors = np.sort(relative_errors(np.asarray(y, float), np.asarray(prediction, float)))
    return errors, np.arange(1, len(errors) + 1) / max(len(errors), 1)


def _inside(frame: pd.DataFrame, train: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The rows whose every value lies within the training rows' range (or seen categories)."""
    keep = np.ones(len(rows), dtype=bool)
    for name in frame.columns:
        seen, values = frame[name].iloc[train], frame[name].iloc[rows]
        if pd.api.types.is_numeric_dtype(frame[name]) and not pd.api.types.is_bool_dtype(
            frame[name]
        ):
            keep &= ((values >= seen.min()) & (values <= seen.max())).to_numpy()
        else:
            keep &= values.astype(str).isin(set(seen.astype(str))).to_numpy()
    return rows[keep]


def interpolation_scenario(X: pd.DataFrame, test_fraction: float = 0.1, seed: int = 0) -> Scenario:
    """Random held-out rows that lie inside the training ranges (the paper's Table 4 setup)."""
    if not 0 < test_fraction < 1:
        raise ValueError("test_fraction must be in (0, 1)")
    order = np.random.default_rng(seed).permutation(len(X))
    n_test = max(1, int(round(test_fraction * len(X))))
    test, train = order[:n_test], np.sort(order[n_test:])
    return Scenario("interpolation", train, np.sort(_inside(X, train, test)))


def extrapolation_scenarios(
    X: pd.DataFrame, fraction: float = 0.2, min_rows: int = 5
) -> list[Scenario]:
    """Per numeric parameter with at least 3 values, train below a cut and test above it
    ("above"), and the mirror ("below"); `fraction` of the rows, roughly, lie beyond each cut,
    and at least the outermost level."""
    scenarios = []
    for name in X.columns:
        column = X[name]
        if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            continue
        values = column.to_numpy(dtype=float)
        levels = np.unique(values[~np.isnan(values)])
        if len(levels) < 3:
            continue
        # At least the outermost level lies beyond each cut (a knob measured at 3 levels).
        high = min(float(np.nanquantile(values, 1 - fraction, method="lower")), levels[-2])
        low = max(float(np.nanquantile(values, fraction, method="higher")), levels[1])
        for side, cut, train_mask in (
            ("above", high, values <= high),
            ("below", low, values >= low),
        ):
            train = np.nonzero(train_mask)[0]
            test = np.nonzero(~train_mask & ~np.isnan(values))[0]
            if len(train) >= min_rows and len(test) >= 1:
                scenarios.append(Scenario(f"{name} {side}", train, test, name, side, cut))
    return scenarios


def scenario_errors(
    estimator: BaseEstimator, X: pd.DataFrame, y: Any, scenario: Scenario
) -> tuple[np.ndarray, np.ndarray]:
    """Fit on the scenario's training rows; (measured, predicted) on its test rows."""
    target = np.asarray(y, dtype=float)
    with threadpool_limits(limits=1):
        model = clone(estimator).fit(X.iloc[scenario.train], target[scenario.train])
        prediction = model.predict(X.iloc[scenario.test])
    return target[scenario.test], prediction


def scenario_mre(estimator: BaseEstimator, X: pd.DataFrame, y: Any, scenario: Scenario) -> float:
    return mean_relative_error(*scenario_errors(estimator, X, y, scenario))


def paired_t_test(errors_a: Any, errors_b: Any) -> PairedTest:
    """scipy's `ttest_rel` on paired error samples (a: e.g. optimised, b: defaults)."""
    a, b = np.asarray(errors_a, float), np.asarray(errors_b, float)
    if a.shape != b.shape or len(a) < 2:
        raise ValueError("paired samples need the same length, at least 2")
    result = ttest_rel(a, b)
    return PairedTest(
        float(result.statistic), float(result.pvalue), float(a.mean()), float(b.mean())
    )


def compare_on_folds(
    estimator_a: BaseEstimator,
    estimator_b: BaseEstimator,
    X: Any,
    y: Any,
    cv: int = 10,
    error: str = "rmse",
    random_state: int = 0,
) -> PairedTest:
    """Paired t-test of two estimators' errors over the same cross-validation folds."""
    folds = cv_folds(len(X), cv, random_state)
    return paired_t_test(
        cv_errors(estimator_a, X, y, folds, error), cv_errors(estimator_b, X, y, folds, error)
    )
