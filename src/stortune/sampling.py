"""Designs of experiments over a space: Latin hypercube, random, full factorial, Monte Carlo.

All of them return only valid configs. How each handles constraints:

* **lhs**: draws an LHS in the unit cube (`scipy.stats.qmc.LatinHypercube`), then *repairs*
  invalid rows by swapping one coordinate between an invalid row and another row. A swap keeps
  every column a permutation of the same strata, so the design stays exactly one sample per
  stratum per dimension. Rows that swaps cannot repair within the budget are *resampled*
  uniformly (the design's `repaired`/`resampled` counts say how many), which loses strict
  stratification for those rows only.
* **random**: independent uniform draws in the unit cube, invalid or duplicate configs rejected
  and drawn again.
* **monte_carlo**: independent uniform draws, invalid ones drawn again, duplicates kept (SeRRa's
  Monte Carlo choice of request sizes is of this kind).
* **factorial**: the full-factorial grid with conditions and constraints applied.

`random` and `factorial` can leave out configs measured before (`exclude`, a set of
`config_key`s), so a second sweep adds only new configs to a dataset.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stortune.bounds import MAX_SAMPLES
from stortune.errors import ConfigError, StortuneError
from stortune.space import Config, Constraint, Space

METHODS = ("lhs", "random", "montecarlo", "factorial")
UNIFORM_BATCH = 64  # uniform draws decoded together after a first one missed; grows
MAX_UNIFORM_BATCH = 1024  # fourfold up to this where valid draws are rare
MAX_GRID = 250_000  # configs of a whole factorial (before constraints): about a second to walk


@dataclass
class Design:
    """Sampled configs, their unit-cube points, and how constraint handling went."""

    configs: list[Config]
    points: np.ndarray
    method: str
    repaired: int = 0
    resampled: int = 0
    notes: list[str] = field(default_factory=list)


def sample(
    space: Space,
    method: str,
    n: int,
    seed: int | None = 0,
    levels: int = 3,
    exclude: set[str] | frozenset[str] = frozenset(),
) -> Design:
    """Dispatch by method name (one of METHODS); `exclude` only for random and factorial."""
    if exclude and method not in ("random", "factorial"):
        raise StortuneError(
            f"leaving out measured configs works with the random and factorial designs, "
            f"not {method!r}"
        )
    if method == "lhs":
        return latin_hypercube(space, n, seed)
    if method == "random":
        return random_configs(space, n, seed, exclude)
    if method == "montecarlo":
        return monte_carlo(space, n, seed)
    if method == "factorial":
        _check_n(n, least=0)
        raw = space.raw_grid_size(levels)
        if not n and raw > MAX_GRID:
            raise StortuneError(
                f"the full factorial of {space.name!r} has {count_text(raw)} configs before its "
                f"constraints: give how many to take (at most {MAX_SAMPLES:,}), or another design"
            )
        fresh = (c for c in space.grid(levels) if config_key(c) not in exclude)
        configs = list(itertools.islice(fresh, n or None))
        points = space.encode_many(configs)
        return Design(configs, points, "factorial")
    raise StortuneError(f"unknown sampling method {method!r} (choose from {', '.join(METHODS)})")


def latin_hypercube(space: Space, n: int, seed: int | None = 0) -> Design:
    """An n-point LHS design of valid configs (repair by swaps, see the module doc)."""
    _check_n(n)
    from scipy.stats import qmc  # scipy.stats takes a second to import: only when used

    rng = np.random.default_rng(seed)
    points = qmc.LatinHypercube(d=len(space), rng=rng).random(n)
    repair = _SwapRepair(space, points, rng)
    before = repair.invalid_count()
    repair.run()
    repaired = before - repair.invalid_count()
    resampled = 0
    for i in np.flatnonzero(~repair.valid):
        points[i] = _valid_uniform_point(space, rng)
        resampled += 1
    configs = [space.validate(c) for c in space.decode_many(points)]
    design = Design(configs, points, "lhs", repaired=repaired, resampled=resampled)
    if resampled:
        design.notes.append(
            f"{resampled} of {n} rows were resampled uniformly (constraints too tight for swaps)"
        )
    distinct = len({config_key(c) for c in configs})
    if distinct < n:
        design.notes.append(
            f"{n} rows hold {distinct} distinct configs (parameters with few levels repeat "
            f"combinations; the random design draws distinct ones)"
        )
    return design


class _SwapRepair:
    """Make invalid LHS rows valid by swapping one coordinate with another row.

    A row's score is the number of constraints it breaks. The coordinate moved is one that a
    broken constraint names, and several partner rows are tried for a swap that lowers the two
    rows' total score: a search that converges in a few passes even where only 1% of random rows
    are valid. Swapping keeps each column a permutation, so stratification is untouched. Decoded
    configs are cached and only the swapped coordinate is re-decoded (whole rows only when the
    parameter drives a condition).
    """

    PARTNERS = 12
    ROUNDS = 10
    STALL = 2
    BROKEN = 10**6  # the score of a row that cannot even be evaluated

    def __init__(self, space: Space, points: np.ndarray, rng: np.random.Generator) -> None:
        self.space, self.points, self.rng = space, points, rng
        self.n, self.d = points.shape
        self.index = {name: j for j, name in enumerate(space.names)}
        drivers = set().union(*(p.condition.names for p in space.parameters if p.condition))
        self.drives_condition = [p.name in drivers for p in space.parameters]
        self.values = space.values_at(points)  # per row, before conditions
        self.configs = [space.with_conditions(v) for v in self.values]
        # per row, each constraint's state (`_check`); a swap re-checks only the constraints
        # that name the swapped parameter (every one when it drives a condition)
        self.naming = [
            [
                c
                for c, constraint in enumerate(space.constraints)
                if p.name in constraint.expression.names
            ]
            for p in space.parameters
        ]
        self.states = [
            [self._check(c, config) for c in space.constraints] for config in self.configs
        ]
        self.scores = np.array([self._score_of(states) for states in self.states])

    @property
    def valid(self) -> np.ndarray:
        return self.scores == 0

    def invalid_count(self) -> int:
        return int((self.scores > 0).sum())

    def run(self) -> None:
        """Search until every row is valid, or for at most `ROUNDS` x n moves, or `STALL` x n
        moves without progress. Pairwise orderings such as ``a <= b`` between two stratified
        columns leave only near-sorted pairings valid, which local search rarely finds: the
        bounds keep the cost linear in n and the rows left over are resampled."""
        if self.n < 2:
            return
        stalled = 0
        for _ in range(self.ROUNDS * self.n):
            if not (self.scores > 0).any() or stalled >= self.STALL * self.n:
                break
            i = int(self.rng.choice(np.flatnonzero(self.scores > 0)))
            stalled = 0 if self._improve(i, self._dimension_to_move(i)) else stalled + 1

    def _dimension_to_move(self, i: int) -> int:
        states = self.states[i]
        broken = (
            []
            if self.ERROR in states
            else [c for c, state in zip(self.space.constraints, states, strict=True) if state]
        )
        if broken:
            names = sorted(broken[int(self.rng.integers(len(broken)))].expression.names)
            return self.index[names[int(self.rng.integers(len(names)))]]
        return int(self.rng.integers(self.d))

    def _improve(self, i: int, j: int) -> bool:
        """Try partners for a swap of coordinate j that lowers the pair's score and keep it.
        Failing that, keep a swap that leaves the score as it was (a plateau move, so that
        rows needing a chain of swaps can get there); returns whether the score fell."""
        neutral: int | None = None
        for k in self.rng.choice(self.n, size=min(self.PARTNERS, self.n), replace=False):
            k = int(k)
            if k == i:
                continue
            old = self.configs[i], self.configs[k]
            self._swap(i, k, j)
            states_i, states_k = self._rechecked(i, j), self._rechecked(k, j)
            score_i, score_k = self._score_of(states_i), self._score_of(states_k)
            total, before = score_i + score_k, self.scores[i] + self.scores[k]
            if total < before:
                self._keep(i, states_i)
                self._keep(k, states_k)
                return True
            if total == before and neutral is None:
                neutral = k
            self._swap(i, k, j)
            self.configs[i], self.configs[k] = old
        if neutral is not None:
            self._swap(i, neutral, j)
            self._keep(i, self._rechecked(i, j))
            self._keep(neutral, self._rechecked(neutral, j))
        return False

    def _swap(self, i: int, k: int, j: int) -> None:
        points = self.points  # element by element: a fancy-indexed swap costs ten times more
        points[i, j], points[k, j] = points[k, j], points[i, j]
        p = self.space.parameters[j]
        for row in (i, k):
            value = p.from_unit(points[row, j])
            self.values[row][p.name] = value
            if self.drives_condition[j]:
                self.configs[row] = self.space.with_conditions(self.values[row])
            elif p.name in self.configs[row]:
                self.configs[row][p.name] = value  # a swap back restores it the same way

    ERROR = -1  # a constraint that cannot be evaluated on the row

    def _check(self, constraint: Constraint, config: Config) -> int:
        """1 if the row breaks the constraint, 0 if it holds or names an inactive parameter,
        ERROR if it cannot be evaluated (`Constraint.broken_by`, as `Space.violations` sees it)."""
        try:
            return int(constraint.broken_by(config))
        except ConfigError:
            return self.ERROR

    def _rechecked(self, row: int, j: int) -> list[int]:
        """The row's constraint states after coordinate j changed."""
        constraints, config = self.space.constraints, self.configs[row]
        if self.drives_condition[j]:
            return [self._check(c, config) for c in constraints]
        states = list(self.states[row])
        for c in self.naming[j]:
            states[c] = self._check(constraints[c], config)
        return states

    def _keep(self, row: int, states: list[int]) -> None:
        self.states[row], self.scores[row] = states, self._score_of(states)

    def _score_of(self, states: list[int]) -> int:
        """The number of constraints the row breaks; BROKEN if one cannot be evaluated."""
        return self.BROKEN if self.ERROR in states else sum(states)


