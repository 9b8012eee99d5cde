"""Cubist rule-based model trees (paper, 3.5) through the optional, GPL-3 `cubist` package.

It is an extra (`pip install 'stortune[cubist]'`) so that the default install stays free of
GPL code; the import happens only when a Cubist model is fitted.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pandas as pd

from stortune.errors import StortuneError
from stortune.models.base import TabularRegressor

MISSING_MESSAGE = "Cubist needs the optional extra: pip install 'stortune[cubist]' (GPL-3)"


def cubist_available() -> bool:
    return importlib.util.find_spec("cubist") is not None


def _cubist_class() -> Any:
    try:
        from cubist import Cubist
    except ImportError:
        raise StortuneError(MISSING_MESSAGE) from None
    return Cubist


class CubistModel(TabularRegressor):
    """Cubist with the paper's three knobs (Table 2).

    * `n_rules` (the paper's nsplits, R's `rules`): most rules the model may have.
    * `committees` (ntrees): boosting-like committee members whose predictions are averaged.
    * `neighbors` (ninstances): training points used for instance-based correction; 0 is off.
    """

    def __init__(
        self, n_rules: int = 100, committees: int = 1, neighbors: int = 0, random_state: int = 0
    ) -> None:
        self.n_rules = n_rules
        self.committees = committees
        self.neighbors = neighbors
        self.random_state = random_state

    def _fit_encoded(self, Z: np.ndarray, y: np.ndarray) -> None:
        neighbors = int(round(self.neighbors))
        self.model_ = _cubist_class()(
            n_rules=max(1, int(round(self.n_rules))),
            n_committees=max(1, int(round(self.committees))),
            neighbors=neighbors if neighbors > 0 else None,
            random_state=self.random_state,
        ).fit(_named(Z), y)

    def _predict_encoded(self, Z: np.ndarray) -> np.ndarray:
        return self.model_.predict(_named(Z))


def _named(Z: np.ndarray) -> pd.DataFrame:
    """Plain column names: Cubist names its own from a table and warns when predict has none."""
    return pd.DataFrame(Z, columns=[f"x{i}" for i in range(Z.shape[1])])
