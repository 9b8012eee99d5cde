"""A space inferred from a dataset's columns, for datasets that come without a space file.

Rules: a numeric column with at most `max_levels` distinct values becomes an ordinal over those
values; a numeric column with more becomes an int (all whole numbers) or float range over the
observed minimum and maximum; anything else becomes a categorical. The default is the value
closest to the median (numeric) or the most frequent value (categorical), since datasets rarely
record the system's own default.
"""

from __future__ import annotations

import pandas as pd

from stortune.datasets import Dataset
from stortune.space.parameter import Kind, Parameter, ensure_values
from stortune.space.space import Space


def space_from_dataset(dataset: Dataset, max_levels: int = 16) -> Space:
    """The space of a dataset's parameter columns; a column whose name is no parameter name
    (a space, a quote) is refused here, in one line, not when a stored campaign is read back."""
    from stortune.space.loader import check_name

    for name in dataset.params:
        check_name(name, dataset.source or "dataset")
    parameters = [_infer(name, dataset.frame[name], max_levels) for name in dataset.params]
    name = dataset.source.rsplit("/", 1)[-1].rsplit(".", 1)[0] or "dataset"
    return Space(name, parameters, description=f"inferred from {dataset.source}")


def _infer(name: str, column: pd.Series, max_levels: int) -> Parameter:
    column = column.dropna()
    numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    distinct = sorted(column.unique(), key=lambda v: (str(type(v)), v))
    if pd.api.types.is_bool_dtype(column):
        return Parameter(name, Kind.BOOL, default=bool(column.mode().iloc[0]))
    if numeric and len(distinct) <= max_levels:
        values = ensure_values(distinct)
        median = column.median()
        default = min(values, key=lambda v: abs(v - median))
        return Parameter(name, Kind.ORDINAL, default=default, values=values)
    if numeric:
        whole = bool((column == column.round()).all())
        kind = Kind.INT if whole else Kind.FLOAT
        low, high = column.min().item(), column.max().item()
        median = column.median()
        default = int(round(median)) if whole else float(median)
        if whole:
            low, high = int(low), int(high)
        return Parameter(name, kind, default=default, low=low, high=high)
    values = ensure_values(str(v) for v in distinct)
    return Parameter(name, Kind.CATEGORICAL, default=str(column.mode().iloc[0]), values=values)
