"""The contract between workloads and targets.

A `Workload` drives a target during one run and says what it needs from it (`Need`): a mounted
directory to work in (fio), a RADOS pool to reach (rados bench), or the rows of a measured table.
A target says which needs it provides and, for each run, hands the workload a `Venue` with the
resource. So targets never import a concrete workload, and a new workload that needs a
directory runs on every target that provides one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from stortune.enums import RunStatus
from stortune.errors import ConfigError
from stortune.workloads.declared import Declarations


@dataclass
class Measurement:
    """The outcome of one run: metrics (numbers only) and what else is worth keeping.

    `status` says whether it is a result (`RunStatus`); `error` says why not, in one line.
    """

    metrics: dict[str, float] = field(default_factory=dict)
    status: RunStatus = RunStatus.OK
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.OK

    @classmethod
    def failed(
        cls, error: str, status: RunStatus | str = RunStatus.FAILED, **info: Any
    ) -> Measurement:
        return cls(status=RunStatus(status), error=error, info=dict(info))


class Need(StrEnum):
    """What a workload needs from the target it runs on."""

    DIRECTORY = "directory"  # a directory on the file system under test
    RADOS_POOL = "rados-pool"  # a RADOS pool and the `rados` command line that reaches it
    TABLE_ROWS = "table-rows"  # the rows of a measured table recorded under the workload's name


class Tracker(Protocol):
    """Where a workload records what it starts that outlives a crash (a database server), so
    that the target's teardown, or the next target after a SIGKILL, undoes it: the target's
    journal (`stortune.system.journal.Journal`; entry ``server``: pid, start time, signals)."""

    def record(self, op: str, **fields: Any) -> None: ...

    def undo(self, ops: set[str] | None = None) -> list[str]: ...


class Sampler(Protocol):
    """Something measured alongside a run (system or cluster metrics)."""

    def start(self) -> Any: ...

    def stop(self) -> dict[str, float]: ...


@dataclass
class Venue:
    """What a target hands a workload for one run.

    `directory`: where to work (DIRECTORY); `rados`: the argv prefix naming the pool and client
    (RADOS_POOL); `cgroup`: a cgroup folder the benchmark process joins (a memory cap);
    `devices`: the block devices under test, whose utilisation the system metrics report;
    `samplers`: extra metrics measured during the run; `journal`: where to record a server
    the workload starts (`Tracker`); `before_measure`: what the target does
    between a workload's set-up and its measured phase (drop the page cache, say); `lookup`:
    a replayed table's row for a workload name and repetition (TABLE_ROWS).
    """

    directory: Path | None = None
    rados: Sequence[str] = ()
    cgroup: Path | None = None
    devices: Sequence[str] = ()
    samplers: Sequence[Sampler] = ()
    journal: Tracker | None = None
    before_measure: Callable[[], None] = lambda: None
    lookup: Callable[[str, int], Measurement] | None = None
    repetition: int = 0  # which repetition the run fills


class Workload(ABC):
    """What drives a target during one run (a fio job, a rados bench)."""

    kind: str = ""
    name: str = "default"
    needs: Need = Need.DIRECTORY

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """A JSON-able spec from which `make_workload` rebuilds this workload."""

    @classmethod
    @abstractmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Workload:
        """The workload `describe()` described."""

    @abstractmethod
    def run(self, venue: Venue, timeout: float | None = None) -> Measurement:
        """One run in `venue`, killed after `timeout` seconds; never raises for the
        benchmark's own failure (a failed Measurement says what happened)."""

    def bind(self, values: Mapping[str, Any]) -> Workload:
        """This workload with the values of a config's workload parameters (by option name);
        a workload without parameters refuses any, so a workload x system space is never run
        with a workload that would ignore its workload half."""
        if values:
            raise ConfigError(
                f"workload {self.name!r} takes no workload parameters "
                f"(the config sets {', '.join(sorted(values))}); use a parametric workload "
                "such as spa"
            )
        return self

    @property
    def footprint_bytes(self) -> int:
        """Bytes the workload writes to its venue (room a target must leave for it)."""
        return 0

    @property
    def expected_seconds(self) -> float | None:
        """How long one run lasts, about (None: unknown); plans use it to fit a time budget."""
        return None

    @property
    def declared(self) -> Declarations:
        """The objective, guardrails and start state the workload declares (a job file's
        ``# stortune ...`` lines); none by default, starting cold."""
        return Declarations()

    def metric_names(self) -> frozenset[str] | None:
        """The metric names a run can report, besides the target's own (``sys.*``); None when
        that is unknown (a replayed table's columns, a program's own output)."""
        return None


def numeric_metrics(data: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Flatten nested mappings to dotted names and keep the numbers (booleans excluded)."""
    out: dict[str, float] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(numeric_metrics(value, f"{name}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)
    return out
