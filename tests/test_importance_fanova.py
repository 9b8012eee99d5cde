"""fANOVA through Optuna: one ranking, subsets of one dataset, the study's trial cap."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from stortune.datasets import Dataset, from_frame
from stortune.errors import DatasetError
from stortune.importance import rank_fanova, study_dataset, subsample_study
from stortune.importance import study as study_module
from stortune.importance.fanova import subset_ranker
from stortune.importance.synthetic import STRONG, additive_dataset


@pytest.fixture(scope="module")
def data() -> Dataset:
    return additive_dataset(150, seed=31)


def test_ranks_the_known_parameters_first(data: Dataset) -> None:
    result = rank_fanova(data)
    assert result.ranking[:2] == list(STRONG)
    assert sorted(result.ranking) == sorted(data.params)
    assert sum(result.importance.values()) == pytest.approx(1.0)
    out = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert out["method"] == "fanova" and out["max_depth"] == 8


def test_a_constant_parameter_ranks_last_with_no_importance(data: Dataset) -> None:
    frame = data.frame.assign(fixed=7)
    result = rank_fanova(Dataset(frame, [*data.params, "fixed"], data.metrics, data.directions))
    assert result.ranking[-1] == "fixed" and result.importance["fixed"] == 0.0


def test_a_constant_metric_is_a_user_error() -> None:
    frame = pd.DataFrame({"a": [1, 2, 3, 4], "b": ["x", "y", "x", "y"], "y": [5.0] * 4})
    with pytest.raises(DatasetError, match="constant"):
        rank_fanova(from_frame(frame, metrics=["y"]))


def test_subsets_keep_the_whole_data_ranges_and_a_flat_subset_gets_no_ranking(
    data: Dataset,
) -> None:
    rows = study_dataset(data)
    ranker = subset_ranker(rows)
    sub = Dataset(rows.frame.iloc[:60].reset_index(drop=True), rows.params, rows.metrics)
    assert ranker(sub)[0] in STRONG
    flat = sub.frame.assign(**{rows.metrics[0]: 1.0})
    assert ranker(Dataset(flat, rows.params, rows.metrics)) == []


def test_the_study_caps_fanova_trials(data: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(study_module, "FANOVA_TRIALS", 2)
    study = subsample_study(data, [0.5], trials=5, method="fanova", depth=2)
    assert [len(r) for r in study.rankings] == [2]
    assert study.method == "fanova" and study.correction is None
    assert study.truth == list(STRONG)
    assert np.isfinite(study.success()).all()
