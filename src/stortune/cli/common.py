"""What every command shares: the console, error exits, JSON output, the default store."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console

from stortune.errors import StortuneError

console = Console()
err_console = Console(stderr=True)

DEFAULT_STORE = "stortune.db"


def fail(message: str, code: int = 2) -> None:
    """Print one line saying what is wrong and exit (no traceback)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise SystemExit(code)


def print_json(data: Any) -> None:
    """Machine-readable output on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def parse_assignments(items: list[str]) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; values are typed later by the space."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise StortuneError(f"--config {item!r}: write NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


STORE_HELP = "Results store: a SQLite file path or a SQLAlchemy URL (postgresql://...)."
StoreOption = typer.Option(DEFAULT_STORE, "--store", envvar="STORTUNE_STORE", help=STORE_HELP)
SOURCE_HELP = "A dataset file (CSV, Parquet or ARFF) or the name of a campaign in --store."
WorkloadFilterOption = typer.Option(
    None, "--workload", "-w", help="Analyse this workload's runs (needed when there are several)."
)
RawOption = typer.Option(
    False, "--raw", help="Absolute values, not relative to the reference config (drift-prone)."
)
