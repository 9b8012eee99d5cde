"""The sweep plan: every config of a design x workloads x repetitions, the harness of SPA and
Carver; and the noise study, a sweep of one config alternating with the reference.

Order matters on a machine whose throughput drifts (MEASURING.md): repetitions are interleaved,
one pass over all configs per repetition, each pass in its own seeded shuffle, so drift spreads
over configs instead of following the design's order. A reference config (the space's default
unless named) is measured every `reference_every` configs; each run can then be expressed
relative to the reference interpolated at its start time (`reference.relative_values`), which
cancels slow drift. All trials are stored up front, in one transaction before any run, so a
resumed sweep finds its whole design and exactly the runs missing; a second pass measures again
what the first left disturbed.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from stortune.errors import StortuneError
from stortune.measure.log import CampaignLog
from stortune.measure.reference import REFERENCE, is_reference
from stortune.measure.results import finished_slots
from stortune.measure.runner import Plan, Visit, VisitResult, check_repetitions, workload_name
from stortune.space import Config, Space
from stortune.store import Campaign, Trial
from stortune.workloads.base import Workload

PASSES = 2  # the second pass measures what the first left disturbed


@dataclass
class SweepSettings:
    repetitions: int = 2
    reference_every: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        check_repetitions(self.repetitions)
        if self.reference_every < 0:
            raise StortuneError("--reference-every must be 0 (off) or a positive number")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> SweepSettings:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in settings.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def store_design(
    log: CampaignLog, space: Space, configs: Sequence[Config], reference: Config | None = None
) -> None:
    """Store the reference (trial 0) and the design's configs (1..n) as pending trials, in one
    transaction: a sweep killed while storing them leaves no part of a design to resume."""
    if not configs:
        raise StortuneError("the design has no valid config to measure")
    design = [(0, space.validate(reference or {}), {"source": REFERENCE})]
    design += [(seq, space.validate(c), None) for seq, c in enumerate(configs, start=1)]
    log.store.add_trials(log.campaign.id, design)


class SweepPlan(Plan):
    """A stored design measured run by run (see the module doc)."""

    def __init__(
        self, log: CampaignLog, workloads: Sequence[Workload | None], settings: SweepSettings
    ) -> None:
        super().__init__(log, workloads)
        self.settings = settings
        if not log.trials():  # a kill between the campaign's row and its design's transaction
            raise StortuneError(
                f"{log.campaign.kind} {log.name!r} has no stored design: it was stopped while "
                f"storing it, before any run; delete it (stortune campaigns delete {log.name}) "
                "and start it again"
            )

    def _design(self) -> tuple[Trial, list[Trial]]:
        trials = self.log.trials()
        reference = next(t for t in trials if is_reference(t))
        return reference, [t for t in trials if not is_reference(t)]

    def planned_runs(self) -> int:
        return planned_runs(self.log.campaign, len(self._design()[1]))

    def done_runs(self) -> int:
        return sum(len(finished_slots(t)) for t in self._design()[1])

    def visits(self) -> Generator[Visit, VisitResult, None]:
        for _ in range(PASSES):
            yield from self._pass()
        for trial in self.log.trials():
            self.log.finish(trial)

    def _pass(self) -> Generator[Visit, VisitResult, None]:
        """One pass over every slot without a result, repetition by repetition."""
        reference, design = self._design()
        done = {t.id: finished_slots(t) for t in design}
        names = [workload_name(w) for w in self.workloads]
        reps = range(self.settings.repetitions)
        if all((n, r) in done[t.id] for t in design for n in names for r in reps):
            return
        next_visit = 1 + max((r.repetition for r in reference.runs), default=-1)
        every = self.settings.reference_every
        since_reference = every  # the reference first
        for rep in reps:
            order = np.random.default_rng(self.settings.seed + rep).permutation(len(design))
            for index in order:
                trial = design[int(index)]
                missing = [
                    w for w in self.workloads if (workload_name(w), rep) not in done[trial.id]
                ]
                if not missing:
                    continue
                if every and since_reference >= every:
                    yield Visit(reference, self.slots(next_visit), counted=False)
                    next_visit += 1
                    since_reference = 0
                yield Visit(trial, self.slots(rep, missing))
                since_reference += 1
                if rep == self.settings.repetitions - 1:
                    self.log.finish(trial)
        if every:
            yield Visit(reference, self.slots(next_visit), counted=False)  # closes the span


def planned_runs(campaign: Campaign, configs: int) -> int:
    """Runs a stored sweep of `configs` configs plans (reference runs come on top)."""
    workloads = max(1, len(campaign.workload.get("workloads", [])))
    return configs * int(campaign.settings.get("repetitions", 1)) * workloads


def sweep_time_estimate(runs: int, runtime: float, overhead: float = 3.0) -> float:
    """Seconds a sweep of `runs` runs takes: each run's runtime plus apply/setup overhead
    (1-4 s per local-fs evaluation on this kind of machine, MEASURING.md)."""
    return runs * (runtime + overhead)
