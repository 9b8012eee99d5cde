"""After tuning: the default and the best config measured again, in rounds, and the verdict.

A tuner's best value is the maximum of noisy measurements, so it overstates the gain (the
winner's curse). The verification runs every label once per round (default, best, compared
configs; the order turns each round, so no label always runs first), into a campaign
``NAME-verify`` of kind ``verify``. Each round is a block: drift on these machines (2x within
minutes) moves a round's runs together, so a candidate is judged by its per-round log-ratios to
the default, a paired t interval of their mean (`stats.paired_ratio`), never by an unpaired
interval of the means, into which the drift would go whole.

The verification is sequential: after `VerifyRules.min_rounds` it looks after every round and
stops measuring a label once its `Judgement` is decided: better (the interval lies above 1),
worse (below), equivalent (inside 1 ± `equivalence`), or a trade-off (better, but a guardrail
metric measured in the same runs fell beyond its allowed share), each but worse only once the
interval is narrower than `precision` (a config worse beyond the noise is not kept however wide
its interval); at `max_rounds` what is still open is undecided, with the rounds a
decision would need. In a joint space the best config's stack part and application part
(`space.parts`) are candidates beside it, measured until decided too, and the recommendation is
the candidate verified better by the most. Compared configs (an expert's, what each risky value
buys) are measured in the first `min_rounds` only. `Verification` reads it all back as one
object: configs by label, gains, guardrail checks, judgements and the config to recommend.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

import yaml

from stortune.enums import CampaignKind, Direction, RunStatus
from stortune.errors import StortuneError
from stortune.measure.log import CampaignLog
from stortune.measure.reference import is_reference
from stortune.measure.results import campaign_best, finished_slots
from stortune.measure.runner import Plan, Visit, VisitResult, check_repetitions, workload_name
from stortune.objective import Guardrail, Objective, combine_workloads
from stortune.space import Config, Space
from stortune.space.parts import PART_LABELS
from stortune.stats import PairedRatio, paired_ratio, ratio_ci, summarize, t_quantile
from stortune.store import Campaign, Run, Store, Trial
from stortune.workloads.base import Workload

LABELS = ("default", "best")  # always re-measured; compared configs come after them
SAFE_LABEL = "best-safe"  # the best config without risky values, when risk was allowed
# stortune's own candidates, measured until decided (others for min_rounds only); the one
# recommended is the best verified of them
SEQUENTIAL_LABELS = ("best", SAFE_LABEL, *PART_LABELS)
SUFFIX = "-verify"


@dataclass(frozen=True)
class Gain:
    """How much better `label`'s config is than the default (0.12 = 12% better, whatever the
    direction). `rounds`: the paired rounds behind it (0: an unpaired comparison)."""

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
    rounds: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def ratio(self) -> float:
        return 1 + self.gain

    @property
    def ratio_low(self) -> float:
        return 1 + self.ci_low

    @property
    def ratio_high(self) -> float:
        return 1 + self.ci_high

    @property
    def half_width(self) -> float:
        """The interval's half-width as a share (log scale), inf when it has none."""
        low, high = self.ratio_low, self.ratio_high
        if not (low > 0 and math.isfinite(high)):
            return math.inf
        return math.exp((math.log(high) - math.log(low)) / 2) - 1

    @property
    def significant(self) -> bool:
        """Whether the interval excludes no change (a gain or a loss beyond the noise)."""
        return self.ci_low > 0 or self.ci_high < 0

    @property
    def known(self) -> bool:
        """Whether the gain is a number: a ratio needs every run above 0."""
        return math.isfinite(self.gain)

    def ratio_text(self) -> str:
        """``1.13x (90% CI 1.05-1.22)``: the gain as a ratio, whatever the metric's unit."""
        if not self.known:
            return "unknown (a ratio needs every run above 0)"
        if not (math.isfinite(self.ci_low) and math.isfinite(self.ci_high)):
            return f"{format_ratio(self.ratio)}x (no CI: each config needs two runs)"
        return (
            f"{format_ratio(self.ratio)}x ({self.confidence:.0%} CI {format_ratio(self.ratio_low)}-"
            f"{format_ratio(self.ratio_high)})"
        )

    def text(self) -> str:
        better = "higher" if self.direction == Direction.MAX else "lower"
        runs = (
            f"{self.rounds} paired rounds"
            if self.rounds
            else f"n = {self.n_default} + {self.n_best}"
        )
        return (
            f"{self.label} vs {self.baseline} on {self.metric} ({better} is better): "
            f"{self.ratio_text()}; means {_number(self.default_mean)} and "
            f"{_number(self.best_mean)}, {runs}"
        )


