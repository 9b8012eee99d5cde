"""Carver's PI/CPI (eqs. 2-4), binning, greedy selection and its stop rules."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from stortune.datasets import from_frame
from stortune.errors import DatasetError
from stortune.importance import (
    conditional_importance,
    encode,
    fixed_sets,
    parameter_importance,
    rank_carver,
    rsd,
)
from stortune.importance.carver import PiCorrection, greedy_batch
from stortune.importance.synthetic import additive_dataset


def test_pi_matches_a_hand_computation_on_12_rows() -> None:
    # P = a: y = 2, 4, 4, 6    mean 4,  variance (4 + 0 + 0 + 4) / 4 = 2
    # P = b: y = 10, 10, 12, 8 mean 10, variance (0 + 0 + 4 + 4) / 4 = 2
    # P = c: y = 1, 3, 5, 7    mean 4,  variance (9 + 1 + 1 + 9) / 4 = 5
    # all:   mean 72 / 12 = 6, sum of squares 24 + 72 + 36 = 132, Var(S) = 132 / 12 = 11
    # eq. 2: PI = 11 - (4/12 * 2 + 4/12 * 2 + 4/12 * 5) = 11 - 3 = 8
    # levels correction: 3 levels on 12 rows take 2/11 of Var(S) by chance: 8 - 2/11 * 11 = 6
    values = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    y = [2, 4, 4, 6, 10, 10, 12, 8, 1, 3, 5, 7]
    assert parameter_importance(values, y, PiCorrection.NONE) == pytest.approx(8.0)
    assert parameter_importance(values, y) == pytest.approx(6.0)
    # Row order does not matter.
    order = np.random.default_rng(0).permutation(12)
    shuffled = parameter_importance([values[i] for i in order], [y[i] for i in order])
    assert shuffled == pytest.approx(6.0)


def test_pi_is_zero_for_a_parameter_with_one_value_or_no_effect() -> None:
    for correction in PiCorrection:
        assert parameter_importance(["x"] * 4, [1, 2, 3, 4], correction) == pytest.approx(0.0)
    no_effect = (["u", "v", "u", "v"], [1, 1, 5, 5])
    assert parameter_importance(*no_effect, PiCorrection.NONE) == pytest.approx(0.0)
    # Less than chance: 2 levels on 4 rows take 1/3 of Var(S) = 4 on average.
    assert parameter_importance(*no_effect) == pytest.approx(-4 / 3)


def test_cpi_is_the_max_over_the_given_values() -> None:
    # Q matters only where P = p1: CPI(Q | P) is CPI(Q | P = p1), not an average.
    raw = PiCorrection.NONE
    p = ["p0"] * 4 + ["p1"] * 4
    q = ["q0", "q1"] * 4
    y = [5, 5, 6, 6, 0, 10, 0, 10]
    at_p0 = parameter_importance(q[:4], y[:4], raw)  # 5, 5, 6, 6 by q: means 5.5 and 5.5 -> 0
    at_p1 = parameter_importance(q[4:], y[4:], raw)  # 0, 10, 0, 10 by q: Var 25, within 0 -> 25
    assert at_p0 == pytest.approx(0.0)
    assert at_p1 == pytest.approx(25.0)
    assert conditional_importance(q, y, given=[p], correction=raw) == pytest.approx(25.0)
    # Corrected, per cell: 25 - 1/3 * 25 at p1, below 0 at p0.
    assert conditional_importance(q, y, given=[p]) == pytest.approx(50 / 3)
    # Over several given parameters, the max runs over their value combinations.
    r = ["r0", "r0", "r1", "r1"] * 2
    cells = {(a, b): [i for i in range(8) if p[i] == a and r[i] == b] for a in p for b in r}
    expected = max(
        parameter_importance([q[i] for i in rows], [y[i] for i in rows], raw)
        for rows in cells.values()
    )
    assert conditional_importance(q, y, given=[p, r], correction=raw) == pytest.approx(expected)
    # Corrected, those cells of one row per level of q tell nothing.
    assert conditional_importance(q, y, given=[p, r]) == 0.0


def test_cpi_leaves_out_the_cells_that_tell_nothing() -> None:
    # Given p, the p0 cell has one row per level of q (it would score 0 by itself); the p1
    # cell's q does worse than chance. CPI is the p1 cell's negative score, not 0.
    p = ["p0", "p0", "p1", "p1", "p1", "p1"]
    q = ["q0", "q1", "q0", "q1", "q0", "q1"]
    y = [0, 10, 1, 1, 5, 5]
    at_p1 = parameter_importance(q[2:], y[2:])
    assert at_p1 < 0
    assert conditional_importance(q, y, given=[p]) == pytest.approx(at_p1)


def test_encode_bins_continuous_and_keeps_few_valued_numbers() -> None:
    frame = pd.DataFrame(
        {
            "cont": np.arange(100, dtype=float),
            "few": [1, 2, 4, 8] * 25,
            "cat": ["x", "y"] * 50,
            "gap": [np.nan, *range(99)],
        }
    )
    enc = encode(frame, ["cont", "few", "cat", "gap"], bins=4)
    assert list(enc.levels) == [4, 4, 2, 5]
    assert enc.labels[1] == ["1", "2", "4", "8"]
    assert np.bincount(enc.codes[:, 0]).tolist() == [25, 25, 25, 25]
    assert enc.labels[3][-1] == "NA"
    assert set(enc.edges) == {"cont", "gap"}
    assert list(encode(frame, ["few"], bins=3).levels) == [3]  # 4 values > 3 bins: binned


def test_greedy_recovers_the_known_parameters() -> None:
    result = rank_carver(additive_dataset(2000, seed=1), stop="top-n", top=3)
    assert result.selected == ["journal", "block_kb", "barrier"]
    first, second, third = result.steps
    assert first.kind == "PI" and second.kind == "CPI"
    # The interaction shows in CPI (given the journal mode), not in PI.
    assert first.scores["barrier"] < 1.0 < 5.0 < third.score
    assert third.at["journal"] == "writeback"
    assert result.stop == "top-n"
    assert result.direction == "max"


def test_rsd_stop_fires_once_the_best_cell_is_stable() -> None:
    result = rank_carver(additive_dataset(2000, seed=1), stop="rsd", rsd_threshold=0.02)
    assert result.stop == "rsd"
    assert result.selected == ["journal", "block_kb", "barrier"]
    assert result.steps[-1].best_rsd < 0.02 <= result.steps[-2].best_rsd
    assert result.steps[-1].best_values == {
        "journal": "writeback",
        "block_kb": "8",
        "barrier": "off",
    }


def test_rsd_stop_selects_nothing_for_a_flat_metric() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"a": rng.integers(0, 3, 200), "b": rng.integers(0, 3, 200)}
        | {"y": 1000 + rng.normal(0, 1, 200)}
    )
    result = rank_carver(from_frame(frame, metrics=["y"]))
    assert result.steps == [] and result.stop == "rsd"


def test_no_reduction_stop_when_no_parameter_separates_the_means() -> None:
    # A pure XOR interaction: every value of a and of b has the same mean, so no PI > 0.
    frame = pd.DataFrame({"a": [0, 0, 1, 1], "b": [0, 1, 0, 1], "y": [1.0, 2.0, 2.0, 1.0]})
    result = rank_carver(from_frame(frame, metrics=["y"]), stop="none")
    assert result.steps == [] and result.stop == "no-reduction"


def test_stop_none_runs_until_nothing_is_left() -> None:
    frame = pd.DataFrame({"a": [0, 0, 1, 1], "b": [0, 1, 0, 1], "y": [1.0, 2.0, 5.0, 7.0]})
    data = from_frame(frame, metrics=["y"])
    result = rank_carver(data, stop="none", correction="none")
    assert result.selected == ["a", "b"] and result.stop == "exhausted"
    # Corrected, b splits cells of one row per value: that tells nothing, so b is not picked.
    corrected = rank_carver(data, stop="none")
    assert corrected.selected == ["a"] and corrected.stop == "no-reduction"


def test_direction_is_carried_and_ranking_does_not_depend_on_it() -> None:
    frame = additive_dataset(500, seed=2).frame.rename(columns={"throughput": "latency"})
    lower = rank_carver(
        from_frame(frame, metrics=["latency"]).with_metric_direction("latency", "min"), stop="top-n"
    )
    higher = rank_carver(from_frame(frame, metrics=["latency"]), stop="top-n")
    assert lower.direction == "min" and higher.direction == "max"
    assert lower.selected == higher.selected
    assert lower.steps[0].best_mean < higher.steps[0].best_mean


def test_aliased_parameters_tie_to_the_first_column() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, 300)
    noise = rng.uniform(0, 1, 300)  # a null parameter, so that the 300 rows stay distinct
    frame = pd.DataFrame({"b": 1 - a, "a": a, "x": noise, "y": 10.0 * a + rng.normal(0, 1, 300)})
    assert rank_carver(from_frame(frame, metrics=["y"]), stop="top-n", top=1).selected == ["b"]


def test_corrected_pi_of_a_null_parameter_averages_zero_whatever_its_levels() -> None:
    # 4,000 sets of 26 rows of noise, split by a random 2-level and a random 8-level code.
    rng = np.random.default_rng(12)
    rows, trials, n = 50_000, 4000, 26
    codes = np.stack([rng.integers(0, 2, rows), rng.integers(0, 8, rows)], axis=1)
    y = rng.normal(0.0, 1.0, rows)
    index = np.stack([rng.choice(rows, n, replace=False) for _ in range(trials)])
    levels = np.array([2, 8])
    raw = greedy_batch(codes, levels, y, index, 1, correction=PiCorrection.NONE)[1][:, 0]
    corrected = greedy_batch(codes, levels, y, index, 1)[1][:, 0]
    # Uncorrected, k levels take about (k - 1)/(n - 1) of the variance by chance.
    assert raw.mean(axis=0) == pytest.approx([1 / 25, 7 / 25], rel=0.1)
    se = corrected.std(axis=0) / np.sqrt(trials)
    assert (np.abs(corrected.mean(axis=0)) < 3 * se).all()


@pytest.mark.parametrize("correction", list(PiCorrection))
def test_batch_matches_one_ranking_at_a_time(correction: PiCorrection) -> None:
    data = additive_dataset(400, seed=4)
    params = ["journal", "block_kb", "barrier", "scheduler", "discard", "inode_size"]
    # Distinct configurations: a one-off ranking averages repeated ones first.
    frame = data.frame[[*params, "throughput"]].drop_duplicates(params).reset_index(drop=True)
    enc = encode(frame, params)
    y = frame["throughput"].to_numpy()
    rng = np.random.default_rng(5)
    index = np.stack([rng.choice(len(frame), 30, replace=False) for _ in range(40)])
    picks, _ = greedy_batch(enc.codes, enc.levels, y, index, depth=3, correction=correction)
    for rows, batch in zip(index, picks, strict=True):
        one = rank_carver(
            from_frame(frame.iloc[rows].reset_index(drop=True), metrics=["throughput"]),
            stop="none",
            top=3,
            correction=correction,
        )
        assert [params[k] for k in batch if k >= 0] == one.selected


def test_result_is_json_ready() -> None:
    result = rank_carver(additive_dataset(300, seed=6), stop="top-n", top=2)
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["selected"] == result.selected
    assert data["steps"][0]["param"] == "journal"
    assert data["correction"] == "levels"


def test_fixed_sets_counts_one_point_per_value_and_pair() -> None:
    sets = fixed_sets(additive_dataset(600, seed=7), ["journal", "barrier"], max_fixed=2)
    assert (sets["n_fixed"] == 1).sum() == 3 + 2
    assert (sets["n_fixed"] == 2).sum() == 3 * 2
    assert sets["rsd"].between(0, 1).all()


def test_rsd_is_sample_std_over_mean() -> None:
    assert rsd(np.array([9.0, 11.0])) == pytest.approx(np.sqrt(2) / 10)
    assert np.isnan(rsd(np.array([5.0])))


def test_bad_options_are_user_errors() -> None:
    data = additive_dataset(50)
    with pytest.raises(DatasetError):
        rank_carver(data, stop="sometimes")
    with pytest.raises(DatasetError):
        rank_carver(data, bins=1)
    with pytest.raises(DatasetError):
        rank_carver(data, metric="nope")
    with pytest.raises(DatasetError, match="levels, none"):
        rank_carver(data, correction="sometimes")
