"""The coordinator: a campaign's plan measured on a cluster's nodes.

Only the coordinator asks the tuner and writes the store; each run is stored with the node that
measured it (``info['node']``). A tuning campaign keeps one trial in flight per free node
(`measure.parallel`); any other plan (a verification, a sweep) runs its visits in order on one
node. Each job's visits go to the node it started on, back to back, so a race pairs a challenger
with the incumbent on one device.

Faults:

- A node that dies or leaves mid-visit: the visit's runs are stored as *lost* (placeholders that
  no value counts, as disturbed runs are) and the visit goes to the next free node, which
  measures the trial from its own target's state (every visit applies the config anew). A
  node's reference is not moved: a new node measures its own.
- A node that cannot measure the campaign (another kind of target, a failed preflight) or that
  stayed busy is left out, with one line saying why; its visit goes elsewhere.
- No node left for `NODE_WAIT` seconds: the campaign stops, interrupted, and resumes later.
- The coordinator killed: `stortune resume NAME --scheduler ...` rebuilds the plan from the store
  and measures again what was in flight; nothing finished is repeated.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Generator, Mapping
from typing import Any

from stortune.cluster.client import Cluster
from stortune.cluster.node import NodeRefused, VisitOutcome
from stortune.enums import CampaignStatus, RunStatus, StopReason
from stortune.errors import Interrupted, LeaseLost, StortuneError
from stortune.measure.lease import CampaignLease
from stortune.measure.log import CampaignLog
from stortune.measure.parallel import NODE, Job, ParallelTunePlan
from stortune.measure.runner import (
    Event,
    EventKind,
    Outcome,
    Plan,
    RunRules,
    Visit,
    VisitResult,
    campaign_outcome,
    sigterm_as_interrupt,
)
from stortune.store import Trial
from stortune.system import environment
from stortune.workloads.base import Measurement

POLL_SECONDS = 0.2  # how often the coordinator looks at its nodes while visits run
NODE_WAIT = 60.0  # seconds without any node before the campaign stops


class ClusterRunner:
    """Executes one campaign's plan on a cluster (see the module doc)."""

    def __init__(
        self,
        log: CampaignLog,
        cluster: Cluster,
        target_kind: str,
        rules: RunRules,
        on_event: Callable[[Event], None] | None = None,
        seconds: float | None = None,
        lease: CampaignLease | None = None,
    ) -> None:
        self.log = log
        self.cluster = cluster
        self.target_kind = target_kind
        self.rules = rules
        self.on_event = on_event or (lambda _e: None)
        self.seconds = seconds
        self.lease = lease
        self.left_out: dict[str, str] = {}
        self._deadline: float | None = None

    # ---- life cycle ---------------------------------------------------------------------------
    def execute(self, plan: Plan) -> Outcome:
        store, campaign = self.log.store, self.log.campaign
        started = time.monotonic()
        self._deadline = None if self.seconds is None else started + self.seconds
        self.log.on_finish = lambda trial, summary: self.on_event(
            Event(EventKind.TRIAL, trial, value=summary.value)
        )
        store.record_environment(
            campaign.id,
            {
                **environment.fingerprint(),
                "scheduler": self.cluster.scheduler,
                "nodes": sorted(self.cluster.nodes() or {}),
            },
        )
        store.set_status(campaign.id, CampaignStatus.RUNNING)
        schedule = _schedule_of(plan)
        try:
            with sigterm_as_interrupt():
                stopped_by = self._drive(schedule)
        except KeyboardInterrupt:
            store.set_status(campaign.id, CampaignStatus.INTERRUPTED)
            raise Interrupted(campaign.name) from None
        except LeaseLost:
            raise
        except BaseException:
            store.set_status(campaign.id, CampaignStatus.FAILED)
            raise
        finally:
            schedule.close()
        finished = stopped_by in (StopReason.BUDGET, StopReason.TIME)
        store.set_status(
            campaign.id, CampaignStatus.FINISHED if finished else CampaignStatus.INTERRUPTED
        )
        outcome = campaign_outcome(self.log, stopped_by)
        outcome.notes[:0] = plan.notes
        outcome.notes += [f"left out: {why}" for why in self.left_out.values()]
        if stopped_by == StopReason.NO_NODES:
            note = (
                f"stopped: no node could measure for {NODE_WAIT:g} s; finished runs are kept. "
                f"Start nodes (`stortune worker --scheduler {self.cluster.scheduler} ...`), then "
                f"`stortune resume {campaign.name} --scheduler {self.cluster.scheduler}`"
            )
            outcome.notes.append(note)
            self.on_event(Event(EventKind.STOP, message=note))
        outcome.seconds = time.monotonic() - started
        return outcome

    # ---- the loop -------------------------------------------------------------------------------
    def _drive(self, schedule: _Schedule) -> StopReason:
        waiting: deque[Job] = deque(schedule.resumed())
        running: dict[str, tuple[Job, str, Any]] = {}  # node -> (job, its address, future)
        alone_since: float | None = None
        try:
            while True:
                self._confirm()
                nodes = self._nodes(running)
                for name, (job, address, future) in list(running.items()):
                    if nodes.get(name) != address:
                        del running[name]
                        future.cancel()
                        self._lose(job, name, waiting, f"node {name} left mid-run")
                out_of_time = self._out_of_time()
                for name, address in nodes.items():
                    if name not in running and not out_of_time:
                        job = self._job_for(name, waiting, schedule)
                        if job is not None:
                            running[name] = (job, address, self._submit(job, name, address))
                if nodes and len(running) == len(nodes) and not waiting and not out_of_time:
                    self._propose_ahead(waiting, schedule)
                if not running:
                    if out_of_time:
                        return StopReason.TIME
                    if not waiting and schedule.done():
                        return StopReason.BUDGET
                    if nodes and not waiting:
                        raise StortuneError("the plan waits for a trial no node is measuring")
                    alone_since = alone_since or time.monotonic()
                    left = NODE_WAIT - (time.monotonic() - alone_since)
                    if left < 0:
                        return StopReason.NO_NODES
                    if not nodes:
                        why = f"no node to measure on at {self.cluster.scheduler}: waiting"
                        self.on_event(Event(EventKind.WAIT, message=why, seconds_left=left))
                    time.sleep(POLL_SECONDS * 5)
                    continue
                alone_since = None
                self.cluster.wait_any([f for _, _, f in running.values()], POLL_SECONDS)
                for name, (job, _address, future) in list(running.items()):
                    if future.done():
                        del running[name]
                        follow = self._collect(job, name, future, waiting, schedule)
                        if follow is None:
                            continue
                        # no visit starts after the time budget (its trial stays pending for a
                        # resume); a node left out hands its job's next visit to another
                        free = name in nodes and name not in self.left_out
                        if free and not self._out_of_time():
                            address = nodes[name]
                            running[name] = (follow, address, self._submit(follow, name, address))
                        else:
                            self._requeue(follow, waiting)
        finally:
            for _job, _address, future in running.values():
                future.cancel()

    def _nodes(self, running: Mapping[str, tuple[Job, str, Any]]) -> dict[str, str]:
        """The nodes to measure on: those connected and not left out. When the scheduler does
        not answer, the nodes measuring now are taken to be there still (a visit is lost only
        when its node is known to have left, or its future fails) and no other is used."""
        known = self.cluster.nodes()
        if known is None:
            known = {name: address for name, (_job, address, _future) in running.items()}
        return {n: a for n, a in known.items() if n not in self.left_out}

    def _out_of_time(self) -> bool:
        return self._deadline is not None and time.monotonic() > self._deadline

    def _job_for(self, node: str, waiting: deque[Job], schedule: _Schedule) -> Job | None:
        """The node's reference if it has none yet, else a waiting job (a lost visit, or the
        proposal made ahead), else a new trial."""
        while True:
            job = schedule.reference_for(node)
            if job is None:
                job = waiting.popleft() if waiting else schedule.next_job()
            if job is None:
                return None
            if job.visit is not None or self._advance(job, None, schedule):
                return job

    def _propose_ahead(self, waiting: deque[Job], schedule: _Schedule) -> None:
        """With every node busy, make the next proposal now, so the node that frees first
        starts it at once instead of waiting while the tuner computes it."""
        job = schedule.next_job()
        if job is not None and self._advance(job, None, schedule):
            waiting.append(job)

    def _advance(self, job: Job, result: VisitResult | None, schedule: _Schedule) -> bool:
        """Give the job's plan the result and take its next visit; False when it ended."""
        schedule.drive(job)
        try:
            job.visit = next(job.visits) if result is None else job.visits.send(result)
        except StopIteration:
            job.visit = None
            schedule.ended(job)
            return False
        return True

    def _submit(self, job: Job, node: str, address: str) -> Any:
        assert job.visit is not None
        if job.node != node:
            job.node = node
            schedule_trial = self._own_trial(job)
            if schedule_trial is not None and not job.reference:
                self.log.update_trial_info(schedule_trial, {NODE: node})
        visit = job.visit
        self.on_event(Event(EventKind.VISIT, visit.trial, counted=visit.counted))
        campaign = self.log.campaign
        payload = {
            "campaign": campaign.name,
            "kind": self.target_kind,
            "space": campaign.space_yaml,
            "objective": self.log.objective.to_dict(),
            "rules": self.rules.to_dict(),
            "seq": visit.trial.seq,
            "config": dict(visit.trial.config),
            "slots": [
                (s.workload.describe() if s.workload is not None else None, s.repetition)
                for s in visit.slots
            ],
            "info": dict(visit.info),
        }
        return self.cluster.submit(address, payload)

    def _own_trial(self, job: Job) -> Trial | None:
        return next((t for t in self.log.trials() if t.seq == job.seq), None)

    def _collect(
        self, job: Job, node: str, future: Any, waiting: deque[Job], schedule: _Schedule
    ) -> Job | None:
        """Store what a finished visit measured; the job's next visit (same node), if any."""
        assert job.visit is not None
        try:
            outcome: VisitOutcome = future.result()
        except NodeRefused as exc:
            self._leave_out(node, str(exc))
            self._requeue(job, waiting)
            return None
        except Exception as exc:  # the worker died (KilledWorker), or the task was cancelled
            self._lose(job, node, waiting, f"node {node}: {type(exc).__name__}: {exc}")
            return None
        visit = job.visit
        info = {**visit.info, NODE: node}
        for kept in outcome.runs:
            self._confirm()
            self.log.record(
                visit.trial,
                kept.workload,
                kept.repetition,
                kept.measurement,
                kept.started,
                kept.ended,
                info,
            )
            self.on_event(
                Event(
                    EventKind.RUN,
                    visit.trial,
                    kept.workload,
                    kept.repetition,
                    kept.measurement,
                    counted=visit.counted,
                )
            )
        if outcome.busy is not None:
            self._leave_out(node, f"node {node} stayed busy ({outcome.busy})")
            done = {
                (r.workload, r.repetition)
                for r in outcome.runs
                if r.measurement.status != RunStatus.DISTURBED
            }
            rest = [s for s in visit.slots if (s.name, s.repetition) not in done]
            if rest:
                job.visit = Visit(visit.trial, rest, visit.counted, visit.info)
                self._requeue(job, waiting)
                return None
        result = VisitResult(
            outcome.applied, outcome.error, list(outcome.measurements), dict(outcome.state)
        )
        if self._advance(job, result, schedule):
            return job
        why = schedule.refused(job)
        if why is not None:
            self._leave_out(node, f"{why} ({outcome.error or _first_error(outcome)})")
        return None

    def _lose(self, job: Job, node: str, waiting: deque[Job], why: str) -> None:
        """A visit whose node died: its runs stored as lost, the visit measured elsewhere."""
        visit = job.visit
        assert visit is not None
        now = time.time()
        for slot in visit.slots:
            lost = Measurement.failed(why, RunStatus.LOST)
            self.log.record(
                visit.trial, slot.name, slot.repetition, lost, now, now, {**visit.info, NODE: node}
            )
        own = self._own_trial(job)
        if own is not None:
            lost_on = list((own.info or {}).get("lost_on", [])) + [node]
            self.log.update_trial_info(own, {"lost_on": lost_on})
        self.on_event(Event(EventKind.WAIT, message=f"{why}: measuring it on another node"))
        self._requeue(job, waiting)

    def _requeue(self, job: Job, waiting: deque[Job]) -> None:
        if job.reference:  # a reference belongs to its node: a new node measures its own
            job.visits.close()
            return
        waiting.appendleft(job)

    def _leave_out(self, node: str, why: str) -> None:
        self.left_out[node] = why
        self.on_event(Event(EventKind.WAIT, message=f"left out: {why}"))

    def _confirm(self) -> None:
        if self.lease is not None:
            self.lease.confirm()


