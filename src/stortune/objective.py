"""What a campaign optimises: one metric, or several combined by Magpie's scalarisation.

Each objective is a metric with a direction and a weight (``METRIC:max:2``). Several are combined
into one score per run, ``sum w_i norm(P_i) / sum w_i``, with min-max normalisation over bounds
per metric, flipped for minimised metrics so that 1 is always best. Bounds are given (domain
knowledge) or taken around the default config's measurement: [0, 2 x reference], so the default
scores 0.5 and a metric twice as good as the default adds what halving a latency does (Magpie
II-A). Runs keep their raw metrics; the score is computed when a run is read, so bounds found
after the default's runs still score them, and every objective stays there for the Pareto front.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from stortune.enums import Direction
from stortune.errors import StortuneError

SCORE = "score"  # the metric name of a scalarised objective


@dataclass(frozen=True)
class ObjectiveSpec:
    """A metric, whether larger (max) or smaller (min) is better, and its weight."""

    metric: str
    direction: Direction = Direction.MAX
    weight: float = 1.0

    @classmethod
    def parse(cls, text: str) -> ObjectiveSpec:
        """``METRIC``, ``METRIC:max``, ``METRIC:min:2`` (weight 2)."""
        parts = text.split(":")
        name = parts[0].strip()
        direction = parts[1] if len(parts) > 1 and parts[1] else "max"
        try:
            weight = float(parts[2]) if len(parts) > 2 else 1.0
        except ValueError:
            weight = -1.0
        if (
            not name
            or direction not in ("max", "min")
            or len(parts) > 3
            or not math.isfinite(weight)
            or weight <= 0
        ):
            raise StortuneError(
                f"objective {text!r}: write METRIC, METRIC:max|min or METRIC:max|min:WEIGHT "
                "(a positive weight)"
            )
        return cls(name, Direction(direction), weight)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "direction": str(self.direction), "weight": self.weight}


@dataclass(frozen=True)
class Guardrail:
    """A metric that must not get worse than `tolerance` (a share: 0.1 allows 0.90x) while the
    objective improves: the data files' IOPS beside a database's commits, say. A config that
    wins the objective but breaks a guardrail is a trade-off, never a plain gain."""

    metric: str
    direction: Direction = Direction.MAX
    tolerance: float = 0.1

    @classmethod
    def parse(cls, text: str) -> Guardrail:
        """``METRIC:max|min`` or ``METRIC:max|min:SHARE``, SHARE as ``10%`` or ``0.1``."""
        parts = [p.strip() for p in text.split(":")]
        share = parts[2] if len(parts) > 2 else "10%"
        try:
            tolerance = float(share[:-1]) / 100 if share.endswith("%") else float(share)
        except ValueError:
            tolerance = math.nan
        if (
            len(parts) not in (2, 3)
            or not parts[0]
            or parts[1] not in ("max", "min")
            or not 0 <= tolerance < 1
        ):
            raise StortuneError(
                f"guardrail {text!r}: write METRIC:max|min[:SHARE], SHARE the regression "
                "allowed (10% or 0.1, below 100%)"
            )
        return cls(parts[0], Direction(parts[1]), tolerance)

    @property
    def floor(self) -> float:
        """The lowest ratio (candidate over default, oriented so that above 1 is better) the
        guardrail accepts."""
        return 1.0 - self.tolerance

    def text(self) -> str:
        return f"{self.metric}:{self.direction}:{self.tolerance:.0%}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "direction": str(self.direction),
            "tolerance": self.tolerance,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Guardrail:
        return cls(
            str(data["metric"]),
            Direction(data.get("direction", "max")),
            float(data.get("tolerance", 0.1)),
        )


@dataclass
class Scalarizer:
    """Weighted sum of min-max normalised objectives (1 = best on every one); `bounds` may
    lack metrics until the default config has been measured (`around`)."""

    objectives: list[ObjectiveSpec]
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.objectives:
            raise StortuneError("scalarisation needs at least one objective")
        self.bounds = {k: (float(lo), float(hi)) for k, (lo, hi) in self.bounds.items()}
        for name, (lo, hi) in self.bounds.items():
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise StortuneError(f"bounds of {name}: LOW must be below HIGH, both finite")

    @property
    def complete(self) -> bool:
        return all(o.metric in self.bounds for o in self.objectives)

    def around(self, reference: Mapping[str, float]) -> Scalarizer:
        """Bounds [0, 2 x reference] (symmetric around a negative or zero reference) for the
        metrics without given bounds."""
        bounds = dict(self.bounds)
        for o in self.objectives:
            if o.metric in bounds:
                continue
            if o.metric not in reference:
                raise StortuneError(f"the default config's runs have no metric {o.metric!r}")
            ref = float(reference[o.metric])
            half = abs(ref) or 1.0
            bounds[o.metric] = (ref - half, ref + half)
        return Scalarizer(self.objectives, bounds)

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
        return cls(list(objectives), bounds)

    def normalise(self, metric: str, value: float, direction: Direction) -> float:
        lo, hi = self.bounds[metric]
        x = (value - lo) / (hi - lo)
        return x if direction == Direction.MAX else 1.0 - x

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
        objectives = [
            ObjectiveSpec(o["metric"], Direction(o.get("direction", "max")), o.get("weight", 1.0))
            for o in data["objectives"]
        ]
        return cls(objectives, {k: tuple(v) for k, v in data.get("bounds", {}).items()})


@dataclass(frozen=True)
class Objective:
    """What to optimise: a metric and its direction, or (`scalarizer`) several metrics
    combined into the score, which is maximised."""

    metric: str
    direction: Direction = Direction.MAX
    scalarizer: Scalarizer | None = None
    guardrails: tuple[Guardrail, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Objective:
        """``metric`` or ``metric:max`` / ``metric:min``."""
        spec = ObjectiveSpec.parse(text)
        if spec.weight != 1.0:
            raise StortuneError(f"objective {text!r}: a weight needs several objectives")
        return cls(spec.metric, spec.direction)

    @classmethod
    def of(
        cls, texts: Sequence[str], bounds: Mapping[str, tuple[float, float]] | None = None
    ) -> Objective:
        """One objective, or several scalarised (bounds given now or taken later around the
        default config's runs)."""
        specs = [ObjectiveSpec.parse(t) for t in texts]
        if not specs:
            raise StortuneError("give an objective: --objective METRIC[:max|min]")
        names = [s.metric for s in specs]
        if len(set(names)) < len(names):
            raise StortuneError(f"an objective is named twice: {', '.join(names)}")
        unknown = sorted(set(bounds or {}) - set(names))
        if unknown:
            raise StortuneError(f"--bounds for {', '.join(unknown)}, which is no objective")
        if len(specs) == 1:
            if bounds:
                raise StortuneError("--bounds are for several objectives")
            return cls(specs[0].metric, specs[0].direction)
        return cls(SCORE, Direction.MAX, Scalarizer(specs, dict(bounds or {})))

    @property
    def measured(self) -> list[str]:
        """The metrics a run must report."""
        if self.scalarizer is None:
            return [self.metric]
        return [o.metric for o in self.scalarizer.objectives]

    @property
    def directions(self) -> dict[str, Direction]:
        """Each metric's direction: the measured metrics' and the guardrails'."""
        guarded = {g.metric: g.direction for g in self.guardrails}
        if self.scalarizer is not None:
            return guarded | {o.metric: o.direction for o in self.scalarizer.objectives}
        return guarded | ({self.metric: self.direction} if self.metric else {})

    @property
    def needs_bounds(self) -> bool:
        return self.scalarizer is not None and not self.scalarizer.complete

    def value(self, metrics: Mapping[str, Any]) -> float | None:
        """The objective's value in one run's metrics (None: a metric is missing or not a
        finite number, or the scalarisation still lacks bounds)."""
        if self.scalarizer is None:
            return _finite(metrics.get(self.metric))
        if not self.scalarizer.complete:
            return None
        values = {m: _finite(metrics.get(m)) for m in self.measured}
        if any(v is None for v in values.values()):
            return None
        return self.scalarizer.score(values)  # type: ignore[arg-type]

    def with_bounds_around(self, reference: Mapping[str, float]) -> Objective:
        if self.scalarizer is None:
            return self
        return replace(self, scalarizer=self.scalarizer.around(reference))

    def with_guardrails(self, guardrails: Sequence[Guardrail]) -> Objective:
        """This objective with `guardrails` (a guardrail on the objective's own metric is
        dropped: the objective itself is judged already)."""
        kept = tuple(g for g in guardrails if g.metric not in self.measured)
        return replace(self, guardrails=kept)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric, "direction": str(self.direction)}
        if self.scalarizer is not None:
            out["scalarizer"] = self.scalarizer.to_dict()
        if self.guardrails:
            out["guardrails"] = [g.to_dict() for g in self.guardrails]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Objective:
        scalarizer = data.get("scalarizer")
        return cls(
            str(data.get("metric", "")),
            Direction(data.get("direction", "max")),
            Scalarizer.from_dict(scalarizer) if scalarizer else None,
            tuple(Guardrail.from_dict(g) for g in data.get("guardrails") or ()),
        )

    def text(self) -> str:
        if self.scalarizer is None:
            return f"{self.metric}:{self.direction}"
        parts = [f"{o.metric}:{o.direction}:{o.weight:g}" for o in self.scalarizer.objectives]
        return "score of " + ", ".join(parts)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def combine_workloads(means: Sequence[float]) -> float:
    """One objective value from per-workload means: their geometric mean when all are positive
    (so each workload counts by its ratio, whatever its scale), else the arithmetic mean. One
    workload's mean is its value as it is: exp(log(m)) would be off in the last bit, and a tuner
    that breaks ties by exact values (FLASH's tree) would propose otherwise."""
    if len(means) == 1:
        return float(means[0])
    if all(m > 0 for m in means):
        return float(math.exp(sum(math.log(m) for m in means) / len(means)))
    return float(sum(means) / len(means))


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[Direction]) -> bool:
    """Whether `a` is at least as good as `b` on every objective and better on one."""
    signs = np.array([Direction(d).sign for d in directions])
    x, y = signs * np.asarray(a, dtype=float), signs * np.asarray(b, dtype=float)
    return bool((x >= y).all() and (x > y).any())


def pareto_front(points: Sequence[Sequence[float]], directions: Sequence[Direction]) -> list[int]:
    """Indices of the points no other point dominates (in input order)."""
    return [
        i
        for i, p in enumerate(points)
        if not any(dominates(q, p, directions) for j, q in enumerate(points) if j != i)
    ]


def parse_bounds(items: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``["bw=0:500", ...]`` -> ``{"bw": (0.0, 500.0)}``: normalisation bounds as written."""
    out: dict[str, tuple[float, float]] = {}
    for item in items:
        name, _, rest = item.partition("=")
        low, _, high = rest.partition(":")
        try:
            bounds = (float(low), float(high))
        except ValueError:
            raise StortuneError(f"--bounds {item!r}: write METRIC=LOW:HIGH") from None
        if not (math.isfinite(bounds[0]) and math.isfinite(bounds[1]) and bounds[0] < bounds[1]):
            raise StortuneError(f"--bounds {item!r}: LOW must be below HIGH, both finite")
        out[name.strip()] = bounds
    return out
