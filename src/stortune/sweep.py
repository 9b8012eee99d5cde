"""The sweep: every config of a design x workloads x repetitions, the harness of SPA and Carver.

Order matters on a machine whose throughput drifts (MEASURING.md): repetitions are interleaved,
one pass over all configs per repetition, each pass in its own seeded shuffle, so drift spreads
over configs instead of following the design's order. A reference config (the space's default
unless named) is measured every `reference_every` configs; each run can then be expressed
relative to the reference interpolated at its start time (`relative_values`), which cancels
slow drift. All trials are stored up front, so a resumed sweep finds exactly the runs missing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from stortune import environment
from stortune.errors import StortuneError
from stortune.experiment import (
    Event,
    Objective,
    finished_slots,
    limits_for,
    machine_lock,
    measure_once,
    new_campaign,
    record_run,
    workload_name,
    workloads_from_specs,
)
from stortune.reference import REFERENCE
from stortune.space import Config, Space, parse_space
from stortune.stats import summarize
from stortune.store import Campaign, Store, Trial
from stortune.targets import Target, Workload, make_target


@dataclass
class SweepSettings:
    repetitions: int = 2
    timeout: float | None = 600.0
    reference_every: int = 5
    seed: int = 0
    check_disturbance: bool = False
    settle_seconds: float = 5.0
    max_other_cpu: float = 0.5  # cores of user time others may use during a run

    def __post_init__(self) -> None:
        if self.repetitions < 1:
            raise StortuneError(f"repetitions must be at least 1, not {self.repetitions}")
        if self.reference_every < 0:
            raise StortuneError("--reference-every must be 0 (off) or a positive number")


class Sweep:
    """A stored design measured run by run (see the module doc)."""

    def __init__(
        self,
        store: Store,
        campaign: Campaign,
        space: Space,
        target: Target,
        workloads: Sequence[Workload | None],
        settings: SweepSettings,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self.store, self.campaign, self.space = store, campaign, space
        self.target, self.workloads = target, list(workloads) or [None]
        self.settings = settings
        self.on_event = on_event or (lambda _e: None)

    @classmethod
    def start(
        cls,
        store: Store,
        name: str,
        space: Space,
        target: Target,
        workloads: Sequence[Workload | None],
        metric: str,
        direction: str,
        configs: Sequence[Config],
        settings: SweepSettings,
        reference: Config | None = None,
    ) -> Sweep:
        if not configs:
            raise StortuneError("the design has no valid config to measure")
        objective = Objective(metric, direction)
        campaign = new_campaign(
            store, name, "sweep", space, target, workloads, objective, "factorial",
            settings.seed, asdict(settings),
        )  # fmt: skip
        reference = space.validate(reference or {})
        store.add_trial(campaign.id, 0, reference, {"source": REFERENCE})
        for seq, config in enumerate(configs, start=1):
            store.add_trial(campaign.id, seq, space.validate(config))
        return cls(store, campaign, space, target, workloads, settings)

    @classmethod
    def resume(cls, store: Store, name: str) -> Sweep:
        campaign = store.campaign(name)
        if campaign.kind != "sweep":
            raise StortuneError(f"campaign {name!r} is a {campaign.kind}, not a sweep")
        space = parse_space(campaign.space_yaml, f"campaign {name!r}")
        return cls(
            store,
            campaign,
            space,
            make_target(campaign.target, space),
            workloads_from_specs(campaign.workload.get("workloads", [])),
            SweepSettings(**campaign.settings),
        )

    @property
    def total_runs(self) -> int:
        """Runs of the design (reference runs come on top)."""
        return planned_runs(self.campaign, len(self.store.trials(self.campaign.id)) - 1)

    @property
    def completed_runs(self) -> int:
        """Runs of the design with a result (`finished_slots`: a disturbed run leaves its slot
        open, to be measured again)."""
        return sum(len(finished_slots(t)) for t in self.store.trials(self.campaign.id)[1:])

    def run(self) -> None:
        self.store.record_environment(
            self.campaign.id, {**environment.fingerprint(), "target": self.target.describe()}
        )
        self.store.set_status(self.campaign.id, "running")
        try:
            with machine_lock(self.target, self.campaign.name), self.target:
                # The second pass measures again what the first left disturbed (or unmeasured).
                for _ in range(2):
                    self._pass()
        except KeyboardInterrupt:
            self.store.set_status(self.campaign.id, "interrupted")
            raise
        for trial in self.store.trials(self.campaign.id):
            self._finish(trial)
        self.store.set_status(self.campaign.id, "finished")

    def _pass(self) -> None:
        """One pass over every slot without a result, repetition by repetition."""
        trials = self.store.trials(self.campaign.id)
        reference, design = trials[0], trials[1:]
        done = {t.id: finished_slots(t) for t in trials}
        if all(
            (workload_name(w), rep) in done[t.id]
            for t in design
            for w in self.workloads
            for rep in range(self.settings.repetitions)
        ):
            return
        next_ref_rep = 1 + max((r.repetition for r in reference.runs), default=-1)
        since_reference = self.settings.reference_every  # measure the reference first
        every = self.settings.reference_every
        for rep in range(self.settings.repetitions):
            order = np.random.default_rng(self.settings.seed + rep).permutation(len(design))
            for index in order:
                trial = design[int(index)]
                missing = [
                    w for w in self.workloads if (workload_name(w), rep) not in done[trial.id]
                ]
                if not missing:
                    continue
                if every and since_reference >= every:
                    self._measure(reference, self.workloads, next_ref_rep)
                    next_ref_rep += 1
                    since_reference = 0
                self._measure(trial, missing, rep)
                since_reference += 1
                if rep == self.settings.repetitions - 1:
                    self._finish(trial)
        if every:
            self._measure(reference, self.workloads, next_ref_rep)  # closes the span

    def _measure(self, trial: Trial, workloads: Sequence[Workload | None], rep: int) -> None:
        self.target.apply(trial.config)
        for workload in workloads:
            name = workload_name(workload)
            limits = limits_for(self.settings, self.target)
            m = measure_once(
                self.target, workload, self.settings.timeout, self.campaign.metric, limits
            )
            record_run(self.store, self.campaign.id, trial.id, name, rep, m)
            self.on_event(Event("run", trial.seq, trial.config, name, rep, m))

    def _finish(self, trial: Trial) -> None:
        runs = self.store.trial_runs(trial.id)
        values = [r.metrics[self.campaign.metric] for r in runs if r.status == "ok"]
        summary = summarize(values)
        self.store.finish_trial(
            trial.id,
            "ok" if summary.n else "failed",
            summary.mean if summary.n else None,
            {"all": summary.to_dict()},
        )


def planned_runs(campaign: Campaign, configs: int) -> int:
    """Runs a stored sweep of `configs` configs plans (reference runs come on top)."""
    workloads = max(1, len(campaign.workload.get("workloads", [])))
    return configs * int(campaign.settings.get("repetitions", 1)) * workloads


def sweep_time_estimate(runs: int, runtime: float, overhead: float = 3.0) -> float:
    """Seconds a sweep of `runs` runs takes: each run's runtime plus apply/setup overhead
    (1-4 s per local-fs evaluation on this kind of machine, MEASURING.md)."""
    return runs * (runtime + overhead)