def format_ratio(value: float) -> str:
    """A ratio to 3 significant digits, trailing zeros kept (1.00, 0.556, 12.5)."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:#.3g}".rstrip(".")


def _number(value: float) -> str:
    """3 significant digits, whole numbers from 100 up (2030, not 2.03e+03)."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def gain(
    metric: str,
    direction: str,
    default: Sequence[float],
    best: Sequence[float],
    confidence: float = 0.9,
    label: str = "best",
) -> Gain:
    """The relative improvement of `best` over `default` measured at different times
    (unpaired: Welch's interval of the ratio of means): mean ratio - 1 for a maximised
    metric, default/best - 1 for a minimised one (halving a latency is a 100% gain). For runs
    made side by side in rounds, `paired_gain` is the one to use."""
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


def paired_gain(
    metric: str,
    direction: str,
    default: Mapping[int, float],
    best: Mapping[int, float],
    confidence: float = 0.9,
    label: str = "best",
) -> Gain:
    """`label`'s gain over the default from the rounds both have a value in (round ->
    value), as a paired ratio (module doc)."""
    rounds = sorted(set(default) & set(best))
    if not rounds:
        raise StortuneError(f"no round measured both the default and {label}")
    pairs = [(default[r], best[r]) for r in rounds]
    paired = paired_ratio(pairs, confidence, maximise=direction == Direction.MAX)
    return _gain_of(metric, direction, pairs, paired, label)


def _gain_of(
    metric: str, direction: str, pairs: Sequence[tuple[float, float]], r: PairedRatio, label: str
) -> Gain:
    mean = sum(b for b, _ in pairs) / len(pairs), sum(c for _, c in pairs) / len(pairs)
    return Gain(
        metric, direction, mean[0], mean[1], len(pairs), len(pairs), r.ratio - 1, r.ci_low - 1,
        r.ci_high - 1, r.confidence, label, rounds=r.n,
    )  # fmt: skip


# ---- rules and verdicts ----------------------------------------------------------------------
@dataclass(frozen=True)
class VerifyRules:
    """When a verification stops: at least `min_rounds`, at most `max_rounds`; a label is
    decided once its interval (at `confidence`) is at most `precision` wide either way and lies
    above 1, below 1, or inside 1 ± `equivalence`."""

    min_rounds: int = 5
    max_rounds: int = 20
    equivalence: float = 0.05
    precision: float = 0.15
    confidence: float = 0.9
    sequential: tuple[str, ...] = SEQUENTIAL_LABELS  # labels measured until decided
    max_seconds: float | None = None  # a time cap beside the rounds' (hard, as --seconds is)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sequential", tuple(self.sequential))
        check_repetitions(self.min_rounds)
        if not self.min_rounds <= self.max_rounds <= 10_000:
            raise StortuneError(
                f"the verification's most rounds ({self.max_rounds}) must be at least its "
                f"fewest ({self.min_rounds}) and at most 10,000"
            )
        if not 0 < self.equivalence < 1 or not 0 < self.precision < 10:
            raise StortuneError("equivalence and precision are shares above 0 (0.05 = 5%)")
        if not 0 < self.confidence < 1:
            raise StortuneError(f"the confidence is a fraction in (0, 1), not {self.confidence}")
        if self.max_seconds is not None and not (
            math.isfinite(self.max_seconds) and self.max_seconds > 0
        ):
            raise StortuneError(f"the verification's time cap must be positive: {self.max_seconds}")

    @classmethod
    def of(cls, min_rounds: int, max_rounds: int | None = None, **more: Any) -> VerifyRules:
        """Rules with `min_rounds`, and four times as many (at least 12) as the most."""
        return cls(min_rounds, max_rounds or max(4 * min_rounds, 12), **more)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> VerifyRules:
        rounds = int(settings.get("repetitions", 1))
        verify = dict(settings.get("verify") or {})
        # a verification stored before rounds were sequential: exactly its repetitions
        verify.setdefault("max_rounds", rounds)
        return cls(min_rounds=rounds, **verify)

    def to_settings(self) -> dict[str, Any]:
        out = asdict(self)
        out["sequential"] = list(self.sequential)
        return {"repetitions": out.pop("min_rounds"), "verify": out}


