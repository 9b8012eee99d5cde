"""What a trial's runs add up to, and which trial is best: one rule for every plan and view.

A trial's value is, for each workload, the mean of its successful runs' objective values,
combined over workloads (`combine_workloads`). A trial without a successful run of some
workload has no value, and its error says why. A disturbed run is a placeholder: it fills no
slot (`finished_slots`), so the slot is measured again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stortune.enums import Direction, RunStatus
from stortune.measure.objective import Objective, combine_workloads
from stortune.stats import summarize, t_quantile
from stortune.store import Campaign, Run, Trial


@dataclass
class TrialSummary:
    """A trial's value (None when it has none), per-workload statistics, and why not."""

    value: float | None
    per_workload: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


def run_value(run: Run, objective: Objective) -> float | None:
    """The objective's value in one successful run (None for any other run)."""
    if run.status != RunStatus.OK:
        return None
    return objective.value(run.metrics)


def summarize_runs(
    runs: Sequence[Run],
    workloads: Sequence[str],
    objective: Objective,
    confidence: float = 0.9,
) -> TrialSummary:
    """The one rule (module doc)."""
    per_workload: dict[str, dict[str, Any]] = {}
    means = []
    for name in workloads:
        values = [
            v for r in runs if r.workload == name and (v := run_value(r, objective)) is not None
        ]
        summary = summarize(values, confidence)
        per_workload[name] = {**summary.to_dict(), "ci_rel": summary.ci_half_width_rel}
        if summary.n == 0:
            errors = [r.error for r in runs if r.workload == name and r.error]
            return TrialSummary(None, per_workload, errors[-1] if errors else _why_none(runs))
        means.append(summary.mean)
    if not means:
        return TrialSummary(None, per_workload, "no workload to measure")
    return TrialSummary(combine_workloads(means), per_workload)


def _why_none(runs: Sequence[Run]) -> str:
    if not runs:
        return "no run yet"
    return "no successful run"


def finished_slots(trial: Trial) -> set[tuple[str, int]]:
    """(workload, repetition) pairs a trial has a result for; a disturbed run is not one, so a
    resumed campaign measures it again (`Store.add_run` then replaces it)."""
    return {(r.workload, r.repetition) for r in trial.runs if r.status != RunStatus.DISTURBED}


def best_trial(trials: Iterable[Trial], direction: Direction | str) -> Trial | None:
    """The trial with the best value in the objective's direction (None: no trial has one)."""
    sign = Direction(direction).sign
    best: Trial | None = None
    for trial in trials:
        if trial.value is None:
            continue
        if best is None or sign * trial.value > sign * best.value:  # type: ignore[operator]
            best = trial
    return best


def repetition_values(trial: Trial, workloads: Sequence[str], objective: Objective) -> list[float]:
    """The trial's value per repetition (workloads combined; a repetition missing a workload's
    successful run is left out)."""
    by_rep: dict[int, dict[str, float]] = {}
    for run in trial.runs:
        value = run_value(run, objective)
        if value is not None and run.workload in workloads:
            by_rep.setdefault(run.repetition, {})[run.workload] = value
    return [
        combine_workloads([values[w] for w in workloads])
        for _, values in sorted(by_rep.items())
        if len(values) == len(workloads)
    ]


def pooled_rsd(samples: Iterable[Sequence[float]]) -> tuple[float, int]:
    """The relative standard deviation of repetitions pooled over configs (each config's
    deviations from its own mean), and its degrees of freedom: one noise level for the whole
    campaign, steadier than any config's own estimate from a handful of runs."""
    ss, df = 0.0, 0
    for values in samples:
        if len(values) >= 2:
            mean = sum(values) / len(values)
            if mean:
                ss += sum(((v - mean) / mean) ** 2 for v in values)
                df += len(values) - 1
    return (math.sqrt(ss / df), df) if df else (math.nan, 0)


def best_by_lower_bound(
    trials: Iterable[Trial],
    workloads: Sequence[str],
    objective: Objective,
    confidence: float = 0.9,
) -> Trial | None:
    """The trial whose mean is best at worst: the best lower confidence bound (for a
    minimised metric, the best upper one) among trials repeated at least twice, with the
    campaign's pooled noise. Never the luckiest single run; without repeated trials, the best
    value."""
    candidates = [t for t in trials if t.value is not None]
    values = {t.id: repetition_values(t, workloads, objective) for t in candidates}
    repeated = [t for t in candidates if len(values[t.id]) >= 2]
    rsd, df = pooled_rsd(values.values())
    if not repeated or not math.isfinite(rsd):
        return best_trial(candidates, objective.direction)
    t_value = t_quantile(0.5 + confidence / 2, df)
    sign = Direction(objective.direction).sign

    def bound(trial: Trial) -> float:
        v = values[trial.id]
        mean = sum(v) / len(v)
        return sign * mean - t_value * rsd * abs(mean) / math.sqrt(len(v))

    return max(repeated, key=bound)


def campaign_best(campaign: Campaign, trials: Iterable[Trial]) -> Trial | None:
    """A campaign's best evaluation: by lower confidence bound when it raced its configs
    (intensification), else by value."""
    from stortune.measure.reference import is_reference

    evaluated = [t for t in trials if not is_reference(t)]
    objective = Objective.from_dict(campaign.objective)
    if campaign.settings.get("intensify"):
        names = [w.get("name", "default") for w in campaign.workload.get("workloads", [])]
        confidence = float(campaign.settings.get("confidence", 0.9))
        return best_by_lower_bound(evaluated, names or ["default"], objective, confidence)
    return best_trial(evaluated, objective.direction)
