"""Performance models: regression techniques that predict a metric from a configuration.

After Noorshams et al., "Predictive Performance Modeling of Virtualized Storage Systems using
Optimized Statistical Regression Techniques" (ICPE'13): linear models, MARS, CART, M5 and
Cubist, each with its hyperparameters tuned by the paper's split search, plus gradient boosting
as a modern reference. `TECHNIQUES` maps a name to a factory and its default search ranges
(the paper's Table 2 where it has them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from stortune.errors import StortuneError
from stortune.models.base import TabularRegressor
from stortune.models.boosting import BoostingModel
from stortune.models.cart import CARTModel
from stortune.models.cubist_model import MISSING_MESSAGE as CUBIST_MISSING
from stortune.models.cubist_model import CubistModel, cubist_available
from stortune.models.linear import LinearModel
from stortune.models.m5 import M5Model
from stortune.models.mars import MARSModel
from stortune.models.network import NetworkModel
from stortune.models.regularised import LassoModel
from stortune.models.search import Choice, Dimension, Integer, Real, SplitSearchCV


@dataclass(frozen=True)
class Technique:
    """A regression technique: how to build it and which hyperparameter box to search."""

    name: str
    summary: str
    factory: Callable[..., TabularRegressor]
    fixed: dict[str, Any] = field(default_factory=dict)
    space: dict[str, Dimension] = field(default_factory=dict)
    # Integer parameters whose upper bound is also capped at the number of training rows:
    # the paper derives upper bounds "based on the used training data".
    row_bounded: tuple[str, ...] = ()
    available: Callable[[], bool] = lambda: True
    requirement: str = ""  # what to install when it is not available

    def check(self) -> None:
        """Raise the user-facing reason when the technique cannot run here."""
        if not self.available():
            raise StortuneError(self.requirement or f"{self.name} is not available")

    def make(self, **params: Any) -> TabularRegressor:
        """The estimator at its defaults, or with the given hyperparameters."""
        return self.factory(**{**self.fixed, **params})

    def search_space(self, n_rows: int | None = None) -> dict[str, Dimension]:
        """The default box, with row-bounded integer ranges capped at `n_rows`."""
        if n_rows is None:
            return dict(self.space)
        space = dict(self.space)
        for name in self.row_bounded:
            dim = space[name]
            if isinstance(dim, Integer):
                space[name] = replace(dim, high=max(dim.low, min(dim.high, n_rows)))
        return space


_MARS_SPACE: dict[str, Dimension] = {
    "nnodes": Integer(3, 800),
    "thresh": Real(0.0, 0.999),
    "nprune": Integer(2, 800),
}

TECHNIQUES: dict[str, Technique] = {
    t.name: t
    for t in (
        Technique("linear", "linear regression", LinearModel),
        Technique(
            "linear-int",
            "linear regression with pairwise interactions",
            LinearModel,
            fixed={"interactions": True},
        ),
        Technique(
            "lasso-int",
            "lasso with pairwise interactions (penalty by 5-fold CV)",
            LassoModel,
            fixed={"interactions": True},
        ),
        Technique(
            "mars",
            "MARS, additive (py-earth2)",
            MARSModel,
            fixed={"max_degree": 1},
            space=_MARS_SPACE,
            row_bounded=("nnodes", "nprune"),
        ),
        Technique(
            "mars-int",
            "MARS with interactions (py-earth2)",
            MARSModel,
            fixed={"max_degree": 2},
            space=_MARS_SPACE,
            row_bounded=("nnodes", "nprune"),
        ),
        Technique(
            "cart",
            "CART regression tree (rpart's minsplit, cp)",
            CARTModel,
            space={"minsplit": Integer(2, 400), "cp": Real(0.0, 0.999)},
            row_bounded=("minsplit",),
        ),
        Technique(
            "m5",
            "M5 model tree",
            M5Model,
            space={"min_instances": Integer(2, 100), "smoothing": Choice((True, False))},
            row_bounded=("min_instances",),
        ),
        Technique(
            "cubist",
            "Cubist rule-based model trees (optional, GPL-3)",
            CubistModel,
            space={
                "n_rules": Integer(2, 400),
                "committees": Integer(1, 100),
                "neighbors": Integer(0, 9),
            },
            available=cubist_available,
            requirement=CUBIST_MISSING,
        ),
        Technique(
            "boosting",
            "gradient boosted trees (scikit-learn)",
            BoostingModel,
            space={"learning_rate": Real(0.01, 0.5), "min_samples_leaf": Integer(1, 50)},
            row_bounded=("min_samples_leaf",),
        ),
        Technique(
            "network",
            "feed-forward network with L1 on the first layer (DeepPerf's kind, torch)",
            NetworkModel,
            space={"n_layers": Integer(2, 5), "l1": Real(0.0, 0.1)},
        ),
    )
}

# The four techniques the paper evaluates (it keeps LRM and MARS with interactions only).
PAPER_TECHNIQUES = ("linear-int", "mars-int", "cart", "cubist")


def technique(name: str) -> Technique:
    if name not in TECHNIQUES:
        raise StortuneError(f"unknown technique {name!r} (have: {', '.join(TECHNIQUES)})")
    return TECHNIQUES[name]


def available_techniques() -> list[str]:
    """Techniques that can run here (Cubist only with its optional extra installed)."""
    return [name for name, t in TECHNIQUES.items() if t.available()]


def make_model(name: str, **params: Any) -> TabularRegressor:
    return technique(name).make(**params)


def default_space(name: str, n_rows: int | None = None) -> dict[str, Dimension]:
    return technique(name).search_space(n_rows)


__all__ = [
    "PAPER_TECHNIQUES",
    "TECHNIQUES",
    "BoostingModel",
    "CARTModel",
    "Choice",
    "CubistModel",
    "Integer",
    "LinearModel",
    "M5Model",
    "MARSModel",
    "NetworkModel",
    "Real",
    "SplitSearchCV",
    "Technique",
    "available_techniques",
    "default_space",
    "make_model",
    "technique",
]
