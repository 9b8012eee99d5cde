"""bo's trust region on a pool: the number of parameters a proposal may change from the
incumbent, shrunk by failures and grown by successes (TuRBO's rules, CASMOPOLITAN's distance)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from stortune.space import parse_space
from stortune.tuners import make_tuner
from stortune.tuners.trust import FAILURES, LEAST_ROWS, SUCCESSES, TrustRegion

BITS = 10
SPACE = parse_space(
    "name: bits\nparameters:\n"
    + "".join(f"  b{i}: {{type: ordinal, values: [0, 1], default: 0}}\n" for i in range(BITS))
)


def test_the_region_halves_after_failures_doubles_after_successes_and_restarts() -> None:
    region = TrustRegion(9)
    assert region.size == 5  # half the free parameters, rounded up
    region.update(1.0)  # the first best: nothing to compare with
    for _ in range(FAILURES):
        region.update(1.0)
    assert region.size == 2
    for step in range(SUCCESSES):
        region.update(2.0 + step)
    assert region.size == 4
    for _ in range(SUCCESSES):
        region.update(region._best + 1)  # type: ignore[operator]
    assert region.size == 8
    for _ in range(SUCCESSES):
        region.update(region._best + 1)  # type: ignore[operator]
    assert region.size == 9  # never more than every free parameter
    for _ in range(4 * FAILURES):  # 9 -> 4 -> 2 -> 1 -> 0: restart over the whole table
        region.update(0.0)
    assert region.size == 9
    assert TrustRegion(1).size == 2  # at least two


def test_the_region_counts_changed_parameters_and_widens_to_hold_enough_rows() -> None:
    grid = np.array(list(itertools.product((0.0, 1.0), repeat=BITS)))
    free = list(range(BITS))
    region = TrustRegion(BITS)
    centre = grid[0]
    region.size = 4
    inside = region.inside(grid, centre, free)
    assert np.array_equal(inside, grid.sum(axis=1) <= 4)
    region.size = 2  # only the free parameters count
    assert np.array_equal(region.inside(grid, centre, free[:3]), grid[:, :3].sum(axis=1) <= 2)
    region.size = 1  # 11 rows change at most one bit: too few, so two (56 rows)
    assert np.count_nonzero(region.inside(grid, centre, free)) == 56 >= LEAST_ROWS


def test_bo_proposes_on_a_pool_inside_its_region_around_the_incumbent() -> None:
    """A table of random values over ten bits (every row a config): each model proposal
    changes at most the region's size of bits from the best row so far (two when one bit
    holds fewer than the rows the region must hold). Without the region, bo's proposals here
    stray past it within the first ten (three bits changed where two were allowed)."""
    rng = np.random.default_rng(3)
    rows = [dict(zip([p.name for p in SPACE.parameters], bits, strict=True))
            for bits in itertools.product((0, 1), repeat=BITS)]  # fmt: skip
    value = {tuple(r.values()): float(v) for r, v in zip(rows, rng.random(len(rows)), strict=True)}
    tuner: Any = make_tuner("bo", SPACE, "max", seed=1, budget=30, pool=rows)
    seen: list[tuple[int, int]] = []
    original = tuner._maximise_over_pool

    def watched(score, free, encoded, y, rng) -> Any:  # noqa: ANN001
        config, point = original(score, free, encoded, y, rng)
        centre = encoded[int(np.argmax(y))]
        seen.append((int(np.abs(point - centre).sum()), tuner._trust.size))
        return config, point

    tuner._maximise_over_pool = watched
    for _ in range(30):
        config = tuner.ask()
        tuner.tell(config, value[tuple(config.values())])
    assert len(seen) >= 10
    assert all(changed <= max(size, 2) for changed, size in seen), seen
    assert min(size for _, size in seen) <= 2  # it shrank: a proposal from anywhere would
    # change more than two bits nine times in ten
