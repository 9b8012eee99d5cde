"""Ranking parameters before tuning (SAPPHIRE 3.3) and measuring a sample to rank from.

`rank_space` ranks a space's parameters (Carver or Lasso) on the runs stored for it that show
what the tuning will be judged on (`ranking_data`), measuring a Latin hypercube sample first
when the store holds too few configs, and returns the space to tune: the top K free, with the
parameters their conditions read (a ranked bfq tunable frees the scheduler), the others pinned
at their best known (or default) values. Held at the best, the free ones start from it too, so
the campaign's first evaluation is the best config measured.

What a ranking ranks on (`ranking_data`):

* **The job's workloads only.** The same metric means different things under different
  workloads (``total.bw_mbs`` of fileserver is not that of stream); another workload's runs,
  in a sample shared by several, would rank that workload's parameters. A tuning of several
  workloads is judged on each config's geometric mean over them of its per-workload means
  (`combine_workloads`): it ranks on that, one row per config measured under all of them.
* **Relative to the reference runs, where measured.** A campaign that measured reference runs
  gives each run divided by the reference measured around it (``<metric>_rel``, as
  `stortune rank --from CAMPAIGN` does): it cancels the drift of the machine. Raw values
  otherwise; when some campaigns have reference runs and some do not, only the relative values
  count (raw ones do not compare with ratios).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import pandas as pd

from stortune.datasets import METRIC_PREFIX, Dataset, config_value, from_frame
from stortune.enums import CampaignKind, Direction
from stortune.errors import StortuneError
from stortune.measure.campaigns import new_campaign, open_campaign
from stortune.measure.reference import campaign_relative
from stortune.measure.runner import Outcome, RunRules
from stortune.measure.tuning import TuneSettings
from stortune.objective import Objective, combine_workloads
from stortune.sources import RELATIVE_SUFFIX, WORKLOAD_COLUMN
from stortune.space import Config, Space
from stortune.store import Store
from stortune.targets.base import Target
from stortune.tuners.topk import pin, rankable, top_k, with_parents
from stortune.workflows.reporting import Reporter, run_measuring
from stortune.workloads.base import Workload

if TYPE_CHECKING:
    from stortune.cluster.client import Cluster


class RankMethod(StrEnum):
    CARVER = "carver"
    LASSO = "lasso"
    # Carver's and Lasso's top K taken in turns, Carver first: the parameters either finds,
    # Carver's own (its groups of configs) before Lasso's (a linear fit) at each rank
    CARVER_LASSO = "carver-lasso"


class Hold(StrEnum):
    """What the untuned parameters are pinned to: the sample's best config (where the tuning
    then starts) or their defaults."""

    BEST = "best"
    DEFAULT = "default"


@dataclass
class RankOptions:
    """`tune --rank`: the method, how many parameters to tune, what the others are pinned to
    (``best`` known values or ``default``), and the sample size (configs)."""

    method: str
    top_k: int = 5
    hold: str = Hold.BEST
    budget: int | None = None

    def __post_init__(self) -> None:
        if self.method not in tuple(RankMethod):
            choices = ", ".join(RankMethod)
            raise StortuneError(f"--rank must be one of {choices}, not {self.method!r}")
        if self.hold not in tuple(Hold):
            choices = ", ".join(Hold)
            raise StortuneError(f"--hold must be one of {choices}, not {self.hold!r}")
        if self.top_k < 1:
            raise StortuneError(f"--top-k must be at least 1, not {self.top_k}")
        if self.budget is not None and self.budget < 2:
            raise StortuneError(f"--rank-budget must be at least 2 configs, not {self.budget}")


@dataclass
class Ranking:
    """The space to tune and how the ranking chose it."""

    space: Space
    free: list[str]
    held: Config
    configs: int
    method: str
    warning: str | None = None
    samples: list[str] = field(default_factory=list)  # campaigns measured for it
    metric: str | None = None  # the column ranked on (``<metric>_rel``: relative values)
    workloads: list[str] = field(default_factory=list)  # whose runs it ranked on

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "tuned": self.free,
            "pinned": self.held,
            "configs": self.configs,
            "warning": self.warning,
            "samples": self.samples,
            "metric": self.metric,
            "workloads": self.workloads,
        }

    def basis(self) -> str:
        """What the ranking ranked on, in words."""
        runs = f"{', '.join(self.workloads)} runs" if self.workloads else "runs"
        metric = self.metric or "?"
        if metric.endswith(RELATIVE_SUFFIX):
            metric = f"{metric.removesuffix(RELATIVE_SUFFIX)} relative to the reference runs"
        return f"{runs}, {metric}"


def ranking_data(
    store: Store, space: Space, objective: Objective, workloads: Sequence[str]
) -> tuple[Dataset, Objective] | None:
    """The runs stored for this space that a tuning of `workloads` on `objective` is judged
    on (module doc), as one dataset, and the objective to rank it on: `objective`'s metric,
    or ``<metric>_rel`` when the values are relative. None without such runs."""
    metric = objective.metric
    raw, relative = METRIC_PREFIX + metric, METRIC_PREFIX + metric + RELATIVE_SUFFIX
    names = set(space.names)
    frames = []
    for campaign in store.campaigns():
        if campaign.space_name != space.name or campaign.kind == CampaignKind.VERIFY:
            continue
        frame = store.runs_frame(campaign.name, include_failed=False)
        if frame.empty or raw not in frame or not names <= set(frame.columns):
            continue
        frame = frame[frame[WORKLOAD_COLUMN].astype(str).isin(list(workloads))]
        frame = frame.dropna(subset=[raw])
        if frame.empty:
            continue
        ratios = campaign_relative(store, campaign, metric)
        frame = frame.assign(**{relative: frame["run.id"].map(ratios).astype(float)})
        params = [c for c in frame.columns if c in names]  # the export's order, as it ranks
        frames.append(frame[[*params, WORKLOAD_COLUMN, raw, relative]])
    if not frames:
        return None
    runs = pd.concat(frames, ignore_index=True)
    column = relative if runs[relative].notna().any() else raw
    runs = runs.dropna(subset=[column])
    if len(workloads) > 1:
        runs = combined(runs, [c for c in runs.columns if c in names], column, workloads)
    if runs.empty:
        return None
    runs = runs[[c for c in runs.columns if c in names or c == column]]
    data = from_frame(runs.reset_index(drop=True), metrics=[column], source="store")
    ranked_on = Objective(column.removeprefix(METRIC_PREFIX), objective.direction)
    return data.with_metric_direction(ranked_on.metric, objective.direction), ranked_on


def combined(
    runs: pd.DataFrame, params: list[str], column: str, workloads: Sequence[str]
) -> pd.DataFrame:
    """One row per config measured under every workload: the geometric mean over them of its
    per-workload means, as a tuning of several workloads values a config."""
    means = runs.groupby([*params, WORKLOAD_COLUMN], dropna=False, sort=False)[column].mean()
    table = means.unstack(WORKLOAD_COLUMN)
    if not set(workloads) <= set(table.columns):
        return runs.iloc[0:0]
    table = table[list(workloads)].dropna()
    values = [combine_workloads(list(row)) for row in table.itertuples(index=False)]
    out = table.index.to_frame(index=False)
    out[column] = values
    return out


def sample_space(
    store: Store,
    name: str,
    space: Space,
    target: Target,
    workloads: Sequence[Workload | None],
    objective: Objective,
    configs: int,
    rules: RunRules,
    reporter: Reporter,
    seed: int = 0,
    reference_every: int = 0,
    repetitions: int = 1,
    cluster: Cluster | None = None,
) -> Outcome:
    """Measure a Latin hypercube of `configs` configs (one run each, unless told) as a
    campaign of kind sample (stored like any other, so it can be ranked again or resumed)."""
    settings = TuneSettings(
        budget=configs, repetitions=repetitions, reference_every=reference_every
    )
    campaign = new_campaign(
        store, name, CampaignKind.SAMPLE, space, target, workloads, objective,
        {**settings.to_dict(), **rules.to_dict()}, tuner="lhs", seed=seed,
    )  # fmt: skip
    measuring = open_campaign(
        store, campaign.name, target=target, workloads=workloads, cluster=cluster
    )
    return run_measuring(measuring, reporter, f"sampling {name}")


def rank_space(
    store: Store,
    space: Space,
    options: RankOptions,
    objective: Objective,
    sample: Callable[[int], str],
    workloads: Sequence[str] = ("default",),
) -> Ranking:
    """The space to tune (see the module doc), ranked on the stored runs of `workloads` (their
    names). `sample(n)` measures n more configs and returns its campaign's name; it is called
    when the store has fewer than the sample size (default: max(20, 2 x parameters); Lasso
    ranks with fewer samples than parameters, as SAPPHIRE did on Ceph)."""
    needed = options.budget or max(20, 2 * len(space))
    found = ranking_data(store, space, objective, workloads)
    have = 0 if found is None else len(found[0].aggregated().frame)
    samples = []
    if have < needed:
        samples.append(sample(needed - have))
        found = ranking_data(store, space, objective, workloads)
    if found is None:
        raise StortuneError(
            f"no successful run of {', '.join(workloads)} measuring {objective.metric} to rank "
            "the parameters with"
        )
    dataset, ranked_on = found
    ranking = ranked_space(dataset, space, options, ranked_on, samples)
    ranking.workloads = list(workloads)
    return ranking


def ranked_space(
    dataset: Dataset,
    space: Space,
    options: RankOptions,
    objective: Objective,
    samples: Sequence[str] = (),
) -> Ranking:
    """The space to tune from a ranking of `dataset` on `objective`'s metric (a column of it):
    the top K free with their parents, the others pinned (see the module doc)."""
    dataset = replace(dataset, params=rankable(space, dataset.params))
    top = top_parameters(dataset, options.method, objective.metric, options.top_k, space)
    free = with_parents(space, top)
    means = dataset.aggregated().frame
    held: Config = {}
    start: Config = {}
    if options.hold == Hold.BEST:  # and the free ones start there: the first evaluation is it
        start = best_known(dataset, space, objective)
        held = {n: v for n, v in start.items() if n not in free}
    return Ranking(
        pin(space, free, held, start),
        free,
        held,
        len(means),
        options.method,
        thin_ranking_warning(len(means), len(space)),
        list(samples),
        objective.metric,
    )


def top_parameters(
    dataset: Dataset, method: str, metric: str, k: int, space: Space | None = None
) -> list[str]:
    """The first `k` parameters of `dataset` for `metric` by `method`, among those `space`
    holds (when given: a dataset can hold more)."""
    from stortune.importance import rank_dataset

    if method == RankMethod.CARVER_LASSO:
        carver = top_parameters(dataset, RankMethod.CARVER, metric, k)
        lasso = top_parameters(dataset, RankMethod.LASSO, metric, k)
        found = [name for pair in zip(carver, lasso, strict=False) for name in pair]
    else:
        strategy = "top-n" if method == RankMethod.CARVER else None
        found = top_k(rank_dataset(dataset, str(method), metric, strategy, k), k)
    return [n for n in dict.fromkeys(found) if space is None or n in space][:k]


def best_known(dataset: Dataset, space: Space, objective: Objective) -> Config:
    """The config of `dataset` with the best mean on `objective`'s metric among those `space`
    holds (a sample drawn before a value was found risky can hold it), without the parameters
    its rows leave inactive."""
    frame = dataset.aggregated().frame.dropna(subset=[objective.metric])
    frame = frame.sort_values(objective.metric, ascending=objective.direction == Direction.MIN)
    for _, row in frame.iterrows():
        config = {n: config_value(row[n]) for n in space.names if n in row.index}
        config = {n: v for n, v in config.items() if v is not None}
        try:
            space.validate(config)
        except StortuneError:
            continue
        return config
    raise StortuneError(f"no config of {dataset.source} is in the space {space.name!r}")


def thin_ranking_warning(configs: int, parameters: int) -> str | None:
    """Why a ranking from fewer configs than parameters deserves doubt (measured on Ceph: 18
    configs for 439 options put monitor timeouts and scrub thresholds in the top 16)."""
    if configs >= parameters:
        return None
    return (
        f"the ranking saw {configs} configs for {parameters} parameters: beyond the strongest "
        f"few, its order is mostly noise; a larger --rank-budget makes it worth more"
    )
