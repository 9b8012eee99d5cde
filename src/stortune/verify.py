"""After tuning: the default and the best config measured again, interleaved, and the gain.

A tuner's best value is the maximum of noisy measurements, so it overstates the gain (the
winner's curse). `remeasure` runs default and best alternately (ABAB..., so drift hits both
alike), `repetitions` times each, stores the runs as a campaign ``NAME-verify`` of kind
``verify``, and `gain` states the improvement with a confidence interval (ratio of means,
Welch, `stats.ratio_ci`). Other configs to compare with (an expert's, say) join the rotation
under their own labels. `stortune recommend` reads it back with `stored_gain`; `stored_gains`
gives every label's gain over the default.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from stortune.errors import StortuneError
from stortune.experiment import (
    combine_workloads,
    machine_lock,
    measure_once,
    record_run,
    workload_name,
)
from stortune.space import Config
from stortune.stats import ratio_ci, summarize
from stortune.store import Campaign, Store
from stortune.targets import Measurement, Target, Workload

LABELS = ("default", "best")  # always re-measured; compared configs come after them
SUFFIX = "-verify"


@dataclass(frozen=True)
class Gain:
    """How much better `best` is than `default` (0.12 = 12% better, whatever the direction)."""

    metric: str
    direction: str
    default_mean: float
    best_mean: float
    n_default: int
    n_best: int
    gain: float
    ci_low: float
    ci_high: float
    confidence: float
    label: str = "best"  # which config was compared with the default

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        ci = f"{self.confidence:.0%} CI {self.ci_low:+.1%} .. {self.ci_high:+.1%}"
        if not math.isfinite(self.ci_low) or not math.isfinite(self.ci_high):
            ci = "no CI: repeat each config at least twice"
        return (
            f"{self.metric}: default {self.default_mean:.6g}, {self.label} {self.best_mean:.6g} "
            f"({'higher' if self.direction == 'max' else 'lower'} is better): "
            f"gain {self.gain:+.1%} ({ci}; n = {self.n_default} + {self.n_best})"
        )


def gain(
    metric: str,
    direction: str,
    default: Sequence[float],
    best: Sequence[float],
    confidence: float = 0.9,
    label: str = "best",
) -> Gain:
    """The relative improvement of `best` over `default`: mean ratio - 1 for a maximised
    metric, default/best - 1 for a minimised one (halving a latency is a 100% gain)."""
    d, b = summarize(default, confidence), summarize(best, confidence)
    if d.n == 0 or b.n == 0:
        raise StortuneError("no successful re-measurement of the default or the best config")
    r = ratio_ci(default, best, confidence)
    if direction == "max":
        value, low, high = r.ratio - 1, r.ci_low - 1, r.ci_high - 1
    else:
        value = 1 / r.ratio - 1
        low = 1 / r.ci_high - 1 if r.ci_high > 0 else math.nan
        high = 1 / r.ci_low - 1 if r.ci_low > 0 else math.inf
    return Gain(metric, direction, d.mean, b.mean, d.n, b.n, value, low, high, confidence, label)


def remeasure(
    store: Store,
    tuned: Campaign,
    target: Target,
    workloads: Sequence[Workload | None],
    configs: Mapping[str, Config],
    repetitions: int,
    timeout: float | None = None,
    on_run: Callable[[], None] | None = None,
    space_yaml: str | None = None,
) -> dict[str, Gain]:
    """Measure `configs` ({"default": ..., "best": ..., other labels ...}) interleaved and
    store the runs; `space_yaml` is the whole space when the campaign tuned a pinned one (its
    default is the one that counts, and `recommend` renders against it). Returns each label's
    gain over the default: always best's, and those of the compared configs that ran."""
    missing = [label for label in LABELS if label not in configs]
    if missing:
        raise StortuneError(f"re-measuring needs a {' and a '.join(missing)} config")
    labels = [*LABELS, *(label for label in configs if label not in LABELS)]
    names = {c.name for c in store.campaigns()}
    campaign = store.create_campaign(
        next(n for n in verify_names(tuned.name) if n not in names),
        kind="verify",
        space_name=tuned.space_name,
        space_yaml=space_yaml or tuned.space_yaml,
        target=target.describe(),
        workload=tuned.workload,
        objective=tuned.objective,
        settings={"repetitions": repetitions, "of": tuned.name},
    )
    trial_ids = {
        label: store.add_trial(campaign.id, seq, configs[label], {"label": label})
        for seq, label in enumerate(labels)
    }
    values: dict[str, list[float]] = {label: [] for label in labels}
    with machine_lock(target, campaign.name), target:
        for rep in range(repetitions):
            for label in labels:
                run = (trial_ids[label], configs[label], rep)
                value = _measure(store, campaign, target, workloads, run, timeout, tuned.metric)
                if value is not None:
                    values[label].append(value)
                if on_run is not None:
                    on_run()
    for label in labels:
        summary = summarize(values[label])
        store.finish_trial(
            trial_ids[label],
            "ok" if summary.n else "failed",
            summary.mean if summary.n else None,
            summary.to_dict(),
        )
    store.set_status(campaign.id, "finished")
    best = gain(tuned.metric, tuned.direction, values["default"], values["best"])
    compared = {label: v for label, v in values.items() if label not in LABELS}
    return {"best": best, **gains_over(tuned.metric, tuned.direction, values["default"], compared)}


