"""Several objectives at once: Magpie's weighted linear scalarisation, and the Pareto front.

Each objective is a metric with a direction and a weight (``METRIC:max:2``). The score of a run
is ``sum w_i norm(P_i) / sum w_i``, with min-max normalisation over bounds per metric, flipped
for minimised metrics so that 1 is always best. Bounds are given (domain knowledge) or inferred
from measurements; inferred from a single reference (the default config), they are
[0, 2 x reference], so the default scores 0.5 and a metric twice as good as the default adds
what halving a latency does (Magpie II-A).

`ScalarizedTarget` wraps any target and adds the score to every run's metrics as ``score``: the
experiment loop then optimises it like any single metric, and the stored runs keep every
objective for the Pareto front (`pareto_front`) that reports show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stortune.errors import StortuneError
from stortune.space import Config, Space
from stortune.targets.base import Measurement, Target, Workload

SCORE = "score"


@dataclass(frozen=True)
class ObjectiveSpec:
    """A metric, whether larger (max) or smaller (min) is better, and its weight."""

    metric: str
    direction: str = "max"
    weight: float = 1.0

    @classmethod
    def parse(cls, text: str) -> ObjectiveSpec:
        """``METRIC``, ``METRIC:max``, ``METRIC:min:2`` (weight 2)."""
        parts = text.split(":")
        name = parts[0]
        direction = parts[1] if len(parts) > 1 and parts[1] else "max"
        try:
            weight = float(parts[2]) if len(parts) > 2 else 1.0
        except ValueError:
            weight = -1.0
        if not name or direction not in ("max", "min") or len(parts) > 3 or weight <= 0:
            raise StortuneError(
                f"objective {text!r}: write METRIC, METRIC:max|min or METRIC:max|min:WEIGHT "
                "(a positive weight)"
            )
        return cls(name, direction, weight)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "direction": self.direction, "weight": self.weight}


class Scalarizer:
    """Weighted sum of min-max normalised objectives (1 = best on every one)."""

    def __init__(
        self, objectives: Sequence[ObjectiveSpec], bounds: Mapping[str, tuple[float, float]]
    ) -> None:
        if not objectives:
            raise StortuneError("scalarisation needs at least one objective")
        missing = [o.metric for o in objectives if o.metric not in bounds]
        if missing:
            raise StortuneError(f"no normalisation bounds for {', '.join(missing)}")
        self.objectives = list(objectives)
        self.bounds = {k: (float(lo), float(hi)) for k, (lo, hi) in bounds.items()}

    @classmethod
    def around(
        cls, objectives: Sequence[ObjectiveSpec], reference: Mapping[str, float]
    ) -> Scalarizer:
        """Bounds [0, 2 x reference] (symmetric around a negative or zero reference)."""
        bounds = {}
        for o in objectives:
            if o.metric not in reference:
                raise StortuneError(f"the reference measurement has no metric {o.metric!r}")
            ref = float(reference[o.metric])
            half = abs(ref) or 1.0
            bounds[o.metric] = (ref - half, ref + half)
        return cls(objectives, bounds)

    @classmethod
    def from_data(
        cls, objectives: Sequence[ObjectiveSpec], rows: Sequence[Mapping[str, float]]
    ) -> Scalarizer:
        """Bounds from the smallest and largest value measured of each metric."""
        bounds = {}
        for o in objectives:
            values = [float(r[o.metric]) for r in rows if o.metric in r]
            if not values:
                raise StortuneError(f"no measurement of {o.metric!r} to take bounds from")
            lo, hi = min(values), max(values)
            bounds[o.metric] = (
                (lo, hi) if hi > lo else (lo - (abs(lo) or 1.0), hi + (abs(hi) or 1.0))
            )
        return cls(objectives, bounds)

    def normalise(self, metric: str, value: float, direction: str) -> float:
        lo, hi = self.bounds[metric]
        x = (value - lo) / (hi - lo)
        return x if direction == "max" else 1.0 - x

    def score(self, metrics: Mapping[str, float]) -> float:
        total = sum(o.weight for o in self.objectives)
        return (
            sum(
                o.weight * self.normalise(o.metric, metrics[o.metric], o.direction)
                for o in self.objectives
            )
            / total
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "objectives": [o.to_dict() for o in self.objectives],
            "bounds": {k: list(v) for k, v in self.bounds.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scalarizer:
        objectives = [ObjectiveSpec(**o) for o in data["objectives"]]
        return cls(objectives, {k: tuple(v) for k, v in data["bounds"].items()})


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """Whether `a` is at least as good as `b` on every objective and better on one."""
    signs = np.array([1.0 if d == "max" else -1.0 for d in directions])
    x, y = signs * np.asarray(a, dtype=float), signs * np.asarray(b, dtype=float)
    return bool((x >= y).all() and (x > y).any())


def pareto_front(points: Sequence[Sequence[float]], directions: Sequence[str]) -> list[int]:
    """Indices of the points no other point dominates (in input order)."""
    return [
        i
        for i, p in enumerate(points)
        if not any(dominates(q, p, directions) for j, q in enumerate(points) if j != i)
    ]


class ScalarizedTarget(Target):
    """Any target, with the scalarised score of its objectives added to each run's metrics."""

    kind = "scalarized"

    def __init__(self, inner: Target, scalarizer: Scalarizer) -> None:
        self.inner = inner
        self.scalarizer = scalarizer
        self.measures_machine = inner.measures_machine

    @classmethod
    def from_spec(cls, spec: dict[str, Any], space: Space) -> ScalarizedTarget:
        from stortune.targets import make_target

        return cls(make_target(spec["inner"], space), Scalarizer.from_dict(spec["scalarizer"]))

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "inner": self.inner.describe(),
            "scalarizer": self.scalarizer.to_dict(),
        }

    def setup(self) -> None:
        self.inner.setup()

    def teardown(self) -> None:
        self.inner.teardown()

    def apply(self, config: Config) -> None:
        self.inner.apply(config)

    def state(self) -> dict[str, float]:
        return self.inner.state()

    def run(self, workload: Workload | None, timeout: float | None = None) -> Measurement:
        measurement = self.inner.run(workload, timeout)
        if not measurement.ok:
            return measurement
        missing = [
            o.metric for o in self.scalarizer.objectives if o.metric not in measurement.metrics
        ]
        if missing:
            return Measurement.failed(
                f"the run reported no metric {', '.join(map(repr, missing))} to scalarise",
                **measurement.info,
            )
        measurement.metrics[SCORE] = self.scalarizer.score(measurement.metrics)
        return measurement
