"""One technique through the paper's whole protocol on one dataset: what `stortune model
evaluate` prints and `bench/models.py` tabulates.

With `optimize`, the split search runs on the interpolation training rows only, so that the
held-out error of the optimised model is honest; the paired t-test then compares default and
optimised hyperparameters over the same 10 folds of all rows, and the optimised ones serve for
the goodness of fit and the extrapolation scenarios.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from threadpoolctl import threadpool_limits

from stortune.models import technique
from stortune.models.crossval import cv_errors, cv_folds
from stortune.models.evaluation import (
    PairedTest,
    Scenario,
    extrapolation_scenarios,
    interpolation_scenario,
    paired_t_test,
    scenario_errors,
    scenario_mre,
)
from stortune.models.metrics import mean_relative_error, r2, relative_errors
from stortune.models.search import SplitSearchCV


@dataclass(frozen=True)
class SearchSettings:
    """The split search's knobs; the defaults are the paper's (k=4, n=5, 10 iterations)."""

    splits: int = 4
    explorations: int = 5
    max_iter: int = 10
    cv: int = 10
    tol: float | None = None
    max_evals: int | None = None
    max_seconds: float | None = None
    n_jobs: int | None = None  # worker processes sharing the folds (joblib's meaning)


@dataclass
class Optimisation:
    params: dict[str, Any]
    evaluations: int
    stop_reason: str
    seconds: float
    mre_default: float
    mre_optimized: float
    test: PairedTest

    @property
    def reduction(self) -> float:
        """Relative change of the held-out MRE (negative: the search helped)."""
        if not self.mre_default:
            return float("nan")
        return (self.mre_optimized - self.mre_default) / self.mre_default


@dataclass
class Assessment:
    """A model's scores on one dataset (fractions, not percent)."""

    name: str
    params: dict[str, Any]
    r2_fit: float
    cv_rmse: float
    interpolation_mre: float
    interpolation_p90: float
    measured: np.ndarray
    predicted: np.ndarray
    extrapolation: dict[str, float] = field(default_factory=dict)
    optimisation: Optimisation | None = None
    seconds: float = 0.0

    @property
    def extrapolation_mre(self) -> float:
        values = [v for v in self.extrapolation.values() if np.isfinite(v)]
        return float(np.mean(values)) if values else float("nan")

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "technique": self.name,
            "params": self.params,
            "r2_fit": self.r2_fit,
            "cv_rmse": self.cv_rmse,
            "interpolation_mre": self.interpolation_mre,
            "interpolation_p90": self.interpolation_p90,
            "extrapolation_mre": self.extrapolation_mre,
            "extrapolation": self.extrapolation,
            "seconds": round(self.seconds, 2),
        }
        if self.optimisation is not None:
            o = self.optimisation
            data["optimization"] = {
                "params": o.params,
                "evaluations": o.evaluations,
                "stop_reason": o.stop_reason,
                "seconds": round(o.seconds, 2),
                "mre_default": o.mre_default,
                "mre_optimized": o.mre_optimized,
                "reduction": o.reduction,
                "t_statistic": o.test.statistic,
                "p_value": o.test.pvalue,
                "cv_rmse_default": o.test.mean_b,
                "cv_rmse_optimized": o.test.mean_a,
            }
        return data


def split_search_cv(
    estimator: BaseEstimator, space: dict, settings: SearchSettings
) -> SplitSearchCV:
    """The (unfitted) split search of `estimator` over `space` with these settings."""
    return SplitSearchCV(
        estimator,
        space,
        splits=settings.splits,
        explorations=settings.explorations,
        max_iter=settings.max_iter,
        tol=settings.tol,
        max_evals=settings.max_evals,
        max_seconds=settings.max_seconds,
        cv=settings.cv,
        n_jobs=settings.n_jobs,
    )


def search(
    estimator: BaseEstimator, space: dict, X: pd.DataFrame, y: np.ndarray, settings: SearchSettings
) -> SplitSearchCV:
    """The fitted split search of `estimator` over `space`."""
    return split_search_cv(estimator, space, settings).fit(X, y)


def assess(
    name: str,
    estimator: BaseEstimator,
    X: pd.DataFrame,
    y: np.ndarray,
    interpolation: Scenario,
    extrapolation: list[Scenario],
    folds: list[tuple[np.ndarray, ...]],
) -> Assessment:
    """Goodness of fit, cross-validated RMSE, interpolation and extrapolation errors."""
    started = time.perf_counter()
    with threadpool_limits(limits=1):  # see cv_errors: small fits, busy machine
        fitted = clone(estimator).fit(X, y)
    measured, predicted = scenario_errors(estimator, X, y, interpolation)
    errors = relative_errors(measured, predicted)
    return Assessment(
        name=name,
        params={
            k: v for k, v in estimator.get_params().items() if not isinstance(v, BaseEstimator)
        },
        r2_fit=r2(y, fitted.predict(X)),
        cv_rmse=float(np.mean(cv_errors(estimator, X, y, folds))),
        interpolation_mre=mean_relative_error(measured, predicted),
        interpolation_p90=float(np.quantile(errors, 0.9)) if len(errors) else float("nan"),
        measured=measured,
        predicted=predicted,
        extrapolation={s.name: scenario_mre(estimator, X, y, s) for s in extrapolation},
        seconds=time.perf_counter() - started,
    )


def assess_technique(
    name: str,
    X: pd.DataFrame,
    y: np.ndarray,
    interpolation: Scenario,
    extrapolation: list[Scenario],
    folds: list[tuple[np.ndarray, ...]],
    optimize: bool = False,
    settings: SearchSettings | None = None,
) -> Assessment:
    """`assess` a registered technique, at its defaults or tuned by the split search."""
    settings = settings or SearchSettings()
    tech = technique(name)
    default = tech.make()
    space = tech.search_space(len(interpolation.train))
    if not optimize or not space:
        return assess(name, default, X, y, interpolation, extrapolation, folds)
    started = time.perf_counter()
    train = interpolation.train
    tuned = search(default, space, X.iloc[train], y[train], settings)
    seconds = time.perf_counter() - started
    best = tech.make(**tuned.best_params_)
    result = assess(name, best, X, y, interpolation, extrapolation, folds)
    result.optimisation = Optimisation(
        params=tuned.best_params_,
        evaluations=tuned.search_.n_evaluations,
        stop_reason=tuned.search_.stop_reason,
        seconds=seconds,
        mre_default=scenario_mre(default, X, y, interpolation),
        mre_optimized=result.interpolation_mre,
        test=paired_t_test(cv_errors(best, X, y, folds), cv_errors(default, X, y, folds)),
    )
    result.seconds += seconds
    return result


def prepare(
    X: pd.DataFrame, y: Any, test_fraction: float = 0.1, seed: int = 0, cv: int = 10
) -> tuple[Scenario, list[Scenario], list[tuple[np.ndarray, ...]]]:
    """The shared scenarios and folds, so that every technique is scored on the same rows."""
    return (
        interpolation_scenario(X, test_fraction, seed),
        extrapolation_scenarios(X),
        cv_folds(len(X), cv, seed),
    )
