"""Workloads: what drives a target during a run. `make_workload(spec)` rebuilds one from the
spec its `describe()` returned (stored with every campaign); `workload_named` builds one from
the name a user gives (``fileserver``, ``my.fio``, ``rados-rand``), among the kinds that serve
what the target provides."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Collection, Mapping
from typing import Any

from stortune.errors import ConfigError, TargetError
from stortune.space import Application
from stortune.units import parse_size
from stortune.workloads import postgres, rocksdb
from stortune.workloads.base import Measurement, Need, Venue, Workload
from stortune.workloads.fio import (
    ALIASES,
    DEFAULT_RUNTIME,
    TEMPLATES,
    FioWorkload,
    parse_fio_output,
)
from stortune.workloads.launcher import User
from stortune.workloads.postgres import Mode, PgbenchWorkload
from stortune.workloads.rados import PRESETS, RadosWorkload
from stortune.workloads.rocksdb import Benchmark, DbBenchWorkload
from stortune.workloads.rows import RowsWorkload
from stortune.workloads.spa import SpaWorkload

KINDS: dict[str, type[Workload]] = {
    "fio": FioWorkload,
    "rados": RadosWorkload,
    "rows": RowsWorkload,
    "spa": SpaWorkload,
    "pgbench": PgbenchWorkload,
    "db_bench": DbBenchWorkload,
}

# The application workloads by the names a user gives (-w pgbench, -w rocksdb-fillrandom), and
# the sizes a name may set after a colon (-w pgbench:scale=4,clients=4).
Factory = Callable[[float | None, dict[str, int]], Workload]
APPLICATIONS: dict[str, Factory] = {
    **{
        PgbenchWorkload(mode).name: (
            lambda runtime, sizes, mode=mode: PgbenchWorkload(mode, **_runtime(runtime), **sizes)
        )
        for mode in Mode
    },
    **{
        f"rocksdb-{bench}": (
            lambda runtime, sizes, bench=bench: DbBenchWorkload(bench, **_runtime(runtime), **sizes)
        )
        for bench in Benchmark
    },
}
SIZES = {"pgbench": ("scale", "clients", "jobs"), "rocksdb": ("keys", "value_size", "threads")}


def _runtime(runtime: float | None) -> dict[str, float]:
    return {"runtime": runtime} if runtime else {}


def _application(text: str, runtime: float | None) -> Workload | None:
    """``NAME`` or ``NAME:KEY=N,KEY=N`` of an application workload (None: not one)."""
    name, _, rest = text.partition(":")
    if name not in APPLICATIONS:
        return None
    allowed = SIZES[name.split("-", 1)[0]]
    sizes: dict[str, int] = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key not in allowed or not value.isdigit() or int(value) < 1:
            raise ConfigError(
                f"workload {text!r}: give sizes as {name}:KEY=N,... with KEY one of "
                f"{', '.join(allowed)} and N a whole number from 1"
            )
        sizes[key] = int(value)
    return APPLICATIONS[name](runtime, sizes)


def check_installed(application: Application) -> None:
    """TargetError, in one line, when this machine cannot run `application` at all (so a
    space's values are not blamed for a missing program)."""
    if application is Application.POSTGRES:
        postgres.installation()
        User.named(postgres.USER)
    elif shutil.which(rocksdb.PROGRAM) is None:
        raise TargetError(f"{rocksdb.PROGRAM} is not installed (Debian's rocksdb-tools has it)")


def application_workload(application: Application) -> PgbenchWorkload | DbBenchWorkload:
    """A workload that runs `application`, whose `probe` starts it with given options (what
    `stortune space clean` applies an application's values with)."""
    if application is Application.POSTGRES:
        return PgbenchWorkload()
    return DbBenchWorkload()


def make_workload(spec: Mapping[str, Any]) -> Workload:
    """The workload a spec describes; ``kind`` picks the class (default ``fio``)."""
    kind = spec.get("kind", "fio")
    if kind not in KINDS:
        raise ConfigError(f"unknown workload kind {kind!r} (choose from {', '.join(KINDS)})")
    return KINDS[kind].from_spec(spec)


def _fio(name: str, runtime: float | None) -> Workload | None:
    application = _application(name, runtime)
    if application is not None:
        return application
    if name == "spa":
        return SpaWorkload(runtime=runtime or DEFAULT_RUNTIME)
    job, size = _fio_size(name)
    if job in TEMPLATES or job in ALIASES or job.endswith(".fio") or "/" in job:
        timing = {"runtime": runtime, "runtime_given": True} if runtime else {}
        return FioWorkload(job, size=_checked_size(name, job, size), **timing)
    return None


def _fio_size(name: str) -> tuple[str, str | None]:
    """``JOB`` or ``JOB:size=SIZE`` (the file set's total size, as fio writes sizes: 64m, 2g),
    split into the job and the size (None: the job's own). A smaller file set lays out faster;
    a file set that the page cache holds measures the cache, not the stack."""
    job, colon, option = name.rpartition(":")
    if not colon or not option.startswith("size="):
        return name, None
    return job, option.removeprefix("size=")


def _checked_size(name: str, job: str, size: str | None) -> str | None:
    """The size given after a fio job's name, refused in one line unless fio can take it."""
    if size is None:
        return None
    try:
        positive = parse_size(size) > 0
    except ConfigError:
        positive = False
    if not positive:
        raise ConfigError(
            f"workload {name!r}: give the file set's size as {job}:size=N with a unit, "
            "as fio takes it (64m, 2g)"
        )
    return size


def _rados(name: str, runtime: float | None) -> Workload | None:
    if name in PRESETS:
        return RadosWorkload.named(name, **({"duration": runtime} if runtime else {}))
    return None


def _rows(name: str, runtime: float | None) -> Workload | None:
    return RowsWorkload(name)


# What serves each need, and the names it takes (for the error message).
BUILDERS: dict[Need, tuple[Callable[[str, float | None], Workload | None], str]] = {
    Need.DIRECTORY: (
        _fio,
        f"fio templates {', '.join(TEMPLATES)}, spa (takes the workload parameters of a "
        f"workload x system space), a .fio job file, or an application: "
        f"{', '.join(APPLICATIONS)} (sizes after a colon: dbfsync:size=64m, "
        "pgbench:scale=4,clients=4)",
    ),
    Need.RADOS_POOL: (_rados, f"rados bench {', '.join(PRESETS)}"),
    Need.TABLE_ROWS: (_rows, "a workload recorded in the dataset"),
}


def workload_named(
    name: str, runtime: float | None = None, provides: Collection[Need] | None = None
) -> Workload:
    """The workload called `name`, lasting `runtime` seconds, of a kind that serves one of
    `provides` (default: any)."""
    needs = [n for n in BUILDERS if provides is None or n in provides]
    for need in needs:
        built = BUILDERS[need][0](name, runtime)
        if built is not None:
            return built
    known = "; ".join(BUILDERS[n][1] for n in needs) or "none"
    raise ConfigError(f"unknown workload {name!r} (known: {known})")


__all__ = [
    "APPLICATIONS",
    "KINDS",
    "application_workload",
    "TEMPLATES",
    "Measurement",
    "Need",
    "Venue",
    "Workload",
    "make_workload",
    "parse_fio_output",
    "workload_named",
]
