"""The `table` target: replays a measured dataset (Carver's look-up method).

Each config is looked up among the dataset's rows; repetition r of a config returns the metrics
of its r-th stored run (cycling when it has fewer), so a replay is the same whenever it is made,
a resumed campaign's too. A config the dataset does not hold is an error,
or, when asked (`nearest`), answered by the nearest stored config in the unit-cube encoding. A
dataset measured under several workloads (a ``run.workload`` column) is replayed workload by
workload (`RowsWorkload`): by default all of them, combined as a real campaign over those
workloads would be. This lets tuners and rankings be tested in seconds on data measured once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from stortune.datasets import INACTIVE, RUN_PREFIX, Dataset, load_dataset
from stortune.enums import Direction, RunStatus
from stortune.errors import ConfigError, TargetError
from stortune.sampling import config_key
from stortune.space import Config, Space, space_from_dataset
from stortune.targets.base import Target, TargetSettings, setting
from stortune.workloads.base import Measurement, Need, Venue, Workload

WORKLOAD_COLUMN = f"{RUN_PREFIX}workload"
STATUS_COLUMN = f"{RUN_PREFIX}status"
NO_WORKLOAD = ""  # the rows of a dataset without a workload column
ANY_WORKLOAD = "*"  # every row of a config, whatever its workload (a run without a workload)


@dataclass(frozen=True)
class TableSettings(TargetSettings):
    dataset: str = setting(
        "", flag="--dataset", implies=True, help="table target: the dataset file to replay."
    )
    nearest: bool = setting(
        False, flag="--nearest", help="table target: answer unknown configs with the nearest row."
    )
    metrics: list[str] | None = setting(None)  # the metric columns, when the file must be told


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
        if data is None:
            if not self.settings.dataset:
                raise TargetError("--target table needs --dataset FILE")
            data = load_dataset(self.settings.dataset, self.settings.metrics)
        else:
            self.settings = replace(self.settings, dataset=str(Path(data.source).resolve()))
        self.dataset = data
        if self.space is None:
            self.space = space_from_dataset(data)
        self.nearest = self.settings.nearest
        self._rows: dict[tuple[str, str], list[int]] = {}
        self._configs: list[Config] = []
        self._keys: dict[str, int] = {}  # config key -> index in _configs
        self._points: list[np.ndarray] = []
        self._current: str | None = None
        self.workload_names = self._index()
        self.provides = frozenset({Need.TABLE_ROWS}) if self.workload_names else frozenset()  # type: ignore[misc]

    @classmethod
    def of(cls, data: Dataset, space: Space | None = None, nearest: bool = False) -> TableTarget:
        """A table over a dataset already in memory."""
        return cls(space, data=data, nearest=nearest)

    def _index(self) -> list[str]:
        frame = self.dataset.frame
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
        skipped = 0
        for i, row in enumerate(frame[self.dataset.params].itertuples(index=False)):
            if not ok[i]:
                continue
            raw = {k: _plain(v) for k, v in zip(self.dataset.params, row, strict=True)}
            raw = {k: v for k, v in raw.items() if v is not None and k in self.space}  # type: ignore[operator]
            try:
                config = self.space.validate(raw)  # type: ignore[union-attr]
            except ConfigError:
                skipped += 1
                continue
            key = config_key(config)
            if key not in self._keys:
                self._keys[key] = len(self._configs)
                self._configs.append(config)
                self._points.append(self.space.encode(config))  # type: ignore[union-attr]
            self._rows.setdefault((key, workloads[i]), []).append(i)
            if workloads[i] != NO_WORKLOAD:
                self._rows.setdefault((key, ANY_WORKLOAD), []).append(i)
        if not self._rows:
            raise TargetError(f"{self.dataset.source}: no row is a valid config of the space")
        self.skipped_rows = skipped
        return sorted({w for _, w in self._rows} - {NO_WORKLOAD, ANY_WORKLOAD})

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

    def apply(self, config: Config) -> None:
        assert self.space is not None
        valid = self.space.validate(config)
        key = config_key(valid)
        if key not in self._keys:
            if not self.nearest:
                raise TargetError(
                    f"config not in the dataset {self.dataset.source} "
                    "(use --nearest to answer with the nearest stored config)"
                )
            point = self.space.encode(valid)
            distances = np.linalg.norm(np.array(self._points) - point, axis=1)
            key = config_key(self._configs[int(np.argmin(distances))])
        self._current = key

    def check_workload(self, workload: Workload | None) -> None:
        """Without a workload, a run replays every row of the config in turn (how campaigns
        stored before tables had workloads were measured)."""
        if workload is not None:
            super().check_workload(workload)

    def venue(self, workload: Workload) -> Venue:
        return Venue(lookup=self._row)

    def measure(self, timeout: float | None = None, repetition: int = 0) -> Measurement:
        return self._row(ANY_WORKLOAD if self.workload_names else NO_WORKLOAD, repetition)

    def _row(self, workload: str, repetition: int) -> Measurement:
        if self._current is None:
            raise TargetError("the table target was run before a config was applied")
        slot = (self._current, workload)
        rows = self._rows.get(slot)
        if not rows:
            return Measurement.failed(f"the dataset has no run of workload {workload!r} here")
        index = rows[repetition % len(rows)]
        record = self.dataset.frame.iloc[index]
        metrics = {m: float(record[m]) for m in self.dataset.metrics}
        metrics = {m: v for m, v in metrics.items() if math.isfinite(v)}
        return Measurement(metrics, info={"row": int(index)})

    def optimum(self, metric: str | None = None, direction: str | None = None) -> float:
        """The best mean metric over the dataset's configs (for tuner benchmarks)."""
        metric = metric or self.dataset.metrics[0]
        direction = direction or self.dataset.direction(metric)
        values = self.dataset.frame[metric].to_numpy(dtype=float)
        means = [float(np.nanmean(values[rows])) for rows in self._rows.values()]
        return max(means) if direction == Direction.MAX else min(means)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and value == INACTIVE
    ):
        return None  # the parameter does not apply to this row's config
    return value