class Judgement(StrEnum):
    """What a verification found of one config against the default."""

    BETTER = "better"  # the interval lies above 1 and every guardrail held
    WORSE = "worse"  # the interval lies below 1
    EQUIVALENT = "equivalent"  # within ± the equivalence margin of the default
    TRADE_OFF = "trade-off"  # better, but a guardrail fell beyond its allowed share
    UNDECIDED = "undecided"  # the rounds allowed did not decide it


class GuardrailStatus(StrEnum):
    HELD = "held"  # the interval lies above the guardrail's floor
    BROKEN = "broken"  # the interval lies below it
    UNCLEAR = "unclear"  # the interval straddles it
    UNKNOWN = "unknown"  # the runs lack the metric


@dataclass(frozen=True)
class GuardrailCheck:
    """A guardrail metric's paired ratio (above 1 = better) in the verification's runs."""

    guardrail: Guardrail
    ratio: PairedRatio | None

    @property
    def status(self) -> GuardrailStatus:
        r = self.ratio
        if r is None or r.n == 0 or not math.isfinite(r.ratio):
            return GuardrailStatus.UNKNOWN
        if r.ci_low >= self.guardrail.floor:
            return GuardrailStatus.HELD
        if r.ci_high < self.guardrail.floor:
            return GuardrailStatus.BROKEN
        return GuardrailStatus.UNCLEAR

    def text(self) -> str:
        g, r = self.guardrail, self.ratio
        if r is None or self.status == GuardrailStatus.UNKNOWN:
            return f"{g.metric}: not measured"
        interval = (
            f"{format_ratio(r.ci_low)}-{format_ratio(r.ci_high)}"
            if math.isfinite(r.ci_high)
            else "no interval"
        )
        floor = f"may fall to {g.floor:.2g}x"
        return f"{g.metric} {format_ratio(r.ratio)}x ({interval}; {self.status}, {floor})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "guardrail": self.guardrail.to_dict(),
            "status": str(self.status),
            "ratio": None if self.ratio is None else self.ratio.to_dict(),
        }


@dataclass(frozen=True)
class LabelResult:
    """One config's verified comparison with the default."""

    label: str
    gain: Gain
    guardrails: tuple[GuardrailCheck, ...]
    judgement: Judgement
    why: str  # for an undecided one, what was missing and the rounds it would need

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "gain": self.gain.to_dict(),
            "guardrails": [c.to_dict() for c in self.guardrails],
            "judgement": str(self.judgement),
            "why": self.why,
        }


def judge(
    gain: Gain, checks: Sequence[GuardrailCheck], rules: VerifyRules, final: bool
) -> tuple[Judgement | None, str]:
    """The judgement the rounds so far support (None: measure another round; `final`: no more
    rounds come, so what is open is undecided), and for an undecided one why."""
    if not gain.known:
        return (Judgement.UNDECIDED if final else None), "a run measured 0 or less: no ratio"
    low, high = gain.ratio_low, gain.ratio_high
    precise = gain.half_width <= rules.precision
    broken = [c for c in checks if c.status == GuardrailStatus.BROKEN]
    unclear = [c for c in checks if c.status == GuardrailStatus.UNCLEAR]
    if high < 1:  # worse beyond the noise: no precision needed to keep the default
        return Judgement.WORSE, ""
    if precise and 1 - rules.equivalence <= low and high <= 1 + rules.equivalence:
        return Judgement.EQUIVALENT, ""
    if precise and low > 1:
        if broken:
            return Judgement.TRADE_OFF, ""
        if not unclear:
            return Judgement.BETTER, ""
    if not final:
        return None, ""
    return Judgement.UNDECIDED, _why_undecided(gain, unclear, rules)


