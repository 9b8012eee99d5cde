"""The experiment loop: ask a tuner, validate, apply, run repetitions, record, tell.

Every run is committed to the store the moment it finishes. A campaign interrupted by a crash,
SIGKILL or Ctrl-C is resumed by `Experiment.resume`: the stored trials are replayed through a
fresh tuner (finished ones told as they were), the trial that was in progress gets only its
missing repetitions, and the loop goes on, so no finished run is lost or measured twice.

A run that fails or hangs (killed at the per-run timeout) is recorded with its status and error
and the loop goes on; a trial with no successful run is told to the tuner as failed (None).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import yaml

from stortune import disturbance, environment
from stortune.disturbance import Limits
from stortune.errors import ConfigError, StortuneError
from stortune.lock import BenchmarkLock
from stortune.reference import REFERENCE, is_reference
from stortune.space import Config, Space, parse_space
from stortune.stats import summarize
from stortune.store import DISTURBED, Campaign, Store, Trial
from stortune.targets import Measurement, Target, Workload, make_target
from stortune.tuners import Tuner, make_tuner


@dataclass(frozen=True)
class Objective:
    """What to optimise: a metric name and whether larger (max) or smaller (min) is better."""

    metric: str
    direction: str = "max"

    @classmethod
    def parse(cls, text: str) -> Objective:
        """``metric`` or ``metric:max`` / ``metric:min``."""
        name, _, direction = text.partition(":")
        direction = direction or "max"
        if not name or direction not in ("max", "min"):
            raise StortuneError(f"objective {text!r}: write METRIC, METRIC:max or METRIC:min")
        return cls(name, direction)

    def to_dict(self) -> dict[str, str]:
        return {"metric": self.metric, "direction": self.direction}


@dataclass
class LoopSettings:
    budget: int | None = 20
    seconds: float | None = None
    repetitions: int = 3
    timeout: float | None = 600.0
    confidence: float = 0.9
    baseline: bool = False
    # Repetitions until confident (SeRRa's rule): when `target_ci` is set, a config is run at
    # least `min_repetitions` times and then until the `confidence` t-interval of its mean is
    # within +-target_ci (relative) for every workload, at most `repetitions` times.
    target_ci: float | None = None
    min_repetitions: int = 2
    # Redo runs that other work on the machine disturbed (stortune.disturbance).
    check_disturbance: bool = False
    settle_seconds: float = 5.0
    max_other_cpu: float = 0.5  # cores of user time others may use during a run
    # Measure the space's default config before the first evaluation, after every
    # `reference_every` evaluations and at the end, so runs can be read relative to it
    # (stortune.reference); 0: never.
    reference_every: int = 0

    def __post_init__(self) -> None:
        if self.budget is None and self.seconds is None:
            raise StortuneError("give a budget in evaluations or in seconds")
        if self.budget is not None and self.budget < 1:
            raise StortuneError(f"the budget must be at least 1 evaluation, not {self.budget}")
        if self.repetitions < 1:
            raise StortuneError(f"repetitions must be at least 1, not {self.repetitions}")
        if self.target_ci is not None and not 0 < self.target_ci < 1:
            raise StortuneError(f"the CI target is a fraction in (0, 1), not {self.target_ci}")
        if self.min_repetitions < 1:
            raise StortuneError(f"min repetitions must be at least 1, not {self.min_repetitions}")
        if self.timeout is not None and self.timeout <= 0:
            raise StortuneError(f"the timeout must be positive, not {self.timeout}")
        if self.reference_every < 0:
            raise StortuneError("--reference-every must be 0 (off) or a positive number")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Event:
    """Progress news for a user interface: 'trial' (started), 'run' (finished), 'told'."""

    kind: str
    seq: int
    config: Config
    workload: str = ""
    repetition: int = 0
    measurement: Measurement | None = None
    value: float | None = None


@dataclass
class Outcome:
    campaign: str
    trials: int
    runs_ok: int
    runs_failed: int
    best_config: Config | None
    best_value: float | None
    stopped_by: str
    notes: list[str] = field(default_factory=list)
    reference_runs: int = 0  # runs of the reference config (included in runs_ok/runs_failed)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


REFERENCE_SEQ = -1  # the reference trial's sequence number in a tuning campaign (tuner's from 0)


def new_campaign(
    store: Store,
    name: str,
    kind: str,
    space: Space,
    target: Target,
    workloads: Sequence[Workload | None],
    objective: Objective,
    tuner: str,
    seed: int,
    settings: Mapping[str, Any],
) -> Campaign:
    """Store a campaign with everything a resume needs to rebuild it: the space as YAML, the
    target's and workloads' specs, the objective, the tuner and the loop's settings."""
    return store.create_campaign(
        name,
        kind=kind,
        space_name=space.name,
        space_yaml=yaml.safe_dump(space.to_dict(), sort_keys=False),
        target=target.describe(),
        workload={"workloads": [w.describe() for w in workloads if w is not None]},
        objective=objective.to_dict(),
        tuner=tuner,
        seed=seed,
        settings=dict(settings),
    )


