"""Datasets: tidy tables of parameter columns and metric columns.

Every analysis (ranking, models, tuner benchmarks through the `table` target) reads a `Dataset`,
whether it came from the store (`stortune export`) or from a file measured elsewhere. Column
roles are recognised by these conventions, in this order:

* stortune's own export: metric columns are named ``metric.<name>``, bookkeeping columns
  ``run.<name>`` (trial, repetition, status, times); every other column is a parameter. The
  direction of the metrics stortune measures is known by their names (throughput and rates
  higher, latencies lower).
* the moot/PromiseTune convention: a trailing ``+`` (maximise) or ``-`` (minimise) marks a
  metric and its direction.
* Weka ARFF files (BestConfig's samples): the last attribute is the metric, to be maximised.
* otherwise the caller names the metrics (``metrics=[...]``); without that, the last column.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from stortune.errors import DatasetError
from stortune.inputs import DATASET_BYTES, read_bytes
from stortune.values import plain

METRIC_PREFIX = "metric."
RUN_PREFIX = "run."
# The level a categorical parameter takes where it does not apply (a condition switched it off,
# e.g. ext4's journal mode on xfs): an empty cell would break sorting, encoding and models.
INACTIVE = "n/a"
# what stortune's own workloads measure, by the last part of a metric's name
_HIGHER_IS_BETTER = frozenset({"bw_mbs", "iops", "tps", "ops_per_s"})
_LOWER_IS_BETTER_PREFIX = "lat_"


@dataclass
class Dataset:
    """A table of measured configurations: which columns are parameters, which are metrics."""

    frame: pd.DataFrame
    params: list[str]
    metrics: list[str]
    directions: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        missing = [c for c in [*self.params, *self.metrics] if c not in self.frame.columns]
        if missing:
            raise DatasetError(f"{self.source or 'dataset'}: no column(s) {', '.join(missing)}")
        if not self.metrics:
            raise DatasetError(f"{self.source or 'dataset'}: no metric column")
        if not self.params:
            raise DatasetError(f"{self.source or 'dataset'}: no parameter column")

    @property
    def X(self) -> pd.DataFrame:  # noqa: N802 - scikit-learn's name for the design matrix
        return self.frame[self.params]

    def y(self, metric: str | None = None) -> pd.Series:
        """The metric column (the first metric when none is named)."""
        name = metric or self.metrics[0]
        if name not in self.metrics:
            raise DatasetError(
                f"{self.source or 'dataset'}: no metric {name!r} (have: {', '.join(self.metrics)})"
            )
        return self.frame[name]

    def direction(self, metric: str | None = None) -> str:
        """'max' or 'min'; metrics with no recorded direction are taken as 'max'."""
        return self.directions.get(metric or self.metrics[0], "max")

    def aggregated(self) -> Dataset:
        """One row per distinct configuration, metrics averaged over its repetitions."""
        if self.frame[self.params].duplicated().sum() == 0:
            return self
        grouped = self.frame.groupby(self.params, dropna=False, sort=False)[self.metrics].mean()
        # index and values side by side in one step: reset_index inserts the hundreds of
        # parameter columns of a Ceph space one at a time
        frame = pd.concat(
            [grouped.index.to_frame(index=False), grouped.reset_index(drop=True)], axis=1
        )
        return Dataset(
            frame, list(self.params), list(self.metrics), dict(self.directions), self.source
        )

    def with_metric_direction(self, metric: str, direction: str) -> Dataset:
        directions = dict(self.directions)
        directions[metric] = direction
        return Dataset(self.frame, self.params, self.metrics, directions, self.source)


def known_direction(metric: str) -> str | None:
    """'max' or 'min' for a metric stortune's workloads measure (``dblog.write.iops``,
    ``total.bw_mbs_rel``, ``lat_p99_ms``), None for a name it cannot vouch for."""
    unit = metric.removesuffix("_rel").rsplit(".", 1)[-1]
    if unit in _HIGHER_IS_BETTER:
        return "max"
    if unit.startswith(_LOWER_IS_BETTER_PREFIX):
        return "min"
    return None


def design_matrix(
    frame: pd.DataFrame, params: list[str]
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Numeric matrix of the parameter columns: numeric ones as they are, the others one-hot.

    Returns the matrix and, for each parameter, the columns it became (``name=value`` for one-hot
    columns), so that importances and coefficients can be summed back to the parameter.
    """
    columns: dict[str, pd.Series] = {}
    groups: dict[str, list[str]] = {}
    for name in params:
        col = frame[name]
        if pd.api.types.is_bool_dtype(col) or pd.api.types.is_numeric_dtype(col):
            columns[name] = col.astype(float)
            groups[name] = [name]
        else:
            col = with_inactive_level(col).astype(str)
            values = sorted(col.unique())
            groups[name] = []
            for value in values:
                key = f"{name}={value}"
                columns[key] = (col.astype(str) == value).astype(float)
                groups[name].append(key)
    return pd.DataFrame(columns, index=frame.index), groups