def _why_undecided(gain: Gain, unclear: Sequence[GuardrailCheck], rules: VerifyRules) -> str:
    if not math.isfinite(gain.half_width):
        return "too few rounds for an interval"
    needed = rounds_needed(gain, rules)
    more = f"about {needed} more rounds would decide it" if needed else "more rounds would decide"
    if gain.half_width > rules.precision:
        return (
            f"its interval is ±{gain.half_width:.0%} wide after {gain.rounds} rounds, more than "
            f"the ±{rules.precision:.0%} a verdict needs; {more}"
        )
    if gain.ratio_low > 1 and unclear:
        names = ", ".join(c.guardrail.metric for c in unclear)
        return f"better, but guardrail {names} may have fallen below its floor; {more}"
    return (
        f"its interval {format_ratio(gain.ratio_low)}-{format_ratio(gain.ratio_high)} includes "
        f"no change and reaches beyond ±{rules.equivalence:.0%}; {more}"
    )


def rounds_needed(gain: Gain, rules: VerifyRules) -> int | None:
    """About how many more rounds would narrow the interval enough to decide, from the spread
    of the rounds so far (None: not estimable)."""
    n = gain.rounds
    half = math.log(1 + gain.half_width) if math.isfinite(gain.half_width) else math.inf
    if n < 2 or not math.isfinite(half) or half <= 0:
        return None
    t = t_quantile(0.5 + rules.confidence / 2, n - 1)
    sd = half * math.sqrt(n) / t
    mean = abs(math.log(gain.ratio))
    margin = math.log(1 + rules.equivalence)
    # the half-width that decides: below the distance to 1, or to the equivalence margin
    target = max(mean, margin - mean) if mean < margin else mean
    target = min(target, math.log(1 + rules.precision))
    if target <= 0:
        return None
    return max(1, math.ceil((t * sd / target) ** 2) - n)


# ---- the plan --------------------------------------------------------------------------------
def new_verification(
    store: Store,
    tuned: Campaign,
    target_spec: Mapping[str, Any],
    configs: Mapping[str, Config],
    rules: VerifyRules | int,
    space: Space,
) -> Campaign:
    """Store a verification campaign of `tuned` with one pending trial per label: default and
    best first, then the compared configs. `space` is the whole space (its default is the one
    that counts, and `recommend` renders against it); `rules` (or the fewest rounds) say when
    it stops."""
    missing = [label for label in LABELS if label not in configs]
    if missing:
        raise StortuneError(f"re-measuring needs a {' and a '.join(missing)} config")
    rules = rules if isinstance(rules, VerifyRules) else VerifyRules.of(rules)
    labels = [*LABELS, *(label for label in configs if label not in LABELS)]
    names = {c.name for c in store.campaigns()}
    settings = {**tuned.settings, **rules.to_settings(), "of": tuned.name}
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
    """Rounds of every label still measured, the order turning by one label each round
    (default, best, X; best, X, default; ...), so no label always runs first, after the pause
    between rounds, nor always after the same config; after `min_rounds` only the sequential
    labels not yet decided, beside the default (module doc)."""

    def __init__(
        self, log: CampaignLog, workloads: Sequence[Workload | None], rules: VerifyRules
    ) -> None:
        super().__init__(log, workloads)
        self.rules = rules

    def planned_runs(self) -> int:
        """The first rounds' runs, plus a round of the open labels once past them (rounds
        beyond the first depend on what they find)."""
        trials = self.log.trials()
        first = len(trials) * self.rules.min_rounds * len(self.workloads)
        done = self.done_runs()
        if done < first:
            return first
        return done + (len(self._open(trials)) + 1) * len(self.workloads)

    def done_runs(self) -> int:
        return sum(len(finished_slots(t)) for t in self.log.trials())

    def visits(self) -> Generator[Visit, VisitResult, None]:
        trials = self.log.trials()
        for rnd in range(self.rules.max_rounds):
            if rnd < self.rules.min_rounds:
                present = trials
            else:
                trials = self.log.trials()
                still = self._open(trials)
                if not still:
                    break
                present = [t for t in trials if _label(t) == "default" or t in still]
            turn = rnd % len(present) if present else 0
            for trial in present[turn:] + present[:turn]:
                done = finished_slots(self.log.trial(trial.id))
                missing = [w for w in self.workloads if (workload_name(w), rnd) not in done]
                if missing:
                    yield Visit(trial, self.slots(rnd, missing))
        for trial in self.log.trials():
            self.log.finish(trial)

    def _open(self, trials: Sequence[Trial]) -> list[Trial]:
        """The sequential labels' trials whose judgement is not decided yet."""
        results = analyse(trials, self.log.objective, self.rules, len(self.workloads), final=False)
        return [
            t
            for t in trials
            if _label(t) in self.rules.sequential
            and _label(t) in results
            and results[_label(t)].judgement is None
        ]