def finished_slots(trial: Trial) -> set[tuple[str, int]]:
    """(workload, repetition) pairs a trial has a result for; a disturbed run is not one, so a
    resumed campaign measures it again (`Store.add_run` then replaces it)."""
    return {(r.workload, r.repetition) for r in trial.runs if r.status != DISTURBED}


def workload_name(workload: Workload | None) -> str:
    return workload.name if workload is not None else "default"


def combine_workloads(means: Sequence[float]) -> float:
    """One objective value from per-workload means: their geometric mean when all are positive
    (so each workload counts by its ratio, whatever its scale), else the arithmetic mean."""
    if all(m > 0 for m in means):
        return float(math.exp(sum(math.log(m) for m in means) / len(means)))
    return float(sum(means) / len(means))


class Experiment:
    """One campaign's loop over a store, a space, a tuner, a target and its workloads."""

    def __init__(
        self,
        store: Store,
        campaign: Campaign,
        space: Space,
        tuner: Tuner,
        target: Target,
        workloads: Sequence[Workload | None],
        settings: LoopSettings,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self.store = store
        self.campaign = campaign
        self.space = space
        self.tuner = tuner
        self.target = target
        self.workloads = list(workloads) or [None]
        self.settings = settings
        self.on_event = on_event or (lambda _e: None)
        self.objective = Objective(campaign.metric, campaign.direction)
        self._reference: tuple[int, Config] | None = None  # reference trial: id, config

    # ---- construction ---------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        store: Store,
        name: str,
        space: Space,
        target: Target,
        workloads: Sequence[Workload | None],
        objective: Objective,
        tuner_name: str,
        settings: LoopSettings,
        seed: int = 0,
        kind: str = "tune",
        on_event: Callable[[Event], None] | None = None,
    ) -> Experiment:
        """A new campaign in the store, ready to run."""
        tuner = make_tuner(tuner_name, space, objective.direction, seed, settings.budget)
        campaign = new_campaign(
            store,
            name,
            kind,
            space,
            target,
            workloads,
            objective,
            tuner_name,
            seed,
            asdict(settings),
        )
        return cls(store, campaign, space, tuner, target, workloads, settings, on_event)

    @classmethod
    def resume(
        cls,
        store: Store,
        name: str,
        budget: int | None = None,
        seconds: float | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> Experiment:
        """Rebuild a stored campaign's loop exactly as it was started (budget may be raised)."""
        campaign = store.campaign(name)
        if campaign.kind == "dataset":
            raise StortuneError(f"campaign {name!r} is an imported dataset; nothing to resume")
        space = parse_space(campaign.space_yaml, f"campaign {name!r}")
        stored = dict(campaign.settings)
        if budget is not None:
            stored["budget"] = budget
        if seconds is not None:
            stored["seconds"] = seconds
        settings = LoopSettings(**stored)
        if settings.to_dict() != campaign.settings:
            store.update_settings(campaign.id, settings.to_dict())
        tuner = make_tuner(
            campaign.tuner, space, campaign.direction, campaign.seed, settings.budget
        )
        target = make_target(campaign.target, space)
        workloads = workloads_from_specs(campaign.workload.get("workloads", []))
        return cls(store, campaign, space, tuner, target, workloads, settings, on_event)

    # ---- the loop -------------------------------------------------------------------------
    def run(self) -> Outcome:
        started = time.monotonic()
        self.store.record_environment(
            self.campaign.id, {**environment.fingerprint(), "target": self.target.describe()}
        )
        self.store.set_status(self.campaign.id, "running")
        stopped_by = "budget"
        try:
            with machine_lock(self.target, self.campaign.name), self.target:
                seq = self._replay()
                self._maybe_reference(seq)
                if seq == 0 and self.settings.baseline:
                    self._evaluate(0, self.space.default_config(), None, {"source": "default"})
                    seq = 1
                while True:
                    if self.settings.budget is not None and seq >= self.settings.budget:
                        break
                    if (
                        self.settings.seconds is not None
                        and time.monotonic() - started >= self.settings.seconds
                    ):
                        stopped_by = "time"
                        break
                    self._maybe_reference(seq)
                    config = self.tuner.ask()
                    self._evaluate(seq, config, trial=None)
                    seq += 1
                self._maybe_reference(seq, closing=True)
        except KeyboardInterrupt:
            self.store.set_status(self.campaign.id, "interrupted")
            raise
        except BaseException:
            self.store.set_status(self.campaign.id, "failed")
            raise
        self.store.set_status(self.campaign.id, "finished")
        return self.outcome(stopped_by)

    def _maybe_reference(self, seq: int, closing: bool = False) -> None:
        """Measure the reference config when `reference_every` evaluations have passed since
        its last visit (or none yet), and once more at the end so the last span is closed."""
        every = self.settings.reference_every
        if not every:
            return
        trial_id, config = self._reference_trial()
        done = [r for r in self.store.trial_runs(trial_id) if r.status != DISTURBED]
        # seq at which each visit happened, recorded in the runs' info
        last_at = max(((r.info or {}).get("at_seq", -1) for r in done), default=None)
        due = last_at is None or seq - last_at >= every or (closing and last_at < seq)
        if not due:
            return
        visit = 1 + max((r.repetition for r in done), default=-1)
        self.target.apply(config)
        for workload in self.workloads:
            m = self._measure(workload)
            m.info["at_seq"] = seq
            record_run(self.store, self.campaign.id, trial_id, workload_name(workload), visit, m)
            self.on_event(Event("reference", seq, config, workload_name(workload), visit, m))
        value, summary, error = self._summarize(self.store.trial_runs(trial_id))
        self.store.finish_trial(
            trial_id, "ok" if value is not None else "failed", value, summary, error
        )

    def _reference_trial(self) -> tuple[int, Config]:
        """The reference trial's id and config, found or created once per loop (not a scan of
        every stored trial before each evaluation)."""
        if self._reference is None:
            found = [t for t in self.store.trials(self.campaign.id) if is_reference(t)]
            if found:
                self._reference = (found[0].id, found[0].config)
            else:
                config = self.space.default_config()
                trial_id = self.store.add_trial(
                    self.campaign.id, REFERENCE_SEQ, config, {"source": REFERENCE}
                )
                self._reference = (trial_id, config)
        return self._reference

    def _replay(self) -> int:
        """Tell the tuner the stored history; finish an interrupted trial. Returns next seq."""
        stored = [t for t in self.store.trials(self.campaign.id) if not is_reference(t)]
        for trial in stored:
            if (trial.info or {}).get("source") != "default":
                self.tuner.ask()  # keeps a seeded tuner's sequence aligned with the stored one
            if trial.finished:
                self.tuner.tell(trial.config, trial.value)
            else:
                self._evaluate(trial.seq, trial.config, trial=trial)
        return len(stored)

    def _evaluate(
        self, seq: int, config: Config, trial: Trial | None, info: dict | None = None
    ) -> None:
        self.on_event(Event("trial", seq, config))
        try:
            config = self.space.validate(config)
        except ConfigError as exc:
            trial_id = trial.id if trial else self.store.add_trial(self.campaign.id, seq, config)
            self.store.finish_trial(trial_id, "invalid", error=str(exc))
            self._tell(seq, config, None)
            return
        trial_id = trial.id if trial else self.store.add_trial(self.campaign.id, seq, config, info)
        done = finished_slots(trial) if trial else set()
        try:
            self.target.apply(config)
        except StortuneError as exc:
            self.store.finish_trial(trial_id, "failed", error=f"apply: {exc}")
            self._tell(seq, config, None)
            return
        # Repetition-major order: workloads interleave, so slow drift spreads over all of them.
        for rep in range(self.settings.repetitions):
            for workload in self.workloads:
                name = workload_name(workload)
                if (name, rep) in done:
                    continue
                measurement = self._measure(workload)
                record_run(self.store, self.campaign.id, trial_id, name, rep, measurement)
                self.on_event(Event("run", seq, config, name, rep, measurement))
            if self._confident(trial_id, rep + 1):
                break
        runs = self.store.trial_runs(trial_id)
        self.tuner.observe_state(self.target.state())  # DDPG's state, before the tell
        value, summary, error = self._summarize(runs)
        self.store.finish_trial(
            trial_id, "ok" if value is not None else "failed", value, summary, error
        )
        self._tell(seq, config, value)

    def _confident(self, trial_id: int, repetitions_done: int) -> bool:
        """Whether adaptive repetitions may stop: every workload's interval is within target."""
        target = self.settings.target_ci
        if target is None or repetitions_done < self.settings.min_repetitions:
            return False
        _, summary, error = self._summarize(self.store.trial_runs(trial_id))
        return error is None and all(s["ci_rel"] <= target for s in summary.values())

    def _measure(self, workload: Workload | None) -> Measurement:
        limits = limits_for(self.settings, self.target)
        return measure_once(
            self.target, workload, self.settings.timeout, self.objective.metric, limits
        )

    def _summarize(self, runs: Sequence[Any]) -> tuple[float | None, dict[str, Any], str | None]:
        per_workload: dict[str, Any] = {}
        means = []
        for workload in self.workloads:
            name = workload_name(workload)
            values = [
                r.metrics[self.objective.metric]
                for r in runs
                if r.workload == name and r.status == "ok"
            ]
            summary = summarize(values, self.settings.confidence)
            per_workload[name] = {**summary.to_dict(), "ci_rel": summary.ci_half_width_rel}
            if summary.n == 0:
                errors = [r.error for r in runs if r.workload == name and r.error]
                return None, per_workload, errors[-1] if errors else "no successful run"
            means.append(summary.mean)
        return combine_workloads(means), per_workload, None

    def _tell(self, seq: int, config: Config, value: float | None) -> None:
        self.tuner.tell(config, value)
        self.on_event(Event("told", seq, config, value=value))

    def outcome(self, stopped_by: str = "budget") -> Outcome:
        stored = self.store.trials(self.campaign.id)
        ok = sum(1 for t in stored for r in t.runs if r.status == "ok")
        failed = sum(1 for t in stored for r in t.runs if r.status != "ok")
        best = self.tuner.best
        return Outcome(
            self.campaign.name,
            sum(1 for t in stored if not is_reference(t)),
            ok,
            failed,
            best.config if best else None,
            best.value if best else None,
            stopped_by,
            reference_runs=sum(len(t.runs) for t in stored if is_reference(t)),
        )


class DisturbanceSettings(Protocol):
    check_disturbance: bool
    max_other_cpu: float
    settle_seconds: float


def limits_for(settings: DisturbanceSettings, target: Target) -> Limits | None:
    """Disturbance limits for a loop's runs, or None when they are not checked: not asked for,
    or a target that does not measure this machine (a table replays numbers)."""
    if not (settings.check_disturbance and target.measures_machine):
        return None
    return Limits(other_cpu_cores=settings.max_other_cpu, settle_seconds=settings.settle_seconds)


def machine_lock(target: Target, campaign: str) -> AbstractContextManager[object]:
    """The machine's benchmark lock when the target measures this machine, else nothing."""
    if not target.measures_machine:
        return nullcontext()
    return BenchmarkLock(f"campaign {campaign!r}, target {target.kind}")


def record_run(
    store: Store, campaign_id: int, trial_id: int, workload: str, rep: int, m: Measurement
) -> None:
    """Commit one finished run (its times come from `measure_once`)."""
    info = dict(m.info)
    started, ended = info.pop("_started"), info.pop("_ended")
    store.add_run(
        campaign_id,
        trial_id,
        workload=workload,
        repetition=rep,
        status=m.status,
        metrics=m.metrics,
        error=m.error,
        info=info,
        started_at=started,
        ended_at=ended,
    )


def measure_once(
    target: Target,
    workload: Workload | None,
    timeout: float | None,
    metric: str,
    limits: Limits | None = None,
) -> Measurement:
    """One run, never raising for a benchmark's own failure: a crash, a hang or a missing
    objective metric becomes a failed Measurement. Start and end times go into `info`.

    With `limits`, a run that something else on the machine disturbed (`stortune.disturbance`)
    is redone up to `limits.retries` times; what the discarded attempts measured and why they
    were discarded is kept in ``info['disturbed_attempts']``, and a run still disturbed after the
    last retry gets the status ``disturbed`` (summaries leave it out)."""
    if limits is None:
        return _measure_plain(target, workload, timeout, metric)
    attempts: list[dict[str, Any]] = []
    while True:
        before = disturbance.probe()
        measurement = _measure_plain(target, workload, timeout, metric)
        reason = disturbance.judge(before, disturbance.probe(), measurement.metrics, limits)
        if reason is None or len(attempts) >= limits.retries:
            break
        attempts.append({"reason": reason, "metrics": measurement.metrics})
        time.sleep(limits.settle_seconds)
    if attempts:
        measurement.info["disturbed_attempts"] = attempts
    if reason is not None and measurement.ok:
        measurement.status, measurement.error = DISTURBED, reason
    return measurement


def _measure_plain(
    target: Target, workload: Workload | None, timeout: float | None, metric: str
) -> Measurement:
    started = time.time()
    try:
        measurement = target.run(workload, timeout)
    except StortuneError as exc:
        measurement = Measurement.failed(str(exc))
    except (OSError, ValueError, RuntimeError) as exc:  # a crashing benchmark, not our bug
        measurement = Measurement.failed(f"{type(exc).__name__}: {exc}")
    if measurement.ok and metric not in measurement.metrics:
        have = ", ".join(sorted(measurement.metrics)[:12])
        measurement = Measurement.failed(
            f"the run reported no metric {metric!r} (it has: {have})", **measurement.info
        )
    measurement.info["_started"] = started
    measurement.info["_ended"] = time.time()
    return measurement


def workloads_from_specs(specs: Sequence[dict[str, Any]]) -> list[Workload | None]:
    if not specs:
        return [None]
    from stortune.workloads import make_workload

    return [make_workload(spec) for spec in specs]
