"""A tuner's own copy of a space whose extendable bounds can grow: SAPPHIRE's dynamic bounds.

Declared ranges are guesses (often a band around the default), so a parameter that says
``extendable: true`` starts at its declared low/high and, when the incumbent or a promising
proposal comes within `margin` of a bound, that side grows by `grow` times the current width
(in log units for log parameters), never past ``hard_low``/``hard_high`` (SAPPHIRE Fig. 4).

The user's space is never touched: the copy has its own `Parameter` objects and keeps the
original's conditions and constraints, so the tuner searches and validates in the copy.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from stortune.space import Kind, Parameter, Space

MARGIN = 0.05
GROW = 0.5


@dataclasses.dataclass(frozen=True)
class Widening:
    """One growth step, kept for reports: which side of which parameter, to what range."""

    name: str
    side: str
    low: float
    high: float


class GrowableSpace:
    """`space` is the copy to search in; `widen_near` and `include` grow its bounds."""

    def __init__(self, space: Space, margin: float = MARGIN, grow: float = GROW) -> None:
        self.original = space
        self.margin = margin
        self.grow = grow
        root = space.root  # a subspace keeps its held values
        params = [dataclasses.replace(p) for p in root.parameters]
        copy = Space(root.name, params, root.constraints, root.description, root.source)
        held = getattr(space, "held", None)
        self.space = copy.subspace(space.names, held) if held is not None else copy
        self.widenings: list[Widening] = []

    @property
    def extendable(self) -> list[Parameter]:
        return [p for p in self.space.parameters if p.extendable and p.is_numeric]

    def widen_near(self, config: Mapping[str, Any]) -> list[Widening]:
        """Grow each extendable bound that a value of `config` is near (or beyond)."""
        done = []
        for p in self.extendable:
            if p.name not in config:
                continue
            u = _position(p, float(config[p.name]))
            if u <= self.margin:
                done += self._grow(p, "low")
            if u >= 1 - self.margin:
                done += self._grow(p, "high")
        return done

    def include(self, config: Mapping[str, Any]) -> None:
        """Grow bounds until they hold `config`'s values (a config told from elsewhere)."""
        for p in self.extendable:
            value = config.get(p.name)
            if value is None:
                continue
            for side in ("low", "high"):
                for _ in range(64):
                    outside = value < p.low if side == "low" else value > p.high
                    if not outside or not self._grow(p, side):
                        break

    def _grow(self, p: Parameter, side: str) -> list[Widening]:
        limit = p.hard_low if side == "low" else p.hard_high
        current = p.low if side == "low" else p.high
        if limit is not None and current == limit:
            return []
        sign = -1.0 if side == "low" else 1.0
        if p.log:
            width = math.log(p.high) - math.log(p.low) or math.log(2.0) / self.grow
            new = math.exp(math.log(current) + sign * self.grow * width)
        else:
            width = (p.high - p.low) or max(1.0, abs(current))
            new = current + sign * self.grow * width
        if p.kind is Kind.INT:
            new = math.floor(new) if side == "low" else math.ceil(new)
            if p.log:
                new = max(new, 1)
        if limit is not None:
            new = max(new, limit) if side == "low" else min(new, limit)
        if new == current:
            return []
        setattr(p, side, new)
        step = Widening(p.name, side, p.low, p.high)
        self.widenings.append(step)
        return [step]


def _position(p: Parameter, value: float) -> float:
    """Where `value` lies between low (0) and high (1): in log units for log parameters; not
    the cell-centred `to_unit`, so that the extreme value of an int counts as at its bound."""
    lo, hi = float(p.low), float(p.high)
    if p.log:
        value, lo, hi = math.log(max(value, 1e-300)), math.log(lo), math.log(hi)
    if hi == lo:
        return 0.0 if value <= lo else 1.0
    return (value - lo) / (hi - lo)
