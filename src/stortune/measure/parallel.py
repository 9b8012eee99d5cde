"""Tuning with several trials in flight, as a cluster's coordinator runs it.

Each trial is the serial plan's own evaluation (`TunePlan._evaluate`: its repetitions, or a race
against the incumbent), a generator of visits that the coordinator drives on one node. Up to
`lag` trials are in flight, in an order fixed so that a seeded campaign proposes the same configs
whatever the nodes' timing, and a resumed campaign goes on as an uninterrupted one would:

- trial k is proposed once trials 0..k-lag have had their turn, and trial j has its turn once
  trials 0..j+lag-1 were proposed: the tuner has heard exactly trials 0..k-lag when it proposes
  trial k, and trials k-lag+1..k-1 are pending. A trial's turn is when the tuner is told its
  value and, when racing, when its race's end takes effect (its pairs, a new incumbent).
- Pending configs are shown to the tuner as constant lies (the mean value told so far; a failure
  before any value): a copy of the tuner is told the lies and asked, so the tuner itself hears
  only measured values; it keeps what the copy learnt besides (`Tuner.adopt`: a GP's fitted
  hyperparameters), and a resume asks the same copies again to learn it alike. A tuner that
  keeps its asked proposals pending itself (Optuna's samplers, with their own constant liar;
  random and Latin hypercube designs: `Tuner.asks_pending`) is asked directly.
- When racing (or when the default is measured first), trial 0 ends before trial 1 starts: every
  race needs an incumbent.

A node waits when the oldest trial in flight holds the next proposal back (a race longer than
the others): reproducibility costs that idle time.

Each node measures the default config once, as its reference, before its first trial; the tuner
is told a trial's value divided by the reference of the node it ran on, so nodes whose devices
differ are compared only through their own defaults, and a race pairs a challenger with the
incumbent on one node, back to back.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stortune.measure.log import CampaignLog
from stortune.measure.racing import Verdict
from stortune.measure.reference import REFERENCE, is_reference
from stortune.measure.results import node_references
from stortune.measure.runner import Visit, VisitResult
from stortune.measure.tuning import DEFAULT_SOURCE, REFERENCE_SEQ, StateOf, TunePlan, TuneSettings
from stortune.space import Config, Space
from stortune.store import Trial
from stortune.tuners import Tuner
from stortune.workloads.base import Workload

NODE = "node"  # the key naming a node in a trial's and a run's info


@dataclass
class Job:
    """One trial's evaluation (or a node's reference) in flight: its visits, and where."""

    seq: int
    visits: Generator[Visit, VisitResult, None]
    visit: Visit | None = None  # the visit being measured, or waiting for a node
    node: str | None = None
    reference: bool = False


class _TurnTaker:
    """What the serial evaluation calls on its tuner, kept until the trial's turn."""

    def __init__(self, plan: ParallelTunePlan) -> None:
        self.plan = plan

    def tell(self, config: Config, value: float | None) -> None:
        plan, seq = self.plan, self.plan.current
        plan.defer(lambda: plan.real.tell(config, plan.relative(seq, value)))

    def observe_state(self, state: Mapping[str, float]) -> None:
        plan = self.plan
        plan.defer(lambda: plan.real.observe_state(state))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.plan.real, name)


