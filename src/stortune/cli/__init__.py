"""The `stortune` command line. Each command group lives in its own module of this package and
adds itself through `register(app)`; `COMMAND_MODULES` lists them."""

from __future__ import annotations

import importlib

import typer

from stortune.cli.common import fail
from stortune.errors import StortuneError

app = typer.Typer(
    name="stortune",
    help=(
        "Find out how a storage system's parameters shape its performance, and set them well.\n\n"
        "Start with `stortune demo`, or `stortune space show ext4` to see a bundled space."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_MODULES = [
    "space",
    "sample",
    "run",
    "sweep",
    "noise",
    "data",
    "rank",
    "model",
    "profile",
    "ceph",
    "tune",
    "report",
    "demo",
]

for _name in COMMAND_MODULES:
    importlib.import_module(f"stortune.cli.{_name}").register(app)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2."""
    try:
        app()
    except StortuneError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted; finished runs are stored (continue with --resume)", 130)
