"""`plain`: numpy and pandas values, paths and containers of them as plain Python; and a table
cell as a config value (`config_value`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from stortune.datasets import INACTIVE, config_value
from stortune.values import plain


def test_numpy_scalars_become_python_ones() -> None:
    for value, expected, kind in [
        (np.int64(4096), 4096, int),
        (np.float64(0.5), 0.5, float),
        (np.bool_(True), True, bool),
        (np.str_("xfs"), "xfs", str),
    ]:
        made = plain(value)
        assert made == expected and type(made) is kind


def test_containers_are_walked_and_tuples_become_lists() -> None:
    value = {
        "sizes": np.array([4, 8]),
        "pair": (np.int64(1), Path("/mnt/a")),
        "nested": [{"on": np.bool_(False)}],
        "column": pd.Series([1.5, 2.5]),
    }
    made = plain(value)
    assert made == {
        "sizes": [4, 8],
        "pair": [1, "/mnt/a"],
        "nested": [{"on": False}],
        "column": [1.5, 2.5],
    }
    assert type(made["nested"][0]["on"]) is bool
    assert yaml.safe_load(yaml.safe_dump(made)) == made
    assert json.loads(json.dumps(made)) == made


def test_plain_values_stay_as_they_are_and_nan_stays_nan() -> None:
    marker = object()
    for value in (None, True, 3, 2.5, "text", marker):
        assert plain(value) is value
    assert math.isnan(plain(np.float64("nan"))) and math.isnan(plain(float("nan")))


def test_a_cell_of_an_inactive_parameter_is_no_config_value() -> None:
    assert config_value(np.float64("nan")) is None
    assert config_value(INACTIVE) is None
    assert config_value(np.str_(INACTIVE)) is None
    assert config_value(np.int64(3)) == 3 and type(config_value(np.int64(3))) is int
    assert config_value(np.bool_(False)) is False
    assert config_value("writeback") == "writeback"
