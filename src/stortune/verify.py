"""Re-measure candidate configs side by side and state the gain with a confidence interval.

A tuner's best value is the maximum of noisy means and so flatters itself, and on a drifting
machine absolute numbers from an hour apart do not compare (MEASURING.md). Verification measures
the configs again, interleaved (A-B-A-B), and reports the ratio of their means with a t-based
interval. The runs are stored as a campaign of kind ``verify`` named ``<campaign>-verify``, so
they can be exported and an interrupted verification resumes without repeating runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stortune.experiment import (
    Event,
    combine_workloads,
    machine_lock,
    measure_once,
    record_run,
    workload_name,
)
from stortune.space import Config
from stortune.stats import Ratio, Summary, ratio_ci, summarize
from stortune.store import Campaign, Store, Trial
from stortune.targets import Target, Workload


@dataclass
class Verdict:
    """Per-config summaries of the objective and the gain of `candidate` over `baseline`
    (above 1 is better, whatever the direction)."""

    campaign: str
    metric: str
    direction: str
    summaries: dict[str, Summary]
    gain: Ratio

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "metric": self.metric,
            "direction": self.direction,
            "summaries": {k: v.to_dict() for k, v in self.summaries.items()},
            "gain": self.gain.to_dict(),
        }


def verify(
    store: Store,
    source: Campaign,
    target: Target,
    workloads: Sequence[Workload | None],
    configs: Mapping[str, Config],
    repetitions: int = 3,
    timeout: float | None = None,
    baseline: str = "default",
    candidate: str = "best",
    on_event: Callable[[Event], None] | None = None,
) -> Verdict:
    """Measure each labelled config `repetitions` times, interleaved, and compare two of them."""
    on_event = on_event or (lambda _e: None)
    campaign = _verify_campaign(store, source, repetitions)
    trials = _trials_by_label(store, campaign, configs)
    metric = source.metric
    workloads = list(workloads) or [None]
    with machine_lock(target, campaign.name), target:
        for rep in range(repetitions):
            for label, config in configs.items():
                trial = trials[label]
                done = {(r.workload, r.repetition) for r in store.trial_runs(trial.id)}
                missing = [w for w in workloads if (workload_name(w), rep) not in done]
                if not missing:
                    continue
                target.apply(config)
                for workload in missing:
                    m = measure_once(target, workload, timeout, metric)
                    record_run(store, campaign.id, trial.id, workload_name(workload), rep, m)
                    on_event(Event("run", trial.seq, config, workload_name(workload), rep, m))
    values = {
        label: _per_repetition(store.trial_runs(trials[label].id), workloads, metric)
        for label in configs
    }
    summaries = {label: summarize(v) for label, v in values.items()}
    for label, trial in trials.items():
        s = summaries[label]
        store.finish_trial(
            trial.id, "ok" if s.n else "failed", s.mean if s.n else None, {"verify": s.to_dict()}
        )
    store.set_status(campaign.id, "finished")
    a, b = values[baseline], values[candidate]
    gain = ratio_ci(a, b) if source.direction == "max" else ratio_ci(b, a)
    return Verdict(campaign.name, metric, source.direction, summaries, gain)


def _verify_campaign(store: Store, source: Campaign, repetitions: int) -> Campaign:
    name = f"{source.name}-verify"
    if any(c.name == name for c in store.campaigns()):
        return store.campaign(name)
    return store.create_campaign(
        name,
        kind="verify",
        space_name=source.space_name,
        space_yaml=source.space_yaml,
        target=source.target,
        workload=source.workload,
        objective=source.objective,
        settings={"repetitions": repetitions, "source": source.name},
    )


def _trials_by_label(
    store: Store, campaign: Campaign, configs: Mapping[str, Config]
) -> dict[str, Trial]:
    existing = {(t.info or {}).get("label"): t for t in store.trials(campaign.id)}
    for seq, (label, config) in enumerate(configs.items()):
        if label not in existing:
            store.add_trial(campaign.id, seq, config, {"label": label})
    return {(t.info or {}).get("label"): t for t in store.trials(campaign.id)}


def _per_repetition(
    runs: Sequence[Any], workloads: Sequence[Workload | None], metric: str
) -> list[float]:
    """One objective value per repetition: the workloads of that repetition combined."""
    out = []
    names = [workload_name(w) for w in workloads]
    reps = sorted({r.repetition for r in runs})
    for rep in reps:
        means = [
            r.metrics[metric]
            for r in runs
            if r.repetition == rep and r.status == "ok" and r.workload in names
        ]
        if len(means) == len(names) and all(not math.isnan(v) for v in means):
            out.append(combine_workloads(means))
    return out
