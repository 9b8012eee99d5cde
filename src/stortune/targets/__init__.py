"""Targets: the systems under test. `make_target(spec)` rebuilds one from its stored spec."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from stortune.errors import TargetError
from stortune.space import Space
from stortune.targets.base import Measurement, Target, Workload

# kind -> "module:Class"; each class has `from_spec(spec, space)`. Imported lazily, so that a
# target's heavy or optional dependencies cost nothing until it is used.
REGISTRY: dict[str, str] = {
    "ceph": "stortune.targets.ceph:CephTarget",
    "command": "stortune.targets.command:CommandTarget",
    "localfs": "stortune.targets.localfs:LocalFsTarget",
    "surrogate": "stortune.targets.surrogate:SurrogateTarget",
    "table": "stortune.targets.table:TableTarget",
}


def make_target(spec: Mapping[str, Any], space: Space) -> Target:
    kind = spec.get("kind")
    if kind not in REGISTRY:
        raise TargetError(f"unknown target {kind!r} (choose from {', '.join(sorted(REGISTRY))})")
    module_name, class_name = REGISTRY[kind].split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.from_spec(dict(spec), space)


__all__ = ["REGISTRY", "Measurement", "Target", "Workload", "make_target"]
