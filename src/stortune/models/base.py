"""What every stortune model shares: tables in, one-hot encoding learnt at fit, numbers out.

Measured datasets mix numeric knobs with categorical ones (an I/O scheduler, a file system).
The estimators take the raw table and encode it themselves, so that a fitted model can later be
asked about a single config dict: the categories are those seen at fit, an unseen category
encodes as all zeros, and a missing numeric value takes the training median.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from stortune.datasets import design_matrix


class TableEncoder:
    """Numeric matrix of a parameter table, with the column layout fixed at fit."""

    def fit(self, frame: pd.DataFrame) -> TableEncoder:
        self.params: list[str] = list(frame.columns)
        _, groups = design_matrix(frame, self.params)
        self.categories: dict[str, list[str]] = {}
        self.medians: dict[str, float] = {}
        for name in self.params:
            keys = groups[name]
            if keys == [name]:
                values = frame[name].astype(float)
                self.medians[name] = float(values.median()) if values.notna().any() else 0.0
            else:
                self.categories[name] = [k[len(f"{name}=") :] for k in keys]
        self.columns: list[str] = [
            key
            for name in self.params
            for key in (
                [name] if name in self.medians else [f"{name}={v}" for v in self.categories[name]]
            )
        ]
        # Which encoded columns belong to which parameter: interactions skip same-parameter pairs.
        self.owner: list[str] = [
            name for name in self.params for _ in range(len(self.categories.get(name, [name])))
        ]
        return self

    def is_numeric(self, name: str) -> bool:
        return name in self.medians

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        blocks = []
        for name in self.params:
            col = frame[name]
            if self.is_numeric(name):
                values = pd.to_numeric(col, errors="coerce").astype(float).to_numpy()
                blocks.append(np.where(np.isnan(values), self.medians[name], values)[:, None])
            else:
                text = col.astype(str).to_numpy()
                blocks.append(
                    np.column_stack([text == v for v in self.categories[name]]).astype(float)
                )
        return np.hstack(blocks) if blocks else np.empty((len(frame), 0))


def as_frame(X: Any, columns: list[str] | None = None) -> pd.DataFrame:
    """A DataFrame of X; arrays get the fitted column names (or x0, x1, ...)."""
    if isinstance(X, pd.DataFrame):
        if all(isinstance(c, str) for c in X.columns):
            return X
        return X.set_axis([str(c) for c in X.columns], axis=1)
    array = np.asarray(X)
    if array.ndim != 2:
        raise ValueError(f"expected a 2-D table, got shape {array.shape}")
    names = columns if columns and len(columns) == array.shape[1] else None
    return pd.DataFrame(array, columns=names or [f"x{i}" for i in range(array.shape[1])])


class TabularRegressor(RegressorMixin, BaseEstimator):
    """Base of the stortune estimators: subclasses fit and predict on the encoded matrix.

    RegressorMixin stays left of BaseEstimator: scikit-learn >= 1.6 reads the estimator tags
    through the MRO, and the other order leaves a model that `is_regressor` does not recognise.
    """

    def fit(self, X: Any, y: Any) -> TabularRegressor:
        frame, target = self._fit_frame(X, y)
        self._fit_encoded(self.encoder_.transform(frame), target)
        return self

    def predict(self, X: Any) -> np.ndarray:
        frame = self._predict_frame(X)
        return np.asarray(self._predict_encoded(self.encoder_.transform(frame)), dtype=float)

    def _fit_frame(self, X: Any, y: Any) -> tuple[pd.DataFrame, np.ndarray]:
        """The checked table and metric; learns the encoding (where every fit starts)."""
        frame = as_frame(X)
        target = np.array(y, dtype=float).ravel()  # a writable copy: py-earth2 rejects read-only
        if len(target) != len(frame):
            raise ValueError(f"X has {len(frame)} rows but y has {len(target)}")
        if len(target) == 0 or not np.all(np.isfinite(target)):
            raise ValueError("y must be non-empty and finite")
        self.encoder_ = TableEncoder().fit(frame)
        self.n_features_in_ = frame.shape[1]
        if isinstance(X, pd.DataFrame):
            self.feature_names_in_ = np.asarray(frame.columns, dtype=object)
        return frame, target

    def _predict_frame(self, X: Any) -> pd.DataFrame:
        """The table to predict, with the columns seen at fit (where every predict starts)."""
        check_is_fitted(self, "encoder_")
        frame = as_frame(X, self.encoder_.params)
        missing = [p for p in self.encoder_.params if p not in frame.columns]
        if missing:
            raise ValueError(f"X lacks column(s) {', '.join(missing)}")
        return frame[self.encoder_.params]

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        raise NotImplementedError

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        raise NotImplementedError
