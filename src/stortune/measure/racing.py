"""Racing a challenger against the incumbent, so that noise does not pick the winner.

A tuner's best single run is the winner's curse: on a machine whose runs vary by 5-10%, the
config that measured highest once is often a lucky draw (MEASURING.md; the Ceph campaign's best
run re-measured 22% lower). Intensification (SMAC) and racing (irace) answer it the same way:
a challenger replaces the incumbent only after beating it on the same number of repetitions
with a stated confidence.

Here the race is paired: each step measures the challenger and the incumbent, one run each,
next to each other in time, so the slow drift of these machines cancels in the step's ratio;
the challenger goes first in even steps and second in odd ones, so that the place in the order
cancels too. The decision is on the log-ratios d = log(challenger / incumbent) (sign-flipped for a
minimised metric): with n pairs, mean d̄ and the pooled spread s of every race so far, the
challenger

- wins when d̄ - t·s/√n > 0 and n >= 2 (it replaces the incumbent),
- loses when d̄ + t·s/√n < 0 (it is dropped early, often after one pair),
- and is otherwise measured again, up to `max_pairs`; a challenger not proven better by then
  leaves the incumbent in place.

Every step also re-measures the incumbent, so an incumbent that was lucky loses its lead as
its runs accumulate. The spread is pooled over all races (within-race deviations), with a prior
of 10% until a few pairs have been seen, so a single pair can already reject a clearly worse
config.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from stortune.stats import t_quantile

PRIOR_SPREAD = 0.10  # log-ratio spread assumed before the races have shown their own
PRIOR_WEIGHT = 3  # degrees of freedom the prior counts for


class Verdict(StrEnum):
    WINS = "wins"  # replaces the incumbent
    LOSES = "loses"  # worse beyond the noise
    UNPROVEN = "unproven"  # not shown better within the pairs allowed: the incumbent stays
    BREAKS_GUARDRAIL = "breaks guardrail"  # won on the objective, a guardrail fell too far
    FAILED = "failed"  # the challenger did not run
    FIRST = "first"  # the first config: incumbent without a race
    # beat the incumbent it raced, but a race that ended meanwhile crowned a better one (a
    # cluster's races overlap): the incumbent stays
    OUTRUN = "outrun"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict | None  # None: measure another pair
    mean: float  # mean log-ratio so far
    half_width: float


def log_ratio(challenger: float, incumbent: float, maximise: bool) -> float | None:
    """log(challenger / incumbent), positive when the challenger is better (None: a value
    that is not positive cannot be compared by ratio)."""
    if challenger <= 0 or incumbent <= 0:
        return None
    d = math.log(challenger / incumbent)
    return d if maximise else -d


def pooled_spread(races: Iterable[Sequence[float]]) -> tuple[float, int]:
    """The within-race standard deviation of log-ratios over every race with two pairs or
    more, shrunk towards the prior; and its degrees of freedom."""
    ss, df = 0.0, 0
    for d in races:
        if len(d) >= 2:
            mean = sum(d) / len(d)
            ss += sum((x - mean) ** 2 for x in d)
            df += len(d) - 1
    spread = math.sqrt((ss + PRIOR_WEIGHT * PRIOR_SPREAD**2) / (df + PRIOR_WEIGHT))
    return spread, df + PRIOR_WEIGHT


def decide(
    pairs: Sequence[float],
    spread: float,
    dof: int,
    max_pairs: int,
    confidence: float = 0.9,
) -> Decision:
    """What the race's log-ratios so far say (module doc); `confidence` is one-sided."""
    n = len(pairs)
    if n == 0:
        return Decision(None, 0.0, math.inf)
    mean = sum(pairs) / n
    half = t_quantile(confidence, max(1, dof)) * spread / math.sqrt(n)
    if mean + half < 0:
        return Decision(Verdict.LOSES, mean, half)
    if n >= 2 and mean - half > 0:
        return Decision(Verdict.WINS, mean, half)
    if n >= max_pairs:
        return Decision(Verdict.UNPROVEN, mean, half)
    return Decision(None, mean, half)