# ---- what to measure next: a tuning plan's trials, or any plan's visits in order --------------
class _Schedule:
    def resumed(self) -> list[Job]:
        return []

    def reference_for(self, node: str) -> Job | None:
        """What `node` measures before anything else (None: nothing)."""
        return None

    def next_job(self) -> Job | None:
        raise NotImplementedError

    def drive(self, job: Job) -> None:
        """Before a job's plan is given a result."""

    def ended(self, job: Job) -> None:
        """A job's visits are over."""

    def done(self) -> bool:
        raise NotImplementedError

    def refused(self, job: Job) -> str | None:
        """Why the node of a job that just ended may measure no more (None: it may)."""
        return None

    def close(self) -> None:
        """Nothing more will be measured."""


class _TrialsInFlight(_Schedule):
    def __init__(self, plan: ParallelTunePlan) -> None:
        self.plan = plan

    def resumed(self) -> list[Job]:
        return self.plan.resume()

    def reference_for(self, node: str) -> Job | None:
        return self.plan.reference_job(node) if self.plan.needs_reference(node) else None

    def next_job(self) -> Job | None:
        return self.plan.next_job()

    def drive(self, job: Job) -> None:
        self.plan.current = job.seq

    def ended(self, job: Job) -> None:
        if not job.reference:
            self.plan.ended(job.seq)

    def refused(self, job: Job) -> str | None:
        """Why a node whose reference just ended cannot measure: its default config gave no
        value, so nothing it measures could be compared with the other nodes'."""
        if job.reference and job.node and self.plan.reference_value(job.node) is None:
            return f"node {job.node}: its reference (the default config) gave no value"
        return None

    def done(self) -> bool:
        return self.plan.exhausted() and self.plan.settled()


class _InOrder(_Schedule):
    """A plan that is not a tuning campaign: its visits in order, on one node at a time."""

    def __init__(self, plan: Plan) -> None:
        self.visits: Generator[Visit, VisitResult, None] = plan.visits()
        self.started = False
        self.over = False

    def next_job(self) -> Job | None:
        if self.started:
            return None
        self.started = True
        return Job(0, self.visits)

    def ended(self, job: Job) -> None:
        self.over = True

    def done(self) -> bool:
        return self.over

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.visits.close()


def _schedule_of(plan: Plan) -> _Schedule:
    return _TrialsInFlight(plan) if isinstance(plan, ParallelTunePlan) else _InOrder(plan)


def _first_error(outcome: VisitOutcome) -> str:
    return next((r.measurement.error for r in outcome.runs if r.measurement.error), "no error")
