"""The `table` target: replays a measured dataset (Carver's look-up method).

Each config is looked up among the dataset's rows; repetition r of a config returns the metrics
of its r-th stored run (cycling when it has fewer), so a replay is the same whenever it is made,
a resumed campaign's too. A config the dataset does not hold is an error,
or, when asked (`nearest`), answered by the nearest stored config in the unit-cube encoding. A
dataset measured under several workloads (a ``run.workload`` column) is replayed workload by
workload (`RowsWorkload`): by default all of them, combined as a real campaign over those
workloads would be. This lets tuners and rankings be tested in seconds on data measured once.

Two options make a replay a fair test of tuners. `pool`: tuners choose among the dataset's
configs only (`tuning_pool()`; the protocol of FLASH and PromiseTune on tables that are not full
grids), and a config outside it is refused. `noise`: every replayed run is multiplied by seeded
log-normal noise of that relative standard deviation, a fresh draw each time a config is run
again (a resumed campaign's target counts the runs it stored, `recall`), so a tuner meets the
noise a real system has while `true_value` still knows the noise-free value of whatever it
recommends.

`replay_seconds` makes every run sleep that long, as a real benchmark would take: the engine's
own overheads (a cluster's speedup, a coordinator's proposals) are then measured against runs
of a known length.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from stortune.datasets import RUN_PREFIX, Dataset, config_value, load_dataset
from stortune.enums import Direction, RunStatus
from stortune.errors import ConfigError, TargetError
from stortune.sampling import config_key
from stortune.space import Config, Space, fold_one_hot, space_from_dataset
from stortune.targets.base import Target, TargetSettings, setting
from stortune.workloads.base import Measurement, Need, Venue, Workload

if TYPE_CHECKING:
    from stortune.store import Run

WORKLOAD_COLUMN = f"{RUN_PREFIX}workload"
STATUS_COLUMN = f"{RUN_PREFIX}status"
NO_WORKLOAD = ""  # the rows of a dataset without a workload column
ANY_WORKLOAD = "*"  # every row of a config, whatever its workload (a run without a workload)
MAX_REPLAY = 3600.0  # seconds a replayed run may be made to take


@dataclass(frozen=True)
class TableSettings(TargetSettings):
    dataset: str = setting(
        "", flag="--dataset", implies=True, help="table target: the dataset file to replay."
    )
    nearest: bool = setting(
        False, flag="--nearest", help="table target: answer unknown configs with the nearest row."
    )
    pool: bool = setting(
        False, flag="--pool", help="table target: tune over the dataset's configs only."
    )
    noise: float = setting(
        0.0,
        flag="--noise",
        help="table target: relative SD of seeded noise on every replayed run (0.07 = 7%).",
    )
    noise_seed: int = setting(0, flag="--noise-seed", help="table target: seed of that noise.")
    replay_seconds: float = setting(
        0.0,
        flag="--replay-seconds",
        help="table target: sleep this long in each run, as a real benchmark would take (for "
        "measuring the engine's own overheads, e.g. a cluster's speedup).",
    )
    metrics: list[str] | None = setting(None)  # the metric columns, when the file must be told

    def __post_init__(self) -> None:
        if not (math.isfinite(self.noise) and 0 <= self.noise <= 1):
            raise TargetError(f"--noise is a relative SD from 0 to 1, not {self.noise}")
        if not (math.isfinite(self.replay_seconds) and 0 <= self.replay_seconds <= MAX_REPLAY):
            raise TargetError(
                f"--replay-seconds is from 0 to {MAX_REPLAY:g} seconds, not {self.replay_seconds}"
            )
        if self.pool and self.nearest:
            raise TargetError("--pool and --nearest exclude each other: a pool has no neighbours")


class TableTarget(Target):
    kind = "table"
    Settings = TableSettings
    summary = "replay a dataset"
    measures_machine = False
    settings: TableSettings

    def __init__(
        self,
        space: Space | str | None = None,
        settings: TableSettings | None = None,
        *,
        data: Dataset | None = None,
        **values: Any,
    ) -> None:
        super().__init__(space, settings, **values)
        given = data is not None
        if data is None:
            if not self.settings.dataset:
                raise TargetError("--target table needs --dataset FILE")
            data = load_dataset(self.settings.dataset, self.settings.metrics)
        else:
            self.settings = replace(self.settings, dataset=str(Path(data.source).resolve()))
        if self.space is None:  # inferred: the table's one-hot groups become categoricals
            data = fold_one_hot(data)
            self.space = space_from_dataset(data)
        else:
            data = _as_space_sees_it(data, self.space)
        self.dataset = data
        self.nearest = self.settings.nearest
        index = _cached_index(data, self.space, from_file=not given)
        self._rows = index.rows  # (config key, workload) -> the dataset's rows
        self._configs = index.configs
        self._keys = index.keys  # config key -> index in _configs
        self._row_keys = index.row_keys  # row -> its config's key
        self._points = index.points
        self.skipped_rows = index.skipped
        self.workload_names = index.workloads
        self._current: str | None = None
        self._visits: dict[tuple[str, str, int], int] = {}  # runs replayed per slot (noise draws)
        self.provides = frozenset({Need.TABLE_ROWS}) if self.workload_names else frozenset()  # type: ignore[misc]

    @classmethod
    def of(cls, data: Dataset, space: Space | None = None, nearest: bool = False) -> TableTarget:
        """A table over a dataset already in memory."""
        return cls(space, data=data, nearest=nearest)

    def metric_names(self) -> frozenset[str]:
        """The dataset's metric columns: what every replayed run reports."""
        return frozenset(self.dataset.metrics)

    def configs(self) -> list[Config]:
        """The distinct configs the dataset holds."""
        return list(self._configs)

    def workloads(self, names: list[str], runtime: float | None) -> list[Workload | None]:
        """The dataset's workloads named (default: all it holds), each replayed on its own."""
        unknown = sorted(set(names) - set(self.workload_names))
        if unknown and self.workload_names:
            raise TargetError(
                f"{self.dataset.source} holds no runs of workload(s) {', '.join(unknown)} "
                f"(it has: {', '.join(self.workload_names)})"
            )
        return super().workloads(names or self.workload_names, runtime)

    def tuning_pool(self) -> list[Config] | None:
        """The dataset's configs when tuning is held to them (`--pool`), else None."""
        return self.configs() if self.settings.pool else None

    def apply(self, config: Config) -> None:
        assert self.space is not None
        valid = self.space.validate(config)
        key = config_key(valid)
        if key not in self._keys:
            if self.settings.pool:
                raise TargetError(
                    f"config not in the pool of {Path(self.dataset.source).name}: "
                    f"{_describe(valid)}"
                )
            if not self.nearest:
                raise TargetError(
                    f"config not in the dataset {self.dataset.source} "
                    "(use --nearest to answer with the nearest stored config)"
                )
            point = self.space.encode(valid)
            distances = np.linalg.norm(np.array(self._points) - point, axis=1)
            key = config_key(self._configs[int(np.argmin(distances))])
        self._current = key

    def recall(self, runs: Iterable[Run]) -> None:
        """Count each stored run this table answered (the ``row`` it keeps) as a visit of its
        slot: a resumed campaign then draws the noise one sitting would have drawn, where a
        config measured again before the stop would otherwise get its first draw again."""
        for run in runs:
            row = (run.info or {}).get("row")
            key = self._row_keys.get(row) if isinstance(row, int) else None
            if key is None:
                continue
            workload = run.workload if run.workload in self.workload_names else self._every_run
            visit_key = (key, workload, run.repetition)
            self._visits[visit_key] = self._visits.get(visit_key, 0) + 1

    def check_workload(self, workload: Workload | None) -> None:
        """Without a workload, a run replays every row of the config in turn (how campaigns
        stored before tables had workloads were measured)."""
        if workload is not None:
            super().check_workload(workload)

    def venue(self, workload: Workload) -> Venue:
        return Venue(lookup=self._row)

    @property
    def _every_run(self) -> str:
        """The workload key under which a config's rows of every workload are listed."""
        return ANY_WORKLOAD if self.workload_names else NO_WORKLOAD

    def measure(self, timeout: float | None = None, repetition: int = 0) -> Measurement:
        return self._row(self._every_run, repetition)

    def _row(self, workload: str, repetition: int) -> Measurement:
        if self._current is None:
            raise TargetError("the table target was run before a config was applied")
        time.sleep(self.settings.replay_seconds)
        slot = (self._current, workload)
        rows = self._rows.get(slot)
        if not rows:
            return Measurement.failed(f"the dataset has no run of workload {workload!r} here")
        index = rows[repetition % len(rows)]
        record = self.dataset.frame.iloc[index]
        metrics = {m: float(record[m]) for m in self.dataset.metrics}
        metrics = {m: v for m, v in metrics.items() if math.isfinite(v)}
        if self.settings.noise > 0:
            metrics = self._noisy(metrics, slot, repetition)
        return Measurement(metrics, info={"row": int(index)})

    def _noisy(
        self, metrics: dict[str, float], slot: tuple[str, str], repetition: int
    ) -> dict[str, float]:
        """The metrics times log-normal factors of mean 1 and relative SD `noise`, drawn from
        the seed, the config, the workload, the repetition and how often that run was made."""
        visit_key = (*slot, repetition)
        visit = self._visits.get(visit_key, 0)
        self._visits[visit_key] = visit + 1
        sigma = math.sqrt(math.log1p(self.settings.noise**2))
        rng = np.random.default_rng(
            [self.settings.noise_seed, _stable(slot[0]), _stable(slot[1]), repetition, visit]
        )
        factors = np.exp(rng.normal(-(sigma**2) / 2, sigma, size=len(metrics)))
        return {m: v * float(f) for (m, v), f in zip(metrics.items(), factors, strict=True)}

    def true_value(self, config: Config, metric: str | None = None) -> float:
        """A config's noise-free value: the mean of the metric over its stored runs."""
        assert self.space is not None
        metric = metric or self.dataset.metrics[0]
        key = config_key(self.space.validate(config))
        rows = self._rows.get((key, self._every_run))
        if not rows:
            raise TargetError(f"config not in the dataset {self.dataset.source}")
        return float(np.nanmean(self.dataset.frame[metric].to_numpy(dtype=float)[rows]))

    def optimum(self, metric: str | None = None, direction: str | None = None) -> float:
        """The best mean metric over the dataset's configs (for tuner benchmarks)."""
        metric = metric or self.dataset.metrics[0]
        direction = direction or self.dataset.direction(metric)
        values = self.dataset.frame[metric].to_numpy(dtype=float)
        means = [float(np.nanmean(values[rows])) for rows in self._rows.values()]
        return max(means) if direction == Direction.MAX else min(means)