def load_dataset(path: str | Path, metrics: list[str] | None = None) -> Dataset:
    """Read a CSV, Parquet or ARFF file into a Dataset, recognising column roles (module doc)."""
    path = Path(path)
    data = read_dataset_file(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".arff":
            return _load_arff(path, data, metrics)
        frame = read_table(data, suffix)
    except DatasetError:
        raise
    except Exception as exc:  # pandas raises many kinds; the user needs the file and the reason
        raise DatasetError(f"{path}: cannot read: {exc}") from None
    return from_frame(frame, metrics=metrics, source=str(path))


def read_dataset_file(path: Path) -> bytes:
    """A dataset file's bytes: a regular file of at most `inputs.DATASET_BYTES`."""
    try:
        if not path.exists():
            raise DatasetError(f"{path}: no such file")
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        raise DatasetError(f"{path!r}: {getattr(exc, 'strerror', None) or exc}") from None
    return read_bytes(path, "dataset", DATASET_BYTES, DatasetError)


def read_table(data: bytes, suffix: str, **csv_options: Any) -> pd.DataFrame:
    """The table a file's bytes hold: Parquet by its suffix, else CSV."""
    if suffix in (".parquet", ".pq"):
        return pd.read_parquet(io.BytesIO(data))
    return pd.read_csv(io.BytesIO(data), **csv_options)


def from_frame(frame: pd.DataFrame, metrics: list[str] | None = None, source: str = "") -> Dataset:
    """Recognise parameter and metric columns of an in-memory table (module doc)."""
    if frame.empty:
        raise DatasetError(f"{source or 'dataset'}: no rows")
    directions: dict[str, str] = {}
    frame = frame.copy()
    if metrics:
        metric_cols = list(metrics)
    elif any(c.startswith(METRIC_PREFIX) for c in frame.columns):
        metric_cols = [c for c in frame.columns if c.startswith(METRIC_PREFIX)]
        for c in metric_cols:
            direction = known_direction(c[len(METRIC_PREFIX) :])
            if direction:
                directions[c[len(METRIC_PREFIX) :]] = direction
    elif any(c.endswith(("+", "-")) for c in frame.columns):
        metric_cols = []
        renames = {}
        for c in frame.columns:
            if c.endswith(("+", "-")):
                name = c[:-1]
                renames[c] = name
                directions[name] = "max" if c.endswith("+") else "min"
                metric_cols.append(name)
        frame = frame.rename(columns=renames)
    else:
        metric_cols = [frame.columns[-1]]
    renames = {c: c[len(METRIC_PREFIX) :] for c in metric_cols if c.startswith(METRIC_PREFIX)}
    if renames:
        frame = frame.rename(columns=renames)
        metric_cols = [renames.get(c, c) for c in metric_cols]
    # a column named as a metric (``metric.*``) is never a parameter, chosen or not
    params = [
        c
        for c in frame.columns
        if c not in metric_cols and not str(c).startswith((RUN_PREFIX, METRIC_PREFIX))
    ]
    for name in metric_cols:
        if name in frame.columns and not pd.api.types.is_numeric_dtype(frame[name]):
            frame[name] = pd.to_numeric(frame[name], errors="coerce")
    for name in params:
        frame[name] = with_inactive_level(frame[name])
    return Dataset(frame, params, metric_cols, directions, source)


def with_inactive_level(column: pd.Series) -> pd.Series:
    """A text parameter column with its empty cells named `INACTIVE` (numbers stay as they are)."""
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return column
    if not column.isna().any():
        return column
    return column.astype(object).where(column.notna(), INACTIVE).astype(str)


def config_value(cell: Any) -> Any:
    """A parameter's table cell as a config value: plain Python, None where the parameter was
    inactive (NaN in a numeric column, `INACTIVE` in a text one)."""
    value = plain(cell)
    if (isinstance(value, float) and math.isnan(value)) or value == INACTIVE:
        return None
    return value


def _load_arff(path: Path, data: bytes, metrics: list[str] | None) -> Dataset:
    """A minimal reader for dense Weka ARFF files (the form BestConfig writes)."""
    names: list[str] = []
    kinds: list[str] = []
    rows: list[list[str]] = []
    in_data = False
    for lineno, raw in enumerate(data.decode("utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        lower = line.lower()
        if in_data:
            rows.append(next(csv.reader(io.StringIO(line), skipinitialspace=True)))
            if len(rows[-1]) != len(names):
                raise DatasetError(
                    f"{path}:{lineno}: {len(rows[-1])} values, {len(names)} attributes declared"
                )
        elif lower.startswith("@attribute"):
            parts = line.split(None, 2)
            if len(parts) < 3:
                raise DatasetError(f"{path}:{lineno}: malformed @attribute line")
            names.append(parts[1].strip("'\""))
            kinds.append(parts[2].strip())
        elif lower.startswith("@data"):
            in_data = True
    if not names or not rows:
        raise DatasetError(f"{path}: no attributes or no data rows")
    frame = pd.DataFrame(rows, columns=names)
    for name, kind in zip(names, kinds, strict=True):
        if kind.lower() in ("numeric", "real", "integer"):
            frame[name] = pd.to_numeric(frame[name].replace("?", np.nan))
    metric_cols = list(metrics) if metrics else [names[-1]]
    params = [c for c in names if c not in metric_cols]
    return Dataset(frame, params, metric_cols, {m: "max" for m in metric_cols}, str(path))
