"""Workloads: what drives a target during a run. `make_workload(spec)` rebuilds one from the
spec its `describe()` returned (stored with every campaign)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stortune.errors import ConfigError
from stortune.targets.base import Workload
from stortune.workloads.fio import TEMPLATES, FioWorkload, parse_fio_output
from stortune.workloads.rados import RadosWorkload

KINDS = {"fio": FioWorkload, "rados": RadosWorkload}


def make_workload(spec: Mapping[str, Any]) -> Workload:
    """The workload a spec describes; ``kind`` picks the class (default ``fio``)."""
    kind = spec.get("kind", "fio")
    if kind not in KINDS:
        raise ConfigError(f"unknown workload kind {kind!r} (choose from {', '.join(KINDS)})")
    return KINDS[kind].from_spec(spec)


__all__ = ["KINDS", "TEMPLATES", "FioWorkload", "Workload", "make_workload", "parse_fio_output"]
