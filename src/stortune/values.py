"""Values as plain Python (`plain`): what leaves numpy or pandas for a config, a spec or a
stored row. A module of its own, importing nothing of stortune, so every layer may use it."""

from __future__ import annotations

import os
from typing import Any


def plain(value: Any) -> Any:
    """`value` in the types JSON, YAML and a user's config hold: numpy and pandas scalars
    and arrays become Python's numbers, bools and lists, paths become text, and dicts, lists
    and tuples (as lists) are walked; anything else is returned as it is. NaN stays NaN:
    callers that read it as "no value" say so (`datasets.config_value`).

    Table cells come out of pandas as `np.int64`, `np.float64` and `np.bool_`: `yaml.safe_dump`
    refuses all three, `json.dumps` the first and the last, and neither is an `int` or a `bool`
    to `isinstance`; so a value taken from a table is made plain before it is kept."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "tolist"):  # numpy scalars and arrays, pandas series
        return value.tolist()
    return value
