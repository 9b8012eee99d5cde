"""What every system under test provides, and the one shape of its settings.

A `Target` brings a system to a config (`apply`) and measures it (`run`). Its settings are one
frozen dataclass (`TargetSettings`); everything else about them is derived from it: the spec
stored with a campaign (`describe`), the rebuilt target of a resume (`from_spec`), and the
command-line options (`cli_options`, one per field that carries a flag). Adding a target is
writing its module (a `Target` subclass with a `kind`, found by `stortune.targets.registry`), its
space file and its tests.

Workloads say what they need (`Need`); a target says what it `provides` and hands each run a
`Venue` (`workloads.base`), so targets never import concrete workloads.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from stortune.errors import TargetError
from stortune.space import Config, Space, load_space
from stortune.values import plain
from stortune.workloads.base import Measurement, Need, Venue, Workload

if TYPE_CHECKING:
    from stortune.store import Run
    from stortune.targets.install import InstallFile

log = logging.getLogger(__name__)


def setting(
    default: Any = None,
    *,
    flag: str | None = None,
    help: str = "",  # noqa: A002 - the word every CLI library uses
    implies: bool = False,
    factory: Callable[[], Any] | None = None,
) -> Any:
    """A settings field; `flag` (``--image-size``) makes it a command-line option, `implies`
    says that giving it picks this target when ``--target`` is not given; `factory` computes
    the default when a target is made (a folder named by an environment variable, say)."""
    metadata = {"flag": flag, "help": help, "implies": implies}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class CliOption:
    """A command-line option derived from a settings field."""

    name: str  # the field
    flag: str
    type: type
    default: Any
    help: str
    implies: bool


class SpecError(TargetError):
    """A target's stored spec is not one `from_spec` can make a target of."""


