"""A campaign's record in the store, as plans and the runner write and read it.

Plans add trials and finish them; the runner records runs. Both go through this one object, so
a trial is summarised by one rule (`results.summarize_runs`) wherever it is finished.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stortune.enums import TrialStatus
from stortune.measure.results import TrialSummary, summarize_runs
from stortune.objective import Objective
from stortune.store import Campaign, Store, Trial
from stortune.workloads.base import Measurement


class CampaignLog:
    """Trials and runs of one campaign (see the module doc)."""

    def __init__(
        self,
        store: Store,
        campaign: Campaign,
        workloads: Sequence[str],
        confidence: float = 0.9,
    ) -> None:
        self.store = store
        self.campaign = campaign
        self.workloads = list(workloads) or ["default"]
        self.confidence = confidence
        self.objective = Objective.from_dict(campaign.objective)
        # told when a trial's value is known (the runner shows the best so far)
        self.on_finish: Callable[[Trial, TrialSummary], None] = lambda _t, _s: None

    @property
    def name(self) -> str:
        return self.campaign.name

    def trials(self) -> list[Trial]:
        return self.store.trials(self.campaign.id)

    def trial(self, trial_id: int) -> Trial:
        return self.store.trial(trial_id)

    def add_trial(self, seq: int, config: Mapping[str, Any], info: Mapping | None = None) -> Trial:
        trial_id = self.store.add_trial(self.campaign.id, seq, config, info)
        return self.store.trial(trial_id)

    def record(
        self,
        trial: Trial,
        workload: str,
        repetition: int,
        measurement: Measurement,
        started: float,
        ended: float,
        info: Mapping[str, Any] | None = None,
    ) -> int:
        """Commit one finished run."""
        return self.store.add_run(
            self.campaign.id,
            trial.id,
            workload=workload,
            repetition=repetition,
            status=str(measurement.status),
            metrics=measurement.metrics,
            error=measurement.error,
            info={**measurement.info, **(info or {})},
            started_at=started,
            ended_at=ended,
        )

    def summary(self, trial: Trial) -> TrialSummary:
        return summarize_runs(
            self.store.trial_runs(trial.id), self.workloads, self.objective, self.confidence
        )

    def finish(self, trial: Trial) -> TrialSummary:
        """Summarise the trial's runs and store its value (status ok) or why it has none."""
        summary = self.summary(trial)
        status = TrialStatus.OK if summary.ok else TrialStatus.FAILED
        self.store.finish_trial(
            trial.id, status, summary.value, summary.per_workload, summary.error
        )
        self.on_finish(trial, summary)
        return summary

    def update_trial_info(self, trial: Trial, info: Mapping[str, Any]) -> None:
        """Add to a trial's info (a race's verdict, say), keeping what it holds."""
        current = self.store.trial(trial.id).info or {}
        self.store.update_trial(trial.id, info={**current, **info})

    def invalid(self, seq: int, config: Mapping[str, Any], error: str) -> None:
        """A config that breaks the space's rules: stored as such, nothing measured."""
        trial_id = self.store.add_trial(self.campaign.id, seq, config)
        self.store.finish_trial(trial_id, TrialStatus.INVALID, error=error)

    def set_objective(self, objective: Objective) -> None:
        """Keep what the objective learnt (bounds found from the default config's runs)."""
        self.objective = objective
        self.store.update_campaign(self.campaign.id, objective=objective.to_dict())
        self.campaign = self.store.campaign(self.campaign.name)

    def update_settings(self, settings: Mapping[str, Any]) -> None:
        self.store.update_campaign(self.campaign.id, settings=dict(settings))
        self.campaign = self.store.campaign(self.campaign.name)
