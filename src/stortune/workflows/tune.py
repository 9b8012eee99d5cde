"""Tuning, SAPPHIRE's whole workflow on one target: optionally rank the parameters first (on
the runs stored for the space, sampling more when they are too few), tune the top K with the
others pinned, then re-measure default, best and any compared config interleaved and state each
gain with its confidence interval. Several objectives are scalarised (Magpie) and their Pareto
front is kept. `stortune run` is the same without ranking and verification.

Values that can lose data on a crash or power cut (a space's `risk`) are left out of the search
unless the job allows them; then the best safe config is re-measured beside the best one, so a
user sees what the risk buys.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stortune.enums import (
    CampaignKind,
    CampaignStatus,
    Direction,
    RiskScope,
    RunStatus,
    StopReason,
)
from stortune.errors import StortuneError
from stortune.measure.campaigns import Measuring, new_campaign, open_campaign, space_of
from stortune.measure.results import campaign_best
from stortune.measure.runner import Outcome, RunRules, workload_name
from stortune.measure.tuning import TunePlan, TuneSettings, within_pool
from stortune.measure.verify import (
    SAFE_LABEL,
    Gain,
    Verification,
    VerifyRules,
    in_loop_gain,
    latest_verification,
)
from stortune.objective import Objective, pareto_front
from stortune.space import Config, Space
from stortune.space.parts import layer_parts
from stortune.space.risk import Risk, risks_of, risky_variants, safe_space
from stortune.store import Campaign, Store
from stortune.targets import make_target
from stortune.targets.base import Target
from stortune.tuners import DEFAULT_TUNER
from stortune.tuners.pool import pool_within
from stortune.workflows.rank import Ranking, RankOptions, rank_space, sample_space
from stortune.workflows.reporting import Reporter, Silent, run_measuring
from stortune.workflows.verify import verify
from stortune.workloads.base import Workload

if TYPE_CHECKING:
    from stortune.cluster.client import Cluster


@dataclass
class TuneJob:
    """A new tuning campaign: what to tune, on what, for what, and how."""

    space: Space  # the whole space (ranking may pin part of it)
    target: Target
    workloads: list[Workload | None]
    objective: Objective
    settings: TuneSettings
    rules: RunRules = field(default_factory=RunRules)
    tuner: str = DEFAULT_TUNER
    seed: int = 0
    name: str | None = None
    kind: CampaignKind = CampaignKind.TUNE
    rank: RankOptions | None = None
    verify: int = 0  # the fewest rounds of the verification (0: skip it)
    verify_max: int | None = None  # the most rounds (None: `VerifyRules.of`'s default)
    verify_seconds: float | None = None  # a time cap on the verification
    compare: dict[str, Config] = field(default_factory=dict)
    agent: Path | None = None  # ddpg: continue from this saved agent and save it back
    allow_risk: bool = False  # search values that can lose data on a crash too
    measure_risks: RiskScope = RiskScope.NONE  # risky values verified on top of the best
    cluster: Cluster | None = None  # measure on its nodes (`stortune worker`), not here

    def campaign_name(self) -> str:
        return self.name or f"{self.space.name}-{self.tuner}-{time.strftime('%Y%m%d-%H%M%S')}"


@dataclass
class TuneResult:
    campaign: str
    outcome: Outcome
    ranking: Ranking | None = None
    widened: dict[str, list[float]] = field(default_factory=dict)
    verification: Verification | None = None
    pareto: list[dict[str, Any]] = field(default_factory=list)
    objective: Objective | None = None
    in_loop: Gain | None = None  # the best config's gain as the tuning runs measured it
    risks: list[Risk] = field(default_factory=list)  # what the best config risks

    @property
    def gains(self) -> dict[str, Gain]:
        """Each verified label's gain over the default: "best" first, then compared labels."""
        return {} if self.verification is None else self.verification.gains

    @property
    def gain(self) -> Gain | None:
        return self.gains.get("best")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"campaign": self.campaign, "outcome": self.outcome.to_dict()}
        if self.ranking is not None:
            out["ranking"] = self.ranking.to_dict()
        if self.widened:
            out["widened"] = self.widened
        out["risks"] = [r.to_dict() for r in self.risks]
        if self.in_loop is not None:
            out["in_loop"] = self.in_loop.to_dict()
        if self.gain is not None:
            out["gain"] = self.gain.to_dict()
        out["compared"] = {k: g.to_dict() for k, g in self.gains.items() if k != "best"}
        if self.verification is not None:
            out["verification"] = self.verification.to_dict()
        if self.objective is not None and self.objective.scalarizer is not None:
            out["scalarizer"] = self.objective.scalarizer.to_dict()
            out["pareto"] = self.pareto
        return out


