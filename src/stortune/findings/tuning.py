"""Tuning curves: a campaign's values in order of evaluation, the best so far after each, and
the same for the store's other campaigns that tuned the same space, workload and objective."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stortune.enums import CampaignKind, Direction
from stortune.measure.reference import is_reference
from stortune.store import Campaign, Store, Trial

MAX_SIBLINGS = 5


@dataclass
class Curve:
    """One campaign's evaluations (None: failed) and the best value after each (NaN: none yet)."""

    campaign: str
    tuner: str
    values: list[float | None]
    best: list[float]

    @property
    def final(self) -> float:
        return self.best[-1] if self.best else math.nan

    @property
    def reached(self) -> int | None:
        """The evaluation (1-based) that first reached the final best."""
        return next((i + 1 for i, v in enumerate(self.best) if v == self.final), None)

    @property
    def failed(self) -> list[int]:
        """The evaluations (0-based) without a value."""
        return [i for i, v in enumerate(self.values) if v is None]


def best_so_far(values: Sequence[float | None], direction: str) -> list[float]:
    """The best value after each evaluation (NaN until the first success)."""
    best: float | None = None
    curve = []
    for v in values:
        if v is not None and (best is None or Direction(direction).better(v, best)):
            best = v
        curve.append(best if best is not None else math.nan)
    return curve


def evaluation_values(trials: Sequence[Trial]) -> list[float | None]:
    """Each evaluation's value in order; reference-config trials are not evaluations."""
    return [t.value for t in trials if not is_reference(t)]


def tuning_curves(store: Store, campaign: Campaign, trials: Sequence[Trial]) -> list[Curve]:
    """The campaign's curve first, then its siblings' that have a value (an imported dataset
    has no order of evaluation: no curve)."""
    if campaign.kind == CampaignKind.DATASET or not trials:
        return []
    direction = campaign.direction
    mine = evaluation_values(trials)
    curves = [
        Curve(campaign.name, campaign.tuner or campaign.kind, mine, best_so_far(mine, direction))
    ]
    for other in siblings(store, campaign):
        values = evaluation_values(store.trials(other.id))
        if any(v is not None for v in values):
            curves.append(Curve(other.name, other.tuner, values, best_so_far(values, direction)))
    return curves


def siblings(store: Store, campaign: Campaign) -> list[Campaign]:
    """Tuning campaigns of the same space, workloads and objective (other tuners), the latest."""
    found = [
        o
        for o in store.campaigns()
        if o.name != campaign.name
        and o.kind == CampaignKind.TUNE
        and o.space_name == campaign.space_name
        and o.objective == campaign.objective
        and o.workload == campaign.workload
    ]
    return found[-MAX_SIBLINGS:]
