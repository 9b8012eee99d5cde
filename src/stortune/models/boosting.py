"""Gradient boosted trees: our reference beyond the paper (scikit-learn's histogram GBM)."""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from stortune.models.base import TabularRegressor


class BoostingModel(TabularRegressor):
    """`HistGradientBoostingRegressor` with a fixed seed and no early stopping, so that a
    hyperparameter point always yields the same model (the split search caches points)."""

    def __init__(
        self,
        learning_rate: float = 0.1,
        max_iter: int = 100,
        max_leaf_nodes: int = 31,
        min_samples_leaf: int = 20,
    ) -> None:
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        self.model_ = HistGradientBoostingRegressor(
            learning_rate=self.learning_rate,
            max_iter=int(self.max_iter),
            max_leaf_nodes=int(self.max_leaf_nodes),
            min_samples_leaf=int(self.min_samples_leaf),
            early_stopping=False,
            random_state=0,
        ).fit(Z, y)

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        return self.model_.predict(Z)
