"""What a profile measures: request-size intervals, the Monte Carlo pick of sizes, the tasks.

SeRRa (Boito et al., SAC 2015; Bez et al., parallel SeRRa) saw that access time grows about
linearly with the request size inside a range of sizes, so it measures only a few sizes picked
at random in each interval and estimates the rest with a line. The paper's intervals are
8-64 KiB in steps of 8 KiB and 64 KiB-4 MiB in steps of 32 KiB (`DEFAULT_INTERVALS`). A `Task`
is one fio run (request size, access pattern, repetition): units that small balance well over
workers (the parallel paper found whole request sizes too coarse).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stortune.errors import ConfigError
from stortune.units import human_size, parse_size

KIB = 1024
PATTERNS = ("read", "randread", "write", "randwrite")  # fio's rw= names
OPERATIONS = {"read": ("read", "randread"), "write": ("write", "randwrite")}  # (seq, random)
ALIGN = 4 * KIB  # O_DIRECT needs sizes that are multiples of the logical block size


@dataclass(frozen=True, order=True)
class Interval:
    """Request sizes from `low` to `high` (both included) in steps of `step` bytes."""

    low: int
    high: int
    step: int

    def __post_init__(self) -> None:
        if self.step <= 0 or self.low <= 0 or self.high < self.low:
            raise ConfigError(f"interval {self}: need 0 < low <= high and step > 0")
        for value in (self.low, self.step):
            if value % ALIGN:
                raise ConfigError(
                    f"interval {self.label}: sizes must be multiples of {ALIGN // KIB} KiB "
                    "(O_DIRECT alignment)"
                )

    @property
    def sizes(self) -> list[int]:
        return list(range(self.low, self.high + 1, self.step))

    @property
    def label(self) -> str:
        return f"{human_size(self.low)}-{human_size(self.high)}/{human_size(self.step)}"

    def __contains__(self, size: object) -> bool:
        return isinstance(size, int) and self.low <= size <= self.high

    def to_list(self) -> list[int]:
        return [self.low, self.high, self.step]


DEFAULT_INTERVALS = (
    Interval(8 * KIB, 64 * KIB, 8 * KIB),
    Interval(64 * KIB, 4096 * KIB, 32 * KIB),
)
DEFAULT_INTERVALS_TEXT = "8k:64k:8k,64k:4m:32k"


def parse_intervals(text: str) -> tuple[Interval, ...]:
    """``"8k:64k:8k,64k:4m:32k"`` -> intervals (LOW:HIGH:STEP, comma-separated)."""
    out = []
    for part in text.split(","):
        fields = [f.strip() for f in part.split(":")]
        if len(fields) != 3 or not all(fields):
            raise ConfigError(f"interval {part.strip()!r}: write LOW:HIGH:STEP, e.g. 64k:4m:32k")
        out.append(Interval(*(parse_size(f) for f in fields)))
    if not out:
        raise ConfigError("give at least one interval")
    return tuple(out)


def grid(intervals: Iterable[Interval]) -> list[int]:
    """Every request size of the intervals, once, ascending."""
    return sorted({s for interval in intervals for s in interval.sizes})


def pick_sizes(intervals: Sequence[Interval], points: int, rng: random.Random) -> list[list[int]]:
    """Monte Carlo: `points` distinct sizes drawn at random from each interval's grid (all of
    them when the interval has fewer), stratified: one from each of `points` equal parts of
    the grid, so that the picks spread over the interval and its lines extrapolate little
    (two plain random picks fall in the same half of the interval half of the time)."""
    if points < 1:
        raise ConfigError(f"points per interval must be at least 1 (got {points})")
    picks = []
    for interval in intervals:
        sizes = interval.sizes
        if len(sizes) <= points:
            picks.append(sizes)
            continue
        edges = [round(k * len(sizes) / points) for k in range(points + 1)]
        picks.append([rng.choice(sizes[a:b]) for a, b in itertools.pairwise(edges)])
    return picks


@dataclass(frozen=True, order=True)
class Task:
    """One fio run: `pattern` (see `PATTERNS`) at request `size` bytes, repetition `rep`."""

    rep: int
    size: int
    pattern: str

    def key(self) -> tuple[int, str]:
        return (self.size, self.pattern)


def tasks_for(sizes: Iterable[int], reps: Iterable[int]) -> list[Task]:
    """Every pattern at every size for each repetition, repetition-major (a whole round of
    sizes before the next repetition, so that drift spreads over all sizes alike)."""
    unique = sorted(set(sizes))
    return [Task(rep, size, pattern) for rep in reps for size in unique for pattern in PATTERNS]
