"""The one runner: every plan's visits executed under one set of rules.

A plan (a tuner's asks, a sweep's passes, a verification's rotation, the noise study) says which
config to measure next and for which (workload, repetition) slots, as a `Visit`; the runner does
it and hands back a `VisitResult`. The rules, the same for every plan:

- The config does not apply (a TargetError): every slot of the visit gets a failed run saying
  so, and the plan goes on.
- A run crashes, hangs or lacks the objective's metrics: a failed (or timeout) run is recorded,
  and the plan goes on. The visit's other workloads in that repetition are not run (each gets a
  failed run naming the first failure): a repetition with a failed workload counts for nothing,
  and a config that hangs one workload (a Ceph setting that starves the OSD) would otherwise
  spend the time limit on every workload.
- Other work disturbs a run (`disturbance`): the run is stored as disturbed (a placeholder no
  value counts, so a kill while waiting loses nothing) and redone once the machine is quiet
  again; the runner waits for that, with a countdown, at most `busy_wait` seconds per wait, and
  stops the campaign (status interrupted, resumable) when the machine stays busy. A busy machine
  never spends the budget.
- Ctrl-C or SIGTERM: the campaign is marked interrupted and `Interrupted` is raised; the CLI
  prints how to resume. Any other error marks it failed.
- A time budget is a hard limit: no run starts that would not end before it.
- The campaign's lease (`lease`) is confirmed before each visit and each stored run: a process
  whose lease another took over stops (`LeaseLost`) and leaves the campaign to it.

Every finished run is committed to the store at once, so `--resume` (which rebuilds the plan
from the store) loses and repeats nothing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shlex
import signal
import statistics
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from types import FrameType
from typing import Any

from stortune.enums import CampaignStatus, RunStatus, StopReason
from stortune.errors import Interrupted, LeaseLost, StortuneError
from stortune.measure.lease import CampaignLease
from stortune.measure.log import CampaignLog
from stortune.store import Trial
from stortune.system import disturbance, environment
from stortune.system.lock import BenchmarkLock
from stortune.targets.base import Target
from stortune.workloads.base import Measurement, Workload

log = logging.getLogger(__name__)
APPLY_ERROR = "apply: "  # how a failed run's error begins when its config did not apply
BUSY_STOP = "stopped: the machine stayed busy"  # how the note on a busy machine's stop begins


# ---- what plans and the runner exchange ----------------------------------------------------
@dataclass(frozen=True)
class Slot:
    """One run to make: a workload (None: the target measures without one) and a repetition."""

    workload: Workload | None
    repetition: int

    @property
    def name(self) -> str:
        return workload_name(self.workload)


@dataclass
class Visit:
    """Bring the target to `trial`'s config once, then make each of `slots`' runs.

    `counted`: whether the runs count toward the plan's progress (a reference config's runs
    come on top); `info`: kept with each run."""

    trial: Trial
    slots: list[Slot]
    counted: bool = True
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class VisitResult:
    applied: bool
    error: str | None = None
    measurements: list[Measurement] = field(default_factory=list)
    state: dict[str, float] = field(default_factory=dict)  # the target's metrics afterwards


class Plan:
    """What to measure, in what order. Subclasses implement `visits`, a generator that yields
    `Visit`s and receives each one's `VisitResult`; they finish their trials through the log."""

    def __init__(self, log: CampaignLog, workloads: Sequence[Workload | None]) -> None:
        self.log = log
        self.workloads = list(workloads) or [None]
        self.notes: list[str] = []  # what the plan tells about itself, first in the outcome's

    def visits(self) -> Generator[Visit, VisitResult, None]:
        raise NotImplementedError

    def planned_runs(self) -> int | None:
        """Counted runs the plan will make in all (None: unknown, e.g. a time budget)."""
        return None

    def done_runs(self) -> int:
        """Counted runs it has made already (a resumed campaign starts from here)."""
        return 0

    def slots(
        self, repetition: int, workloads: Sequence[Workload | None] | None = None
    ) -> list[Slot]:
        return [Slot(w, repetition) for w in (self.workloads if workloads is None else workloads)]


