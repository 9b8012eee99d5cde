"""After tuning: the default and the best config measured again, interleaved, and the gain.

A tuner's best value is the maximum of noisy measurements, so it overstates the gain (the
winner's curse). The verification plan runs default and best alternately (ABAB..., so drift hits
both alike), `repetitions` times each, into a campaign ``NAME-verify`` of kind ``verify``; other
configs to compare with (an expert's, say) join the rotation under their own labels. `gain`
states an improvement with a confidence interval (ratio of means, Welch, `stats.ratio_ci`);
`stored_gains` reads every label's gain over the default back from the latest verification.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import yaml

from stortune.enums import CampaignKind, Direction, RunStatus
from stortune.errors import StortuneError
from stortune.measure.log import CampaignLog
from stortune.measure.objective import Objective, combine_workloads
from stortune.measure.reference import is_reference
from stortune.measure.results import campaign_best, finished_slots
from stortune.measure.runner import Plan, Visit, VisitResult, check_repetitions, workload_name
from stortune.space import Config, Space
from stortune.stats import ratio_ci, summarize
from stortune.store import Campaign, Run, Store, Trial
from stortune.workloads.base import Workload

LABELS = ("default", "best")  # always re-measured; compared configs come after them
SUFFIX = "-verify"


@dataclass(frozen=True)
class Gain:
    """How much better `label`'s config is than the default (0.12 = 12% better, whatever the
    direction)."""

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
    baseline: str = "default"  # what it was compared with: the default, or where tuning started

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def ratio(self) -> float:
        return 1 + self.gain

    @property
    def significant(self) -> bool:
        """Whether the interval excludes no change (a gain or a loss beyond the noise)."""
        return self.ci_low > 0 or self.ci_high < 0

    @property
    def known(self) -> bool:
        """Whether the gain is a number: a ratio needs every run above 0."""
        return math.isfinite(self.gain)

    def text(self) -> str:
        if not self.known:
            return (
                f"{self.metric}: {self.baseline} {self.default_mean:.6g}, {self.label} "
                f"{self.best_mean:.6g}: gain unknown, a ratio needs every run above 0"
            )
        ci = f"{self.confidence:.0%} CI {self.ci_low:+.1%} .. {self.ci_high:+.1%}"
        if not math.isfinite(self.ci_low) or not math.isfinite(self.ci_high):
            ci = "no CI: repeat each config at least twice"
        better = "higher" if self.direction == Direction.MAX else "lower"
        return (
            f"{self.metric}: {self.baseline} {self.default_mean:.6g}, {self.label} "
            f"{self.best_mean:.6g} "
            f"({better} is better): gain {self.gain:+.1%} ({ci}; n = {self.n_default} + "
            f"{self.n_best})"
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
    if direction == Direction.MAX:
        value, low, high = r.ratio - 1, r.ci_low - 1, r.ci_high - 1
    else:
        value = 1 / r.ratio - 1
        low = 1 / r.ci_high - 1 if r.ci_high > 0 else math.nan
        high = 1 / r.ci_low - 1 if r.ci_low > 0 else math.inf
    return Gain(metric, direction, d.mean, b.mean, d.n, b.n, value, low, high, confidence, label)


def gains_over(
    metric: str, direction: str, default: Sequence[float], measured: Mapping[str, list[float]]
) -> dict[str, Gain]:
    """Each label's gain over `default`, for the labels that have measurements."""
    return {
        label: gain(metric, direction, default, values, label=label)
        for label, values in measured.items()
        if values
    }


