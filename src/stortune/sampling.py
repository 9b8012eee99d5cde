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
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import qmc

from stortune.errors import ConfigError, StortuneError
from stortune.space import Config, Space

METHODS = ("lhs", "random", "montecarlo", "factorial")


@dataclass
class Design:
    """Sampled configs, their unit-cube points, and how constraint handling went."""

    configs: list[Config]
    points: np.ndarray
    method: str
    repaired: int = 0
    resampled: int = 0
    notes: list[str] = field(default_factory=list)


def sample(space: Space, method: str, n: int, seed: int | None = 0, levels: int = 3) -> Design:
    """Dispatch by method name (one of METHODS)."""
    if method == "lhs":
        return latin_hypercube(space, n, seed)
    if method == "random":
        return random_configs(space, n, seed)
    if method == "montecarlo":
        return monte_carlo(space, n, seed)
    if method == "factorial":
        configs = list(space.grid(levels))
        if n:
            configs = configs[:n]
        points = np.array([space.encode(c) for c in configs]).reshape(len(configs), len(space))
        return Design(configs, points, "factorial")
    raise StortuneError(f"unknown sampling method {method!r} (choose from {', '.join(METHODS)})")


def latin_hypercube(
    space: Space, n: int, seed: int | None = 0, max_swaps: int | None = None
) -> Design:
    """An n-point LHS design of valid configs (repair by swaps, see the module doc)."""
    _check_n(n)
    rng = np.random.default_rng(seed)
    points = qmc.LatinHypercube(d=len(space), rng=rng).random(n)
    valid = np.array([_is_valid_point(space, p) for p in points], dtype=bool)
    swaps_left = max_swaps if max_swaps is not None else 200 * n * max(1, len(space))
    before = int((~valid).sum())
    stalled, stall_limit = 0, 50 * n
    while not valid.all() and swaps_left > 0 and stalled < stall_limit and n > 1:
        swaps_left -= 1
        stalled += 1
        i = int(rng.choice(np.flatnonzero(~valid)))
        k = int(rng.integers(n - 1))
        k = k + 1 if k >= i else k
        j = int(rng.integers(len(space)))
        points[[i, k], j] = points[[k, i], j]
        ok_i, ok_k = _is_valid_point(space, points[i]), _is_valid_point(space, points[k])
        if ok_i + ok_k < valid[i] + valid[k]:
            points[[i, k], j] = points[[k, i], j]  # undo: it made things worse
            continue
        if ok_i + ok_k > valid[i] + valid[k]:
            stalled = 0
        valid[i], valid[k] = ok_i, ok_k
    repaired = before - int((~valid).sum())
    resampled = 0
    for i in np.flatnonzero(~valid):
        points[i] = _valid_uniform_point(space, rng)
        resampled += 1
    configs = [space.validate(space.decode(p)) for p in points]
    design = Design(configs, points, "lhs", repaired=repaired, resampled=resampled)
    if resampled:
        design.notes.append(
            f"{resampled} of {n} rows were resampled uniformly (constraints too tight for swaps)"
        )
    return design


def random_configs(space: Space, n: int, seed: int | None = 0) -> Design:
    """n distinct valid configs drawn uniformly (fewer if the space has fewer)."""
    _check_n(n)
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
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
    configs = [space.validate(space.decode(p)) for p in points]
    return Design(configs, points.reshape(n, len(space)), "montecarlo")


def config_key(config: Config) -> str:
    """A canonical text of a config: equal configs have equal keys (used to find repeats)."""
    return json.dumps({k: config[k] for k in sorted(config)}, sort_keys=True, default=str)


def _check_n(n: int) -> None:
    if n < 1:
        raise StortuneError(f"the number of samples must be at least 1, not {n}")


def _is_valid_point(space: Space, point: np.ndarray) -> bool:
    try:
        return space.first_violation(space.decode(point)) is None
    except ConfigError:
        return False


def _valid_uniform_point(space: Space, rng: np.random.Generator, tries: int = 10_000) -> np.ndarray:
    for _ in range(tries):
        point = rng.random(len(space))
        if _is_valid_point(space, point):
            return point
    raise StortuneError(
        f"space {space.name!r}: no valid config found in {tries} uniform draws; "
        "its constraints may exclude (almost) everything"
    )
