"""Everything a report reads, loaded once: the campaign, its trials, the analysis table, the
verification and a device profile. Sections only look things up here, so a missing piece
(no runs, no analysis, no verification) is found in one place and each section says why."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from stortune.datasets import Dataset
from stortune.errors import DatasetError, StortuneError
from stortune.measure.verify import Gain, latest_verification, stored_gain
from stortune.space import Space, parse_space
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


@dataclass
class Context:
    """The loaded inputs of one report; `analysis_note` says why `analysis` is None."""

    store: Store
    campaign: Campaign
    trials: list[Trial]
    space: Space | None
    space_note: str
    analysis: Analysis | None
    analysis_note: str
    verification: Campaign | None
    gain: Gain | None
    profile: dict[str, Any] | None
    profile_source: str
    subject: str = ""
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def ok_trials(self) -> list[Trial]:
        return [t for t in self.trials if t.value is not None]

    @property
    def runs(self) -> list[Any]:
        return [r for t in self.trials for r in t.runs]


def load_context(
    store: Store,
    name: str,
    workload: str | None = None,
    profile: dict[str, Any] | None = None,
    profile_source: str = "",
    subject: str = "",
) -> Context:
    """Read a campaign (a verification campaign stands for the campaign it verified)."""
    campaign = store.campaign(name)
    if campaign.kind == "verify" and campaign.settings.get("of"):
        campaign = store.campaign(campaign.settings["of"])
    trials = [_with_value(t, campaign.metric) for t in store.trials(campaign.id)]
    names = sorted({r.workload for t in trials for r in t.runs})
    if workload is not None and names and workload not in names:
        raise DatasetError(
            f"campaign {campaign.name!r} has no runs of workload {workload!r} "
            f"(have: {', '.join(names)})"
        )
    try:
        space, space_note = parse_space(campaign.space_yaml, f"campaign {campaign.name!r}"), ""
    except StortuneError as exc:
        space, space_note = None, f"The stored space cannot be read: {exc}"
    analysis, note = load_analysis(store, campaign, trials, workload)
    verification = latest_verification(store, campaign)
    try:
        gain = stored_gain(store, campaign)
    except StortuneError:
        gain = None
    if profile is None:
        profile, profile_source = stored_profile(store)
    return Context(
        store,
        campaign,
        trials,
        space,
        space_note,
        analysis,
        note,
        verification,
        gain,
        profile,
        profile_source,
        subject,
    )


def _with_value(trial: Trial, metric: str) -> Trial:
    """An imported dataset's trials carry no value: the mean of their successful runs."""
    if trial.value is not None or trial.status != "ok":
        return trial
    values = [
        r.metrics[metric]
        for r in trial.runs
        if r.status == "ok" and r.metrics.get(metric) is not None
    ]
    return replace(trial, value=sum(values) / len(values)) if values else trial


def load_analysis(
    store: Store, campaign: Campaign, trials: list[Trial], workload: str | None
) -> tuple[Analysis | None, str]:
    """The analysis table of a campaign, or None and the sentence saying why there is none.

    Like `stortune.sources.load_source` on a campaign (successful runs, one workload, the
    objective relative to the reference config when there is one), read from this store."""
    from stortune.datasets import from_frame
    from stortune.sources import WORKLOAD_COLUMN, campaign_frame

    if not trials:
        return None, "The campaign has no evaluations yet, so there is nothing to analyse."
    ok_runs = [r for t in trials for r in t.runs if r.status == "ok"]
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
    if campaign.kind == "dataset" and dataset.metrics:
        return dataset.metrics[0]
    return None


def stored_profile(store: Store) -> tuple[dict[str, Any] | None, str]:
    """The latest campaign of kind ``profile`` that carries a profile (``settings['profile']``,
    the JSON `stortune profile` writes)."""
    for campaign in reversed(store.campaigns()):
        if campaign.kind == "profile" and isinstance(campaign.settings.get("profile"), dict):
            return campaign.settings["profile"], f"campaign {campaign.name}"
    return None, ""
