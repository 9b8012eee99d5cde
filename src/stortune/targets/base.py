"""What every system under test and every workload provides.

A `Target` brings a system to a config (`apply`) and measures it (`run`); a `Workload` says what
drives it. Targets are built from a JSON-able spec (`describe()` / `make_target`) so that a
campaign stored in the results database can be resumed with exactly the same target.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stortune.errors import TargetError
from stortune.space import Config, Space


@dataclass
class Measurement:
    """The outcome of one run: metrics (numbers only) and what else is worth keeping.

    `status` is ``ok``, ``failed`` (the benchmark crashed, printed nothing usable, or its result
    is invalid) or ``timeout`` (it was killed after the per-run time limit); `error` says why in
    one line.
    """

    metrics: dict[str, float] = field(default_factory=dict)
    status: str = "ok"
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def failed(cls, error: str, status: str = "failed", **info: Any) -> Measurement:
        return cls(status=status, error=error, info=dict(info))


class Workload(ABC):
    """What drives a target during one run (a fio job, a rados bench)."""

    name: str = "default"

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """A JSON-able spec from which `make_workload` rebuilds this workload."""


class Target(ABC):
    """The system under test. Use as a context manager: setup on enter, teardown on exit."""

    kind: str = ""
    # Whether runs measure this machine (and so must not overlap with another benchmark);
    # targets that replay data or evaluate a model say False.
    measures_machine: bool = True

    @classmethod
    @abstractmethod
    def from_spec(cls, spec: dict[str, Any], space: Space) -> Target:
        """Rebuild the target from `describe()`'s spec; `space` tells what each parameter is."""

    def setup(self) -> None:  # noqa: B027 - optional hook
        """Bring the system up (create images, start daemons). Idempotent."""

    @abstractmethod
    def apply(self, config: Config) -> None:
        """Bring the system to `config` (raise TargetError when that is impossible)."""

    @abstractmethod
    def run(self, workload: Workload | None, timeout: float | None = None) -> Measurement:
        """Measure the current config under `workload`, killing it after `timeout` seconds."""

    def state(self) -> dict[str, float]:
        """System metrics for tuners that want state (DDPG); empty when the target has none."""
        return {}

    def teardown(self) -> None:  # noqa: B027 - optional hook
        """Undo everything setup and apply did (mounts, devices, settings, daemons)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """A JSON-able spec from which `make_target` rebuilds this target."""

    @classmethod
    def keyword_spec(
        cls, spec: Mapping[str, Any], space: Space | None, keys: Sequence[str]
    ) -> Target:
        """`from_spec` for targets built as ``cls(space, **settings)``: refuses settings it does
        not know (a stored campaign from another version, a typo in a spec file)."""
        unknown = sorted(set(spec) - set(keys) - {"kind", "space"})
        if unknown:
            raise TargetError(
                f"{cls.kind} target: unknown setting(s) {', '.join(unknown)} "
                f"(known: {', '.join(keys)})"
            )
        return cls(space or spec.get("space"), **{k: spec[k] for k in keys if k in spec})  # type: ignore[call-arg]

    def __enter__(self) -> Target:
        self.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()


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
