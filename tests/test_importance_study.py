"""Carver's subsample study: subsets, success rates, methods."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from stortune.datasets import Dataset, from_frame
from stortune.errors import DatasetError
from stortune.importance import draw_subsets, rank_carver, study_dataset, subsample_study
from stortune.importance.study import subset_size
from stortune.importance.synthetic import INTERACTING, STRONG, additive_dataset


@pytest.fixture(scope="module")
def data() -> Dataset:
    return additive_dataset(2000, seed=11)


def test_carver_study_success_grows_to_one(data: Dataset) -> None:
    study = subsample_study(data, [0.005, 0.02, 0.5], trials=200, seed=1)
    assert study.truth == [*STRONG, INTERACTING]
    rates = study.success()
    assert rates.shape == (3, 3)
    assert (rates[-1] >= 0.99).all()
    assert rates[0, 0] < rates[-1, 0]
    assert study.sizes == [10, 40, 1000]
    assert [len(r) for r in study.rankings] == [200, 200, 200]


def test_success_against_another_truth(data: Dataset) -> None:
    study = subsample_study(data, [0.5], trials=20, seed=2)
    swapped = study.success([STRONG[1], STRONG[0], INTERACTING])
    assert swapped[0, 0] == 0.0 and swapped[0, 2] == 1.0


def test_lasso_study_and_a_custom_ranker_share_subsets(data: Dataset) -> None:
    lasso = subsample_study(data, [0.01, 0.5], trials=20, method="lasso", seed=3)
    assert set(lasso.truth[:2]) == set(STRONG)
    assert (lasso.success()[-1, :2] == 1.0).all()

    def carver_top(sub: Dataset) -> list[str]:
        return rank_carver(sub, stop="none", top=3).selected

    custom = subsample_study(data, [0.5], trials=5, method=carver_top, seed=3)
    assert custom.method == "carver_top"
    assert custom.truth == [*STRONG, INTERACTING]


def test_subsets_are_distinct_rows_and_prefix_stable() -> None:
    many = draw_subsets(100, 10, 8, seed=4)
    few = draw_subsets(100, 10, 3, seed=4)
    assert (many[:3] == few).all()
    assert all(len(set(row)) == 10 for row in many)
    assert draw_subsets(5, 5, 2).tolist() == [[0, 1, 2, 3, 4]] * 2


def test_subset_size_rounds_and_clamps() -> None:
    assert subset_size(7000, 0.001) == 7
    assert subset_size(100, 0.001) == 2
    assert subset_size(100, 1.0) == 100
    with pytest.raises(DatasetError):
        subset_size(100, 1.5)


def test_study_dataset_averages_repetitions(data: Dataset) -> None:
    doubled = Dataset(
        data.frame.iloc[np.r_[0:10, 0:10]], data.params, data.metrics, data.directions
    )
    assert len(study_dataset(doubled).frame) == 10


def test_study_json(data: Dataset) -> None:
    study = subsample_study(data, [0.01, 0.1], trials=10)
    out = json.loads(json.dumps(study.to_dict(), allow_nan=False))
    assert [row["size"] for row in out["rows"]] == [20, 200]
    assert len(out["rows"][0]["success"]) == 3


def test_ties_are_broken_at_random_not_by_column_order() -> None:
    # b is the complement of a: every subset splits the same way by either, so a study should
    # find "b" (first column, the full-data pick) about half the time, not always.
    rng = np.random.default_rng(8)
    a = rng.integers(0, 2, 400)
    noise = rng.uniform(0, 1, 400)  # a null parameter, so that the 400 rows stay distinct
    frame = pd.DataFrame({"b": 1 - a, "a": a, "x": noise, "y": 10.0 * a + rng.normal(0, 1, 400)})
    study = subsample_study(from_frame(frame, metrics=["y"]), [0.5], trials=400, depth=1)
    assert study.truth == ["b"]
    assert 0.35 < study.success()[0, 0] < 0.65


def test_a_strong_binary_parameter_beats_a_null_8_level_one_on_26_rows() -> None:
    # Uncorrected, 8 levels explain 7/25 of 26 rows' variance by chance, a binary split 1/25:
    # the null parameter often outranks a binary one that shifts the mean by 1.75 noise SD.
    rng = np.random.default_rng(0)
    n = 4000
    flag = rng.choice(["off", "on"], n)
    frame = pd.DataFrame(
        {
            "level8": rng.choice([f"l{i}" for i in range(8)], n),
            "flag": flag,
            "x": rng.uniform(0, 1, n),  # a null continuous parameter (4 bins)
            "y": 1.75 * (flag == "on") + rng.normal(0, 1, n),
        }
    )
    data = from_frame(frame, metrics=["y"])
    corrected = subsample_study(data, [26 / n], trials=1000, depth=1)
    raw = subsample_study(data, [26 / n], trials=1000, depth=1, correction="none")
    assert corrected.truth == raw.truth == ["flag"]
    assert corrected.sizes == [26] and corrected.correction == "levels"
    assert corrected.success()[0, 0] >= 0.95
    assert raw.success()[0, 0] <= 0.9
    assert np.mean(raw.rankings[0][:, 0] == 0) >= 0.08  # the 8-level null parameter
    assert np.mean(corrected.rankings[0][:, 0] == 0) <= 0.04
