"""How well a few fast regression techniques predict a campaign's metric, cross-validated on
its own configs with hyperparameters at their defaults (`stortune model` tunes them fully)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stortune.findings.table import MIN_CONFIGS, Analysis, too_few_configs

TECHNIQUES = ("linear", "cart", "m5")
FOLDS = 5
NEEDS = f"a cross-validated model needs at least {MIN_CONFIGS}."


@dataclass
class Score:
    """One technique's out-of-fold R² and mean relative error, or why it could not be fitted."""

    r2: float = math.nan
    mre: float = math.nan
    seconds: float = 0.0
    measured: np.ndarray | None = None
    predicted: np.ndarray | None = None
    error: str = ""


@dataclass
class Accuracy:
    """Each technique's score over `folds` folds of `n_configs` configs, or why there is none."""

    scores: dict[str, Score] = field(default_factory=dict)
    folds: int = 0
    n_configs: int = 0
    missing: str = ""

    @property
    def best(self) -> str | None:
        """The fitted technique with the highest R² (None: none was fitted)."""
        fitted = [k for k, s in self.scores.items() if s.predicted is not None]
        return max(
            fitted,
            key=lambda k: self.scores[k].r2 if np.isfinite(self.scores[k].r2) else -1e9,
            default=None,
        )


def assess_campaign(analysis: Analysis | None, note: str) -> Accuracy:
    """Cross-validate `TECHNIQUES` on the analysis table's configs (repetitions averaged)."""
    missing = too_few_configs(analysis, note, NEEDS)
    if missing or analysis is None:
        return Accuracy(missing=missing)
    n = analysis.n_configs
    scores = cross_validate(analysis.configs, analysis.metric)
    return Accuracy(scores, min(FOLDS, n), n)


def cross_validate(configs: Any, metric: str) -> dict[str, Score]:
    """Out-of-fold predictions of each technique in `TECHNIQUES`: R², MRE, seconds."""
    from sklearn.base import clone
    from threadpoolctl import threadpool_limits

    from stortune.models import technique
    from stortune.models.crossval import cv_folds
    from stortune.models.metrics import mean_relative_error, r2

    frame = configs.frame.dropna(subset=[metric]).reset_index(drop=True)
    X, y = frame[configs.params], frame[metric].to_numpy(dtype=float)
    folds = cv_folds(len(frame), FOLDS)
    out: dict[str, Score] = {}
    for name in TECHNIQUES:
        started = time.perf_counter()
        predicted = np.full(len(y), np.nan)
        try:
            tech = technique(name)
            tech.check()
            with threadpool_limits(limits=1):
                for train, test in folds:
                    model = clone(tech.make()).fit(X.iloc[train], y[train])
                    predicted[test] = model.predict(X.iloc[test])
        except Exception as exc:  # noqa: BLE001 - one technique failing must not lose the others
            out[name] = Score(error=str(exc))
            continue
        seconds = time.perf_counter() - started
        out[name] = Score(
            r2(y, predicted), mean_relative_error(y, predicted), seconds, y, predicted
        )
    return out
