"""Campaigns as the engine starts and resumes them: what is stored, and how a stored campaign
is turned back into a plan, a target and rules.

Everything a resume needs is stored with the campaign: the space as YAML, the target's and the
workloads' specs, the objective, the tuner, its seed and the settings. `open_campaign` rebuilds
the same plan for any kind, so `--resume NAME` works alike for tuning, sampling, sweeps, noise
studies and verifications. Measuring takes the campaign's lease first (`lease.py`): one process
measures a campaign at a time, and settings a sitting changes (a raised budget, more rounds) are
stored only once it holds it, so a refused process changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import yaml

from stortune.enums import CampaignKind
from stortune.errors import StortuneError
from stortune.measure.lease import CampaignLease
from stortune.measure.log import CampaignLog
from stortune.measure.runner import Event, Outcome, Plan, Runner, RunRules, workload_name
from stortune.measure.sweeping import SweepPlan, SweepSettings
from stortune.measure.tuning import TunePlan, TuneSettings, within_pool
from stortune.measure.verify import VerifyPlan, VerifyRules
from stortune.objective import Objective
from stortune.space import Space, parse_space
from stortune.store import Campaign, Store
from stortune.storecells import stored
from stortune.targets import make_target
from stortune.targets.base import SpecError, Target
from stortune.tuners import make_tuner
from stortune.tuners.pool import pool_within
from stortune.workloads import make_workload
from stortune.workloads.base import Workload

if TYPE_CHECKING:
    from stortune.cluster.client import Cluster

PARALLEL = "parallel"  # the stored setting: trials in flight at once on a cluster (its order)


@dataclass
class Measuring:
    """A campaign ready to measure: its log, plan, target and rules."""

    log: CampaignLog
    plan: Plan
    target: Target
    rules: RunRules
    seconds: float | None = None
    settings: dict[str, Any] | None = None  # stored settings this sitting changes
    cluster: Cluster | None = None  # measure on its nodes, not on this machine

    @property
    def campaign(self) -> Campaign:
        return self.log.campaign

    def lease(self) -> CampaignLease:
        """The campaign's lease; `run` takes it, and a caller may take it before (it is
        re-entrant), so that a process refused shows nothing else first."""
        return CampaignLease(self.log.store, self.campaign)

    def run(self, on_event: Callable[[Event], None] | None = None) -> Outcome:
        with self.lease() as lease:
            if self.settings is not None:
                self.log.update_settings(self.settings)
                self.settings = None
            if self.cluster is not None:
                from stortune.cluster.coordinator import ClusterRunner

                return ClusterRunner(
                    self.log,
                    self.cluster,
                    self.target.kind,
                    self.rules,
                    on_event,
                    self.seconds,
                    lease,
                ).execute(self.plan)
            runner = Runner(self.log, self.target, self.rules, on_event, self.seconds, lease)
            return runner.execute(self.plan)


def new_campaign(
    store: Store,
    name: str,
    kind: CampaignKind,
    space: Space,
    target: Target,
    workloads: Sequence[Workload | None],
    objective: Objective,
    settings: Mapping[str, Any],
    tuner: str = "",
    seed: int = 0,
) -> Campaign:
    """Store a campaign with everything a resume needs to rebuild it."""
    check_workloads(target, workloads)
    return store.create_campaign(
        name,
        kind=kind,
        space_name=space.name,
        space_yaml=yaml.safe_dump(space.to_dict(), sort_keys=False),
        target=target.describe(),
        workload={"workloads": [w.describe() for w in workloads if w is not None]},
        objective=objective.to_dict(),
        tuner=tuner,
        seed=seed,
        settings=dict(settings),
    )


def check_workloads(target: Target, workloads: Sequence[Workload | None]) -> None:
    """Refuse, before anything is stored, a workload the target cannot host."""
    for workload in workloads:
        target.check_workload(workload)


def workloads_of(campaign: Campaign) -> list[Workload | None]:
    specs = campaign.workload.get("workloads", [])
    with stored(campaign.name, "campaigns.workload", (StortuneError,)):
        return [make_workload(spec) for spec in specs] if specs else [None]


def space_of(campaign: Campaign) -> Space:
    return parse_space(campaign.space_yaml, f"campaign {campaign.name!r} (campaigns.space_yaml)")


def open_campaign(
    store: Store,
    name: str,
    *,
    budget: int | None = None,
    seconds: float | None = None,
    target: Target | None = None,
    workloads: Sequence[Workload | None] | None = None,
    cluster: Cluster | None = None,
) -> Measuring:
    """A stored campaign's plan, rebuilt as it was started (a tuning budget may be raised,
    a time budget given anew; for a verification, `budget` is its most rounds). A new campaign
    is opened the same way, right after `new_campaign` stored it: a start is a resume with no
    runs. `target` and `workloads`, when given, are the objects the stored specs describe,
    already in hand (a started Ceph cluster, a test's stand-in). With `cluster`, the plan is
    measured on its nodes: a tuning campaign with one trial in flight more than it had nodes
    when it started, so a proposal is ready when a node frees (stored as its `parallel`
    setting, so a resume proposes as it would have)."""
    campaign = store.campaign(name)
    kind = campaign.kind
    if kind in (CampaignKind.DATASET, CampaignKind.PROFILE):
        raise StortuneError(f"campaign {name!r} is a {kind}: it has nothing to measure or resume")
    space = space_of(campaign)
    workloads = list(workloads) if workloads is not None else workloads_of(campaign)
    with stored(name, "campaigns.target", (SpecError,)):
        target = target or make_target(campaign.target, space)
    target.recall(run for trial in store.trials(campaign.id) for run in trial.runs)  # so far
    settings = dict(campaign.settings)
    rules = RunRules.from_settings(settings)
    log = CampaignLog(store, campaign, [workload_name(w) for w in workloads])
    changed: dict[str, Any] | None = None
    plan: Plan
    if kind in (CampaignKind.TUNE, CampaignKind.SAMPLE):
        pool = pool_within(space, target.tuning_pool(), target.space)
        if budget is not None:
            settings["budget"] = budget
        tune, notes = within_pool(
            TuneSettings.from_settings({**settings, "seconds": seconds or settings.get("seconds")}),
            pool,
            space,
            log.objective,
        )
        if budget is not None:
            settings["budget"] = tune.budget  # the pool's limit when the budget was above it
        log.confidence = tune.confidence
        if budget is not None and settings != campaign.settings:
            changed = settings
        tuner = make_tuner(
            campaign.tuner,
            space,
            log.objective.direction,
            campaign.seed,
            tune.budget,
            pool=pool,
        )
        if cluster is not None:
            from stortune.measure.parallel import ParallelTunePlan

            if PARALLEL not in settings:
                settings[PARALLEL] = max(1, len(cluster.nodes() or {})) + 1  # one proposal ahead
                changed = settings
            plan = ParallelTunePlan(
                log, workloads, space, tuner, tune, target.state_after, int(settings[PARALLEL])
            )
        else:
            plan = TunePlan(log, workloads, space, tuner, tune, target.state_after)
        plan.notes += notes
        seconds = tune.seconds
    elif kind in (CampaignKind.SWEEP, CampaignKind.NOISE):
        plan = SweepPlan(log, workloads, SweepSettings.from_settings(settings))
    elif kind == CampaignKind.VERIFY:
        rounds = VerifyRules.from_settings(settings)
        if budget is not None:  # more rounds for a verification that stopped undecided
            rounds = replace(rounds, max_rounds=max(budget, rounds.min_rounds))
            changed = {**settings, **rounds.to_settings()}
        plan = VerifyPlan(log, workloads, rounds)
        seconds = seconds or rounds.max_seconds
    else:
        raise StortuneError(f"campaign {name!r} is of an unknown kind {kind!r}")
    return Measuring(log, plan, target, rules, seconds, changed, cluster)