# ---- settings, events, outcome ---------------------------------------------------------------
@dataclass
class RunRules:
    """How runs are made, whatever the plan."""

    timeout: float | None = 600.0
    check_disturbance: bool = False
    settle_seconds: float = 5.0
    max_other_cpu: float = 0.5  # cores of user time others may use during a run
    busy_wait: float = 600.0  # seconds to wait for a busy machine before stopping

    def __post_init__(self) -> None:
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout > 0):
            raise StortuneError(f"the timeout must be a positive number, not {self.timeout}")
        if not (math.isfinite(self.busy_wait) and self.busy_wait >= 0):
            raise StortuneError(f"the busy wait must be 0 or more seconds, not {self.busy_wait}")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RunRules:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in settings.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EventKind(StrEnum):
    VISIT = "visit"  # a config is being applied
    RUN = "run"  # a run finished (and is stored)
    TRIAL = "trial"  # a trial's value is known
    WAIT = "wait"  # the machine is busy: waiting (message, seconds left)
    STOP = "stop"  # measuring stopped before the plan's end: why, and how to go on (message)


@dataclass
class Event:
    kind: EventKind
    trial: Trial | None = None
    workload: str = ""
    repetition: int = 0
    measurement: Measurement | None = None
    value: float | None = None
    counted: bool = True
    message: str = ""
    seconds_left: float = 0.0


@dataclass
class Outcome:
    """What a campaign's measuring achieved, read back from the store."""

    campaign: str
    kind: str
    evaluations: int
    runs_ok: int
    runs_failed: int
    runs_disturbed: int
    best_config: dict[str, Any] | None
    best_value: float | None
    stopped_by: str
    seconds: float = 0.0
    waited_seconds: float = 0.0
    load_max: float | None = None
    notes: list[str] = field(default_factory=list)
    reference_runs: int = 0
    last_error: str | None = None  # why the latest unsuccessful run failed

    @property
    def achieved(self) -> bool:
        return self.best_value is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class MachineBusy(Exception):
    """The machine stayed busy for longer than the runner may wait."""


