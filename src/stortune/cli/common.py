"""What every command shares: the console, error exits, JSON output, the default store."""

from __future__ import annotations

import json
import math
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
    """Machine-readable output on stdout, nothing else: strict JSON, so a NaN or an infinity
    (an error that could not be computed) is null, which every JSON parser reads."""
    sys.stdout.write(json.dumps(strict_json(data), indent=2, default=str, allow_nan=False) + "\n")


def strict_json(value: Any) -> Any:
    """`value` with non-finite floats as None and NumPy scalars and arrays as plain Python."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(item) for item in value]
    # NumPy is not imported here (every command imports this module); its scalars and arrays
    # all have tolist(), which gives Python numbers.
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return strict_json(value.tolist())
    return value


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