class ParallelTunePlan(TunePlan):
    """A tuner's asks with up to `lag` in flight (see the module doc)."""

    def __init__(
        self,
        log: CampaignLog,
        workloads: Sequence[Workload | None],
        space: Space,
        tuner: Tuner,
        settings: TuneSettings,
        state_of: StateOf,
        lag: int,
    ) -> None:
        super().__init__(log, workloads, space, tuner, settings, state_of)
        self.lag = max(1, lag)
        self.real = tuner
        self.tuner = _TurnTaker(self)  # type: ignore[assignment]
        self.current = 0  # the trial whose evaluation is being driven
        self._turns: dict[int, list[Callable[[], None]]] = {}
        self._ended: set[int] = set()
        self._told = 0  # trials 0.._told-1 have had their turn
        self._asked = 0  # trials 0.._asked-1 were proposed
        self._reps: dict[int, int] = {}  # trial id -> the next repetition handed out
        self._referenced: set[str] = set()  # nodes whose reference is measured

    # ---- the order ----------------------------------------------------------------------
    def defer(self, effect: Callable[[], None]) -> None:
        self._turns.setdefault(self.current, []).append(effect)

    def ended(self, seq: int) -> None:
        """Trial `seq`'s evaluation is over: its turn comes when the order allows."""
        self._ended.add(seq)
        self._take_turns()

    def _take_turns(self) -> None:
        budget = self.settings.budget
        while self._told in self._ended:
            last = self._told + self.lag - 1
            if self._told == 0 and self._first_alone():
                last = 0  # every later proposal waits for the first trial
            if budget is not None:
                last = min(last, budget - 1)
            if self._asked <= last:
                return
            for effect in self._turns.pop(self._told, []):
                effect()
            self._told += 1

    def _may_ask(self) -> bool:
        k = self._asked
        need = k - self.lag + 1
        if k >= 1 and self._first_alone():
            need = max(need, 1)
        return self._told >= need

    def _first_alone(self) -> bool:
        """Whether trial 0 ends before trial 1 starts: the first incumbent of every race, or
        the default whose values bound the objectives."""
        return self.settings.intensify or self._wants_default()

    def _wants_default(self) -> bool:
        return self.settings.baseline or self.log.objective.needs_bounds

    @property
    def asked(self) -> int:
        return self._asked

    def exhausted(self) -> bool:
        """Whether every trial of the budget was proposed."""
        return self.settings.budget is not None and self._asked >= self.settings.budget

    def settled(self) -> bool:
        """Whether every proposed trial has had its turn."""
        return self._told >= self._asked

    # ---- proposals ------------------------------------------------------------------------
    def next_job(self) -> Job | None:
        """The next trial to measure, or None: the budget is spent, or the order holds it."""
        if self.exhausted() or not self._may_ask():
            return None
        seq = self._asked
        self.current = seq
        if seq == 0 and self._wants_default():
            config, source = self.space.default_config(), DEFAULT_SOURCE
        else:
            config, source = self._propose(), None
        self._asked += 1
        self._take_turns()  # a turn that waited for this proposal
        return Job(seq, self._evaluate(seq, config, None, source))

    def _propose(self) -> Config:
        """Ask with the pending configs known (see the module doc)."""
        if getattr(self.real, "asks_pending", False):
            return self.real.ask()
        fork = copy.deepcopy(self.real)
        told = [o.value for o in self.real.history if o.value is not None]
        lie = statistics.fmean(told) if told else None
        for trial in self._pending():
            fork.tell(trial.config, lie)
        config = fork.ask()
        self.real.adopt(fork)
        return config

    def _pending(self) -> list[Trial]:
        return [
            t
            for t in self.log.trials()
            if not is_reference(t) and self._told <= t.seq < self._asked
        ]

    def relative(self, seq: int, value: float | None) -> float | None:
        """A trial's value as the tuner hears it: divided by its node's reference value."""
        if value is None:
            return None
        trials = self.log.trials()
        trial = next((t for t in trials if t.seq == seq), None)
        node = ((trial.info or {}) if trial else {}).get(NODE)
        reference = node_references(trials).get(str(node)) if node else None
        return value / reference if reference else value

    def reference_value(self, node: str) -> float | None:
        """The node's reference value (None: not measured, or it gave no value)."""
        return node_references(self.log.trials()).get(node)

    # ---- resuming ---------------------------------------------------------------------------
    def resume(self) -> list[Job]:
        """Hear the stored trials in their order; the unfinished ones, to measure first."""
        jobs: list[Job] = []
        stored = sorted((t for t in self.log.trials() if not is_reference(t)), key=lambda t: t.seq)
        for trial in stored:
            self.current = trial.seq
            source = (trial.info or {}).get("source")
            self._asked = trial.seq
            if source != DEFAULT_SOURCE:
                self._propose()  # what proposing taught the tuner (a seeded sequence, a fit)
            self._asked = trial.seq + 1
            if trial.finished:
                self._replay_finished(trial)
                self.ended(trial.seq)
            else:
                jobs.append(Job(trial.seq, self._evaluate(trial.seq, trial.config, trial, source)))
            self._take_turns()
        self._ensure_bounds()
        return jobs

    def _replay_finished(self, trial: Trial) -> None:
        info = trial.info or {}
        race = info.get("race")
        if self.settings.intensify and race:
            verdict = race.get("verdict")
            pairs = self._pairs(trial) if verdict != Verdict.FIRST else None
            self.defer(lambda: self._conclude_now(trial, verdict, pairs))
            if "told" not in info:
                self.log.update_trial_info(trial, {"told": trial.value})
        told = info.get("told", trial.value)
        self.tuner.tell(trial.config, told)

    # ---- what the serial evaluation does, in order ------------------------------------------
    def _conclude(self, trial: Trial, verdict: Verdict, pairs: list[float] | None) -> None:
        self.defer(lambda: self._conclude_now(trial, verdict, pairs))

    def _conclude_now(self, trial: Trial, verdict: Any, pairs: list[float] | None) -> None:
        """At the trial's turn: a winner whose race's incumbent was crowned over meanwhile
        takes the place only when its value, relative to its node's reference, is better
        than the present incumbent's; else its verdict becomes `outrun`."""
        verdict = Verdict(verdict)
        race = (self.log.trial(trial.id).info or {}).get("race") or {}
        holder = self.incumbent
        if verdict == Verdict.WINS and holder is not None and race.get("against") != holder.seq:
            mine = self.relative(trial.seq, self.log.summary(self.log.trial(trial.id)).value)
            theirs = self.relative(holder.seq, self.log.summary(holder).value)
            if mine is None or theirs is None or not self.real.better(mine, theirs):
                verdict = Verdict.OUTRUN
                self.log.update_trial_info(trial, {"race": {**race, "verdict": str(verdict)}})
        super()._conclude(trial, verdict, pairs)

    def _next_rep(self, trial: Trial) -> int:
        """The incumbent's next repetition: races on other nodes take theirs at the same time."""
        rep = max(super()._next_rep(trial), self._reps.get(trial.id, 0))
        self._reps[trial.id] = rep + 1
        return rep

    # ---- each node's reference ----------------------------------------------------------------
    def _reference_trial_of(self, node: str) -> Trial | None:
        return next(
            (t for t in self.log.trials() if is_reference(t) and (t.info or {}).get(NODE) == node),
            None,
        )

    def needs_reference(self, node: str) -> bool:
        """Whether `node` has yet to measure its reference (asked for each free node while
        the order holds proposals back: the store is read until the answer is no)."""
        if node in self._referenced:
            return False
        trial = self._reference_trial_of(node)
        if trial is not None and trial.finished:
            self._referenced.add(node)
            return False
        return True

    def reference_job(self, node: str) -> Job:
        """The node's reference: the default config, measured once before its first trial."""
        trial = self._reference_trial_of(node)
        if trial is None:
            count = sum(1 for t in self.log.trials() if is_reference(t))
            trial = self.log.add_trial(
                REFERENCE_SEQ - count,
                self.space.default_config(),
                {"source": REFERENCE, NODE: node},
            )
        return Job(trial.seq, self._reference_visits(trial), reference=True)

    def _reference_visits(self, trial: Trial) -> Generator[Visit, VisitResult, None]:
        yield Visit(trial, self.slots(0), counted=False)
        self.log.finish(self.log.trial(trial.id))
