"""One entry point for "rank this dataset": the `stortune rank` command and reports call it.

The CLI resolves where the data comes from (a file now; a stored campaign or a live sampled
budget later) and hands a `Dataset` to `rank_dataset`; nothing here knows about the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from stortune.datasets import Dataset
from stortune.importance.carver import (
    DEFAULT_BINS,
    DEFAULT_RSD,
    CarverResult,
    PiCorrection,
    rank_carver,
)
from stortune.importance.common import RankError
from stortune.importance.lasso import LassoResult, rank_lasso

if TYPE_CHECKING:
    from stortune.importance.fanova import FanovaResult

METHODS = ("carver", "lasso", "fanova")
# Figures of many parameters are unreadable; plots show the leading ones.
PLOT_PARAMS = 9
FIXED_SET_PARAMS = 6


def rank_dataset(
    dataset: Dataset,
    method: str = "carver",
    metric: str | None = None,
    stop: str | None = None,
    top: int | None = None,
    rsd: float = DEFAULT_RSD,
    bins: int = DEFAULT_BINS,
    correction: PiCorrection | str | None = None,
) -> CarverResult | LassoResult | FanovaResult:
    """Rank the parameters of `dataset` for one metric with Carver (default stop: rsd, default
    correction: levels), Lasso or fANOVA."""
    if method not in METHODS:
        raise RankError(f"unknown method {method!r} (use one of: {', '.join(METHODS)})")
    if top is not None and top < 1:
        raise RankError(f"--top must be at least 1 (got {top})")
    if not 0 <= rsd < 1:
        raise RankError(f"--rsd is a fraction in [0, 1) (got {rsd}); 2% is 0.02")
    if method != "carver":
        if stop is not None:
            raise RankError(
                f"--stop applies to --method carver only ({method} ranks every parameter)"
            )
        if correction is not None:
            raise RankError("--pi-correction applies to --method carver only")
    if method == "lasso":
        return rank_lasso(dataset, metric)
    if method == "fanova":
        from stortune.importance.fanova import rank_fanova  # Optuna only when asked for

        return rank_fanova(dataset, metric)
    return rank_carver(
        dataset, metric, stop or "rsd", top, rsd, bins, correction or PiCorrection.LEVELS
    )


def write_plots(
    dataset: Dataset, result: CarverResult | LassoResult | FanovaResult, directory: str | Path
) -> list[Path]:
    """The figures for one ranking (PNG and SVG each) in `directory`."""
    # matplotlib only when figures are asked for
    from stortune.importance.carver import fixed_sets
    from stortune.importance.plots import boxplot_groups
    from stortune.plots import importance as figures
    from stortune.plots.render import save
    from stortune.plots.style import lower_is_better

    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RankError(f"{out}: cannot create the plot directory: {exc.strerror}") from None
    metric, direction = result.metric, result.direction
    if isinstance(result, LassoResult):
        leading = result.ranking[:PLOT_PARAMS]
        fig = figures.lasso_path(
            result.alphas, result.path, result.column_param, result.ranking, result.alpha_cv, metric
        )
        written = save(fig, out / "lasso-path")
    elif not isinstance(result, CarverResult):  # fANOVA: its ranking's boxplots
        leading = result.ranking[:PLOT_PARAMS]
        written = []
    else:
        leading = _leading_carver(result) or result.params[:PLOT_PARAMS]
        fig = figures.carver_steps(result.steps, metric, direction, result.stop)
        written = save(fig, out / "carver-steps")
        sets = fixed_sets(dataset, leading[:FIXED_SET_PARAMS], metric=metric, bins=result.bins)
        written += save(figures.fixed_sets(sets, metric, direction), out / "fixed-sets")
    bins = result.bins if isinstance(result, CarverResult) else DEFAULT_BINS
    name, groups = boxplot_groups(dataset, leading, metric, bins)
    fig = figures.boxplots(groups, name + lower_is_better(dataset.direction(name)))
    return written + save(fig, out / "boxplots")


def _leading_carver(result: CarverResult) -> list[str]:
    """Selected parameters first, then the rest by their PI."""
    rest = []
    if result.steps:
        pi = result.steps[0].scores
        rest = sorted((p for p in pi if p not in result.selected), key=lambda p: -pi[p])
    return [*result.selected, *rest][:PLOT_PARAMS]
