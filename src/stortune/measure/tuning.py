"""The tuning plan: ask a tuner, measure the config with repetitions, tell it the value.

Repetitions go in repetition-major order over the workloads, so slow drift spreads over all of
them. With `target_ci`, a config is repeated (between `min_repetitions` and `repetitions` times)
until the confidence interval of its mean is that narrow for every workload. With
`reference_every`, the space's default config is measured before the first evaluation, after
every N and at the end (`reference`), so each run can be read relative to it. With `baseline`
(or several objectives without bounds), the default config is the first evaluation.

With `intensify`, each config the tuner proposes races the incumbent (`racing`): paired runs of
challenger and incumbent, at most `repetitions` pairs, until it wins or loses with the stated
confidence; the first config measured (the default, with `baseline`) is the first incumbent,
measured `min_repetitions` times. The tuner is told each config's mean, and the campaign's best
is the last incumbent, never the best single run nor a challenger that did not win its race.

Resuming replays the stored trials through a fresh tuner seeded as before: each stored trial the
tuner proposed is asked again (keeping a seeded tuner's sequence aligned) and told the value it was
told live (kept with a raced trial as ``told``: a winner's stored value grows as it defends), races
are replayed from their stored verdicts; the trial in progress gets only its missing runs. A tuner
that reads the target's state (DDPG) is given, before each replayed tell, the state the target
reported after that trial: rebuilt from the stored run it came from (`state_of`, the target's
`state_after`), so a resumed agent learns from what the uninterrupted one saw. Gauges a target
reads live after a run (localfs's and ceph's load and memory) are not stored, so a replayed state
lacks them."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from stortune.enums import PLACEHOLDERS, Direction, RunStatus, TrialStatus
from stortune.errors import ConfigError, StortuneError
from stortune.measure.log import CampaignLog
from stortune.measure.racing import Verdict, decide, log_ratio, pooled_spread
from stortune.measure.reference import REFERENCE, is_reference
from stortune.measure.results import TrialSummary, finished_slots
from stortune.measure.runner import (
    APPLY_ERROR,
    MAX_REPETITIONS,
    Plan,
    Visit,
    VisitResult,
    check_repetitions,
    workload_name,
)
from stortune.objective import Objective
from stortune.sampling import config_key
from stortune.space import Config, Space
from stortune.store import Trial
from stortune.tuners import Tuner
from stortune.workloads.base import Workload

DEFAULT_SOURCE = "default"  # a trial's info['source'] when the plan chose the default config
REFERENCE_SEQ = -1  # the reference trial's sequence number (the tuner's trials count from 0)
MAX_BUDGET = 100_000  # evaluations: more is a typo, and a campaign that could never finish
DEFAULT_BUDGET = 30  # evaluations of a campaign given no budget, `stortune run` or `tune`
# A run other work kept spoiling (the runner measured it again, waiting for quiet each time, and
# gave up) is visited again this many times before its config is told to the tuner without it:
# a failure the config did not cause would steer the tuner away from it.
DISTURBED_REVISITS = 2
StateOf = Callable[[Mapping[str, float]], dict[str, float]]


def no_state(metrics: Mapping[str, float]) -> dict[str, float]:
    """The state of a target that reports none."""
    return {}


@dataclass
class TuneSettings:
    budget: int | None = DEFAULT_BUDGET
    seconds: float | None = None
    repetitions: int = 3
    confidence: float = 0.9
    baseline: bool = False
    target_ci: float | None = None
    min_repetitions: int = 2
    reference_every: int = 0
    intensify: bool = False  # race each config against the incumbent (racing)

    def __post_init__(self) -> None:
        if self.budget is None and self.seconds is None:
            raise StortuneError("give a budget in evaluations or in seconds")
        if self.budget is not None and self.budget < 1:
            raise StortuneError(f"the budget must be at least 1 evaluation, not {self.budget}")
        if self.seconds is not None and not (math.isfinite(self.seconds) and self.seconds > 0):
            raise StortuneError(f"the time budget must be a positive number, not {self.seconds}")
        if self.budget is not None and self.budget > MAX_BUDGET:
            raise StortuneError(f"the budget is at most {MAX_BUDGET:,} evaluations: {self.budget}")
        check_repetitions(self.repetitions)
        if self.target_ci is not None and not 0 < self.target_ci < 1:
            raise StortuneError(f"the CI target is a fraction in (0, 1), not {self.target_ci}")
        if not 1 <= self.min_repetitions <= MAX_REPETITIONS:
            raise StortuneError(
                f"min repetitions must be from 1 to {MAX_REPETITIONS}, not {self.min_repetitions}"
            )
        if self.reference_every < 0:
            raise StortuneError("--reference-every must be 0 (off) or a positive number")
        if not 0 < self.confidence < 1:
            raise StortuneError(f"the confidence is a fraction in (0, 1), not {self.confidence}")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> TuneSettings:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in settings.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def within_pool(
    settings: TuneSettings, pool: Sequence[Config] | None, space: Space, objective: Objective
) -> tuple[TuneSettings, list[str]]:
    """The settings with the budget a pool allows, and a note when it was cut. A pool of N
    configs allows N evaluations, one more when the default config, measured first (a baseline,
    or the objective's bounds taken around it), lies outside it; a larger budget, or none (a
    time budget), is cut to that: a campaign that measured every config of its pool is done,
    where a tuner asked past the pool's end would fail it."""
    if pool is None:
        return settings, []
    keys = {config_key(c) for c in pool}
    first = settings.baseline or objective.needs_bounds
    outside = first and config_key(space.default_config()) not in keys
    most = len(keys) + int(outside)
    if settings.budget is not None and settings.budget <= most:
        return settings, []
    cut = "the budget is cut to" if settings.budget is not None else "at most"
    note = f"note: {cut} {most} evaluations: the pool holds {len(keys)} configs"
    if outside:
        note += ", and the default config, outside it, is measured first"
    return replace(settings, budget=most), [note]


