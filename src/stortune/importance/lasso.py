"""SAPPHIRE's Lasso ranking (section 3.3), with OtterTune's order-of-entry rule.

Preprocessing, in this order:

1. Categorical parameters become one-hot columns (`stortune.datasets.design_matrix`); numeric
   and boolean parameters stay one column each.
2. log10: a numeric parameter column whose values are all > 0 is replaced by its log10, and so
   is the metric when all its values are > 0. A column with a zero or a negative value is left
   untransformed (an offset would be arbitrary and would change the ranking with the units), and
   one-hot and boolean columns are never transformed. Missing values then take the column median.
3. Standardisation of every column and of the metric; constant columns are dropped (they can
   never enter the path and rank last).

Two rankings come out, both summed back from columns to parameters:

* ``ranking``: by the order in which a parameter's first column leaves zero along the Lasso
  path, from the largest alpha down (OtterTune's rule). Parameters entering at the same alpha
  are ordered by their summed |coefficient| there, those that never enter by |correlation|
  with the metric.
* ``coef_ranking``: by the summed |coefficient| at the alpha chosen by cross-validation
  (`LassoCV`, shuffled K-fold, on the same alpha grid).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from stortune.datasets import Dataset, design_matrix
from stortune.errors import DatasetError
from stortune.importance.common import jsonable, metric_frame

N_ALPHAS = 100
EPS = 1e-3
CV_FOLDS = 5


@dataclass(frozen=True)
class Design:
    """The preprocessed matrix: columns, their parameter, and which were log10-transformed."""

    matrix: np.ndarray
    y: np.ndarray
    columns: list[str]
    owner: np.ndarray
    params: list[str]
    logged: list[str]


def prepare(dataset: Dataset, metric: str | None = None) -> tuple[str, Design]:
    """Steps 1-2 of the module doc on the configurations (repetitions averaged)."""
    name, frame = metric_frame(dataset, metric)
    table, groups = design_matrix(frame, dataset.params)
    columns = list(table.columns)
    matrix = np.array(table.to_numpy(dtype=float))
    numeric = {p for p, cols in groups.items() if cols == [p] and _is_numeric(frame[p])}
    positive = (np.where(np.isnan(matrix), np.inf, matrix) > 0).all(axis=0)
    log_cols = [k for k, c in enumerate(columns) if c in numeric and positive[k]]
    matrix[:, log_cols] = np.log10(matrix[:, log_cols])
    logged = [columns[k] for k in log_cols]
    missing = np.isnan(matrix)
    matrix[:, missing.all(axis=0)] = 0.0  # never active in the data: a constant, ranked last
    missing = np.isnan(matrix)
    if missing.any():
        matrix = np.where(missing, np.nanmedian(matrix, axis=0), matrix)
    y = frame[name].to_numpy(dtype=float)
    if y.min() > 0:
        y = np.log10(y)
        logged.append(name)
    owner_of = {col: i for i, p in enumerate(dataset.params) for col in groups[p]}
    owner = np.array([owner_of[c] for c in columns], dtype=np.int64)
    design = Design(matrix, y, columns, owner, list(dataset.params), logged)
    return name, design


def _is_numeric(col: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)


def standardise(matrix: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Zero mean, unit variance; returns the kept (non-constant) column numbers too."""
    std = matrix.std(axis=0)
    keep = np.flatnonzero(std > 1e-12 * (1 + np.abs(matrix).max(axis=0)))
    x = (matrix[:, keep] - matrix[:, keep].mean(axis=0)) / std[keep]
    y_std = y.std()
    if y_std == 0:
        raise DatasetError("the metric is constant: nothing to rank")
    return np.asfortranarray(x), (y - y.mean()) / y_std, keep


