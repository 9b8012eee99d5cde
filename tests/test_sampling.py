import numpy as np
import pytest

from stortune.errors import StortuneError
from stortune.sampling import config_key, latin_hypercube, monte_carlo, random_configs, sample
from stortune.space import Space, parse_space

CONTINUOUS = """
name: c
parameters:
  a: {type: float, low: 0, high: 1, default: 0.5}
  b: {type: float, low: 1, high: 1000, log: true, default: 10}
  c: {type: float, low: -5, high: 5, default: 0}
"""

CONSTRAINED = (
    CONTINUOUS
    + """
constraints:
  - require: a + (c + 5) / 10 <= 1.2
"""
)


def strata_counts(points: np.ndarray) -> np.ndarray:
    n = len(points)
    return np.stack(
        [
            np.bincount(np.floor(points[:, j] * n).astype(int), minlength=n)
            for j in range(points.shape[1])
        ]
    )


def test_lhs_has_one_sample_per_stratum_per_dimension() -> None:
    space = parse_space(CONTINUOUS)
    design = latin_hypercube(space, 50, seed=3)
    # the points re-encoded from the configs, not the raw design: what the user gets
    encoded = np.array([space.encode(c) for c in design.configs])
    assert (strata_counts(encoded) == 1).all()


def test_lhs_repairs_constraints_by_swaps_and_stays_stratified() -> None:
    space = parse_space(CONSTRAINED)
    design = latin_hypercube(space, 40, seed=5)
    assert all(space.is_valid(c) for c in design.configs)
    assert design.repaired > 0 and design.resampled == 0
    encoded = np.array([space.encode(c) for c in design.configs])
    assert (strata_counts(encoded) == 1).all()


def test_the_repair_tracks_each_rows_broken_constraints_as_a_full_check_counts_them(
    toy_space: Space,
) -> None:
    """A swap re-checks only the constraints naming the swapped parameter (all of them when it
    drives a condition, as journal drives barrier's): what the repair keeps per row must stay
    what checking the row's config against every constraint gives."""
    from stortune.sampling import _SwapRepair

    rng = np.random.default_rng(3)
    repair = _SwapRepair(toy_space, rng.random((40, len(toy_space))), rng)
    repair.run()
    for config, score in zip(repair.configs, repair.scores, strict=True):
        assert score == len(toy_space.violations(config))
    assert repair.configs == [toy_space.decode(p) for p in repair.points]  # configs follow swaps
    assert 0 < repair.invalid_count() < 40  # swaps ran, and some rows are left to resample


def test_lhs_balances_discrete_values(toy_space: Space) -> None:
    design = latin_hypercube(toy_space.subspace(["journal", "commit", "inode_size"]), 30, seed=0)
    assert design.resampled == 0
    counts = {
        v: sum(c["journal"] == v for c in design.configs)
        for v in ("ordered", "writeback", "journal")
    }
    assert set(counts.values()) == {10}


def test_lhs_resamples_what_swaps_cannot_repair(toy_space: Space) -> None:
    # ratio_a + ratio_b <= 1 cuts the square in half: a stratified design cannot satisfy it in
    # every row, so some rows are resampled, and the design says so.
    design = latin_hypercube(toy_space, 30, seed=0)
    assert all(toy_space.is_valid(c) for c in design.configs)
    assert design.resampled > 0 and design.notes


def test_lhs_is_reproducible_by_seed(toy_space: Space) -> None:
    assert latin_hypercube(toy_space, 10, 7).configs == latin_hypercube(toy_space, 10, 7).configs
    assert latin_hypercube(toy_space, 10, 7).configs != latin_hypercube(toy_space, 10, 8).configs


def test_random_configs_are_valid_and_distinct(toy_space: Space) -> None:
    design = random_configs(toy_space, 200, seed=1)
    assert len(design.configs) == 200
    assert all(toy_space.is_valid(c) for c in design.configs)
    assert len({config_key(c) for c in design.configs}) == 200