# ---- reading verifications back ------------------------------------------------------------
def _label(trial: Trial) -> str | None:
    return (trial.info or {}).get("label")


def round_values(
    trials: Sequence[Trial], value_of: Any, n_workloads: int
) -> dict[str, dict[int, float]]:
    """Each label's value per round (workloads combined; a round with a failed workload, or
    one lacking the metric, is left out); `value_of(metrics)` reads a run's value."""
    values: dict[str, dict[int, float]] = {}
    for trial in trials:
        label = _label(trial)
        if label is None:
            continue
        by_round: dict[int, list[float]] = {}
        for run in trial.runs:
            value = value_of(run.metrics) if run.status == RunStatus.OK else None
            if value is not None:
                by_round.setdefault(run.repetition, []).append(value)
        values[label] = {
            r: combine_workloads(v) for r, v in by_round.items() if len(v) == n_workloads
        }
    return values


@dataclass(frozen=True)
class _Open:
    """A label's comparison while the verification still runs (judgement None: go on)."""

    gain: Gain
    checks: tuple[GuardrailCheck, ...]
    judgement: Judgement | None
    why: str


def analyse(
    trials: Sequence[Trial],
    objective: Objective,
    rules: VerifyRules,
    n_workloads: int,
    final: bool,
) -> dict[str, _Open]:
    """Every non-default label's paired gain, guardrail checks and judgement."""
    values = round_values(trials, objective.value, n_workloads)
    default = values.pop("default", {})
    guard_values = {
        g.metric: round_values(trials, Objective(g.metric).value, n_workloads)
        for g in objective.guardrails
    }
    out: dict[str, _Open] = {}
    for label, mine in values.items():
        if not mine or not set(mine) & set(default):
            continue
        found = paired_gain(
            objective.metric, objective.direction, default, mine, rules.confidence, label
        )
        checks = tuple(
            _check(g, guard_values[g.metric], label, rules.confidence) for g in objective.guardrails
        )
        judgement, why = judge(found, checks, rules, final)
        out[label] = _Open(found, checks, judgement, why)
    return out


def _check(
    guardrail: Guardrail, values: Mapping[str, Mapping[int, float]], label: str, confidence: float
) -> GuardrailCheck:
    base, mine = values.get("default", {}), values.get(label, {})
    pairs = [(base[r], mine[r]) for r in sorted(set(base) & set(mine))]
    if not pairs:
        return GuardrailCheck(guardrail, None)
    maximise = guardrail.direction == Direction.MAX
    return GuardrailCheck(guardrail, paired_ratio(pairs, confidence, maximise))


class Advice(StrEnum):
    """What to do with a recommendation."""

    APPLY = "apply it"  # better beyond the noise, every guardrail held
    KEEP_DEFAULT = "keep the default"  # verified: worse, or within the equivalence margin
    TRADE_OFF = "trade-off"  # better on the objective, a guardrail broken: the user decides
    UNDECIDED = "undecided"  # the rounds allowed did not decide: keep the default meanwhile
    MEASURE_MORE = "measure more"  # not re-measured: one noisy run may have put it first


