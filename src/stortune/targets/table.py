"""The `table` target: replays a measured dataset (Carver's look-up method).

Each config is looked up among the dataset's rows; a run returns the metrics of the next stored
repetition of that config (cycling through them). A config the dataset does not hold is an error,
or, when asked (`nearest=True`), answered by the nearest stored config in the unit-cube encoding.
This lets tuners and rankings be tested in seconds on data measured once.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from stortune.datasets import INACTIVE, Dataset, load_dataset
from stortune.errors import ConfigError, TargetError
from stortune.sampling import config_key
from stortune.space import Config, Space, space_from_dataset
from stortune.targets.base import Measurement, Target, Workload


class TableTarget(Target):
    kind = "table"
    measures_machine = False

    def __init__(self, dataset: Dataset, space: Space | None = None, nearest: bool = False) -> None:
        self.dataset = dataset
        self.space = space or space_from_dataset(dataset)
        self.nearest = nearest
        self._rows: dict[str, list[int]] = {}
        self._configs: list[Config] = []
        self._points: list[np.ndarray] = []
        self._next: dict[str, int] = {}
        self._current: str | None = None
        self._index()

    @classmethod
    def from_spec(cls, spec: dict[str, Any], space: Space | None = None) -> TableTarget:
        dataset = load_dataset(spec["dataset"], spec.get("metrics"))
        return cls(dataset, space, bool(spec.get("nearest", False)))

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "dataset": str(Path(self.dataset.source).resolve()),
            "metrics": self.dataset.metrics,
            "nearest": self.nearest,
        }

    def _index(self) -> None:
        frame = self.dataset.frame
        skipped = 0
        for i, row in enumerate(frame[self.dataset.params].itertuples(index=False)):
            raw = {k: _plain(v) for k, v in zip(self.dataset.params, row, strict=True)}
            raw = {k: v for k, v in raw.items() if v is not None and k in self.space}
            try:
                config = self.space.validate(raw)
            except ConfigError:
                skipped += 1
                continue
            key = config_key(config)
            if key not in self._rows:
                self._rows[key] = []
                self._configs.append(config)
                self._points.append(self.space.encode(config))
            self._rows[key].append(i)
        if not self._rows:
            raise TargetError(f"{self.dataset.source}: no row is a valid config of the space")
        self.skipped_rows = skipped

    def configs(self) -> list[Config]:
        """The distinct configs the dataset holds."""
        return list(self._configs)

    def apply(self, config: Config) -> None:
        key = config_key(self.space.validate(config))
        if key not in self._rows:
            if not self.nearest:
                raise TargetError(
                    f"config not in the dataset {self.dataset.source} "
                    "(use nearest=True to answer with the nearest stored config)"
                )
            point = self.space.encode(self.space.validate(config))
            distances = np.linalg.norm(np.array(self._points) - point, axis=1)
            key = config_key(self._configs[int(np.argmin(distances))])
        self._current = key

    def run(self, workload: Workload | None = None, timeout: float | None = None) -> Measurement:
        if self._current is None:
            raise TargetError("the table target was run before a config was applied")
        rows = self._rows[self._current]
        index = rows[self._next.get(self._current, 0) % len(rows)]
        self._next[self._current] = self._next.get(self._current, 0) + 1
        record = self.dataset.frame.iloc[index]
        metrics = {m: float(record[m]) for m in self.dataset.metrics}
        if any(math.isnan(v) for v in metrics.values()):
            return Measurement.failed(f"row {index} of the dataset has no value")
        return Measurement(metrics, info={"row": int(index)})

    def optimum(self, metric: str | None = None, direction: str | None = None) -> float:
        """The best mean metric over the dataset's configs (for tuner benchmarks)."""
        metric = metric or self.dataset.metrics[0]
        direction = direction or self.dataset.direction(metric)
        values = self.dataset.frame[metric].to_numpy(dtype=float)
        means = [float(np.nanmean(values[rows])) for rows in self._rows.values()]
        return max(means) if direction == "max" else min(means)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and value == INACTIVE
    ):
        return None  # the parameter does not apply to this row's config
    return value
