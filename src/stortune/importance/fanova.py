"""fANOVA (Hutter et al., ICML '14) through Optuna's evaluator: the peer ranking for Carver's.

A random forest is fitted to the configurations, and each parameter's importance is the share
of the forest's variance its main effect explains. The rows become an in-memory Optuna study,
one completed trial per configuration (repetitions averaged first): numeric parameters without
missing values are ranges, others categories; parameters constant over the data are left out
(Optuna's fANOVA needs two values) and rank last with importance 0.

Forests are grown to depth 8 (`DEFAULT_DEPTH`), not Optuna's 64: full-depth forests on a few
thousand continuous rows take minutes per ranking, and the subsample study ranks many subsets.
When subsets of one dataset are ranked (`subset_ranker`), every parameter keeps the range and
categories of the whole dataset, so a subset does not move them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
import pandas as pd
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution
from optuna.importance import FanovaImportanceEvaluator, get_param_importances

from stortune.datasets import Dataset
from stortune.errors import DatasetError
from stortune.importance.common import jsonable, metric_frame

DEFAULT_TREES = 64
DEFAULT_DEPTH = 8

optuna.logging.set_verbosity(optuna.logging.WARNING)

Distributions = dict[str, BaseDistribution]


def distributions(frame: pd.DataFrame, params: list[str]) -> Distributions:
    """Each parameter's range (numeric) or categories (anything else); constant ones left out."""
    out: Distributions = {}
    for p in params:
        col = frame[p]
        if col.nunique(dropna=False) < 2:
            continue
        if col.dtype.kind in "iuf" and not col.isna().any():
            out[p] = FloatDistribution(float(col.min()), float(col.max()))
        else:
            out[p] = CategoricalDistribution(sorted(col.astype(str).unique()))
    return out


def importances(
    frame: pd.DataFrame,
    metric: str,
    space: Distributions,
    trees: int = DEFAULT_TREES,
    max_depth: int = DEFAULT_DEPTH,
    seed: int = 0,
) -> dict[str, float]:
    """fANOVA importance of every parameter of `space` on the rows of `frame`, largest first
    (summing to 1). Raises ValueError or RuntimeError when the forest has nothing to split."""
    study = optuna.create_study()
    study.add_trials(
        [
            optuna.trial.create_trial(
                params={p: _value(row[p], dist) for p, dist in space.items()},
                distributions=space,
                value=float(row[metric]),
            )
            for row in frame.to_dict("records")
        ]
    )
    evaluator = FanovaImportanceEvaluator(n_trees=trees, max_depth=max_depth, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        found = get_param_importances(study, evaluator=evaluator)
    return {p: float(v) for p, v in found.items()}


def _value(value: Any, dist: BaseDistribution) -> Any:
    return float(value) if isinstance(dist, FloatDistribution) else str(value)


def subset_ranker(
    data: Dataset, trees: int = DEFAULT_TREES, max_depth: int = DEFAULT_DEPTH, seed: int = 0
) -> Callable[[Dataset], list[str]]:
    """Rank subsets of `data` (one metric, repetitions averaged) with the whole data's ranges;
    a subset fANOVA cannot rank (a constant metric) gets no ranking."""
    space = distributions(data.frame, data.params)
    metric = data.metrics[0]

    def fanova(sub: Dataset) -> list[str]:
        try:
            return list(importances(sub.frame, metric, space, trees, max_depth, seed))
        except (RuntimeError, ValueError, ZeroDivisionError):
            return []

    return fanova


@dataclass
class FanovaResult:
    """fANOVA ranking of one metric: importances sum to 1 over the ranked parameters."""

    metric: str
    direction: str
    params: list[str]
    ranking: list[str]
    importance: dict[str, float]
    n_rows: int
    trees: int
    max_depth: int
    seed: int
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return jsonable(self.__dict__ | {"method": "fanova"})


def rank_fanova(
    dataset: Dataset,
    metric: str | None = None,
    trees: int = DEFAULT_TREES,
    max_depth: int = DEFAULT_DEPTH,
    seed: int = 0,
) -> FanovaResult:
    """Rank the parameters of `dataset` by their fANOVA importance for one metric."""
    name, frame = metric_frame(dataset, metric)
    if frame[name].nunique() < 2:
        raise DatasetError(f"{dataset.source or 'dataset'}: {name} is constant: nothing to rank")
    space = distributions(frame, list(dataset.params))
    if not space:
        raise DatasetError(f"{dataset.source or 'dataset'}: every parameter is constant")
    found = importances(frame, name, space, trees, max_depth, seed)
    importance = found | {p: 0.0 for p in dataset.params if p not in found}
    return FanovaResult(
        metric=name,
        direction=dataset.direction(name),
        params=list(dataset.params),
        ranking=list(importance),
        importance=importance,
        n_rows=len(frame),
        trees=trees,
        max_depth=max_depth,
        seed=seed,
        source=dataset.source,
    )