@dataclasses.dataclass(frozen=True)
class TargetSettings:
    """Base of every target's settings dataclass (fields made with `setting`)."""

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], kind: str = "") -> Self:
        """From a stored spec; refuses settings it does not know (a campaign stored by another
        version, a typo in a spec file). ``kind`` and ``space`` are the spec's own keys."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(spec) - names - {"kind", "space"})
        if unknown:
            raise SpecError(
                f"{kind or 'target'}: unknown setting(s) {', '.join(unknown)} "
                f"(known: {', '.join(sorted(names))})"
            )
        hints = typing.get_type_hints(cls)
        for name, value in spec.items():
            if name in names and not _fits(value, hints[name]):
                raise SpecError(
                    f"{kind or 'target'}: setting {name} holds {value!r:.60}, not a value of "
                    f"type {_type_text(hints[name])}"
                )
        return cls(**{k: v for k, v in spec.items() if k in names})

    def to_spec(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def cli_options(cls) -> list[CliOption]:
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            flag = f.metadata.get("flag")
            if not flag:
                continue
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            out.append(
                CliOption(
                    f.name, flag, _cli_type(hints[f.name]), default, f.metadata.get("help", ""),
                    bool(f.metadata.get("implies")),
                )
            )  # fmt: skip
        return out


def _fits(value: Any, hint: Any) -> bool:
    """Whether a stored setting's value is of its field's type (what a spec read back from a
    store or a file must be before a target is made of it)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (types.UnionType, typing.Union):
        return any(_fits(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if origin in (list, tuple):
        return isinstance(value, list | tuple) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            _fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items()
        )
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True


def _type_text(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _cli_type(hint: Any) -> type:
    """The plain type of a field for its option: ``str | None`` is str, ``int`` int, lists of
    strings stay lists."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        hint = next(a for a in args if a is not type(None))
    origin = typing.get_origin(hint)
    if origin is list:
        return list
    return hint if isinstance(hint, type) else str


class Target(ABC):
    """The system under test. Use as a context manager: setup on enter, teardown on exit."""

    kind: ClassVar[str] = ""
    Settings: ClassVar[type[TargetSettings]] = TargetSettings
    summary: ClassVar[str] = ""  # one line for `--target`'s help
    provides: ClassVar[frozenset[Need]] = frozenset()  # what workloads it can host
    default_workloads: ClassVar[tuple[str, ...]] = ()  # by name, when none is given
    # Whether runs measure this machine (and so must not overlap with another benchmark);
    # targets that replay data or evaluate a model say False.
    measures_machine: ClassVar[bool] = True
    default_space: ClassVar[str | None] = None  # the bundled space a target uses when given none
    # METRIC:max|min a new campaign optimises when given no --objective and its workloads
    # declare none (`campaign_objective`); None: the user must say
    default_objective: ClassVar[str | None] = None

    def __init__(
        self,
        space: Space | str | None = None,
        settings: TargetSettings | None = None,
        **values: Any,
    ) -> None:
        if settings is not None and values:
            raise TargetError(f"{self.kind}: give settings or keyword values, not both")
        if isinstance(space, str) or (space is None and self.default_space):
            space = load_space(space or self.default_space)  # type: ignore[arg-type]
        self.space: Space | None = space
        self._state_after_run: dict[str, float] = {}
        try:
            self.settings = settings if settings is not None else self.Settings(**values)
        except TypeError as exc:
            raise TargetError(f"{self.kind} target: {exc}") from None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind and not getattr(cls, "__abstractmethods__", None):
            from stortune.targets import register

            register(cls)

    # ---- what a production system installs ---------------------------------------------------
    @classmethod
    def install_files(cls, config: Config, space: Space) -> list[InstallFile]:
        """The files that hold `config`'s changes from the space's defaults as a production
        system installs them (`system_files`), then each application's own options where it
        reads them (postgresql.conf lines, RocksDB options). A class method: a stored
        campaign's recommendation needs no live target."""
        from stortune.targets.install import application_files

        return cls.system_files(config, space) + application_files(config, space)

    @classmethod
    def system_files(cls, config: Config, space: Space) -> list[InstallFile]:
        """The target's own part of `install_files`: ``name = value`` lines unless the target
        has a native form (fstab and sysctl.d, ceph.conf)."""
        from stortune.targets.install import plain_files

        return plain_files(config, space)

    # ---- spec -------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The JSON-able spec from which `from_spec` rebuilds this target."""
        return {"kind": self.kind, **self.settings.to_spec()}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], space: Space | None = None) -> Self:
        """The target a spec describes; without a space, the bundled one the spec names."""
        named = spec.get("space") if isinstance(spec.get("space"), str) else None
        return cls(space or named, cls.Settings.from_spec(spec, cls.kind))

    # ---- life cycle -------------------------------------------------------------------------
    def preflight(self) -> None:  # noqa: B027 - optional hook
        """Refuse what can be refused before anything is locked or touched (no root, a
        mounted device); raises TargetError."""

    def setup(self) -> None:  # noqa: B027 - optional hook
        """Bring the system up (create images, start daemons). Idempotent."""

    @abstractmethod
    def apply(self, config: Config) -> None:
        """Bring the system to `config` (raise TargetError when that is impossible)."""

    def run(
        self, workload: Workload | None = None, timeout: float | None = None, repetition: int = 0
    ) -> Measurement:
        """Measure the current config under `workload`, killing it after `timeout` seconds;
        `repetition` is the repetition this run fills (a replayed table answers with the
        matching stored one). A successful run's state is kept for `state`; a failed one
        leaves the state the last good run left."""
        measurement = self.attempt(workload, timeout, repetition)
        if measurement.ok:
            self._state_after_run = self.state_after(measurement.metrics)
        return measurement

    def attempt(
        self, workload: Workload | None = None, timeout: float | None = None, repetition: int = 0
    ) -> Measurement:
        """One run of the current config, as `run` describes (the part targets extend)."""
        self.check_workload(workload)
        if workload is None:
            return self.measure(timeout, repetition)
        venue = self.venue(workload)
        venue.repetition = repetition
        measurement = workload.run(venue, timeout)
        self.after_run(workload, measurement)
        return measurement

    def check_workload(self, workload: Workload | None) -> None:
        """Refuse a workload this target cannot host (or a missing one it needs)."""
        if workload is None:
            if self.provides:
                raise TargetError(f"the {self.kind} target needs a workload to run")
            return
        if workload.needs not in self.provides:
            offers = ", ".join(sorted(self.provides)) or "no resource: it measures by itself"
            raise TargetError(
                f"workload {workload.name!r} needs a {workload.needs}, which the {self.kind} "
                f"target does not provide (it offers {offers})"
            )

    def measure(self, timeout: float | None = None, repetition: int = 0) -> Measurement:
        """A run without a workload: targets that measure by themselves (a command, a table)."""
        raise TargetError(f"the {self.kind} target needs a workload to run")

    def venue(self, workload: Workload) -> Venue:
        """The resource a workload runs in, ready for one run."""
        raise TargetError(f"the {self.kind} target provides no venue for {workload.name!r}")

    def reassert(self) -> list[str]:
        """Machine-wide settings of the applied config that something else changed since,
        each as one line, after writing them back; a run they changed under is disturbed."""
        return []

    def after_run(self, workload: Workload, measurement: Measurement) -> None:  # noqa: B027
        """What a target adds to a run's record (its devices, its options)."""

    def workloads(self, names: list[str], runtime: float | None) -> list[Workload | None]:
        """The workloads named (or this target's default ones) at `runtime` seconds."""
        from stortune.workloads import workload_named

        chosen = names or list(self.default_workloads)
        if not self.provides:
            if names:
                raise TargetError(
                    f"the {self.kind} target measures by itself: it takes no --workload"
                )
            return [None]
        built = [workload_named(name, runtime, self.provides) for name in chosen]
        for workload in built:
            self.check_workload(workload)
        return built

    def tuning_pool(self) -> list[Config] | None:
        """The only configs this target can run, when tuners must choose among them (a table
        in pool mode); None for targets that run any valid config."""
        return None

    def state(self) -> dict[str, float]:
        """System metrics for tuners that want state (DDPG): what `state_after` took from the
        last successful run, and the gauges `live_state` reads now."""
        return {**self._state_after_run, **self.live_state()}

    def metric_names(self) -> frozenset[str] | None:
        """The metric names a run reports when no workload's names say it (the target measures
        by itself, or replays what it holds), as names or patterns (``*.read.iops``); None when
        unknown ahead (a program's own output). Objectives are checked against them."""
        return None

    def live_state(self) -> dict[str, float]:
        """Gauges read now, not stored with any run (load, memory, dirty pages): a replayed
        campaign cannot give them back. Empty unless a target adds them."""
        return {}

    def state_after(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """The part of a successful run's metrics that `state` reports after it: what a
        replayed campaign gives its tuner for each stored run (gauges read live, after the run,
        are not stored and so are not part of it). Empty when the target has no state."""
        return {}

    def recall(self, runs: Iterable[Run]) -> None:  # noqa: B027 - optional hook
        """The runs a campaign being resumed stored in its earlier sittings: a target whose
        answers depend on the runs it made before (a table's noise draws) goes on as if it had
        made them, so the resumed campaign measures what one sitting would have."""

    def teardown(self) -> None:  # noqa: B027 - optional hook
        """Undo everything setup and apply did (mounts, devices, settings, daemons)."""

    def __enter__(self) -> Self:
        self.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()


def noise_fraction(value: Any, what: str) -> float:
    """A target's multiplicative noise setting as a float: a finite fraction >= 0, else one
    line naming the setting (`what`)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise TargetError(f"{what} must be a fraction >= 0, not {value!r}")
    return float(value)


def require_root(what: str) -> None:
    """Say plainly what needs root and what works without it."""
    if os.geteuid() != 0:
        raise TargetError(
            f"{what} needs root (loop devices, mkfs, mount, sysfs, daemons); without root you can "
            "measure a directory with --target command and fio, or replay a dataset with "
            "--target table --dataset FILE"
        )
