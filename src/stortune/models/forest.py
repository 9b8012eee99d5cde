"""Random and extremely randomised forests on stortune's table encoding.

Averaging hundreds of deep trees is among the best models at tens of rows (DaL's own results
show a plain tree tying a deep network on some systems; a forest smooths the tree's steps).
The class wraps a scikit-learn forest so that it takes raw tables as the other techniques do.
"""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import RandomForestRegressor

from stortune.models.base import TabularRegressor


class ForestModel(TabularRegressor):
    """A scikit-learn forest class (`forest`) fitted on the one-hot encoded table."""

    def __init__(
        self,
        forest: type = RandomForestRegressor,
        n_estimators: int = 100,
        max_features: float = 1.0,
        random_state: int = 0,
    ) -> None:
        self.forest = forest
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.random_state = random_state

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        self.model_ = self.forest(
            n_estimators=int(self.n_estimators),
            max_features=self.max_features,
            random_state=self.random_state,
        ).fit(Z, y)

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        return self.model_.predict(Z)
