"""The workload of a replayed table: the rows a dataset recorded under one workload's name.

A dataset measured under several workloads (the project's localfs dataset holds fileserver and
mailserver runs) is replayed by the `table` target with one `RowsWorkload` per workload, so a
tuner sees the same combined objective it would on the real system.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stortune.errors import ConfigError
from stortune.workloads.base import Measurement, Need, Venue, Workload


class RowsWorkload(Workload):
    kind = "rows"
    needs = Need.TABLE_ROWS

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError("a table workload needs the name its rows were recorded under")
        self.name = name

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> RowsWorkload:
        return cls(spec.get("name", ""))

    def run(self, venue: Venue, timeout: float | None = None) -> Measurement:
        if venue.lookup is None:
            return Measurement.failed(f"table workload {self.name}: the target holds no rows")
        return venue.lookup(self.name, venue.repetition)