@dataclass(frozen=True)
class _Index:
    """Where a dataset's rows lie in a space: its distinct valid configs and their encodings,
    and per config and workload its rows. Read-only once built, so targets share it."""

    rows: dict[tuple[str, str], list[int]]
    configs: list[Config]
    keys: dict[str, int]
    row_keys: dict[int, str]
    points: list[np.ndarray]
    skipped: int
    workloads: list[str]


_INDEXES: dict[tuple, _Index] = {}
INDEXES_KEPT = 16  # a bench replays a dozen tables, each resumed many times


def _cached_index(data: Dataset, space: Space, from_file: bool) -> _Index:
    """The dataset's index in `space`, built once per table content and space in a process: a
    resumed campaign rebuilds its target, and validating every row of a large table again
    costs seconds each time. The key hashes the rows as loaded (milliseconds), what the index
    is built from: not the file's modification time, which a rewrite within one tick of a
    coarse clock keeps, nor the file read again, which may have changed since it was loaded."""
    if not from_file:
        return _build_index(data, space)
    rows = pd.util.hash_pandas_object(data.frame, index=False).to_numpy()
    key = (
        hashlib.sha256(rows.tobytes()).hexdigest(), tuple(data.frame.columns),
        tuple(data.metrics), json.dumps(space.to_dict(), sort_keys=True, default=str),
    )  # fmt: skip
    index = _INDEXES.pop(key, None) or _build_index(data, space)
    _INDEXES[key] = index  # the most recently used last
    while len(_INDEXES) > INDEXES_KEPT:
        del _INDEXES[next(iter(_INDEXES))]
    return index


