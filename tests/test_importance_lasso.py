"""SAPPHIRE's Lasso ranking: preprocessing rules, path-entry and CV-coefficient rankings."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from stortune.datasets import from_frame
from stortune.errors import DatasetError
from stortune.importance import rank_lasso
from stortune.importance.lasso import prepare
from stortune.importance.synthetic import STRONG, additive_dataset


def test_lasso_recovers_the_strong_parameters() -> None:
    result = rank_lasso(additive_dataset(1000, seed=1))
    assert set(result.ranking[:2]) == set(STRONG)
    assert set(result.coef_ranking[:2]) == set(STRONG)
    assert result.entry_alpha[result.ranking[0]] >= result.entry_alpha[result.ranking[1]]
    assert sorted(result.ranking) == sorted(result.params)


def test_log10_only_for_positive_numeric_columns_and_metric() -> None:
    _, design = prepare(additive_dataset(200, seed=2))
    # block_kb, readahead and inode_size are > 0; queue_depth has zeros, skew negatives; the
    # categorical and boolean columns are never logged; the metric is positive.
    assert sorted(design.logged) == ["block_kb", "inode_size", "readahead", "throughput"]
    col = design.columns.index("block_kb")
    assert set(np.round(design.matrix[:, col], 6)) <= {0.0, 0.30103, 0.60206, 0.90309}


def test_metric_with_zeros_stays_untransformed() -> None:
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0, 5.0], "y": [0.0, 1.0, 2.0, 3.0, 4.0]})
    _, design = prepare(from_frame(frame, metrics=["y"]))
    assert design.logged == ["a"]
    assert design.y.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_one_hot_columns_group_back_to_their_parameter() -> None:
    result = rank_lasso(additive_dataset(400, seed=3))
    journal_cols = [
        c for c, p in zip(result.columns, result.column_param, strict=True) if p == "journal"
    ]
    assert journal_cols == ["journal=journal", "journal=ordered", "journal=writeback"]
    assert result.path.shape == (len(result.columns), len(result.alphas))


def test_constant_parameter_ranks_last() -> None:
    data = additive_dataset(300, seed=4)
    frame = data.frame.assign(fixed=7)
    result = rank_lasso(from_frame(frame, metrics=["throughput"]))
    assert result.ranking[-1] == "fixed"
    assert result.entry_alpha["fixed"] is None and result.coef["fixed"] == 0.0


def test_missing_values_take_the_median() -> None:
    data = additive_dataset(300, seed=5)
    frame = data.frame.copy()
    frame.loc[::10, "readahead"] = np.nan
    result = rank_lasso(from_frame(frame, metrics=["throughput"]))
    assert set(result.ranking[:2]) == set(STRONG)


def test_json_and_errors() -> None:
    result = rank_lasso(additive_dataset(100, seed=6))
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["method"] == "lasso" and "path" not in data
    flat = pd.DataFrame({"a": [1, 2, 3, 4], "y": [5.0, 5.0, 5.0, 5.0]})
    with pytest.raises(DatasetError, match="constant"):
        rank_lasso(from_frame(flat, metrics=["y"]))
