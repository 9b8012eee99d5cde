"""Target and workload options shared by every command that measures (run, sweep, tune, demo).

Typer has no option groups, so the options are module-level singletons reused as defaults, and
`build_target` / `build_workloads` turn their values into objects.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer

from stortune.errors import StortuneError, TargetError
from stortune.space import Space
from stortune.targets import REGISTRY, Target, Workload

TARGET = typer.Option(
    None,
    "--target",
    "-t",
    help="What to measure: localfs (a loop-device file system; root), ceph (a local Ceph "
    "mini-cluster, or an existing one with --ceph-conf; root), command (any program printing "
    "JSON metrics), table (replay a dataset), surrogate (a fitted model predicts) [default: "
    "command with --command, surrogate with --model, table with --dataset, ceph with "
    "--ceph-conf, else localfs].",
)
COMMAND = typer.Option(
    None,
    "--command",
    help="command target: program and arguments with {param} placeholders, run without a "
    "shell; it prints JSON metrics (or fio JSON with --output fio).",
)
OUTPUT = typer.Option("json", "--output", help="command target: json or fio.")
DATASET = typer.Option(None, "--dataset", help="table target: the dataset file to replay.")
NEAREST = typer.Option(
    False, "--nearest", help="table target: answer unknown configs with the nearest row."
)
MODEL = typer.Option(
    None,
    "--model",
    help="surrogate target: a model saved by `stortune model fit -o` "
    "(e.g. --model stortune-out/models/runs.iops.cart.joblib).",
)
WORKLOAD = typer.Option(
    [],
    "--workload",
    "-w",
    help="localfs: a fio template (fileserver, webserver, mailserver, dbserver, seqread, "
    "seqwrite, randread, randwrite) or a .fio job file; ceph: rados-write, rados-seq or "
    "rados-rand; repeatable [default: fileserver; ceph: rados-rand].",
)
RUNTIME = typer.Option(
    10.0,
    "--runtime",
    help="localfs: seconds each fio run lasts; ceph: seconds of rados bench (reads are "
    "prefilled for as long).",
)
OSDS = typer.Option(2, "--osds", help="ceph: OSDs of the local mini-cluster.")
CEPH_CONF = typer.Option(
    None,
    "--ceph-conf",
    help="ceph: tune the existing cluster this ceph.conf names (runtime options only unless "
    "--allow-restart; pools are never deleted) instead of a local mini-cluster.",
)
KEYRING = typer.Option(None, "--keyring", help="ceph: the existing cluster's keyring.")
ALLOW_RESTART = typer.Option(
    False,
    "--allow-restart",
    help="ceph: with --ceph-conf, allow restarting the cluster's daemons for startup options.",
)
HEALTH_TIMEOUT = typer.Option(
    180.0,
    "--health-timeout",
    help="ceph: seconds a changed cluster may take to become healthy before the config "
    "counts as failed.",
)
IMAGE_SIZE = typer.Option("4g", "--image-size", help="localfs: size of the loop image file.")
DEVICE = typer.Option(
    None,
    "--device",
    help="localfs: use this scratch block device instead of an image file "
    "(needs --destroy-data; refused when mounted or the root disk).",
)
DESTROY_DATA = typer.Option(
    False, "--destroy-data", help="localfs: allow formatting the --device (its data is lost)."
)
CHECK_DISTURBANCE = typer.Option(
    True,
    "--check-disturbance/--no-check-disturbance",
    help="Redo a run (at most twice, after a pause) when another benchmark, other processes' "
    "CPU or other devices' I/O disturbed it.",
)
REFERENCE_EVERY = typer.Option(
    None,
    "--reference-every",
    help="Measure the space's default config before the first evaluation, after every N and at "
    "the end, so runs read relative to it (0: never) [default: 5 on targets that measure this "
    "machine, else 0].",
)
DEFAULT_REFERENCE_EVERY = 5


def reference_every(value: int | None, target: Target) -> int:
    """The reference schedule asked for, or the default: on for drifting machines, off for
    targets that replay numbers (a table, a model)."""
    if value is not None:
        return value
    return DEFAULT_REFERENCE_EVERY if target.measures_machine else 0


MEMORY_LIMIT = typer.Option(
    None,
    "--memory-limit",
    help="localfs: cap the benchmark's page cache with a memory cgroup (e.g. 512m).",
)


def target_kind(
    kind: str | None,
    command: str | None,
    dataset: str | None,
    model: str | None = None,
    ceph_conf: str | None = None,
) -> str:
    """The target named, or the one the other options imply."""
    if kind:
        return kind
    if command:
        return "command"
    if model:
        return "surrogate"
    if ceph_conf:
        return "ceph"
    return "table" if dataset else "localfs"


def build_target(
    kind: str,
    space: Space,
    *,
    command: str | None = None,
    output: str = "json",
    dataset: str | None = None,
    nearest: bool = False,
    model: str | None = None,
    image_size: str = "4g",
    device: str | None = None,
    destroy_data: bool = False,
    memory_limit: str | None = None,
    ceph: CephOptions | None = None,
) -> Target:
    """A target from command-line options (each target's own checks run in its constructor)."""
    if kind == "command":
        if not command:
            raise StortuneError("--target command needs --command 'PROGRAM ARGS {param} ...'")
        from stortune.targets.command import CommandTarget

        return CommandTarget(command, output=output)
    if kind == "table":
        if not dataset:
            raise StortuneError("--target table needs --dataset FILE")
        from stortune.datasets import load_dataset
        from stortune.targets.table import TableTarget

        return TableTarget(load_dataset(dataset), space, nearest=nearest)
    if kind == "surrogate":
        if not model:
            raise StortuneError(
                "--target surrogate needs --model FILE (from `stortune model fit -o`)"
            )
        from stortune.targets.surrogate import SurrogateTarget

        return SurrogateTarget(model, space)
    if kind == "localfs":
        require_root("the localfs target")
        from stortune.targets.localfs import LocalFsTarget

        return LocalFsTarget(
            space,
            image_size=image_size,
            device=device,
            destroy_data=destroy_data,
            memory_limit=memory_limit,
        )
    if kind == "ceph":
        ceph = ceph or CephOptions()
        if ceph.conf is None:
            require_root("the ceph target's local mini-cluster")
        from stortune.targets.ceph import CephTarget

        return CephTarget(space, **ceph.settings())
    if kind in REGISTRY:
        raise StortuneError(f"target {kind!r} has no command-line options yet")
    raise TargetError(f"unknown target {kind!r} (choose from {', '.join(sorted(REGISTRY))})")


def build_workloads(kind: str, names: list[str], runtime: float) -> list[Workload | None]:
    """fio workloads for the localfs target, rados bench for ceph; the other targets measure
    without one."""
    if kind == "localfs":
        from stortune.workloads.fio import FioWorkload

        return [FioWorkload(name, runtime=runtime) for name in (names or ["fileserver"])]
    if kind == "ceph":
        from stortune.workloads.rados import RadosWorkload

        return [RadosWorkload.named(n, duration=runtime) for n in (names or ["rados-rand"])]
    if names:
        raise StortuneError(f"--workload is for the localfs and ceph targets, not {kind!r}")
    return [None]


def require_root(what: str) -> None:
    """Say plainly what needs root and what works without it."""
    if os.geteuid() != 0:
        raise StortuneError(
            f"{what} needs root (loop devices, mkfs, mount, sysfs, daemons); without root you can "
            "measure a directory with --target command and fio, or replay a dataset with "
            "--target table --dataset FILE"
        )


@dataclass(frozen=True)
class CephOptions:
    """The ceph target's command-line settings."""

    osds: int = 2
    conf: str | None = None
    keyring: str | None = None
    allow_restart: bool = False
    health_timeout: float = 180.0

    def settings(self) -> dict[str, Any]:
        mode = "existing" if self.conf else "local"
        out: dict[str, Any] = {"mode": mode, "health_timeout": self.health_timeout}
        if mode == "local":
            return {**out, "osds": self.osds}
        return {
            **out,
            "conf": self.conf,
            "keyring": self.keyring,
            "allow_restart": self.allow_restart,
        }


@dataclass
class TargetOptions:
    """What the shared target and workload options said, for commands taking `--target ...`."""

    target: str | None = None
    workload: list[str] = field(default_factory=list)
    runtime: float = 10.0
    image_size: str = "4g"
    device: str | None = None
    destroy_data: bool = False
    memory_limit: str | None = None
    command: str | None = None
    output: str = "json"
    dataset: str | None = None
    nearest: bool = False
    model: str | None = None
    osds: int = 2
    ceph_conf: str | None = None
    keyring: str | None = None
    allow_restart: bool = False
    health_timeout: float = 180.0

    @property
    def kind(self) -> str:
        return target_kind(self.target, self.command, self.dataset, self.model, self.ceph_conf)

    def build(self, space: Space) -> Target:
        return build_target(
            self.kind,
            space,
            command=self.command,
            output=self.output,
            dataset=self.dataset,
            nearest=self.nearest,
            model=self.model,
            image_size=self.image_size,
            device=self.device,
            destroy_data=self.destroy_data,
            memory_limit=self.memory_limit,
            ceph=CephOptions(
                self.osds, self.ceph_conf, self.keyring, self.allow_restart, self.health_timeout
            ),
        )

    def workloads(self) -> list[Workload | None]:
        return build_workloads(self.kind, self.workload, self.runtime)


_OPTIONS: dict[str, tuple[Any, Any]] = {
    "target": (str, TARGET),
    "workload": (list[str], WORKLOAD),
    "runtime": (float, RUNTIME),
    "image_size": (str, IMAGE_SIZE),
    "device": (str, DEVICE),
    "destroy_data": (bool, DESTROY_DATA),
    "memory_limit": (str, MEMORY_LIMIT),
    "command": (str, COMMAND),
    "output": (str, OUTPUT),
    "dataset": (str, DATASET),
    "nearest": (bool, NEAREST),
    "model": (str, MODEL),
    "osds": (int, OSDS),
    "ceph_conf": (str, CEPH_CONF),
    "keyring": (str, KEYRING),
    "allow_restart": (bool, ALLOW_RESTART),
    "health_timeout": (float, HEALTH_TIMEOUT),
}


def with_target_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command every target and workload option, collected into one `TargetOptions`
    passed as its ``targets`` argument (typer has no option groups; this keeps one list)."""
    signature = inspect.signature(func)
    own = [p for p in signature.parameters.values() if p.name != "targets"]
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
        for name, (kind, option) in _OPTIONS.items()
    ]
    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        options = TargetOptions(**{name: kwargs.pop(name) for name in _OPTIONS})
        return func(targets=options, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=keyword[:1] + extra + keyword[1:])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{k: v for k, v in func.__annotations__.items() if k != "targets"},
        **{name: kind for name, (kind, _) in _OPTIONS.items()},
    }
    return wrapper
