"""Gradient boosted trees: our reference beyond the paper (scikit-learn's histogram GBM)."""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from stortune.models.base import TabularRegressor


class BoostingModel(TabularRegressor):
    """`HistGradientBoostingRegressor` with a fixed seed and no early stopping, so that a
    hyperparameter point always yields the same model (the split search caches points).

    `min_samples_leaf=None` (the default) scales with the table: scikit-learn's 20 from 400
    rows on, a twentieth of the rows below (at least 1); a fixed 20 left tables of fewer than
    40 rows without a single split, a constant prediction.
    """

    def __init__(
        self,
        learning_rate: float = 0.1,
        max_iter: int = 100,
        max_leaf_nodes: int = 31,
        min_samples_leaf: int | None = None,
    ) -> None:
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        leaf = self.min_samples_leaf
        self.min_samples_leaf_ = int(min(20, max(1, len(y) // 20)) if leaf is None else leaf)
        self.model_ = HistGradientBoostingRegressor(
            learning_rate=self.learning_rate,
            max_iter=int(self.max_iter),
            max_leaf_nodes=int(self.max_leaf_nodes),
            min_samples_leaf=self.min_samples_leaf_,
            early_stopping=False,
            random_state=0,
        ).fit(Z, y)

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        return self.model_.predict(Z)
