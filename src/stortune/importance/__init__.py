"""Which parameters shape a metric: Carver's variance-based greedy selection (FAST '20),
SAPPHIRE's Lasso ranking, fANOVA (the peer, through Optuna), and Carver's subsample study of how
few runs suffice.

Names are imported on first use (PEP 562): the CLI imports this package at start-up, and
scikit-learn and matplotlib should only load when a ranking or a plot actually runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "CarverResult": "carver",
    "CarverStep": "carver",
    "PiCorrection": "carver",
    "conditional_importance": "carver",
    "encode": "carver",
    "fixed_sets": "carver",
    "parameter_importance": "carver",
    "rank_carver": "carver",
    "rsd": "carver",
    "LassoResult": "lasso",
    "rank_lasso": "lasso",
    "FanovaResult": "fanova",
    "rank_fanova": "fanova",
    "RankError": "common",
    "rank_dataset": "ranking",
    "write_plots": "ranking",
    "StudyResult": "study",
    "draw_subsets": "study",
    "rank_subsets": "study",
    "study_dataset": "study",
    "subsample_study": "study",
}

__all__ = [
    "CarverResult",
    "CarverStep",
    "FanovaResult",
    "LassoResult",
    "PiCorrection",
    "RankError",
    "StudyResult",
    "conditional_importance",
    "draw_subsets",
    "encode",
    "fixed_sets",
    "parameter_importance",
    "rank_carver",
    "rank_dataset",
    "rank_fanova",
    "rank_lasso",
    "rank_subsets",
    "rsd",
    "study_dataset",
    "subsample_study",
    "write_plots",
]

if TYPE_CHECKING:
    from stortune.importance.carver import (
        CarverResult,
        CarverStep,
        PiCorrection,
        conditional_importance,
        encode,
        fixed_sets,
        parameter_importance,
        rank_carver,
        rsd,
    )
    from stortune.importance.common import RankError
    from stortune.importance.fanova import FanovaResult, rank_fanova
    from stortune.importance.lasso import LassoResult, rank_lasso
    from stortune.importance.ranking import rank_dataset, write_plots
    from stortune.importance.study import (
        StudyResult,
        draw_subsets,
        rank_subsets,
        study_dataset,
        subsample_study,
    )


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