def _build_index(data: Dataset, space: Space) -> _Index:
    frame = data.frame
    workloads = (
        frame[WORKLOAD_COLUMN].astype(str).tolist()
        if WORKLOAD_COLUMN in frame
        else [NO_WORKLOAD] * len(frame)
    )
    ok = (
        (frame[STATUS_COLUMN].astype(str) == RunStatus.OK).tolist()
        if STATUS_COLUMN in frame
        else [True] * len(frame)
    )
    index = _Index({}, [], {}, {}, [], 0, [])
    skipped = 0
    for i, row in enumerate(frame[data.params].itertuples(index=False)):
        if not ok[i]:
            continue
        raw = {k: config_value(v) for k, v in zip(data.params, row, strict=True)}
        raw = {k: v for k, v in raw.items() if v is not None and k in space}
        try:
            config = space.validate(raw)
        except ConfigError:
            skipped += 1
            continue
        key = config_key(config)
        if key not in index.keys:
            index.keys[key] = len(index.configs)
            index.configs.append(config)
            index.points.append(space.encode(config))
        index.rows.setdefault((key, workloads[i]), []).append(i)
        index.row_keys[i] = key
        if workloads[i] != NO_WORKLOAD:
            index.rows.setdefault((key, ANY_WORKLOAD), []).append(i)
    if not index.rows:
        raise TargetError(f"{data.source}: no row is a valid config of the space")
    names = sorted({w for _, w in index.rows} - {NO_WORKLOAD, ANY_WORKLOAD})
    return replace(index, skipped=skipped, workloads=names)


def _as_space_sees_it(data: Dataset, space: Space) -> Dataset:
    """The table folded when the space names its folded one-hot groups and not their columns
    (a space inferred from it before: a stored campaign's, resumed), else as it is."""
    names = [p.name for p in space.parameters]
    if all(name in data.frame.columns for name in names):
        return data
    folded = fold_one_hot(data)
    return folded if all(name in folded.frame.columns for name in names) else data


def _stable(text: str) -> int:
    """A hash of `text` that is the same in every process (Python's is salted)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _describe(config: Config) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())
