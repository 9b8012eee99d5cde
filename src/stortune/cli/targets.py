"""Target and workload options shared by every command that measures (run, tune, sweep, rank,
noise), derived from the registered targets' settings dataclasses.

Each settings field with a flag becomes one option of these commands; `TargetOptions.build`
picks the target (``--target``, or the one an option given implies, else localfs), refuses
options that belong to another target, and makes it from its own options' values.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer

from stortune import bounds
from stortune.cli import checks
from stortune.errors import StortuneError
from stortune.measure.reference import default_reference_every
from stortune.space import Space
from stortune.targets import registry, target_class
from stortune.targets.base import CliOption, Target
from stortune.targets.command import check_output_format, split_command
from stortune.targets.table import MAX_REPLAY
from stortune.workloads.base import Workload

DEFAULT_TARGET = "localfs"

WORKLOAD = typer.Option(
    [],
    "--workload",
    "-w",
    help="What drives the target, repeatable: a fio template (`stortune workload list`) or "
    "your own .fio job file on localfs/tmpfs, whose placeholders are ${DIR} (the directory "
    "under test; every path must be under it), ${RUNTIME} (from --runtime), ${SIZE} and "
    "${NAME/N} (NAME divided by N), the file set's size after a colon (dbfsync:size=64m); "
    "check one with `stortune workload check FILE`; "
    "rados-write, rados-seq or rados-rand on ceph; a workload recorded in a --dataset; on a "
    "directory also pgbench, pgbench-select and rocksdb-fillrandom|readrandomwriterandom|"
    "readrandom, sizes after a colon (pgbench:scale=4,clients=4) "
    "\\[default: the target's own: fileserver, rados-rand, every workload of the dataset].",
)
RUNTIME = typer.Option(
    None,
    "--runtime",
    callback=checks.RUNTIME,
    help="Seconds each run measures: fio's runtime (a job file takes it through "
    "runtime=${RUNTIME}, or gets it when it sets no runtime; one with its own runtime= is "
    "refused), rados bench's duration (reads are prefilled for as long), pgbench's and "
    "db_bench's timed phase \\[default: 10; pgbench and db_bench 30].",
)
CHECK_DISTURBANCE = typer.Option(
    True,
    "--check-disturbance/--no-check-disturbance",
    envvar="STORTUNE_CHECK_DISTURBANCE",
    help="Redo a run when another benchmark, other processes' CPU or other devices' I/O "
    "disturbed it, and wait (counting down, at most --busy-wait s) while the machine is busy.",
)
BUSY_WAIT = typer.Option(
    600.0,
    "--busy-wait",
    callback=checks.WAIT,
    help="Seconds to wait for a busy machine before stopping the campaign (resumable).",
)
REFERENCE_EVERY = typer.Option(
    None,
    "--reference-every",
    callback=checks.EVERY,
    help="Measure the space's default config before the first evaluation, after every N and at "
    "the end, so runs read relative to it (0: never) \\[default: 5 on targets that measure this "
    "machine, else 0].",
)


# What a target option's value must be, checked as the command line is read, by field name; an
# int or float option not named here must be a whole number or a number from 0 to DEFAULT_HIGH.
DEFAULT_HIGH = 2**31 - 1
OPTION_CHECKS: dict[str, checks.Callback] = {
    "image_size": checks.SIZE,
    "memory_limit": checks.SIZE,
    "noise": checks.within(bounds.SHARE),
    "noise_seed": checks.SEED,
    "replay_seconds": checks.within(bounds.Range(0, MAX_REPLAY)),
    "osds": checks.within(bounds.Range(1, 64, whole=True)),
    "health_timeout": checks.TIMEOUT,
    "command": checks.checked(lambda text: (split_command(text), text)[1]),
    "output": checks.checked(check_output_format),
}
DEFAULT_CHECKS = {
    int: checks.within(bounds.Range(0, DEFAULT_HIGH, whole=True)),
    float: checks.within(bounds.Range(0, DEFAULT_HIGH)),
}


def reference_every(value: int | None, target: Target) -> int:
    return value if value is not None else default_reference_every(target)


def option_table() -> dict[str, CliOption]:
    """Every registered target's options by field name; two targets may share an option only
    with the same flag and type."""
    table: dict[str, CliOption] = {}
    for kind, cls in registry().items():
        for option in cls.Settings.cli_options():
            known = table.get(option.name)
            if known is not None and (known.flag, known.type) != (option.flag, option.type):
                raise StortuneError(
                    f"target {kind}: option {option.name} clashes with another target's "
                    f"{known.flag} ({known.type.__name__})"
                )
            table.setdefault(option.name, option)
    return table


def owners(name: str) -> list[str]:
    return [k for k, cls in registry().items() if name in _field_names(cls)]


def _field_names(cls: type[Target]) -> set[str]:
    return {o.name for o in cls.Settings.cli_options()}


@dataclass
class TargetOptions:
    """What the target and workload options said."""

    target: str | None = None
    workload: list[str] = field(default_factory=list)
    runtime: float | None = None
    values: dict[str, Any] = field(default_factory=dict)  # target options by field name

    def given(self) -> dict[str, Any]:
        """The target options set to something other than their default."""
        table = option_table()
        return {k: v for k, v in self.values.items() if k in table and v != table[k].default}

    @property
    def kind(self) -> str:
        if self.target:
            target_class(self.target)  # an unknown kind fails here, naming the known ones
            return self.target
        table = option_table()
        implied = sorted({owners(k)[0] for k in self.given() if table[k].implies})
        if len(implied) > 1:
            flags = ", ".join(table[k].flag for k in self.given() if table[k].implies)
            raise StortuneError(f"{flags} name different targets: give one, or --target")
        return implied[0] if implied else DEFAULT_TARGET

    def build(self, space: Space | None) -> Target:
        kind = self.kind
        cls = target_class(kind)
        own = _field_names(cls)
        table = option_table()
        foreign = [k for k in self.given() if k not in own]
        if foreign:
            name = foreign[0]
            raise StortuneError(
                f"{table[name].flag} is an option of the {' / '.join(owners(name))} target, "
                f"and this command measures the {kind} target"
            )
        values = {k: v for k, v in self.values.items() if k in own}
        return cls(space, **values)

    def build_with_space(self, space: str | None) -> Target:
        """The target with `space` (a file or bundled name), else with its own: the bundled
        space it declares, or one it infers from its data (a table)."""
        from stortune.space import load_space

        target = self.build(load_space(space) if space else None)
        if target.space is None:
            raise StortuneError(
                f"a new campaign needs --space: the {self.kind} target has no space of its own"
            )
        return target

    def workloads(self, target: Target) -> list[Workload | None]:
        if self.runtime is not None and not (math.isfinite(self.runtime) and self.runtime > 0):
            raise StortuneError(
                f"--runtime must be a positive number of seconds, not {self.runtime}"
            )
        return target.workloads(list(self.workload), self.runtime)


def target_help() -> str:
    kinds = "; ".join(f"{kind}: {cls.summary}" for kind, cls in registry().items())
    implied = ", ".join(o.flag for o in option_table().values() if o.implies)
    return (
        f"What to measure ({kinds}) \\[default: the target an option given names ({implied}), "
        f"else {DEFAULT_TARGET}]."
    )


def with_target_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command every target and workload option, collected into one `TargetOptions`
    passed as its ``targets`` argument (typer has no option groups; this keeps one list)."""
    table = option_table()
    extra: dict[str, tuple[Any, Any]] = {
        "target": (str, typer.Option(None, "--target", "-t", help=target_help())),
        "workload": (list[str], WORKLOAD),
        "runtime": (float, RUNTIME),
    }
    for name, option in table.items():
        if option.type is bool:
            flag = typer.Option(option.default, option.flag, help=option.help)
        else:
            flag = typer.Option(
                option.default,
                option.flag,
                help=option.help,
                show_default=option.default is not None,
                callback=OPTION_CHECKS.get(name, DEFAULT_CHECKS.get(option.type)),
            )
        extra[name] = (option.type if option.type in (str, int, float, bool) else str, flag)
    signature = inspect.signature(func)
    own = [p for p in signature.parameters.values() if p.name != "targets"]
    params = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
        for name, (kind, option) in extra.items()
    ]
    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        options = TargetOptions(
            kwargs.pop("target"),
            kwargs.pop("workload"),
            kwargs.pop("runtime"),
            {name: kwargs.pop(name) for name in table},
        )
        return func(targets=options, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=keyword[:1] + params + keyword[1:])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{k: v for k, v in func.__annotations__.items() if k != "targets"},
        **{name: kind for name, (kind, _) in extra.items()},
    }
    return wrapper