def random_configs(
    space: Space, n: int, seed: int | None = 0, exclude: set[str] | frozenset[str] = frozenset()
) -> Design:
    """n distinct valid configs drawn uniformly, none of them in `exclude` (fewer if the space has
    fewer)."""
    _check_n(n)
    rng = np.random.default_rng(seed)
    seen: set[str] = set(exclude)
    configs: list[Config] = []
    points: list[np.ndarray] = []
    misses = 0
    while len(configs) < n:
        point = _valid_uniform_point(space, rng)
        config = space.validate(space.decode(point))
        key = config_key(config)
        if key in seen:
            misses += 1
            if misses > 1000 + 100 * n:
                break  # the space has fewer distinct valid configs than asked for
            continue
        seen.add(key)
        configs.append(config)
        points.append(space.encode(config))
    design = Design(configs, np.array(points).reshape(len(points), len(space)), "random")
    if len(configs) < n:
        design.notes.append(f"only {len(configs)} distinct valid configs found")
    return design


def monte_carlo(space: Space, n: int, seed: int | None = 0) -> Design:
    """n independent uniform draws of valid configs (repeats allowed)."""
    _check_n(n)
    rng = np.random.default_rng(seed)
    points = np.array([_valid_uniform_point(space, rng) for _ in range(n)])
    configs = [space.validate(c) for c in space.decode_many(points.reshape(n, len(space)))]
    return Design(configs, points.reshape(n, len(space)), "montecarlo")