class TunePlan(Plan):
    """A tuner's asks, measured (see the module doc)."""

    def __init__(
        self,
        log: CampaignLog,
        workloads: Sequence[Workload | None],
        space: Space,
        tuner: Tuner,
        settings: TuneSettings,
        state_of: StateOf = no_state,
    ) -> None:
        """`state_of`: the state the target reports after a run with these metrics
        (`Target.state_after`), for replaying a campaign to a tuner that reads state."""
        super().__init__(log, workloads)
        self.space = space
        self.tuner = tuner
        self.settings = settings
        self.state_of = state_of
        self._reference: Trial | None = None
        self.incumbent: Trial | None = None
        self.races: list[list[float]] = []  # the log-ratios of every race so far
        if settings.intensify:
            tuner.leave_repeats_to_caller()

    # ---- progress -------------------------------------------------------------------------
    @property
    def per_trial(self) -> int:
        return self.settings.repetitions * len(self.workloads)

    @property
    def max_pairs(self) -> int:
        """Pairs a challenger may race: `repetitions`, at least 2 (one pair never wins)."""
        return max(2, self.settings.repetitions)

    def planned_runs(self) -> int | None:
        if self.settings.budget is None or self.settings.intensify:
            return None  # a race's length depends on what it finds
        return self.settings.budget * self.per_trial

    def done_runs(self) -> int:
        return sum(
            min(self.per_trial, len(finished_slots(t)))
            for t in self.log.trials()
            if not is_reference(t)
        )

    # ---- the plan ---------------------------------------------------------------------------
    def visits(self) -> Generator[Visit, VisitResult, None]:
        seq = yield from self._replay()
        self._ensure_bounds()
        yield from self._maybe_reference(seq)
        wants_default = self.settings.baseline or self.log.objective.needs_bounds
        if seq == 0 and wants_default:
            yield from self._evaluate(0, self.space.default_config(), None, DEFAULT_SOURCE)
            seq = 1
        while self.settings.budget is None or seq < self.settings.budget:
            yield from self._maybe_reference(seq)
            yield from self._evaluate(seq, self.tuner.ask(), None)
            seq += 1
        yield from self._maybe_reference(seq, closing=True)

    def _replay(self) -> Generator[Visit, VisitResult, int]:
        """Tell the tuner the stored history; finish an interrupted trial. Returns next seq."""
        trials = self.log.trials()
        stored = [t for t in trials if not is_reference(t)]
        seen = (RunStatus.OK, RunStatus.DISTURBED)  # runs the target's state was read from
        measured_runs = sorted(
            ((r.ended_at, r.metrics) for t in trials for r in t.runs if r.status in seen),
            key=lambda run: run[0],
        )
        measured_ends = [end for end, _ in measured_runs]
        for trial in stored:
            source = (trial.info or {}).get("source")
            if source != DEFAULT_SOURCE:
                self.tuner.ask()  # keeps a seeded tuner's sequence aligned with the stored one
            if trial.finished:
                self._replay_race(trial)
                self._replay_state(trial, measured_runs, measured_ends)
                # what the tuner was told live: a race winner's value grows runs as it defends
                # its place afterwards, so its stored value now is not what the tuner heard
                info = trial.info or {}
                if self.settings.intensify and info.get("race") and "told" not in info:
                    # finished without it (a version that stored it last, killed in between):
                    # nothing was measured after the kill, so its value is what the tuner heard
                    self.log.update_trial_info(trial, {"told": trial.value})
                self.tuner.tell(trial.config, info.get("told", trial.value))
            else:
                yield from self._evaluate(trial.seq, trial.config, trial, source)
        return len(stored)

    def _replay_state(
        self,
        trial: Trial,
        measured_runs: Sequence[tuple[float, dict[str, float]]],
        measured_ends: list[float],
    ) -> None:
        """Tell the tuner the state the target reported after `trial`, as `_evaluate` and
        `_race` did: after its last applied run of its own (not those it made later as another
        race's incumbent), the target's state came from the last run it had measured (its own,
        or an earlier trial's when its own failed); a config that never applied reported none.
        Metrics stored as null (NaN, inf) are left out, as a live state leaves them out."""
        applied = [
            r.ended_at
            for r in trial.runs
            if not (r.error or "").startswith(APPLY_ERROR)
            and (r.info or {}).get("race") in (None, trial.seq)
        ]
        latest = bisect.bisect_right(measured_ends, max(applied)) if applied else 0
        if latest:
            state = self.state_of(measured_runs[latest - 1][1])
            self.tuner.observe_state({k: v for k, v in state.items() if v is not None})

    def _replay_race(self, trial: Trial) -> None:
        race = (trial.info or {}).get("race")
        if not self.settings.intensify or not race:
            return
        if race.get("verdict") in (Verdict.FIRST, Verdict.WINS):
            self.incumbent = trial
        if race.get("verdict") != Verdict.FIRST:
            self.races.append(self._pairs(trial))

    def _evaluate(
        self, seq: int, config: Config, trial: Trial | None, source: str | None = None
    ) -> Generator[Visit, VisitResult, None]:
        try:
            config = self.space.validate(config)
        except ConfigError as exc:
            if trial is None:
                self.log.invalid(seq, config, str(exc))
            self.tuner.tell(config, None)
            return
        if trial is None:
            trial = self.log.add_trial(seq, config, {"source": source} if source else None)
        if self.settings.intensify:
            yield from self._race(trial, source)
            return
        done = finished_slots(trial)
        state: dict[str, float] = {}
        for rep in range(self.settings.repetitions):
            missing = [w for w in self.workloads if (workload_name(w), rep) not in done]
            if missing:
                result = yield from self._measured(trial, rep, missing)
                if not result.applied:
                    break  # the config does not apply: more repetitions would not either
                state = result.state
            if self._confident(trial, rep + 1):
                break
        self.tuner.observe_state(state)  # DDPG's state, before the tell
        if source == DEFAULT_SOURCE and self.log.objective.needs_bounds:
            self._bounds_from(trial)
        summary = self.log.finish(trial)
        self.tuner.tell(config, summary.value)

    def _measured(
        self,
        trial: Trial,
        rep: int,
        workloads: Sequence[Workload | None],
        info: dict[str, Any] | None = None,
    ) -> Generator[Visit, VisitResult, VisitResult]:
        """Visit `trial` for repetition `rep` of `workloads`; a run that other work kept
        spoiling is visited again, `DISTURBED_REVISITS` times at most."""
        slots = self.slots(rep, workloads)
        result = yield Visit(trial, slots, info=dict(info or {}))
        for _ in range(DISTURBED_REVISITS):
            if not result.applied:  # no runs were made, so none was spoilt
                break
            again = [
                slot.workload
                for slot, m in zip(slots, result.measurements, strict=True)
                if m.status == RunStatus.DISTURBED
            ]
            if not again:
                break
            slots = self.slots(rep, again)
            result = yield Visit(trial, slots, info=dict(info or {}))
        return result

    # ---- intensification: racing the incumbent -------------------------------------------
    def _race(self, trial: Trial, source: str | None) -> Generator[Visit, VisitResult, None]:
        """Measure a config as the first incumbent, or race it against the incumbent."""
        state: dict[str, float] = {}
        incumbent = self.incumbent
        pairs: list[float] = []
        if incumbent is None:
            done = finished_slots(trial)
            for rep in range(max(2, self.settings.min_repetitions)):
                missing = [w for w in self.workloads if (workload_name(w), rep) not in done]
                if missing:
                    result = yield from self._measured(trial, rep, missing)
                    if not result.applied:
                        break
                    state = result.state
            verdict = Verdict.FIRST if self.log.summary(trial).ok else Verdict.FAILED
        else:
            spread, dof = pooled_spread(self.races)
            verdict = None
            while verdict is None:
                pairs = self._pairs(trial)
                step = self._steps_done(trial)
                verdict = decide(
                    pairs, spread, dof, self.max_pairs, self.settings.confidence
                ).verdict
                if verdict is None and step >= 2 * self.max_pairs:
                    verdict = Verdict.UNPROVEN  # the incumbent's runs keep failing
                if verdict is not None:
                    break
                info = {"race": trial.seq, "step": step}
                # every other step the incumbent goes first, so neither side always runs right
                # after the tuner's pause (a run's place in the order can shift its value)
                incumbent_first = step % 2 == 1
                if incumbent_first and not self._incumbent_ran(trial, step):
                    rep = self._next_rep(incumbent)
                    yield Visit(incumbent, self.slots(rep), counted=False, info=info)
                if not self._has_step(trial, step):
                    result = yield from self._measured(trial, step, self.workloads, info)
                    state = result.state or state
                    if not result.applied or self._step_value(trial, step) is None:
                        verdict = Verdict.FAILED
                        break
                if not self._incumbent_ran(trial, step):
                    rep = self._next_rep(incumbent)
                    yield Visit(incumbent, self.slots(rep), counted=False, info=info)
            pairs = self._pairs(trial)
            defended = self.log.trial(incumbent.id)
            self.log.finish(defended)  # its new runs count
            if verdict == Verdict.WINS and self._broken_guardrails(trial, defended):
                verdict = Verdict.BREAKS_GUARDRAIL
        summary = self._finish_race(trial, source, verdict, incumbent, pairs)
        self._conclude(trial, verdict, pairs if incumbent is not None else None)
        self.tuner.observe_state(state)
        self.tuner.tell(trial.config, summary.value)

    def _conclude(self, trial: Trial, verdict: Verdict, pairs: list[float] | None) -> None:
        """A race's end as the next races see it: its pairs join the pooled spread, and a
        winner becomes the incumbent (one that defended is read again, with its new runs).
        A plan with several trials in flight orders these by trial (`parallel`)."""
        if pairs is not None:
            self.races.append(pairs)
        if verdict in (Verdict.FIRST, Verdict.WINS):
            self.incumbent = self.log.trial(trial.id)
        elif self.incumbent is not None:
            self.incumbent = self.log.trial(self.incumbent.id)

    def _finish_race(
        self,
        trial: Trial,
        source: str | None,
        verdict: Verdict,
        incumbent: Trial | None,
        pairs: list[float],
    ) -> TrialSummary:
        if source == DEFAULT_SOURCE and self.log.objective.needs_bounds:
            self._bounds_from(trial)
        race: dict[str, Any] = {"verdict": str(verdict), "pairs": len(pairs)}
        if incumbent is not None:
            race["against"] = incumbent.seq
        if self.log.objective.guardrails and verdict != Verdict.FAILED:
            race["guardrails"] = self._guardrail_logs(trial, incumbent)
        if pairs:
            race["mean_log_ratio"] = sum(pairs) / len(pairs)
        # what the tuner is told, replayed as told, goes in before the trial is finished: a
        # finished trial always has it (a kill between the two writes leaves the race to redo)
        told = self.log.summary(trial).value
        self.log.update_trial_info(trial, {"race": race, "told": told})
        return self.log.finish(trial)

    # ---- guardrails: constraints beside the objective ------------------------------------------
    def _guardrail_logs(self, trial: Trial, incumbent: Trial | None) -> dict[str, float]:
        """Each guardrail metric's log-ratio (above 0 = better) of `trial` to the first
        incumbent (the default, with a baseline): its race's paired log-ratio to `incumbent`
        added to the one the incumbent carries. The first incumbent carries 0."""
        if incumbent is None:
            return {g.metric: 0.0 for g in self.log.objective.guardrails}
        carried = ((incumbent.info or {}).get("race") or {}).get("guardrails") or {}
        out = {}
        for g in self.log.objective.guardrails:
            logs = self._pairs(trial, Objective(g.metric).value, g.direction == Direction.MAX)
            if logs:
                out[g.metric] = sum(logs) / len(logs) + float(carried.get(g.metric, 0.0))
        return out

    def _broken_guardrails(self, trial: Trial, incumbent: Trial) -> list[str]:
        """The guardrails a race winner fell below the floor of (a constraint: such a config
        does not become the incumbent, whatever its objective)."""
        logs = self._guardrail_logs(trial, incumbent)
        return [
            g.metric
            for g in self.log.objective.guardrails
            if g.metric in logs and logs[g.metric] < math.log(g.floor)
        ]

    def _step_runs(self, trial: Trial, step: int) -> list:
        """The runs of one race step of `trial`'s race (its own and the incumbent's)."""
        runs = []
        for other in self.log.trials():
            for run in other.runs:
                info = run.info or {}
                if info.get("race") == trial.seq and info.get("step") == step:
                    runs.append((other.id == trial.id, run))
        return runs

    def _value(
        self, runs: list, read: Callable[[Mapping[str, Any]], float | None] | None = None
    ) -> float | None:
        """The runs' value (workloads combined): the objective's, or what `read` reads."""
        from stortune.objective import combine_workloads

        read = read or self.log.objective.value
        values = [read(r.metrics) for r in runs if r.status == RunStatus.OK]
        values = [v for v in values if v is not None]
        return combine_workloads(values) if len(values) == len(self.workloads) else None

    def _step_value(self, trial: Trial, step: int) -> float | None:
        return self._value([r for own, r in self._step_runs(trial, step) if own])

    def _has_step(self, trial: Trial, step: int) -> bool:
        """Whether the challenger has a run of `step` (a disturbed placeholder is not one)."""
        return any(own and r.status not in PLACEHOLDERS for own, r in self._step_runs(trial, step))

    def _steps_done(self, trial: Trial) -> int:
        """Steps whose challenger run exists (the last may still lack the incumbent's)."""
        steps = {
            (r.info or {}).get("step")
            for r in self.log.store.trial_runs(trial.id)
            if (r.info or {}).get("race") == trial.seq and r.status not in PLACEHOLDERS
        }
        done = 0
        while done in steps and self._incumbent_ran(trial, done):
            done += 1
        return done

    def _incumbent_ran(self, trial: Trial, step: int) -> bool:
        """Whether the incumbent has its run of `step`: a disturbed placeholder is none (one a
        stopped campaign left is measured again), unless other work kept spoiling the visits
        `DISTURBED_REVISITS` allows, which the race then goes on without."""
        theirs = [r for own, r in self._step_runs(trial, step) if not own]
        spoilt = sum(r.status in PLACEHOLDERS for r in theirs)
        return len(theirs) > spoilt or spoilt > DISTURBED_REVISITS

    def _pairs(
        self,
        trial: Trial,
        read: Callable[[Mapping[str, Any]], float | None] | None = None,
        maximise: bool | None = None,
    ) -> list[float]:
        """Log-ratios of the race's complete steps, positive when the challenger was better
        (on the objective, or on what `read` reads, better as `maximise` says)."""
        if maximise is None:
            maximise = self.log.objective.direction == Direction.MAX
        by_step: dict[int, dict[bool, list]] = {}
        for other in self.log.trials():
            for run in other.runs:
                info = run.info or {}
                if info.get("race") == trial.seq:
                    step = int(info.get("step", 0))
                    by_step.setdefault(step, {}).setdefault(other.id == trial.id, []).append(run)
        out = []
        for step in sorted(by_step):
            mine, theirs = by_step[step].get(True, []), by_step[step].get(False, [])
            c, i = self._value(mine, read), self._value(theirs, read)
            if c is not None and i is not None:
                d = log_ratio(c, i, maximise)
                if d is not None:
                    out.append(d)
        return out

    def _next_rep(self, trial: Trial) -> int:
        runs = self.log.store.trial_runs(trial.id)
        return 1 + max((r.repetition for r in runs), default=-1)

    def _confident(self, trial: Trial, repetitions_done: int) -> bool:
        """Whether adaptive repetitions may stop: every workload's interval is within target."""
        target = self.settings.target_ci
        if target is None or repetitions_done < self.settings.min_repetitions:
            return False
        summary = self.log.summary(trial)
        return summary.ok and all(s["ci_rel"] <= target for s in summary.per_workload.values())

    # ---- several objectives: bounds around the default config --------------------------------
    def _ensure_bounds(self) -> None:
        """A resumed campaign whose default trial finished before its bounds were kept."""
        if not self.log.objective.needs_bounds:
            return
        for trial in self.log.trials():
            if (trial.info or {}).get("source") == DEFAULT_SOURCE and trial.finished:
                self._bounds_from(trial)
                for other in self.log.trials():
                    if (
                        other.finished
                        and not is_reference(other)
                        and other.status != TrialStatus.INVALID
                    ):
                        self.log.finish(other)
                return

    def _bounds_from(self, trial: Trial) -> None:
        objective = self.log.objective
        sums: dict[str, list[float]] = {}
        for run in self.log.store.trial_runs(trial.id):
            if run.status == RunStatus.OK:
                for metric in objective.measured:
                    if isinstance(run.metrics.get(metric), int | float):
                        sums.setdefault(metric, []).append(float(run.metrics[metric]))
        if not all(sums.get(m) for m in objective.measured):
            raise StortuneError(
                "the default config's runs failed, so the objectives have no bounds to be "
                "normalised with: give them with --bounds METRIC=LOW:HIGH"
            )
        reference = {k: sum(v) / len(v) for k, v in sums.items()}
        self.log.set_objective(objective.with_bounds_around(reference))

    # ---- the reference config ------------------------------------------------------------------
    def _maybe_reference(
        self, seq: int, closing: bool = False
    ) -> Generator[Visit, VisitResult, None]:
        """Measure the reference config when `reference_every` evaluations have passed since
        its last visit (or none yet), and once more at the end so the last span is closed."""
        every = self.settings.reference_every
        if not every:
            return
        trial = self._reference_trial()
        done = [r for r in self.log.store.trial_runs(trial.id) if r.status not in PLACEHOLDERS]
        last_at = max(((r.info or {}).get("at_seq", -1) for r in done), default=None)
        due = last_at is None or seq - last_at >= every or (closing and last_at < seq)
        if not due:
            return
        visit = 1 + max((r.repetition for r in done), default=-1)
        yield Visit(trial, self.slots(visit), counted=False, info={"at_seq": seq})
        self.log.finish(trial)

    def _reference_trial(self) -> Trial:
        """Found or created once per plan (not a scan of every trial before each evaluation)."""
        if self._reference is None:
            found = [t for t in self.log.trials() if is_reference(t)]
            self._reference = (
                found[0]
                if found
                else self.log.add_trial(
                    REFERENCE_SEQ, self.space.default_config(), {"source": REFERENCE}
                )
            )
        return self._reference