# ---- the runner ------------------------------------------------------------------------------
class Runner:
    """Executes plans for one campaign on one target (see the module doc)."""

    def __init__(
        self,
        log: CampaignLog,
        target: Target,
        rules: RunRules,
        on_event: Callable[[Event], None] | None = None,
        seconds: float | None = None,
        lease: CampaignLease | None = None,
    ) -> None:
        """`lease`: the campaign's, held by the caller, confirmed before anything is stored."""
        self.log = log
        self.target = target
        self.rules = rules
        self.on_event = on_event or (lambda _e: None)
        self.seconds = seconds
        self.lease = lease
        self._deadline: float | None = None
        self._durations: list[float] = []
        self._waited = 0.0
        self._busy_reason = ""

    # ---- life cycle ---------------------------------------------------------------------------
    def execute(self, plan: Plan) -> Outcome:
        """Run the plan to its end, the time budget, or a busy machine; the campaign's status
        says which. Raises `Interrupted` on Ctrl-C/SIGTERM."""
        store, campaign = self.log.store, self.log.campaign
        started = time.monotonic()
        self._deadline = None if self.seconds is None else started + self.seconds
        self.log.on_finish = lambda trial, summary: self.on_event(
            Event(EventKind.TRIAL, trial, value=summary.value)
        )
        stopped_by = StopReason.BUDGET
        with contextlib.ExitStack() as held:
            try:  # refusals (a mounted device, no root, another benchmark) come first
                self.target.preflight()
                held.enter_context(machine_lock(self.target, campaign.name))
            except StortuneError:
                if not store.has_started(campaign.id):
                    store.delete_campaign(campaign.name)  # a refused run leaves nothing behind
                raise
            store.record_environment(
                campaign.id, {**environment.fingerprint(), "target": self.target.describe()}
            )
            store.set_status(campaign.id, CampaignStatus.RUNNING)
            try:
                with sigterm_as_interrupt(), self.target:
                    stopped_by = self._drive(plan)
            except KeyboardInterrupt:
                store.set_status(campaign.id, CampaignStatus.INTERRUPTED)
                raise Interrupted(campaign.name) from None
            except LeaseLost:
                raise  # the campaign is the new holder's: its status is not this one's to set
            except BaseException:
                store.set_status(campaign.id, CampaignStatus.FAILED)
                raise
        status = CampaignStatus.FINISHED
        if stopped_by == StopReason.BUSY:
            status = CampaignStatus.INTERRUPTED
        store.set_status(campaign.id, status)
        outcome = campaign_outcome(self.log, stopped_by)
        outcome.notes[:0] = plan.notes
        outcome.seconds = time.monotonic() - started
        outcome.waited_seconds = self._waited
        if stopped_by == StopReason.BUSY:
            note = busy_stop_note(campaign.name, store.url, self._busy_reason, self.rules.busy_wait)
            outcome.notes.append(note)
            self.on_event(Event(EventKind.STOP, message=note))
        elif stopped_by == StopReason.TIME:
            outcome.notes.append(f"stopped: the time budget of {self.seconds:g} s was spent")
        return outcome

    def _drive(self, plan: Plan) -> StopReason:
        """Visit what the plan asks until it ends (the budget). Only the plan's own end counts
        as that: a StopIteration escaping a target or a workload is a bug, not a budget spent."""
        visits = plan.visits()
        try:
            visit = next(visits, None)
            while visit is not None:
                if not self._time_for(visit):
                    return StopReason.TIME
                self._confirm()
                try:
                    result = self.visit(visit)
                except MachineBusy:
                    return StopReason.BUSY
                except _OutOfTime:
                    return StopReason.TIME
                except StopIteration as exc:
                    raise RuntimeError(f"measuring ended an iterator: {exc!r}") from exc
                visit = _sent(visits, result)
            return StopReason.BUDGET
        finally:
            visits.close()

    # ---- one visit --------------------------------------------------------------------------
    def visit(self, visit: Visit) -> VisitResult:
        trial = visit.trial
        self.on_event(Event(EventKind.VISIT, trial, counted=visit.counted))
        applied_at = time.time()
        try:
            self.target.apply(trial.config)
        except StortuneError as exc:
            error = f"{APPLY_ERROR}{exc}"
            log.info("campaign %s, trial %s: %s", self.log.name, trial.seq, error)
            for slot in visit.slots:
                failed = Measurement.failed(error)
                self._confirm()
                self.log.record(trial, slot.name, slot.repetition, failed, applied_at, time.time())
                self._emit_run(trial, slot, failed, visit.counted)
            return VisitResult(False, error)
        measurements = []
        broken: dict[int, str] = {}  # repetition -> why its first failed run failed
        values = _workload_values(self.target, trial.config)
        for slot in visit.slots:
            started = time.time()
            try:
                slot = _bound(slot, values)
            except StortuneError as exc:
                broken.setdefault(slot.repetition, f"workload: {exc}")
            if slot.repetition in broken:
                measurement = Measurement.failed(broken[slot.repetition])
            else:
                measurement = self._measure(slot, visit)
                if measurement.status in (RunStatus.FAILED, RunStatus.TIMEOUT):
                    broken[slot.repetition] = (
                        f"not run: {slot.name} failed first in this repetition "
                        f"({measurement.error})"
                    )
            self._confirm()
            self.log.record(
                trial, slot.name, slot.repetition, measurement, started, time.time(), visit.info
            )
            self._emit_run(trial, slot, measurement, visit.counted)
            measurements.append(measurement)
        return VisitResult(True, None, measurements, self.target.state())

    def _confirm(self) -> None:
        if self.lease is not None:
            self.lease.confirm()

    def _emit_run(self, trial: Trial, slot: Slot, m: Measurement, counted: bool) -> None:
        self.on_event(Event(EventKind.RUN, trial, slot.name, slot.repetition, m, counted=counted))

    # ---- one run, disturbance and the busy machine ---------------------------------------------
    def _measure(self, slot: Slot, visit: Visit) -> Measurement:
        """One run; with disturbance checks, a disturbed run is stored at once as a placeholder
        and redone once the machine is quiet again (MachineBusy when it stays busy), at most
        `retries` times, the redone run taking the placeholder's slot; the last disturbed try
        is returned as the placeholder. Never raises for the benchmark's own failure."""
        limits = self._limits()
        attempts: list[dict[str, Any]] = []
        while True:
            timeout = self._run_timeout(slot.workload)
            if limits is None:
                return self._timed(slot, timeout)
            started = time.time()
            before = disturbance.probe()
            measurement = self._timed(slot, timeout)
            reason = disturbance.judge(before, disturbance.probe(), limits)
            if reason is None and (drift := self.target.reassert()):
                reason = f"another process changed {', '.join(drift)}"
            if reason is None:
                if attempts:
                    measurement.info["disturbed_attempts"] = attempts
                return measurement
            log.info("run disturbed (%s); measuring it again when the machine is quiet", reason)
            attempts.append({"reason": reason, "metrics": measurement.metrics})
            self._busy_reason = reason
            if len(attempts) > limits.retries:
                # Still spoilt although the machine looked quiet before each try: keep it as a
                # placeholder (the slot stays open for a later pass or a --resume) and go on.
                measurement.info["disturbed_attempts"] = attempts[:-1]
                if measurement.ok:
                    measurement.status, measurement.error = RunStatus.DISTURBED, reason
                return measurement
            self._keep_disturbed(visit, slot, measurement, attempts, started)
            self._wait_for_quiet(limits, reason)

    def _keep_disturbed(
        self,
        visit: Visit,
        slot: Slot,
        measurement: Measurement,
        attempts: list[dict[str, Any]],
        started: float,
    ) -> None:
        """Store a disturbed run before the wait for a quiet machine, which may last
        `busy_wait`: a kill meanwhile loses nothing. Its status, disturbed, keeps it out of
        every value and leaves its slot open (`results.finished_slots`); the run measured
        after the wait replaces it (`Store.add_run`), and so does a resume."""
        reason = attempts[-1]["reason"]
        error = reason if measurement.ok else f"{reason}; the run itself: {measurement.error}"
        info = {**measurement.info, "disturbed_attempts": attempts[:-1]}
        placeholder = Measurement(dict(measurement.metrics), RunStatus.DISTURBED, error, info)
        self._confirm()
        self.log.record(
            visit.trial, slot.name, slot.repetition, placeholder, started, time.time(), visit.info
        )

    def _timed(self, slot: Slot, timeout: float | None) -> Measurement:
        started = time.monotonic()
        measurement = measure_plain(self.target, slot, timeout, self.log)
        if measurement.ok:
            self._durations.append(time.monotonic() - started)
        return measurement

    def _limits(self) -> disturbance.Limits | None:
        if not (self.rules.check_disturbance and self.target.measures_machine):
            return None
        return disturbance.Limits(
            other_cpu_cores=self.rules.max_other_cpu, settle_seconds=self.rules.settle_seconds
        )

    def _wait_for_quiet(self, limits: disturbance.Limits, reason: str) -> None:
        """After a disturbed run: pause `settle_seconds`, then wait, counting down, while
        another benchmark runs or others use the CPU; MachineBusy when `busy_wait` passes
        first. The budget is not spent meanwhile: the same slot is measured again."""
        waited_from = time.monotonic()
        limit = waited_from + self.rules.busy_wait
        self._pause(limits.settle_seconds, f"run disturbed: {reason}")
        while (busy := disturbance.busy_now(limits)) is not None:
            self._busy_reason = busy
            left = limit - time.monotonic()
            if left <= 0:
                self._waited += time.monotonic() - waited_from
                raise MachineBusy(busy)
            self.on_event(Event(EventKind.WAIT, message=f"machine busy: {busy}", seconds_left=left))
            self._sleep(min(limits.settle_seconds, left))
        self._waited += time.monotonic() - waited_from
        self.on_event(Event(EventKind.WAIT, message="machine quiet: measuring again"))

    def _pause(self, seconds: float, why: str) -> None:
        self.on_event(Event(EventKind.WAIT, message=why, seconds_left=seconds))
        self._sleep(seconds)

    def _sleep(self, seconds: float) -> None:
        if self._deadline is not None and time.monotonic() + seconds > self._deadline:
            raise _OutOfTime
        time.sleep(max(0.0, seconds))

    # ---- the time budget ---------------------------------------------------------------------
    def _expected_run(self, workload: Workload | None) -> float:
        if self._durations:
            return statistics.median(self._durations)
        expected = workload.expected_seconds if workload is not None else None
        return expected or 0.0

    def _time_for(self, visit: Visit) -> bool:
        if self._deadline is None:
            return True
        need = sum(self._expected_run(s.workload) for s in visit.slots[:1])
        return time.monotonic() + need <= self._deadline

    def _run_timeout(self, workload: Workload | None) -> float | None:
        timeout = self.rules.timeout
        if self._deadline is None:
            return timeout
        left = self._deadline - time.monotonic()
        if left <= 0 or left < 0.9 * self._expected_run(workload):
            raise _OutOfTime
        return left if timeout is None else min(timeout, left)


