"""What a trial's runs add up to, and which trial is best: one rule for every plan and view.

A trial's value is, for each workload, the mean of its successful runs' objective values,
combined over workloads (`combine_workloads`). A trial without a successful run of some
workload has no value, and its error says why. A disturbed run is a placeholder: it fills no
slot (`finished_slots`), so the slot is measured again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stortune.enums import PLACEHOLDERS, Direction, RunStatus
from stortune.measure.racing import Verdict
from stortune.objective import Objective, combine_workloads
from stortune.stats import summarize
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
    return {(r.workload, r.repetition) for r in trial.runs if r.status not in PLACEHOLDERS}


def best_trial(
    trials: Iterable[Trial],
    direction: Direction | str,
    value: Callable[[Trial], float | None] = lambda t: t.value,
) -> Trial | None:
    """The trial with the best `value` (its own, unless told) in the objective's direction
    (None: no trial has one)."""
    sign = Direction(direction).sign
    best: Trial | None = None
    best_value = 0.0
    for trial in trials:
        v = value(trial)
        if v is None:
            continue
        if best is None or sign * v > sign * best_value:
            best, best_value = trial, v
    return best


RACE_HOLDERS = (Verdict.FIRST, Verdict.WINS)  # the race verdicts that make a trial the incumbent


def race_incumbent(trials: Iterable[Trial]) -> Trial | None:
    """The last trial that held the incumbency of a raced campaign: every challenger after it
    failed to beat it on paired runs with the campaign's confidence. None before any race.

    Not the best mean nor the best lower bound over all trials: those compare configs measured
    at different times, unpaired, and a challenger that lost or stayed unproven in its race can
    top them by drift or luck, the winner's curse the racing is there to stop."""
    holders = [
        t for t in trials if ((t.info or {}).get("race") or {}).get("verdict") in RACE_HOLDERS
    ]
    return max(holders, key=lambda t: t.seq, default=None)


def campaign_best(campaign: Campaign, trials: Iterable[Trial]) -> Trial | None:
    """A campaign's best evaluation: the last incumbent among `trials` when they raced
    (intensification), else the best value (a campaign that did not race, a verification, a
    raced one stopped before its first verdict, or a subset without an incumbent). On a
    cluster, values are compared relative to the reference of the node each trial ran on."""
    from stortune.measure.reference import is_reference

    trials = list(trials)
    evaluated = [t for t in trials if not is_reference(t)]
    holder = race_incumbent(evaluated) if campaign.settings.get("intensify") else None
    direction = Objective.from_dict(campaign.objective).direction
    nodes = node_references(trials)
    if holder is None and nodes:
        return best_trial(evaluated, direction, lambda t: _relative(t, nodes))
    return holder or best_trial(evaluated, direction)


def node_references(trials: Iterable[Trial]) -> dict[str, float]:
    """Each cluster node's reference value (its default config, measured before its first
    trial), by node name; empty for a campaign measured on one machine."""
    from stortune.measure.reference import is_reference

    return {
        str(t.info["node"]): float(t.value)
        for t in trials
        if is_reference(t) and (t.info or {}).get("node") and t.value and t.value > 0
    }


def _relative(trial: Trial, nodes: Mapping[str, float]) -> float | None:
    reference = nodes.get(str((trial.info or {}).get("node")))
    if trial.value is None or reference is None:
        return None
    return trial.value / reference
