"""Models from few measurements: `AutoModel` against every technique at its defaults, the
DeepPerf-style network and scikit-learn's random forest, with DeepPerf's small-sample protocol.

Per dataset (HSQLDB, PostgreSQL, 7z, dconvert, deeparch, exastencils, storm from the shared
moot/PromiseTune CSVs, and the project's data/localfs.csv once per workload) and training size
n = 1N..5N (N: the parameters that vary in the table), each technique trains on the same
`--repeats` random sets of n rows and is scored by the mean relative error on all the other rows
(at most `--max-test` of them, a fixed random sample, on the two tables of 68,640 and 86,058
rows). Rows: dataset x n x technique with the MRE (percent), its 95% CI over repeats and the fit
seconds. The check: `auto` <= 0.9x the forest's MRE and <= the best technique at defaults in
every cell, every auto fit within its budget.

    .venv/bin/python bench/models_small.py [--repeats 10] [--budget 30] [--jobs 2]
                                           [--only NAME_SUBSTRING ...]

Finished cells (dataset x n x technique) are appended to bench/results/models-small-runs.jsonl
and skipped by the next run, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from benchdata import (  # noqa: E402
    add_only_option,
    die_with_parent,
    only_patterns,
    own_specs,
    random_forest,
    select,
)

from stortune.models import available_techniques, make_model  # noqa: E402
from stortune.models.auto import AutoModel  # noqa: E402
from stortune.models.smallsample import small_sample_protocol, train_subsets  # noqa: E402
from stortune.sources import load_spec, spec_name  # noqa: E402

SHARED = ROOT.parent / "shared" / "datasets" / "moot-promisetune"
SYSTEMS = ("HSQLDB", "PostgreSQL", "7z", "dconvert", "deeparch", "exastencils", "storm")
RESULTS = ROOT / "bench" / "results" / "models-small.json"
RUNS = ROOT / "bench" / "results" / "models-small-runs.jsonl"
MULTIPLES = (1, 2, 3, 4, 5)
console = Console()


def specs() -> list[str]:
    return [str(SHARED / f"{name}.csv") for name in SYSTEMS] + own_specs()


def load(spec: str) -> tuple[str, pd.DataFrame, np.ndarray]:
    """(metric, the parameters that vary, metric values): repetitions averaged."""
    data = load_spec(spec).aggregated()
    metric = data.metrics[0]
    frame = data.frame[data.frame[metric].notna()]
    params = [p for p in data.params if frame[p].nunique(dropna=False) > 1]
    return metric, frame[params].reset_index(drop=True), frame[metric].to_numpy(float)


def factory(technique: str, budget: float) -> Any:
    if technique == "auto":
        return lambda: AutoModel(budget_seconds=budget)
    if technique == "random-forest":
        return random_forest
    return lambda: make_model(technique)


def run_cell(
    spec: str, multiple: int, technique: str, repeats: int, budget: float, max_test: int
) -> dict[str, Any]:
    """One dataset x n x technique over every repeat (a worker process)."""
    metric, X, y = load(spec)
    n = multiple * X.shape[1]
    subsets = train_subsets(len(X), n, repeats, seed=multiple)
    if len(X) - n > max_test:  # score on a fixed random sample of the other rows
        keep = np.random.default_rng(0).choice(len(X), size=max_test + n, replace=False)
        X, y = X.iloc[np.sort(keep)].reset_index(drop=True), y[np.sort(keep)]
        subsets = train_subsets(len(X), n, repeats, seed=multiple)
    started = time.monotonic()
    result = small_sample_protocol(factory(technique, budget), X, y, n, subsets=subsets)
    low, high = result.ci95
    return {
        "dataset": spec_name(spec),
        "metric": metric,
        "params": X.shape[1],
        "multiple": multiple,
        "n": n,
        "technique": technique,
        "mre": 100 * result.mean,
        "ci_low": 100 * low,
        "ci_high": 100 * high,
        "mre_repeats": [100 * v for v in result.mre],
        "fit_seconds": float(np.mean(result.fit_seconds)),
        "fit_seconds_max": float(np.max(result.fit_seconds)),
        "test_rows": len(X) - n,
        "seconds": time.monotonic() - started,
    }


def finished() -> dict[tuple, dict[str, Any]]:
    done: dict[tuple, dict[str, Any]] = {}
    if RUNS.exists():
        for line in RUNS.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a killed run
            done[(row["dataset"], row["multiple"], row["technique"], row["repeats_asked"])] = row
    return done


def check(rows: list[dict[str, Any]], budget: float) -> dict[str, Any]:
    """Per cell: auto against the forest and the best technique at defaults."""
    cells: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["dataset"], row["n"]), {})[row["technique"]] = row
    verdicts = []
    for (dataset, n), by in sorted(cells.items()):
        if "auto" not in by or "random-forest" not in by:
            continue
        defaults = {t: r for t, r in by.items() if t not in ("auto", "random-forest")}
        best = min(defaults, key=lambda t: defaults[t]["mre"]) if defaults else None
        auto, forest = by["auto"]["mre"], by["random-forest"]["mre"]
        verdicts.append(
            {
                "dataset": dataset,
                "n": n,
                "auto_vs_forest": auto / forest if forest else math.nan,
                "best_default": best,
                "auto_vs_best_default": auto / defaults[best]["mre"] if best else math.nan,
                "auto_fit_seconds_max": by["auto"]["fit_seconds_max"],
                "forest_ok": auto <= 0.9 * forest,
                "best_default_ok": best is None or auto <= defaults[best]["mre"],
                "budget_ok": by["auto"]["fit_seconds_max"] <= budget,
            }
        )
    return {
        "cells": verdicts,
        "forest_ok": sum(v["forest_ok"] for v in verdicts),
        "best_default_ok": sum(v["best_default_ok"] for v in verdicts),
        "budget_ok": sum(v["budget_ok"] for v in verdicts),
        "of": len(verdicts),
    }


def print_table(rows: list[dict[str, Any]], verdicts: dict[str, Any]) -> None:
    by = {(r["dataset"], r["n"], r["technique"]): r for r in rows}
    table = Table(title="Mean relative error (%) after n random runs, mean of repeats")
    for column in (
        "dataset",
        "n",
        "auto",
        "forest",
        "network",
        "best default",
        "auto/forest",
        "auto/best",
        "auto s (max)",
    ):
        table.add_column(
            column, justify="left" if column in ("dataset", "best default") else "right"
        )
    for v in verdicts["cells"]:
        key = (v["dataset"], v["n"])
        network = by.get((*key, "network"))
        best = by[(*key, v["best_default"])] if v["best_default"] else None
        table.add_row(
            v["dataset"],
            str(v["n"]),
            f"{by[(*key, 'auto')]['mre']:.2f}",
            f"{by[(*key, 'random-forest')]['mre']:.2f}",
            f"{network['mre']:.2f}" if network else "-",
            f"{v['best_default']} {best['mre']:.2f}" if best else "-",
            f"{v['auto_vs_forest']:.2f}" + ("" if v["forest_ok"] else " !"),
            f"{v['auto_vs_best_default']:.2f}" + ("" if v["best_default_ok"] else " !"),
            f"{v['auto_fit_seconds_max']:.1f}",
        )
    console.print(table)
    console.print(
        f"auto <= 0.9x forest in {verdicts['forest_ok']}/{verdicts['of']} cells, <= best default"
        f" in {verdicts['best_default_ok']}/{verdicts['of']}, within budget in"
        f" {verdicts['budget_ok']}/{verdicts['of']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--budget", type=float, default=30.0, help="AutoModel's seconds per fit")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--max-test", type=int, default=10_000)
    parser.add_argument("--techniques", default="", help="comma list (default: all)")
    add_only_option(parser)
    args = parser.parse_args()
    techniques = (
        args.techniques.split(",")
        if args.techniques
        else ["auto", "random-forest", *available_techniques()]
    )
    chosen = select(specs(), only_patterns(args.only))
    done = finished()
    jobs = [
        (spec, m, t)
        for spec in chosen
        for m in MULTIPLES
        for t in techniques
        if (spec_name(spec), m, t, args.repeats) not in done
    ]
    # Slow cells first, so that the pool does not end on one long straggler.
    jobs.sort(key=lambda job: (job[2] != "auto", job[2] != "network", -job[1]))
    console.print(f"{len(jobs)} cells to run, {len(done)} finished before")
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.jobs, initializer=die_with_parent) as pool:
        futures = {
            pool.submit(run_cell, *job, args.repeats, args.budget, args.max_test): job
            for job in jobs
        }
        for i, future in enumerate(as_completed(futures), 1):
            spec, multiple, technique = futures[future]
            try:
                row = future.result()
            except Exception as exc:  # one broken cell must not lose the others
                console.print(f"[red]{spec_name(spec)} {multiple}N {technique}: {exc}[/]")
                continue
            row["repeats_asked"] = args.repeats
            with RUNS.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
            console.print(
                f"[{i}/{len(jobs)}] {row['dataset']} n={row['n']} {technique}: "
                f"{row['mre']:.2f}% ({row['fit_seconds']:.2f} s/fit)",
                highlight=False,
            )
    names = {spec_name(s) for s in chosen}
    rows = [
        r
        for key, r in finished().items()
        if key[3] == args.repeats and r["dataset"] in names and r["technique"] in techniques
    ]
    rows.sort(key=lambda r: (r["dataset"], r["n"], r["technique"]))
    verdicts = check(rows, args.budget)
    print_table(rows, verdicts)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "models-small",
                "protocol": "train on n random rows, MRE on all others (DeepPerf, ICSE'19)",
                "repeats": args.repeats,
                "budget_seconds": args.budget,
                "max_test_rows": args.max_test,
                "machine": {
                    "cpus": __import__("os").cpu_count(),
                    "python": platform.python_version(),
                },
                "wall_seconds": time.monotonic() - started,
                "rows": rows,
                "check": verdicts,
            },
            indent=1,
        )
        + "\n"
    )
    console.print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