def entry_order(
    x: np.ndarray,
    y: np.ndarray,
    owner: np.ndarray,
    n_params: int,
    n_alphas: int = N_ALPHAS,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parameters in order of entry into the Lasso path (OtterTune's rule).

    Returns the order, each parameter's entry alpha (NaN if it never enters), the alphas and
    the column coefficient path (columns, alphas). Full ties go to the first parameter, or to
    a random one with `rng` (as in `carver.greedy_batch`).
    """
    # scikit-learn is imported here, not with the module: the command line imports this
    # module to start, and scikit-learn alone takes a second or more.
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import lasso_path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # The Gram matrix halves the time on wide data (1,536 parameters x 300 rows: ~1 s).
        alphas, path, *_ = lasso_path(x, y, eps=EPS, alphas=n_alphas, precompute=True)
    nonzero = np.abs(path) > 0
    col_entry = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), len(alphas))
    entry = np.full(n_params, len(alphas))
    np.minimum.at(entry, owner, col_entry)
    entered = np.flatnonzero(col_entry < len(alphas))
    first = entered[col_entry[entered] == entry[owner[entered]]]
    at_entry = np.zeros(n_params)
    np.add.at(at_entry, owner[first], np.abs(path[first, col_entry[first]]))
    corr = np.zeros(n_params)
    np.maximum.at(corr, owner, np.abs(x.T @ y) / len(y))
    last_key = np.arange(n_params) if rng is None else rng.random(n_params)
    order = np.lexsort((last_key, -corr, -at_entry, entry))
    entry_alpha = np.where(entry < len(alphas), alphas[np.minimum(entry, len(alphas) - 1)], np.nan)
    return order, entry_alpha, alphas, path


@dataclass
class LassoResult:
    """Lasso ranking of one metric (module doc); coefficients are in standardised units."""

    metric: str
    direction: str
    params: list[str]
    ranking: list[str]
    entry_alpha: dict[str, float | None]
    coef_ranking: list[str]
    coef: dict[str, float]
    alpha_cv: float
    alphas: list[float]
    columns: list[str]
    column_param: list[str]
    path: np.ndarray
    logged: list[str]
    n_rows: int
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "path"}
        data["method"] = "lasso"
        return jsonable(data)


def rank_lasso(
    dataset: Dataset, metric: str | None = None, n_alphas: int = N_ALPHAS, seed: int = 0
) -> LassoResult:
    """Rank parameters by Lasso path entry and by |coefficient| at the cross-validated alpha."""
    from sklearn.exceptions import ConvergenceWarning  # imported on use (`entry_order`)
    from sklearn.linear_model import LassoCV
    from sklearn.model_selection import KFold

    name, design = prepare(dataset, metric)
    n = len(design.y)
    if n < 3:
        raise DatasetError(f"{dataset.source or 'dataset'}: Lasso needs at least 3 rows")
    x, y, keep = standardise(design.matrix, design.y)
    if len(keep) == 0:
        raise DatasetError(f"{dataset.source or 'dataset'}: every parameter is constant")
    owner = design.owner[keep]
    n_params = len(design.params)
    order, entry_alpha, alphas, path = entry_order(x, y, owner, n_params, n_alphas)
    folds = KFold(min(CV_FOLDS, n), shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LassoCV(alphas=alphas, cv=folds, n_jobs=1, max_iter=5000).fit(x, y)
    coef = np.zeros(n_params)
    np.add.at(coef, owner, np.abs(model.coef_))
    rank_of = np.empty(n_params, dtype=np.int64)
    rank_of[order] = np.arange(n_params)
    by_coef = np.lexsort((rank_of, -coef))
    params = design.params
    return LassoResult(
        metric=name,
        direction=dataset.direction(name),
        params=list(params),
        ranking=[params[i] for i in order],
        entry_alpha={
            params[i]: None if np.isnan(entry_alpha[i]) else float(entry_alpha[i]) for i in order
        },
        coef_ranking=[params[i] for i in by_coef],
        coef={params[i]: float(coef[i]) for i in by_coef},
        alpha_cv=float(model.alpha_),
        alphas=[float(a) for a in alphas],
        columns=[design.columns[k] for k in keep],
        column_param=[params[i] for i in owner],
        path=path,
        logged=design.logged,
        n_rows=n,
        source=dataset.source,
    )
