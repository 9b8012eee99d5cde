"""Which parameters matter in a campaign's own runs: Carver's greedy selection and the Lasso
path, each ranking independently (one may fail and the other still stand).

A parameter that kept one value in every config the campaign measured (one a ranking pinned,
one a space fixes) is left out of both rankings: nothing it did can be told from the runs, and
a parameter that is only active with some value of another (ext4's block size on ext4) would
otherwise stand in for that other one. `Importance.constant` names those left out."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd

from stortune.datasets import INACTIVE, Dataset
from stortune.errors import StortuneError
from stortune.findings.table import MIN_CONFIGS, Analysis, too_few_configs
from stortune.importance.carver import CarverResult, rank_carver
from stortune.importance.lasso import LassoResult, rank_lasso

NEEDS = f"ranking needs at least {MIN_CONFIGS} (sweep or tune with a larger budget)."
TOP_LASSO = 3  # Lasso stands in for Carver's selection with its first entries


@dataclass
class Importance:
    """Carver's and Lasso's rankings, why either failed, or why there is none (`missing`);
    `constant`: the parameters left out because they never varied."""

    carver: CarverResult | None = None
    lasso: LassoResult | None = None
    carver_error: str = ""
    lasso_error: str = ""
    missing: str = ""
    constant: list[str] = field(default_factory=list)

    @property
    def top(self) -> list[str]:
        """The parameters that matter: Carver's selection, else the first to enter Lasso."""
        if self.carver is not None and self.carver.selected:
            return self.carver.selected
        if self.lasso is not None:
            entered = [p for p in self.lasso.ranking if self.lasso.entry_alpha[p] is not None]
            return entered[:TOP_LASSO]
        return []

    @property
    def constant_note(self) -> str:
        """ "3 parameters did not vary (a, b, c), so they are not ranked", or ""."""
        n = len(self.constant)
        if not n:
            return ""
        names = ", ".join(self.constant[:8]) + (", ..." if n > 8 else "")
        what = "1 parameter" if n == 1 else f"{n} parameters"
        return f"{what} did not vary in the configs measured ({names}), so not ranked"


def constant_params(dataset: Dataset) -> list[str]:
    """The parameters with at most one value among the dataset's rows (inactive cells, where
    a parameter does not apply, are no value)."""
    out = []
    for name in dataset.params:
        column = dataset.frame[name]
        values = column[column.notna() & (column.astype(str) != INACTIVE)]
        if pd.Series(values.astype(str)).nunique() <= 1:
            out.append(name)
    return out


def rank_campaign(analysis: Analysis | None, note: str) -> Importance:
    """Rank the analysis table's configs (repetitions averaged) by both methods, over the
    parameters that varied."""
    missing = too_few_configs(analysis, note, NEEDS)
    if missing or analysis is None:
        return Importance(missing=missing)
    dataset = analysis.dataset.frame.dropna(subset=[analysis.metric])
    constant = constant_params(replace(analysis.dataset, frame=dataset))
    found = Importance(constant=constant)
    varied = [p for p in analysis.dataset.params if p not in constant]
    if not varied:
        found.missing = f"no parameter varied among the {analysis.n_configs} configs measured"
        return found
    ranked = replace(analysis.dataset, params=varied)
    try:
        found.carver = rank_carver(ranked, analysis.metric)
    except (StortuneError, ValueError) as exc:
        found.carver_error = str(exc)
    try:
        found.lasso = rank_lasso(ranked, analysis.metric)
    except (StortuneError, ValueError) as exc:
        found.lasso_error = str(exc)
    return found
