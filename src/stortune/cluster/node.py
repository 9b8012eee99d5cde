"""A measuring node: a Dask worker that owns one target (its loop image or named device, its Ceph
client) and measures the visits a campaign's coordinator sends it.

The node keeps the target it was started with (its spec, `Target.describe`) and builds it anew
with each campaign's space, entered (set up) once per space and left (torn down: unmounted,
sysfs restored) when another campaign's space comes or the node stops. A visit is measured by
the engine's own runner (`Runner.visit`): the same rules as on one machine (a config that does
not apply, a crashing or hanging benchmark, a disturbed run redone once the node is quiet). The
node writes no store: it hands its runs back, and only the coordinator stores them.

The node holds its own benchmark lock (``benchmark-NODE.lock``) for as long as it runs: one
measuring process per node, while several nodes may share a machine for a try-out.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stortune.enums import TrialStatus
from stortune.errors import StortuneError
from stortune.measure.runner import MachineBusy, Runner, RunRules, Slot, Visit, sigterm_as_interrupt
from stortune.objective import Objective
from stortune.space import parse_space
from stortune.store import Trial
from stortune.system.lock import BenchmarkLock
from stortune.targets import make_target
from stortune.targets.base import Target
from stortune.workloads import make_workload
from stortune.workloads.base import Measurement

RESOURCE = "stortune-node"  # the Dask resource a node offers, one visit at a time
JOIN_SECONDS = 60  # a node whose scheduler cannot be reached (or is gone) this long stops


class NodeRefused(StortuneError):
    """This node cannot measure the campaign (another kind of target, a failed preflight)."""


@dataclass
class KeptRun:
    workload: str
    repetition: int
    measurement: Measurement
    started: float
    ended: float


@dataclass
class VisitOutcome:
    """A visit as the node measured it, for the coordinator to store."""

    node: str
    applied: bool
    error: str | None = None
    runs: list[KeptRun] = field(default_factory=list)
    state: dict[str, float] = field(default_factory=dict)
    measurements: list[Measurement] = field(default_factory=list)  # one a slot, in order
    busy: str | None = None  # the node stayed busy: measure the rest elsewhere


class _RunsKept:
    """The campaign log as the runner sees it on a node: runs are kept, not stored."""

    def __init__(self, name: str, objective: Objective) -> None:
        self.name = name
        self.objective = objective
        self.runs: list[KeptRun] = []

    def record(
        self,
        trial: Trial,
        workload: str,
        repetition: int,
        measurement: Measurement,
        started: float,
        ended: float,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        self.runs.append(KeptRun(workload, repetition, measurement, started, ended))


class NodeService:
    """One node's target, rebuilt for each campaign's space (see the module doc)."""

    def __init__(self, name: str, spec: Mapping[str, Any]) -> None:
        self.name = name
        self.spec = dict(spec)
        self._target: Target | None = None
        self._space_key = ""
        self._held = contextlib.ExitStack()
        self._lock = threading.Lock()

    @property
    def kind(self) -> str:
        return str(self.spec.get("kind", ""))

    def target_for(self, space_yaml: str, kind: str) -> Target:
        if kind != self.kind:
            raise NodeRefused(f"node {self.name} measures a {self.kind} target, not {kind}")
        key = hashlib.sha256(space_yaml.encode()).hexdigest()
        if self._target is None or key != self._space_key:
            self.close()
            space = parse_space(space_yaml, "the campaign's space")
            target = make_target(self.spec, space)
            try:
                target.preflight()
            except StortuneError as exc:
                raise NodeRefused(f"node {self.name}: {exc}") from None
            self._held.enter_context(target)
            self._target, self._space_key = target, key
        return self._target

    def visit(self, payload: Mapping[str, Any]) -> VisitOutcome:
        with self._lock:
            target = self.target_for(payload["space"], payload["kind"])
            log = _RunsKept(payload["campaign"], Objective.from_dict(payload["objective"]))
            runner = Runner(log, target, RunRules.from_settings(payload["rules"]))  # type: ignore[arg-type]
            trial = Trial(
                0,
                payload["seq"],
                dict(payload["config"]),
                TrialStatus.PENDING,
                None,
                None,
                None,
                None,
                time.time(),
                None,
            )
            slots = [
                Slot(make_workload(spec) if spec else None, rep) for spec, rep in payload["slots"]
            ]
            try:
                result = runner.visit(Visit(trial, slots, info=dict(payload["info"])))
            except MachineBusy as exc:
                return VisitOutcome(self.name, True, runs=log.runs, busy=str(exc))
            return VisitOutcome(
                self.name,
                result.applied,
                result.error,
                log.runs,
                dict(result.state),
                list(result.measurements),
            )

    def close(self) -> None:
        self._held.close()
        self._held = contextlib.ExitStack()
        self._target = None


_SERVICE: NodeService | None = None


def measure_visit(payload: Mapping[str, Any]) -> VisitOutcome:
    """The task a coordinator submits: measure one visit on this node's target."""
    if _SERVICE is None:
        raise NodeRefused("this Dask worker is no stortune node (start it with `stortune worker`)")
    return _SERVICE.visit(payload)


def serve(scheduler: str, name: str, target: Target, ready: str = "") -> None:
    """Run a node until it is stopped (Ctrl-C or SIGTERM): check the target, hold the node's
    benchmark lock, join the scheduler as a worker named `name`. `ready` is printed once the
    node has joined."""
    global _SERVICE
    target.preflight()
    with BenchmarkLock(f"stortune node {name}", node=name), sigterm_as_interrupt():
        _SERVICE = NodeService(name, target.describe())
        try:
            asyncio.run(_work(scheduler, name, ready))
        except KeyboardInterrupt:
            pass
        except ValueError as exc:
            if "name taken" not in str(exc):
                raise
            raise StortuneError(
                f"node {name}: the scheduler {scheduler} has a node of that name already; "
                "give this one another --node"
            ) from None
        except (OSError, TimeoutError) as exc:
            raise StortuneError(
                f"node {name}: no Dask scheduler answered at {scheduler} within "
                f"{JOIN_SECONDS:g} s ({type(exc).__name__}: {exc})"
            ) from None
        finally:
            _SERVICE.close()
            _SERVICE = None


async def _work(scheduler: str, name: str, ready: str) -> None:
    from distributed import Worker

    async with Worker(
        scheduler,
        name=name,
        nthreads=1,
        resources={RESOURCE: 1},
        dashboard=False,
        memory_limit=0,
        death_timeout=JOIN_SECONDS,
        silence_logs=logging.WARNING,  # Dask's own start-up lines: the node prints its own
    ) as worker:
        if ready:
            print(ready, flush=True)
        await worker.finished()
