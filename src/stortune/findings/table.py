"""A campaign's trials with their values, and its analysis table.

An imported dataset's trials carry no value (nothing tuned them): here each gets the mean of
its successful runs, so a best trial and a headline exist for it too. The analysis table is
what importance and models read: one workload, successful runs, the objective relative to the
reference config when one was measured (like `stortune.sources.load_source` on a campaign).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stortune.datasets import Dataset, from_frame
from stortune.enums import CampaignKind, RunStatus, TrialStatus
from stortune.errors import StortuneError
from stortune.store import Campaign, Store, Trial

# Importance and models need this many distinct configs measured successfully.
MIN_CONFIGS = 8


@dataclass
class Analysis:
    """The campaign's analysis table (one workload, successful runs, relative metric first)."""

    dataset: Dataset
    metric: str
    workload: str | None
    workloads: list[str]

    @property
    def configs(self) -> Dataset:
        """One row per distinct config, repetitions averaged."""
        return self.dataset.aggregated()

    @property
    def n_configs(self) -> int:
        return len(self.configs.frame.dropna(subset=[self.metric]))

    @property
    def other_workloads(self) -> list[str]:
        """The workloads the campaign ran besides the one analysed."""
        return [w for w in self.workloads if w != self.workload]


def valued_trials(store: Store, campaign: Campaign) -> list[Trial]:
    """The campaign's trials, an imported dataset's with the mean of their successful runs."""
    return [_with_value(t, campaign.metric) for t in store.trials(campaign.id)]


def _with_value(trial: Trial, metric: str) -> Trial:
    if trial.value is not None or trial.status != TrialStatus.OK:
        return trial
    values = [
        r.metrics[metric]
        for r in trial.runs
        if r.status == RunStatus.OK and r.metrics.get(metric) is not None
    ]
    return replace(trial, value=sum(values) / len(values)) if values else trial


def load_analysis(
    store: Store, campaign: Campaign, trials: list[Trial], workload: str | None
) -> tuple[Analysis | None, str]:
    """The analysis table of a campaign, or None and the sentence saying why there is none."""
    from stortune.sources import WORKLOAD_COLUMN, campaign_frame

    if not trials:
        return None, "The campaign has no evaluations yet, so there is nothing to analyse."
    ok_runs = [r for t in trials for r in t.runs if r.status == RunStatus.OK]
    if not ok_runs:
        return None, "No run of this campaign succeeded, so there is nothing to analyse."
    workloads = sorted({r.workload for r in ok_runs})
    if workload is None:
        workload = workloads[0]
    elif workload not in workloads:
        have = ", ".join(workloads)
        return None, f"No successful run of workload {workload!r} (have: {have})."
    try:
        frame = campaign_frame(store, campaign, include_failed=False)
        frame = frame[frame[WORKLOAD_COLUMN].astype(str) == workload].reset_index(drop=True)
        dataset = from_frame(frame, source=f"campaign {campaign.name}")
    except StortuneError as exc:
        return None, f"The analysis table cannot be built: {exc}"
    metric = _analysis_metric(dataset, campaign)
    if metric is None:
        return None, f"The runs hold no value of the objective {campaign.metric!r}."
    dataset = dataset.with_metric_direction(metric, campaign.direction)
    return Analysis(dataset, metric, workload, workloads), ""


def _analysis_metric(dataset: Dataset, campaign: Campaign) -> str | None:
    """The objective relative to the reference config when measured, else the objective."""
    for name in (f"{campaign.metric}_rel", campaign.metric):
        if name in dataset.metrics and dataset.frame[name].notna().any():
            return name
    if campaign.kind == CampaignKind.DATASET and dataset.metrics:
        return dataset.metrics[0]
    return None


def too_few_configs(analysis: Analysis | None, note: str, needs: str) -> str:
    """Why an analysis that `needs` (", and ranking needs at least 8") cannot run: the table's
    note, a count below `MIN_CONFIGS`, or "" when it can."""
    if analysis is None:
        return note
    n = analysis.n_configs
    if n < MIN_CONFIGS:
        return f"only {n} distinct configs were measured successfully, and {needs}"
    return ""
