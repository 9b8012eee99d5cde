"""A space inferred from a dataset's columns, for datasets that come without a space file.

Rules: a numeric column with at most `max_levels` distinct values becomes an ordinal over those
values; a numeric column with more becomes an int (all whole numbers) or float range over the
observed minimum and maximum; anything else becomes a categorical. The default is the value
closest to the median (numeric) or the most frequent value (categorical), since datasets rarely
record the system's own default. Where stortune infers a space from a table it first folds
the table's one-hot groups (several 0/1 columns, one set in each row) into one categorical each
(`fold_one_hot`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stortune.datasets import Dataset
from stortune.space.loader import MAX_NAME, check_name
from stortune.space.parameter import Kind, Parameter, ensure_values
from stortune.space.space import Space


def space_from_dataset(dataset: Dataset, max_levels: int = 16) -> Space:
    """The space of a dataset's parameter columns; a column whose name is no parameter name
    (a space, a quote) is refused here, in one line, not when a stored campaign is read back."""
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


# A one-hot group is searched for over distinct rows; past this many steps the search gives up
# and the columns stay as they are (tables of a few dozen binary columns end far sooner).
MAX_GROUP_STEPS = 10_000
FOLDED_SEPARATOR = "_or_"


def fold_one_hot(dataset: Dataset) -> Dataset:
    """The dataset with each one-hot group of 0/1 columns (two or more, exactly one set in every
    row: 7z's compression methods, HSQLDB's transaction control) folded into one categorical
    column whose levels are the members' names. Inferred as separate binaries, such a group
    offers a tuner mostly points no row holds (none set, several set); folded, the space holds
    only the choices the system has. Meant where a space is inferred from a table (and where a
    space inferred so is given back, a resumed campaign's): a table read with a space naming
    its columns keeps them. The folded column is named after its members
    (``memory_tables_or_cached_tables``) and takes the first member's place."""
    frame = dataset.frame
    groups = one_hot_groups(frame, dataset.params)
    if not groups:
        return dataset
    first = {group[0]: group for group in groups}
    folded = {name for group in groups for name in group}
    columns: dict[str, pd.Series] = {}
    params: list[str] = []
    for name in frame.columns:
        if name in first:
            group = first[name]
            label = FOLDED_SEPARATOR.join(group)
            members = frame[group].to_numpy(dtype=float).argmax(axis=1)
            columns[label] = pd.Series(np.array(group, dtype=object)[members], index=frame.index)
        elif name not in folded:
            columns[name] = frame[name]
    for name in dataset.params:
        if name in first:
            params.append(FOLDED_SEPARATOR.join(first[name]))
        elif name not in folded:
            params.append(name)
    return Dataset(
        pd.DataFrame(columns, index=frame.index),
        params,
        list(dataset.metrics),
        dict(dataset.directions),
        dataset.source,
    )


def one_hot_groups(frame: pd.DataFrame, params: list[str]) -> list[list[str]]:
    """The one-hot groups among the parameter columns, each in column order: sets of two or
    more 0/1 columns (no empty cell, not constant) of which every row has exactly one set. A column
    belongs to one group at most; the search (an exact cover over the distinct rows) takes the
    first group it finds for each column, in column order. A group whose folded name would be
    too long for a parameter stays as it is."""
    binary = [name for name in params if _binary(frame[name])]
    if len(binary) < 2:
        return []
    rows = np.unique(frame[binary].to_numpy(dtype=bool), axis=0)
    taken: set[int] = set()
    groups: list[list[str]] = []
    for start in range(len(binary)):
        if start in taken:
            continue
        budget = [MAX_GROUP_STEPS]
        group = _cover(rows, [start], rows[:, start].copy(), taken, budget)
        if group is not None:
            taken.update(group)
            groups.append([binary[i] for i in sorted(group)])
    names = set(frame.columns)
    return [
        group
        for group in groups
        if (label := FOLDED_SEPARATOR.join(group)) not in names and len(label) <= MAX_NAME
    ]


def _binary(column: pd.Series) -> bool:
    if column.isna().any():
        return False
    if pd.api.types.is_bool_dtype(column):
        return column.nunique() == 2
    if not pd.api.types.is_numeric_dtype(column):
        return False
    return set(column.unique().tolist()) == {0, 1}


def _cover(
    rows: np.ndarray, group: list[int], covered: np.ndarray, taken: set[int], budget: list[int]
) -> list[int] | None:
    """`group` grown, by columns set where no member is, until every row has exactly one
    member set; None when no such growth exists (or the step budget ran out)."""
    budget[0] -= 1
    if budget[0] < 0:
        return None
    open_rows = np.flatnonzero(~covered)
    if open_rows.size == 0:
        return group if len(group) >= 2 else None
    row = rows[open_rows[0]]
    for column in np.flatnonzero(row):
        if column in taken or (rows[:, column] & covered).any():
            continue
        found = _cover(rows, [*group, int(column)], covered | rows[:, column], taken, budget)
        if found is not None:
            return found
    return None