def test_random_stops_at_the_number_of_distinct_configs() -> None:
    space = parse_space("name: s\nparameters:\n  a: {type: bool, default: true}\n")
    design = random_configs(space, 5, seed=0)
    assert len(design.configs) == 2
    assert design.notes


def test_monte_carlo_draws_independently(toy_space: Space) -> None:
    design = monte_carlo(toy_space, 100, seed=2)
    assert len(design.configs) == 100
    assert all(toy_space.is_valid(c) for c in design.configs)


def test_factorial_is_the_valid_grid(toy_space: Space) -> None:
    design = sample(toy_space, "factorial", 0, levels=2)
    assert len(design.configs) == toy_space.grid_size(2)


def test_impossible_constraints_give_a_clear_error() -> None:
    space = parse_space(CONTINUOUS + "constraints:\n  - require: a > 0.5 and a < 0.5 or a == 0.5\n")
    with pytest.raises(StortuneError, match="no valid config found"):
        random_configs(space, 3, seed=0)


def test_unknown_method_and_bad_n(toy_space: Space) -> None:
    with pytest.raises(StortuneError, match="unknown sampling method 'sobol'"):
        sample(toy_space, "sobol", 4)
    with pytest.raises(StortuneError, match="at least 1"):
        sample(toy_space, "lhs", 0)


FEW_LEVELS = """
name: few
parameters:
  a: {type: categorical, values: [x, y], default: x}
  b: {type: ordinal, values: [1, 2, 3], default: 1}
  c: {type: categorical, values: [p, q], default: p}
"""


def test_random_and_factorial_leave_out_excluded_configs() -> None:
    space = parse_space(FEW_LEVELS)
    everything = sample(space, "factorial", 0).configs
    measured = {config_key(c) for c in everything[:5]}
    rest = sample(space, "factorial", 0, exclude=measured).configs
    assert len(rest) == len(everything) - 5
    assert not {config_key(c) for c in rest} & measured
    drawn = sample(space, "random", 7, seed=1, exclude=measured)
    keys = [config_key(c) for c in drawn.configs]
    assert len(keys) == 7 == len(set(keys)) and not set(keys) & measured
    # asking for more than are left gives what is left, and says so
    short = sample(space, "random", 10, seed=1, exclude=measured)
    assert len(short.configs) == 7 and "only 7 distinct" in short.notes[0]


def test_exclusion_is_refused_for_designs_that_cannot_honour_it() -> None:
    space = parse_space(FEW_LEVELS)
    with pytest.raises(StortuneError, match="random and factorial designs, not 'lhs'"):
        sample(space, "lhs", 4, exclude={"{}"})


def test_lhs_over_few_levels_says_how_many_configs_are_distinct() -> None:
    design = latin_hypercube(parse_space(FEW_LEVELS), 12, seed=0)
    distinct = len({config_key(c) for c in design.configs})
    assert distinct < 12
    assert f"12 rows hold {distinct} distinct configs" in design.notes[-1]


@pytest.mark.parametrize("design", [latin_hypercube, random_configs, monte_carlo])
def test_a_seeded_design_does_not_depend_on_how_many_draws_are_decoded_together(
    design, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Valid uniform draws are looked for a batch at a time; the generator must be left where
    one draw at a time would leave it, or a seed would give other designs than it gave."""
    import stortune.sampling as sampling

    rare = CONSTRAINED.replace("<= 1.2", "<= 0.6").replace("default: 0.5", "default: 0.05")
    space = parse_space(rare)  # four in five uniform draws break the constraint
    batched = design(space, 30, 11).configs
    monkeypatch.setattr(sampling, "UNIFORM_BATCH", 1)
    monkeypatch.setattr(sampling, "MAX_UNIFORM_BATCH", 1)
    assert design(space, 30, 11).configs == batched
