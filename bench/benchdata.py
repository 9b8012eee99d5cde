"""What the dataset benchmarks (importance, models, tuners) share: which datasets they run over
by default, the random-forest peer of the model benchmarks, `--only`, how a partial run is
merged into an existing results file, and worker processes that end with the bench.

Datasets are specs ``PATH[@WORKLOAD]`` (`stortune.sources.load_spec`), named in results by
`stortune.sources.spec_name` (``localfs@fileserver``). The project's own measured dataset,
``data/localfs.csv``, is included by default when it is there, once per workload.

``--only NAME`` (repeatable, or a comma list) keeps the datasets whose name contains one of the
substrings (case-insensitive) and merges their entries into the existing results file: entries
of the same name are replaced, the others kept, so that adding a dataset does not mean re-running
hours of the others. The file's top-level settings stay those of the run that wrote it; each
merged run appends its own settings to the file's ``updates`` list.

A helper module, not a benchmark: running it does nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sklearn.compose import make_column_transformer
from sklearn.ensemble import RandomForestRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from stortune.sources import spec_name, workload_specs

REPO = Path(__file__).resolve().parents[1]
OWN_DATASET = REPO / "data" / "localfs.csv"


def own_specs() -> list[str]:
    """One spec per workload of the project's own dataset; none when it is not there."""
    return workload_specs(OWN_DATASET) if OWN_DATASET.exists() else []


def random_forest(seed: int = 0) -> Any:
    """The model peer a user reaches for: scikit-learn's RandomForestRegressor at its defaults,
    one-hot encoding any text columns first."""
    encode = make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore"), lambda X: list(X.select_dtypes(exclude="number"))),
        remainder="passthrough",
    )
    return make_pipeline(encode, RandomForestRegressor(random_state=seed))


def add_only_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME_SUBSTRING",
        help="run only the datasets whose name contains this (repeatable or a comma list) and "
        "merge their entries into the existing results file",
    )


def only_patterns(values: Sequence[str]) -> list[str]:
    """The substrings of repeated and comma-separated ``--only`` values."""
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def select(specs: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """The specs whose name matches one of `patterns` (all of them when there is none)."""
    if not patterns:
        return list(specs)
    wanted = [p.lower() for p in patterns]
    chosen = [s for s in specs if any(p in spec_name(s).lower() for p in wanted)]
    if not chosen:
        names = ", ".join(spec_name(s) for s in specs) or "none"
        sys.exit(f"--only {','.join(patterns)}: no dataset matches (have: {names})")
    return chosen


def previous(path: Path) -> dict[str, Any]:
    """The results file as it is, or an empty report when there is none yet."""
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        sys.exit(f"{path}: cannot merge into it, not JSON: {exc}")


def merge_entries(
    old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]], name: Callable[[dict], str]
) -> list[dict[str, Any]]:
    """`old` with each entry of the same `name` as one in `new` replaced in place by it, and the
    remaining new entries appended."""
    fresh = {name(e): e for e in new}
    merged = [fresh.pop(name(e), e) for e in old]
    return merged + list(fresh.values())


def die_with_parent() -> None:
    """A worker's initializer: the kernel ends the worker when the bench's main process dies
    (PR_SET_PDEATHSIG), so a killed bench leaves no job running that nobody will record."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)