def start_tuning(store: Store, job: TuneJob, reporter: Reporter | None = None) -> TuneResult:
    """Rank (if asked), tune, verify (if asked): a new campaign."""
    reporter = reporter or Silent()
    name = job.campaign_name()
    for workload in job.workloads:
        job.target.check_workload(workload)
    ranking = None
    tuned_space = searched = job.space if job.allow_risk else safe_space(job.space)
    if job.rank is not None:
        ranking = _rank(store, job, searched, name, reporter)
        tuned_space = ranking.space
    pool = pool_within(tuned_space, job.target.tuning_pool(), job.target.space)
    tune, notes = within_pool(job.settings, pool, tuned_space, job.objective)
    settings = {**tune.to_dict(), **job.rules.to_dict(), "allow_risk": job.allow_risk}
    campaign = new_campaign(
        store, name, job.kind, tuned_space, job.target, job.workloads, job.objective, settings,
        tuner=job.tuner, seed=job.seed,
    )  # fmt: skip
    # a start is a resume with no runs: the campaign is opened from what was just stored
    measuring = open_campaign(
        store, campaign.name, target=job.target, workloads=job.workloads, cluster=job.cluster
    )
    plan = measuring.plan
    assert isinstance(plan, TunePlan)
    plan.notes += notes  # the budget cut before it was stored
    result = _tune(store, measuring, plan, job.agent, reporter)
    result.ranking = ranking
    if result.outcome.best_config is not None:
        result.risks = risks_of(job.space, result.outcome.best_config)
    if job.verify > 0 and result.outcome.stopped_by != StopReason.BUSY:
        rules = VerifyRules.of(
            job.verify,
            job.verify_max,
            confidence=job.settings.confidence,
            max_seconds=job.verify_seconds,
        )
        risky = _risky(job.space, result.outcome.best_config, job.measure_risks)
        compare = {**job.compare, **risky}
        result.verification = _verify(
            store, measuring, job.space, job.target, compare, rules, reporter, job.cluster
        )
    return result


def resume_tuning(
    store: Store,
    name: str,
    *,
    budget: int | None = None,
    seconds: float | None = None,
    space: Space | None = None,
    compare: Mapping[str, Config] | None = None,
    verify_repetitions: int = 0,
    verify_max: int | None = None,
    verify_seconds: float | None = None,
    agent: Path | None = None,
    reporter: Reporter | None = None,
    measure_risks: RiskScope = RiskScope.NONE,
    cluster: Cluster | None = None,
) -> TuneResult:
    """Continue a stored tuning campaign where it stopped (a budget may be raised), then
    verify if asked (with the best's risky variants in `measure_risks`, as a start does). The
    default to compare with is the whole space's: `space`, else the one an earlier
    verification kept, else the campaign's (pinned) space's."""
    reporter = reporter or Silent()
    measuring = open_campaign(store, name, budget=budget, seconds=seconds, cluster=cluster)
    if not isinstance(measuring.plan, TunePlan):
        raise StortuneError(
            f"campaign {name!r} is a {measuring.campaign.kind}, not a tuning campaign "
            "(resume it with `stortune resume`)"
        )
    result = _tune(store, measuring, measuring.plan, agent, reporter)
    if result.outcome.best_config is not None:
        result.risks = risks_of(space or measuring.plan.space, result.outcome.best_config)
    if verify_repetitions > 0 and result.outcome.stopped_by != StopReason.BUSY:
        campaign = measuring.campaign
        previous = latest_verification(store, campaign)
        whole = space or (space_of(previous) if previous is not None else measuring.plan.space)
        target = make_target(campaign.target, whole)  # the tuned one knows only its (pinned) space
        if _unfinished_of_best(store, campaign, previous, whole):
            assert previous is not None
            reporter.note(f"continuing the verification {previous.name}, which was stopped")
            run_measuring(
                open_campaign(store, previous.name, target=target, cluster=cluster),
                reporter,
                previous.name,
            )
            result.verification = Verification.read(store, store.campaign(previous.name), campaign)
            return result
        rules = VerifyRules.of(verify_repetitions, verify_max, max_seconds=verify_seconds)
        # the campaign stored the space it searched (safe, unless --allow-risk): the risky
        # values come from the whole space, given or bundled under the campaign's space name
        whole_space = space or _bundled(campaign.space_name) or whole
        risky = _risky(whole_space, result.outcome.best_config, measure_risks)
        compared = {**(compare or {}), **risky}
        result.verification = _verify(
            store, measuring, whole, target, compared, rules, reporter, cluster
        )
    return result


def _bundled(name: str) -> Space | None:
    from stortune.space import bundled_spaces, load_space

    return load_space(name) if name in bundled_spaces() else None


def _risky(space: Space, best: Config | None, scope: RiskScope) -> dict[str, Config]:
    """The best config with each risky value in `scope` (application options, or all), to be
    verified beside it: what each risk would buy, measured, never applied."""
    if scope is RiskScope.NONE or best is None:
        return {}
    return risky_variants(space, space.full_config(best), scope is RiskScope.APPLICATION)