# ---- the plan --------------------------------------------------------------------------------
def new_verification(
    store: Store,
    tuned: Campaign,
    target_spec: Mapping[str, Any],
    configs: Mapping[str, Config],
    repetitions: int,
    space: Space,
) -> Campaign:
    """Store a verification campaign of `tuned` with one pending trial per label: default and
    best first, then the compared configs. `space` is the whole space (its default is the one
    that counts, and `recommend` renders against it)."""
    missing = [label for label in LABELS if label not in configs]
    if missing:
        raise StortuneError(f"re-measuring needs a {' and a '.join(missing)} config")
    check_repetitions(repetitions)
    labels = [*LABELS, *(label for label in configs if label not in LABELS)]
    names = {c.name for c in store.campaigns()}
    settings = {**tuned.settings, "repetitions": repetitions, "of": tuned.name}
    campaign = store.create_campaign(
        next(n for n in verify_names(tuned.name) if n not in names),
        kind=CampaignKind.VERIFY,
        space_name=tuned.space_name,
        space_yaml=yaml.safe_dump(space.to_dict(), sort_keys=False),
        target=target_spec,
        workload=tuned.workload,
        objective=tuned.objective,
        settings=settings,
    )
    for seq, label in enumerate(labels):
        store.add_trial(campaign.id, seq, space.validate(configs[label]), {"label": label})
    return campaign


class VerifyPlan(Plan):
    """Every label once per repetition, repetition after repetition; the order turns by one
    label each repetition (default, best, X; best, X, default; ...), so no label always runs
    first in a round, after the pause between rounds, nor always after the same config."""

    def __init__(self, log: CampaignLog, workloads: Sequence[Workload | None], repetitions: int):
        super().__init__(log, workloads)
        self.repetitions = repetitions

    def planned_runs(self) -> int:
        return len(self.log.trials()) * self.repetitions * len(self.workloads)

    def done_runs(self) -> int:
        return sum(len(finished_slots(t)) for t in self.log.trials())

    def visits(self) -> Generator[Visit, VisitResult, None]:
        trials = self.log.trials()
        done = {t.id: finished_slots(t) for t in trials}
        for rep in range(self.repetitions):
            turn = rep % len(trials) if trials else 0
            for trial in trials[turn:] + trials[:turn]:
                missing = [
                    w for w in self.workloads if (workload_name(w), rep) not in done[trial.id]
                ]
                if missing:
                    yield Visit(trial, self.slots(rep, missing))
        for trial in trials:
            self.log.finish(trial)


# ---- reading verifications back ------------------------------------------------------------
def verify_names(name: str) -> Iterator[str]:
    """NAME-verify, NAME-verify-2, ...: a resumed campaign is verified again."""
    yield name + SUFFIX
    yield from (f"{name}{SUFFIX}-{i}" for i in itertools.count(2))


def latest_verification(store: Store, tuned: Campaign) -> Campaign | None:
    names = {c.name: c for c in store.campaigns() if c.kind == CampaignKind.VERIFY}
    found = None
    for name in verify_names(tuned.name):
        if name not in names:
            return found
        found = names[name]
    return None


def label_values(
    store: Store, verification: Campaign, objective: Objective | None = None
) -> dict[str, list[float]]:
    """Each label's objective value (the verification's own, or `objective`) per repetition
    (workloads combined; a repetition with a failed workload is left out)."""
    objective = objective or Objective.from_dict(verification.objective)
    n_workloads = len(verification.workload.get("workloads", [])) or 1
    values: dict[str, list[float]] = {}
    for trial in store.trials(verification.id):
        label = (trial.info or {}).get("label")
        if label is None:
            continue
        by_rep: dict[int, list[float]] = {}
        for run in trial.runs:
            value = objective.value(run.metrics) if run.status == RunStatus.OK else None
            if value is not None:
                by_rep.setdefault(run.repetition, []).append(value)
        values[label] = [combine_workloads(v) for v in by_rep.values() if len(v) == n_workloads]
    return values


def stored_gains(
    store: Store, tuned: Campaign, objective: Objective | None = None
) -> dict[str, Gain]:
    """Each re-measured config's gain over the default in the latest verification (best and
    any config compared with), for the labels measured successfully. The gain is on the
    campaign's objective, or on `objective` (one metric of a scalarised pair, say: the same
    runs say how throughput and IOPS moved separately)."""
    campaign = latest_verification(store, tuned)
    if campaign is None:
        return {}
    objective = objective or Objective.from_dict(campaign.objective)
    values = label_values(store, campaign, objective)
    default = values.pop("default", [])
    if not default:
        return {}
    return gains_over(objective.metric, objective.direction, default, values)