def config_key(config: Config) -> str:
    """A canonical text of a config: equal configs have equal keys (used to find repeats)."""
    return json.dumps({k: config[k] for k in sorted(config)}, sort_keys=True, default=str)


def _check_n(n: int, least: int = 1) -> None:
    if not least <= n <= MAX_SAMPLES:
        raise StortuneError(
            f"the number of samples must be at least {least} and at most {MAX_SAMPLES:,}, not {n:,}"
        )


def count_text(count: int) -> str:
    """A count as a reader takes it in: 4,096, or 3.1e+334 for a product of hundreds of
    parameters' levels (too large for a float, and for `str` past 4,300 digits)."""
    if count < 10**15:
        return f"{count:,}"
    exponent = math.floor(math.log10(count))
    mantissa = 10 ** (math.log10(count) - exponent)
    return f"{mantissa:.2g}e+{exponent}"


def _is_valid(space: Space, values: dict[str, Any]) -> bool:
    try:
        return space.first_violation(space.with_conditions(values)) is None
    except ConfigError:
        return False


def _valid_uniform_point(space: Space, rng: np.random.Generator, tries: int = 10_000) -> np.ndarray:
    """The first valid point among uniform draws. After a first draw alone (most spaces
    accept most draws), drawn and decoded a batch at a time; the generator is then left
    exactly where one-by-one draws would leave it (the first valid draw's successor), so a
    seeded design does not depend on the batch size."""
    start, batch = 0, 1
    while start < tries:
        state = rng.bit_generator.state
        points = rng.random((min(batch, tries - start), len(space)))
        for i, values in enumerate(space.values_at(points)):
            if _is_valid(space, values):
                rng.bit_generator.state = state
                rng.random((i + 1, len(space)))
                return points[i]
        start += len(points)
        batch = min(max(batch * 4, UNIFORM_BATCH), MAX_UNIFORM_BATCH)
    raise StortuneError(
        f"space {space.name!r}: no valid config found in {tries} uniform draws; "
        "its constraints may exclude (almost) everything"
    )