def _unfinished_of_best(
    store: Store, campaign: Campaign, previous: Campaign | None, space: Space
) -> bool:
    """Whether `previous`, the campaign's latest verification, stopped before it finished and
    re-measures the campaign's best config as it is now: then it is continued, not begun anew."""
    if previous is None or previous.status == CampaignStatus.FINISHED:
        return False
    best = campaign_best(campaign, store.trials(campaign.id))
    labelled = {(t.info or {}).get("label"): t.config for t in store.trials(previous.id)}
    if best is None or "best" not in labelled:
        return False
    try:
        return space.validate(dict(best.config)) == space.validate(dict(labelled["best"]))
    except StortuneError:
        return False


def _rank(store: Store, job: TuneJob, space: Space, name: str, reporter: Reporter) -> Ranking:
    """`--rank`: on the stored runs of the job's workloads, relative to the reference runs
    where their campaigns measured some (`rank_space`); a sample measured for it takes
    reference runs as the tuning will."""
    options = job.rank
    assert options is not None

    def sample(n: int) -> str:
        taken = {c.name for c in store.campaigns()}
        label = f"{name}-rank"
        label += f"-{len(taken)}" if label in taken else ""
        sample_space(
            store, label, space, job.target, job.workloads, job.objective, n, job.rules,
            reporter, seed=job.seed, reference_every=job.settings.reference_every,
            cluster=job.cluster,
        )  # fmt: skip
        return label

    names = list(dict.fromkeys(workload_name(w) for w in job.workloads))
    ranking = rank_space(store, space, options, job.objective, sample, names)
    reporter.note(
        f"{options.method} ranking from {ranking.configs} configs ({ranking.basis()}): tuning "
        f"{', '.join(ranking.free)}; {len(ranking.held)} other parameter(s) pinned "
        f"({options.hold} values)"
    )
    if ranking.warning:
        reporter.note(f"warning: {ranking.warning}")
    return ranking


def _tune(
    store: Store, measuring: Measuring, plan: TunePlan, agent: Path | None, reporter: Reporter
) -> TuneResult:
    tuner = plan.tuner
    if agent is not None and hasattr(tuner, "load") and agent.exists():
        tuner.load(agent)
    outcome = run_measuring(measuring, reporter, measuring.campaign.name)
    if agent is not None and hasattr(tuner, "save"):
        tuner.save(agent)
    result = TuneResult(measuring.campaign.name, outcome, objective=measuring.log.objective)
    result.in_loop = in_loop_gain(store, store.campaign(measuring.campaign.name))
    grown = getattr(getattr(tuner, "bounds", None), "widenings", [])
    if grown:  # SAPPHIRE's dynamic bounds: where the search left the declared box
        result.widened = {w.name: [w.low, w.high] for w in grown}
    if measuring.log.objective.scalarizer is not None:
        result.pareto = pareto_rows(store, measuring.log.campaign, measuring.log.objective)
    return result


def _verify(
    store: Store,
    measuring: Measuring,
    space: Space,
    target: Target,
    compare: Mapping[str, Config],
    rules: VerifyRules,
    reporter: Reporter,
    cluster: Cluster | None = None,
) -> Verification | None:
    trials = store.trials(measuring.campaign.id)
    best = campaign_best(measuring.campaign, trials)
    if best is None:
        return None
    configs = {"default": space.default_config(), "best": dict(best.config)}
    if risks_of(space, best.config):  # what the risk buys: the best safe config beside it
        # (with racing, the last safe incumbent: the safe config the risky one had to beat)
        safe = campaign_best(
            measuring.campaign, [t for t in trials if not risks_of(space, t.config)]
        )
        if safe is not None:
            configs[SAFE_LABEL] = dict(safe.config)
    configs.update(layer_parts(space, best.config))  # which layer the gain comes from
    configs.update(compare)
    return verify(store, measuring.campaign, target, configs, rules, space, reporter, cluster)


def pareto_rows(store: Store, campaign: Campaign, objective: Objective) -> list[dict[str, Any]]:
    """The campaign's Pareto-optimal trials (per-trial means of each objective)."""
    scalarizer = objective.scalarizer
    if scalarizer is None:
        return []
    specs = scalarizer.objectives
    rows, points = [], []
    for trial in store.trials(campaign.id):
        runs = [r for r in trial.runs if r.status == RunStatus.OK]
        if not runs or any(o.metric not in r.metrics for r in runs for o in specs):
            continue
        means = {o.metric: sum(r.metrics[o.metric] for r in runs) / len(runs) for o in specs}
        rows.append({"seq": trial.seq, "config": trial.config, **means})
        points.append([means[o.metric] for o in specs])
    front = pareto_front(points, [Direction(o.direction) for o in specs])
    return [rows[i] for i in front]