def gains_over(
    metric: str, direction: str, default: Sequence[float], measured: dict[str, list[float]]
) -> dict[str, Gain]:
    """Each label's gain over `default`, for the labels that have measurements."""
    return {
        label: gain(metric, direction, default, values, label=label)
        for label, values in measured.items()
        if values
    }


def _measure(
    store: Store,
    campaign: Campaign,
    target: Target,
    workloads: Sequence[Workload | None],
    run: tuple[int, Config, int],
    timeout: float | None,
    metric: str,
) -> float | None:
    """One repetition (trial id, config, repetition) over every workload: the combined value,
    or None when the config cannot be applied or a workload's run failed."""
    trial_id, config, rep = run
    try:
        target.apply(config)
    except StortuneError as exc:
        failed = Measurement.failed(f"apply: {exc}", _started=time.time(), _ended=time.time())
        record_run(store, campaign.id, trial_id, "", rep, failed)
        return None
    means = []
    for workload in workloads:
        m = measure_once(target, workload, timeout, metric)
        record_run(store, campaign.id, trial_id, workload_name(workload), rep, m)
        if m.ok:
            means.append(m.metrics[metric])
    return combine_workloads(means) if len(means) == len(workloads) else None


def verify_names(name: str) -> Iterator[str]:
    """NAME-verify, NAME-verify-2, ...: a resumed campaign is verified again."""
    yield name + SUFFIX
    yield from (f"{name}{SUFFIX}-{i}" for i in itertools.count(2))


def latest_verification(store: Store, tuned: Campaign) -> Campaign | None:
    names = {c.name: c for c in store.campaigns() if c.kind == "verify"}
    found = None
    for name in verify_names(tuned.name):
        if name not in names:
            return found
        found = names[name]
    return None


def stored_gain(store: Store, tuned: Campaign) -> Gain | None:
    """The gain of a tuned campaign's latest verification runs, if it has them."""
    return stored_gains(store, tuned).get("best")


def stored_gains(store: Store, tuned: Campaign) -> dict[str, Gain]:
    """Each re-measured config's gain over the default in the latest verification (best and
    any config compared with), for the labels measured successfully."""
    campaign = latest_verification(store, tuned)
    if campaign is None:
        return {}
    n_workloads = len(tuned.workload.get("workloads", [])) or 1
    values: dict[str, list[float]] = {}
    for trial in store.trials(campaign.id):
        label = (trial.info or {}).get("label")
        if label is None:
            continue
        by_rep: dict[int, list[float]] = {}
        for run in trial.runs:
            if run.status == "ok" and tuned.metric in run.metrics:
                by_rep.setdefault(run.repetition, []).append(run.metrics[tuned.metric])
        values[label] = [combine_workloads(v) for v in by_rep.values() if len(v) == n_workloads]
    default = values.pop("default", [])
    if not default:
        return {}
    return gains_over(tuned.metric, tuned.direction, default, values)


def recommended_config(store: Store, tuned: Campaign) -> Config:
    """What to recommend from a tuned campaign: the verified best config, else its best trial."""
    verification = latest_verification(store, tuned)
    if verification is not None:
        for trial in store.trials(verification.id):
            if (trial.info or {}).get("label") == "best":
                return dict(trial.config)
    finished = [t for t in store.trials(tuned.id) if t.value is not None]
    if not finished:
        raise StortuneError(f"campaign {tuned.name!r} has no successful evaluation")
    best = max(finished, key=lambda t: t.value if tuned.direction == "max" else -t.value)
    return dict(best.config)
