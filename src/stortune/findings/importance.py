"""Which parameters matter in a campaign's own runs: Carver's greedy selection and the Lasso
path, each ranking independently (one may fail and the other still stand)."""

from __future__ import annotations

from dataclasses import dataclass

from stortune.errors import StortuneError
from stortune.findings.table import MIN_CONFIGS, Analysis, too_few_configs
from stortune.importance.carver import CarverResult, rank_carver
from stortune.importance.lasso import LassoResult, rank_lasso

NEEDS = f"ranking needs at least {MIN_CONFIGS} (sweep or tune with a larger budget)."
TOP_LASSO = 3  # Lasso stands in for Carver's selection with its first entries


@dataclass
class Importance:
    """Carver's and Lasso's rankings, why either failed, or why there is none (`missing`)."""

    carver: CarverResult | None = None
    lasso: LassoResult | None = None
    carver_error: str = ""
    lasso_error: str = ""
    missing: str = ""

    @property
    def top(self) -> list[str]:
        """The parameters that matter: Carver's selection, else the first to enter Lasso."""
        if self.carver is not None and self.carver.selected:
            return self.carver.selected
        if self.lasso is not None:
            entered = [p for p in self.lasso.ranking if self.lasso.entry_alpha[p] is not None]
            return entered[:TOP_LASSO]
        return []


def rank_campaign(analysis: Analysis | None, note: str) -> Importance:
    """Rank the analysis table's configs (repetitions averaged) by both methods."""
    missing = too_few_configs(analysis, note, NEEDS)
    if missing or analysis is None:
        return Importance(missing=missing)
    found = Importance()
    try:
        found.carver = rank_carver(analysis.dataset, analysis.metric)
    except (StortuneError, ValueError) as exc:
        found.carver_error = str(exc)
    try:
        found.lasso = rank_lasso(analysis.dataset, analysis.metric)
    except (StortuneError, ValueError) as exc:
        found.lasso_error = str(exc)
    return found