class _OutOfTime(Exception):
    """The time budget ends before the next run could."""


def _sent(visits: Generator[Visit, VisitResult, None], result: VisitResult) -> Visit | None:
    """The plan's next visit after `result`, None when the plan is done."""
    try:
        return visits.send(result)
    except StopIteration:
        return None


def _workload_values(target: Target, config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's workload parameters, from the whole space when tuning a subspace of it."""
    space = target.space
    return space.root.workload_values(space.full_config(config)) if space is not None else {}


def _bound(slot: Slot, values: Mapping[str, Any]) -> Slot:
    """The slot with its workload given the config's workload parameters (if it has any)."""
    if slot.workload is None:
        if values:
            raise StortuneError("the config sets workload parameters but the run has no workload")
        return slot
    return Slot(slot.workload.bind(values), slot.repetition)


def workload_name(workload: Workload | None) -> str:
    return workload.name if workload is not None else "default"


def measure_plain(
    target: Target, slot: Slot, timeout: float | None, log: CampaignLog
) -> Measurement:
    """One run, never raising for a benchmark's own failure: a crash, a hang or a missing
    objective metric becomes a failed Measurement."""
    try:
        measurement = target.run(slot.workload, timeout, slot.repetition)
    except StortuneError as exc:
        measurement = Measurement.failed(str(exc))
    except (OSError, ValueError, RuntimeError) as exc:  # a crashing benchmark, not our bug
        measurement = Measurement.failed(f"{type(exc).__name__}: {exc}")
    missing = [m for m in log.objective.measured if m not in measurement.metrics]
    if measurement.ok and missing:
        import difflib

        names = sorted(measurement.metrics)
        close = [n for m in missing for n in difflib.get_close_matches(m, names, 5, 0.5)]
        have = ", ".join(dict.fromkeys([*close, *names[:12]])) or "none"
        measurement = Measurement.failed(
            f"the run reported no metric {', '.join(map(repr, missing))} (it has: {have})",
            **measurement.info,
        )
    return measurement


def busy_stop_note(campaign: str, store_url: str, reason: str, busy_wait: float) -> str:
    """Why a campaign stopped on a busy machine, and the commands that continue it: once the
    machine is quiet, waiting longer, or measuring anyway (disturbed runs are not redone)."""
    resume = f"stortune resume {shlex.quote(campaign)}{store_option(store_url)}"
    longer = max(1800.0, 3 * busy_wait)
    return (
        f"{BUSY_STOP} ({reason}) for {busy_wait:g} s; finished runs are "
        f"kept. To continue: `{resume}` once the machine is quiet, `{resume} --busy-wait "
        f"{longer:g}` to wait longer, or `{resume} --no-check-disturbance` to measure anyway"
    )


def store_option(url: str) -> str:
    """`` --store PATH`` naming a store, or "" for the store a command opens when given none
    (``stortune.db`` here, or ``$STORTUNE_STORE``)."""
    from stortune.store import normalize_url

    try:
        implied = normalize_url(os.environ.get("STORTUNE_STORE") or "stortune.db")
    except StortuneError:
        implied = ""
    if url == implied:
        return ""
    return f" --store {shlex.quote(url.removeprefix('sqlite:///'))}"


def campaign_outcome(log: CampaignLog, stopped_by: StopReason | str) -> Outcome:
    """What the campaign holds now (every plan's outcome is read back the same way)."""
    from stortune.measure.reference import is_reference
    from stortune.measure.results import campaign_best

    trials = log.trials()
    runs = [r for t in trials for r in t.runs]
    evaluated = [t for t in trials if not is_reference(t)]
    best = campaign_best(log.campaign, evaluated)
    loads = [
        r.metrics[k]
        for r in runs
        for k in ("sys.loadavg_start", "sys.loadavg_end")
        if isinstance(r.metrics.get(k), int | float)
    ]
    return Outcome(
        log.name,
        str(log.campaign.kind),
        len(evaluated),
        sum(r.status == RunStatus.OK for r in runs),
        sum(r.status in (RunStatus.FAILED, RunStatus.TIMEOUT) for r in runs),
        sum(r.status == RunStatus.DISTURBED for r in runs),
        dict(best.config) if best else None,
        best.value if best else None,
        str(stopped_by),
        load_max=max(loads) if loads else None,
        reference_runs=sum(len(t.runs) for t in trials if is_reference(t)),
        last_error=next((r.error for r in reversed(runs) if r.error), None),
    )


# ---- machine-wide guards ---------------------------------------------------------------------
def machine_lock(target: Target, campaign: str) -> AbstractContextManager[object]:
    """The machine's benchmark lock when the target measures this machine, else nothing."""
    if not target.measures_machine:
        return nullcontext()
    return BenchmarkLock(f"campaign {campaign!r}, target {target.kind}")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops measuring like Ctrl-C does: finished runs stay stored and the campaign is
    marked interrupted, ready for --resume. (Only the main thread can set handlers.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


MAX_REPETITIONS = 1_000  # runs of one config: more is a typo, and a campaign that cannot end


def check_repetitions(repetitions: int) -> None:
    """Runs per config: at least one, and few enough that a campaign can end."""
    if not 1 <= repetitions <= MAX_REPETITIONS:
        raise StortuneError(f"repetitions must be from 1 to {MAX_REPETITIONS}, not {repetitions}")