@dataclass
class Verification:
    """A verification read back: its configs by label, each compared config's `LabelResult`,
    the rules it ran under, and the config to recommend (`recommended`)."""

    campaign: Campaign
    tuned: Campaign
    objective: Objective
    rules: VerifyRules
    configs: dict[str, Config]
    results: dict[str, LabelResult] = field(default_factory=dict)
    rounds: int = 0
    reached: dict[str, bool | None] = field(default_factory=dict)  # runs reached the device

    @classmethod
    def of(
        cls, store: Store, tuned: Campaign, objective: Objective | None = None
    ) -> Verification | None:
        """The latest verification of `tuned` (None: never verified); judged on its own
        objective, or on `objective` (one metric of a scalarised pair, say)."""
        campaign = latest_verification(store, tuned)
        if campaign is None:
            return None
        return cls.read(store, campaign, tuned, objective)

    @classmethod
    def read(
        cls,
        store: Store,
        campaign: Campaign,
        tuned: Campaign | None = None,
        objective: Objective | None = None,
    ) -> Verification:
        trials = store.trials(campaign.id)
        objective = objective or Objective.from_dict(campaign.objective)
        rules = VerifyRules.from_settings(campaign.settings)
        n_workloads = len(campaign.workload.get("workloads", [])) or 1
        # read back, what is still open (a verification stopped early, or running) is undecided
        found = analyse(trials, objective, rules, n_workloads, final=True)
        results = {
            label: LabelResult(label, item.gain, item.checks, item.judgement or Judgement.UNDECIDED,
                               item.why)
            for label, item in found.items()
        }  # fmt: skip
        configs = {label: dict(t.config) for t in trials if (label := _label(t)) is not None}
        rounds = 1 + max((r.repetition for t in trials for r in t.runs), default=-1)
        reached = {label: runs_reached(t.runs) for t in trials if (label := _label(t))}
        return cls(campaign, tuned or campaign, objective, rules, configs, results, rounds, reached)

    @property
    def gains(self) -> dict[str, Gain]:
        return {label: r.gain for label, r in self.results.items()}

    def recommended(self) -> tuple[str, Advice, str]:
        """Which label to apply (``default`` when none), the advice, and the verified numbers
        that say so, in words."""
        result = self._best_verified()
        if result is not None:
            guards = "; ".join(c.text() for c in result.guardrails)
            held = f"; guardrails held: {guards}" if guards else ""
            return (
                result.label,
                Advice.APPLY,
                (
                    f"the {_name(result.label)} config re-measured {result.gain.ratio_text()} "
                    f"of the default's {self.objective.metric}{held}{self._part_note(result)}"
                ),
            )
        best = self.results.get("best")
        if (
            best is not None
            and best.judgement in (Judgement.BETTER, Judgement.TRADE_OFF)
            and self._is_default("best")
        ):
            return (
                "default",
                Advice.KEEP_DEFAULT,
                (
                    "the best config found is the default itself: no config the tuning measured "
                    f"did better (what the verification measured, {best.gain.ratio_text()}, is "
                    "the noise between two runs of one config)"
                ),
            )
        if best is None:
            return (
                "default",
                Advice.MEASURE_MORE,
                (
                    f"the verification {self.campaign.name} has no round with both the default "
                    "and the best config measured"
                ),
            )
        g = best.gain
        if not g.known:
            return (
                "default",
                Advice.MEASURE_MORE,
                (
                    f"a run measured {g.metric} at 0 or less, so no ratio to the default exists; "
                    "compare the runs themselves"
                ),
            )
        span = f"{format_ratio(g.ratio_low)}x-{format_ratio(g.ratio_high)}x"
        if best.judgement == Judgement.TRADE_OFF:
            broken = "; ".join(
                c.text() for c in best.guardrails if c.status == GuardrailStatus.BROKEN
            )
            return (
                "default",
                Advice.TRADE_OFF,
                (
                    f"the best config found re-measured {g.ratio_text()} on {g.metric}, but "
                    f"{broken}: apply it only if that is worth it"
                ),
            )
        if best.judgement == Judgement.EQUIVALENT:
            return (
                "default",
                Advice.KEEP_DEFAULT,
                (
                    f"the best config found re-measured {span} of it on {g.metric}, within "
                    f"±{self.rules.equivalence:.0%}: no gain worth a change"
                ),
            )
        if best.judgement == Judgement.WORSE:
            return (
                "default",
                Advice.KEEP_DEFAULT,
                (
                    f"the best config found re-measured {g.ratio_text()} of it on {g.metric}: "
                    f"worse{self._loss_precision(g)}"
                ),
            )
        return (
            "default",
            Advice.UNDECIDED,
            (
                f"keep the default meanwhile: the best config found re-measured {span} of it on "
                f"{g.metric} in {g.rounds} rounds, not decided: {best.why}; continue with "
                f"`stortune resume {self.campaign.name} --budget {self._more_rounds(best)}`"
            ),
        )

    def _best_verified(self) -> LabelResult | None:
        """Of stortune's candidates verified better than the default with every guardrail
        held (and not the default config itself), the one with the highest gain (the first of
        `SEQUENTIAL_LABELS` on a tie): a part of the best config that is at least as good
        changes fewer settings."""
        better = [
            self.results[label]
            for label in SEQUENTIAL_LABELS
            if label in self.results
            and self.results[label].judgement == Judgement.BETTER
            and not self._is_default(label)
        ]
        return max(better, key=lambda r: r.gain.ratio, default=None)

    def _is_default(self, label: str) -> bool:
        """Whether `label`'s config is the default's: a gain it shows is noise, not a change."""
        return label in self.configs and self.configs[label] == self.configs.get("default")

    def _part_note(self, chosen: LabelResult) -> str:
        """Why a part of the best config is recommended rather than the whole."""
        whole = self.results.get("best")
        if chosen.label not in PART_LABELS or whole is None:
            return ""
        other = PART_LABELS[1 - PART_LABELS.index(chosen.label)].split()[0]
        return (
            f"; the whole best config, {whole.gain.ratio_text()}, gained no more: its {other} "
            "settings are left at their defaults"
        )

    def _loss_precision(self, gain: Gain) -> str:
        """For a worse config whose interval is wider than the precision a gain needs: that
        the direction is decided and the size of the loss is not, so nobody quotes it."""
        if gain.half_width <= self.rules.precision:
            return ""
        return (
            f" (decided: the whole interval is below 1; by how much is not, its ±"
            f"{gain.half_width:.0%} after {gain.rounds} rounds is wider than the "
            f"±{self.rules.precision:.0%} a gain must show)"
        )

    def memory_note(self, label: str) -> str:
        """A warning when the runs of `label` or the default were served from memory rather
        than the device (``device.*`` metrics), so the gain may be a caching one."""
        served = [k for k in ("default", label) if self.reached.get(k) is False]
        if not served:
            return ""
        return (
            f"; WARNING: the runs of {' and '.join(served)} were served largely from memory, "
            "not the device: this gain may be a caching one"
        )

    def _more_rounds(self, result: LabelResult) -> int:
        needed = rounds_needed(result.gain, self.rules) or self.rules.max_rounds
        return self.rounds + needed

    def recommended_config(self) -> tuple[Config, str]:
        label, _, _ = self.recommended()
        if label == "default":
            return self.configs["default"], (
                f"the default: no config found was verified better in {self.campaign.name}"
            )
        words = f"the {_name(label)} config" if label in PART_LABELS else f"{label} config"
        return self.configs[label], f"{words}, verified in {self.campaign.name}"

    def to_dict(self) -> dict[str, Any]:
        label, advice, why = self.recommended()
        return {
            "campaign": self.campaign.name,
            "rounds": self.rounds,
            "rules": asdict(self.rules),
            "recommended": label,
            "advice": str(advice),
            "why": why,
            "device_reached": self.reached,
            "results": {k: r.to_dict() for k, r in self.results.items()},
        }