def stored_gain(store: Store, tuned: Campaign) -> Gain | None:
    """The gain of a tuned campaign's latest verification, if it has one."""
    return stored_gains(store, tuned).get("best")


SAFE_LABEL = "best-safe"  # the best config without risky values, when risk was allowed


def recommended_config(store: Store, tuned: Campaign) -> tuple[Config, str]:
    """What to recommend from a campaign, and why. Verified: the best config when it beat the
    default beyond the noise (the interval of its gain excludes none), else the best safe one
    when that did, else the default ("within noise: keep the default"). Not verified: the
    campaign's best trial."""
    verification = latest_verification(store, tuned)
    if verification is not None:
        labelled = {
            (t.info or {}).get("label"): dict(t.config) for t in store.trials(verification.id)
        }
        gains = stored_gains(store, tuned)
        for label in ("best", SAFE_LABEL):
            gain = gains.get(label)
            if gain is not None and gain.ci_low > 0 and label in labelled:
                return labelled[label], f"{label} config, verified in {verification.name}"
        if "best" in gains and "default" in labelled:
            return labelled["default"], (
                f"the default: the best config found was within noise of it, verified in "
                f"{verification.name}"
            )
        if "best" in labelled:
            return labelled["best"], f"verified in {verification.name} (its gain is unknown)"
    trials = [t for t in store.trials(tuned.id) if not is_reference(t)]
    best = campaign_best(tuned, trials)
    if best is None:
        raise StortuneError(f"campaign {tuned.name!r} has no successful evaluation")
    ok = sum(t.value is not None for t in trials)
    return dict(best.config), f"the best of {ok} successful evaluations"


def in_loop_gain(store: Store, campaign: Campaign, confidence: float = 0.9) -> Gain | None:
    """The gain of the campaign's best config over the default as the tuning runs measured it
    (a race winner by its runs after the win, when it has at least two): each run relative to
    the reference measured around it when the campaign has reference runs
    (drift cancelled), per repetition, against the runs of its default-config trial. With
    racing the default is the first incumbent, so it has several. None without both."""
    from stortune.measure.reference import campaign_relative

    trials = [t for t in store.trials(campaign.id) if not is_reference(t)]
    best = campaign_best(campaign, trials)
    default = next((t for t in trials if (t.info or {}).get("source") == "default"), None)
    if best is None or default is None:
        return None
    objective = Objective.from_dict(campaign.objective)
    relative = campaign_relative(store, campaign) if objective.scalarizer is None else {}
    names = [w.get("name", "default") for w in campaign.workload.get("workloads", [])]

    def values(runs: Sequence[Run]) -> list[float]:
        by_rep: dict[int, list[float]] = {}
        for run in runs:
            if run.status != RunStatus.OK:
                continue
            value = relative.get(run.id) if relative else objective.value(run.metrics)
            if value is not None:
                by_rep.setdefault(run.repetition, []).append(value)
        return [combine_workloads(v) for v in by_rep.values() if len(v) == (len(names) or 1)]

    base, top = values(default.runs), values(best.runs)
    # A winner's own race ran until its runs looked better, so they overstate it: the runs it
    # got defending the incumbency afterwards are a fresh measure, when there are enough (if
    # anything a low one: a race against it ends sooner when its run comes out high).
    defending = [r for r in best.runs if (r.info or {}).get("race") not in (None, best.seq)]
    since_win = values(defending)
    if best.id != default.id and len(since_win) >= 2:
        top = since_win
    if not base or not top:
        return None
    found = gain(objective.metric, objective.direction, base, top, confidence, "in the loop")
    if started_at_default(campaign, default) is False:
        return replace(found, baseline="start")
    return found


def started_at_default(campaign: Campaign, first: Trial) -> bool | None:
    """Whether a campaign's first config is its whole space's default; not when a ranking held
    the others at the sample's best and started there (`--hold best`). None for a space that
    is not bundled, whose whole default the campaign does not keep."""
    from stortune.space import load_space

    try:
        whole = load_space(campaign.space_name)
        return whole.validate(dict(first.config)) == whole.default_config()
    except StortuneError:
        return None
