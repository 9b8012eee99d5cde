"""What every command shares: the console, error exits, JSON output, the default store."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import typer
from rich.console import Console

from stortune.errors import StortuneError
from stortune.units import number

if TYPE_CHECKING:
    from stortune.measure.runner import Outcome
    from stortune.objective import Objective
    from stortune.targets.base import Target
    from stortune.workloads.base import Workload

PIPE_WIDTH = 10_000  # columns of output that is no terminal: no table is cut to fit
HELP_WIDTH = 120  # the fewest columns of --help that is no terminal (its panels fill the width)


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def output_width(stream: TextIO | None, least: int = PIPE_WIDTH) -> int | None:
    """Columns for output to `stream`: None (the terminal's own) on a terminal or when COLUMNS
    says, else `least`. A pipe or a file is not 80 columns wide: a table cut to 80 there turns
    `applog2` and `applog2-verify` both into `applo…`."""
    if _is_terminal(stream) or os.environ.get("COLUMNS", "").isdigit():
        return None
    return least


def widen_piped_help() -> None:
    """typer's --help, printed to no terminal, at least HELP_WIDTH wide (the terminal's width
    when one is there): at 80 columns `run --help` leaves 20 for its descriptions. TERMINAL_WIDTH
    or COLUMNS, when given, decide instead."""
    from typer import rich_utils

    width = output_width(sys.stdout, HELP_WIDTH)
    if width is not None and rich_utils.MAX_WIDTH is None:
        rich_utils.MAX_WIDTH = max(width, Console().width)


console = Console(width=output_width(sys.stdout))
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
GuardrailOption = typer.Option(
    [],
    "--guardrail",
    help="METRIC:max|min[:SHARE]: a metric that may get worse by SHARE at most (10% unless "
    "given) while the objective improves; repeatable; replaces the guardrails the workloads' "
    "job files declare (`# stortune guardrail: ...`).",
)
NoGuardrailsOption = typer.Option(
    False, "--no-guardrails", help="Leave out the guardrails the workloads' job files declare."
)


def campaign_objective(
    workloads: Sequence[Workload | None],
    target: Target | None,
    given: Objective | None,
    guardrails: Sequence[str],
    no_guardrails: bool,
    json_out: bool = False,
    fallback: Objective | None = None,
) -> Objective:
    """A new campaign's objective from the options and what its workloads declare
    (`workloads.declared.objective_for`), its metric names checked against what the workloads
    and the target report before anything is stored or measured; each choice made from a
    declaration is said in one line (not under --json: the campaign stores what was chosen)."""
    from stortune.measure.metricnames import check_campaign_metrics
    from stortune.objective import Guardrail, Objective
    from stortune.workloads.declared import objective_for

    if guardrails and no_guardrails:
        raise StortuneError("--guardrail and --no-guardrails: give one or the other")
    chosen = [] if no_guardrails else [Guardrail.parse(g) for g in guardrails] or None
    if fallback is None and target is not None and target.default_objective:
        fallback = Objective.parse(target.default_objective)
    notes: list[str] = []
    objective = objective_for(workloads, given, chosen, fallback=fallback, say=notes.append)
    try:
        check_campaign_metrics(objective, workloads, target)
    except StortuneError as exc:
        if fallback is None or given is not None or objective.measured != fallback.measured:
            raise
        raise StortuneError(f"{exc} (the default objective: give --objective)") from None
    for note in [] if json_out else notes:
        console.print(note, highlight=False, markup=False, soft_wrap=True)
    return objective


MEASURES_BEST = ("tune", "sample", "sweep")  # campaign kinds whose outcome is a best config


class NothingAchieved(StortuneError):
    """A campaign ended without a single successful evaluation."""

    exit_code = 1


def best_text(outcome: Outcome, metric: str) -> str:
    """The best value found and where, or in words that there is none: a campaign where no run
    succeeded has nothing to recommend, and `stortune show` says why each failed."""
    if outcome.best_value is None or outcome.best_config is None:
        return f"no run succeeded: nothing to recommend; see `stortune show {outcome.campaign}`"
    return f"best {metric} = {number(outcome.best_value)} at {outcome.best_config}"


def told_last(outcome: Outcome) -> tuple[list[str], list[str]]:
    """The outcome's notes, and apart the ones to tell last: how to continue a campaign that
    stopped on a busy machine."""
    from stortune.measure.runner import BUSY_STOP

    last = [n for n in outcome.notes if n.startswith(BUSY_STOP)]
    return [n for n in outcome.notes if n not in last], last


def check_achieved(outcome: Outcome) -> None:
    """NothingAchieved, saying why, when a campaign that measures configs has no successful
    evaluation: a command that achieved nothing exits non-zero."""
    if outcome.achieved or outcome.kind not in MEASURES_BEST:
        return
    notes, last = told_last(outcome)
    why = [
        *notes,
        f"{outcome.runs_failed} run(s) failed, {outcome.runs_disturbed} disturbed",
    ]
    if outcome.last_error:
        why.append(f"last error: {outcome.last_error}")
    then = "".join(f"; {note}" for note in last)  # how to continue, last
    raise NothingAchieved(
        f"campaign {outcome.campaign!r}: none of its {outcome.evaluations} evaluations "
        f"succeeded ({'; '.join(why)}); `stortune show {outcome.campaign}` lists each run{then}"
    )


SchedulerOption = typer.Option(
    None,
    "--scheduler",
    envvar="STORTUNE_SCHEDULER",
    help="Measure on a cluster's nodes: the Dask scheduler's address (tcp://HOST:8786) whose "
    "workers are `stortune worker` nodes; one trial in flight per node, each run stored with "
    "its node. Without it, everything runs on this machine.",
)


@contextlib.contextmanager
def cluster_of(scheduler: str | None) -> Iterator[Any]:
    """The cluster at `scheduler`, connected for the command's length; None without one."""
    if not scheduler:
        yield None
        return
    from stortune.cluster.client import Cluster

    with Cluster(scheduler) as cluster:
        yield cluster
