"""The ranges a number a user gives may take, checked where it is read.

A number past its range fails far from where it was given: a seed of -1 inside NumPy, one of
10**20 in SQLite, a timeout of 1e308 in `subprocess`, a size of 99999999999t when the image is
allocated, NaN anywhere as a comparison that is never true. So each number is checked against a
range when the command line is read, and refused with one line that says the range. The ranges
are generous: they refuse what cannot work, never what is merely unusual.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from stortune.errors import ConfigError
from stortune.space.parameter import MAX_LEVELS
from stortune.units import MAX_SIZE, parse_size

SEED_MAX = 2**32 - 1  # NumPy's seeds are 32-bit words; one is enough
# Designs are for measuring, a config at a time: 10,000 configs take half a minute to draw and
# far longer than anyone measures; a bigger design only ties up the machine.
MAX_SAMPLES = 10_000
DAY = 86_400.0


@dataclass(frozen=True)
class Range:
    """Numbers from `low` to `high`; `above` makes `low` itself out of range; `whole` asks for
    an integer."""

    low: float
    high: float
    whole: bool = False
    above: bool = False

    def check(self, value: Any) -> Any:
        """`value` when it is a number in range, else one ConfigError line saying the range."""
        number = value
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise ConfigError(f"{self.text()}, not {value!r}")
        if self.whole and not isinstance(number, int):
            raise ConfigError(f"{self.text()}, not {value!r}")
        if isinstance(number, float) and not math.isfinite(number):
            raise ConfigError(f"{self.text()}, not {value}")
        too_low = number <= self.low if self.above else number < self.low
        if too_low or number > self.high:
            raise ConfigError(f"{self.text()}, not {_shown(number)}")
        return value

    def text(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        if self.above:
            return f"must be {kind} above {_shown(self.low)} and at most {_shown(self.high)}"
        return f"must be {kind} from {_shown(self.low)} to {_shown(self.high)}"


SEED = Range(0, SEED_MAX, whole=True)
COUNT = Range(1, 1_000_000, whole=True)  # evaluations, configs to sample
REPETITIONS = Range(1, 1000, whole=True)
ROUNDS = Range(0, 1000, whole=True)  # verification rounds (0: none)
EVERY = Range(0, 1_000_000, whole=True)  # every N evaluations (0: never)
SECONDS = Range(0, 10 * 365 * DAY, above=True)  # a time budget: ten years at most
TIMEOUT = Range(0, 30 * DAY, above=True)  # one run
RUNTIME = Range(0, 30 * DAY, above=True)  # what one run measures
WAIT = Range(0, 30 * DAY)  # waiting for a quiet machine
FRACTION = Range(0, 1, above=True)  # a share such as a confidence interval's half-width
SHARE = Range(0, 1)  # a share that may be 0 (no noise)
SAMPLES = Range(0, MAX_SAMPLES, whole=True)  # configs of a design (0: a factorial's all)
LEVELS = Range(1, MAX_LEVELS, whole=True)  # grid levels of a numeric parameter


def size(text: Any) -> Any:
    """`text` when it is a size stortune can use (``4g``, ``512m``), else one line why."""
    if text is None:
        return text
    parse_size(text)  # refuses what is no size, or more than MAX_SIZE
    return text


def _shown(number: float) -> str:
    if isinstance(number, float) and number.is_integer() and abs(number) < 1e15:
        number = int(number)
    if isinstance(number, int) and abs(number) >= 10**30:
        return f"{'-' if number < 0 else ''}a number of {len(str(abs(number)))} digits"
    return f"{number:,}" if isinstance(number, int) else f"{number:g}"


__all__ = ["MAX_SIZE", "Range", "size"]