REACHED_SHARE = 0.8  # of a label's runs that reached the device for the label to count as so


def runs_reached(runs: Sequence[Run]) -> bool | None:
    """Whether a config's successful runs reached the device (`measure.device.device_reached`):
    None when none says, else whether most of those that say did."""
    from stortune.targets.device import device_reached

    said = [
        reached
        for r in runs
        if r.status == RunStatus.OK and (reached := device_reached(r.metrics)) is not None
    ]
    if not said:
        return None
    return sum(said) >= REACHED_SHARE * len(said)


def _name(label: str) -> str:
    """A label in words, read before " config": "the best safe config", "the stack part of
    the best config"."""
    if label in PART_LABELS:
        return f"{label} of the best"
    return "best safe" if label == SAFE_LABEL else label


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


def stored_gains(
    store: Store, tuned: Campaign, objective: Objective | None = None
) -> dict[str, Gain]:
    """Each re-measured config's paired gain over the default in the latest verification
    (best and any config compared with), for the labels measured successfully; on the
    campaign's objective, or on `objective` (one metric of a scalarised pair, say: the same
    runs say how throughput and IOPS moved separately)."""
    verification = Verification.of(store, tuned, objective)
    return {} if verification is None else verification.gains


def stored_gain(store: Store, tuned: Campaign) -> Gain | None:
    """The gain of a tuned campaign's latest verification, if it has one."""
    return stored_gains(store, tuned).get("best")


def recommended_config(store: Store, tuned: Campaign) -> tuple[Config, str]:
    """What to recommend from a campaign, and why: verified, the config
    `Verification.recommended` picks (the default unless one was verified better with its
    guardrails held); not verified, the campaign's best trial."""
    verification = Verification.of(store, tuned)
    if verification is not None and "default" in verification.configs:
        return verification.recommended_config()
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
