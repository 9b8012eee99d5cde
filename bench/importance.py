"""How few runs find the same top parameters? Carver (corrected, raw) vs Lasso vs fANOVA (peer).

For every dataset (the shared moot/PromiseTune CSVs and BestConfig ARFFs, the project's own
data/localfs.csv once per workload when it is there, plus any dataset specs
``PATH[@WORKLOAD]`` given as arguments; see bench/benchdata.py), each method ranks all
configurations (its own ground truth, timed), then random subsets at each fraction (Carver's
section 5.4 study). "carver" is Carver with the levels correction (stortune's default),
"carver-raw" Carver's PI/CPI as published (`stortune.importance.carver` explains both). The
subsets are the same for every method (`draw_subsets` is seeded by size and prefix-stable, so a
method given fewer trials sees the first of them). Reported per fraction and method: the share
of trials whose k-th pick is the method's own full-data k-th parameter (k = 1..3), the same
against Carver's full-data ranking, and seconds per ranking (Carver ranks all trials of a
fraction in one numpy batch: its time is that batch over the trials). Per dataset, how clear the
full-data #1 is: Carver's PI of the #1 and the #2 on all rows, the #1's share of the variance,
and whether it stands clear (PI of the #1 at least `CLEAR` times the #2's).

fANOVA (`stortune.importance.fanova`) runs with `max_depth` 8 instead of Optuna's 64 by
default: full-depth forests on a few thousand continuous rows take minutes per ranking
(`--fanova-depth 64` for Optuna's default).

Usage: python bench/importance.py [PATH[@WORKLOAD] ...] [--carver-trials 1000] [--lasso-trials 200]
       [--fanova-trials 10] [--fanova-max-rows 300] [--fractions 0.002,0.005,...] [--plots DIR]
       [--only NAME_SUBSTRING ...] [--only-extra]
(--only runs the matching datasets and merges them into the results file; --only-extra runs
just the datasets given as arguments)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchdata import add_only_option, merge_entries, only_patterns, own_specs, previous, select
from rich.console import Console
from rich.table import Table

from stortune.datasets import Dataset
from stortune.importance import (
    PiCorrection,
    StudyResult,
    draw_subsets,
    rank_carver,
    rank_subsets,
    study_dataset,
)
from stortune.importance.common import jsonable
from stortune.importance.fanova import subset_ranker
from stortune.importance.study import Ranker, full_ranking, subset_size
from stortune.sources import load_spec, spec_name

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"
DEFAULT_FRACTIONS = "0.002,0.005,0.01,0.02,0.05,0.1,0.2,0.5"
DEPTH = 3
CLEAR = 1.5
console = Console()


def shared_datasets() -> list[Path]:
    return sorted((SHARED / "moot-promisetune").glob("*.csv")) + sorted(
        (SHARED / "bestconf-samples").glob("*.arff")
    )


def bench_dataset(spec: str, args: argparse.Namespace) -> dict[str, Any]:
    data = study_dataset(load_spec(spec))
    n = len(data.frame)
    sizes = sorted({subset_size(n, f) for f in args.fractions} - {n})
    levels, raw = PiCorrection.LEVELS, PiCorrection.NONE
    methods: dict[str, tuple[str | Ranker, PiCorrection, int, int]] = {
        "carver": ("carver", levels, args.carver_trials, n),
        "carver-raw": ("carver", raw, args.carver_trials, n),
        "lasso": ("lasso", levels, args.lasso_trials, n),
        "fanova": (
            subset_ranker(data, args.fanova_trees, args.fanova_depth, args.seed),
            levels,
            args.fanova_trials,
            args.fanova_max_rows,
        ),
    }
    studies: dict[str, StudyResult] = {}
    full_seconds: dict[str, float] = {}
    for name, (method, correction, trials, max_rows) in methods.items():
        start = time.perf_counter()
        truth = full_ranking(data, method, DEPTH, correction=correction)
        full_seconds[name] = time.perf_counter() - start
        kept, rankings, seconds = [], [], []
        for size in (s for s in sizes if s <= max_rows and trials > 0):
            subsets = draw_subsets(n, size, trials, args.seed)
            start = time.perf_counter()
            picks = rank_subsets(
                data, subsets, method, DEPTH, seed=args.seed, correction=correction
            )
            rankings.append(picks)
            seconds.append(time.perf_counter() - start)
            kept.append(size)
        studies[name] = StudyResult(
            source=spec,
            metric=data.metrics[0],
            method=name,
            params=list(data.params),
            truth=truth,
            fractions=[s / n for s in kept],
            sizes=kept,
            rankings=rankings,
            seconds=seconds,
            correction=correction.value if method == "carver" else None,
        )
        console.print(f"  {name}: {sum(seconds) + full_seconds[name]:.1f} s", highlight=False)
    return _summary(spec, data, studies, full_seconds) | {"separation": separation(data)}


def separation(data: Dataset) -> dict[str, Any]:
    """How far the full-data #1 stands from the #2, by Carver with and without the correction:
    their PI, the #1's share of the variance, and whether it stands clear."""
    out: dict[str, Any] = {}
    for correction in PiCorrection:
        result = rank_carver(data, stop="top-n", top=1, correction=correction)
        pi = sorted(result.steps[0].scores.values(), reverse=True) if result.steps else [0.0]
        first, second = pi[0], pi[1] if len(pi) > 1 else 0.0
        out[correction.value] = {
            "pi": [first, second],
            "share": first / result.variance if result.variance > 0 else float("nan"),
            "clear": first > 0 and first >= CLEAR * max(second, 0.0),
        }
    return out


def _summary(
    spec: str, data: Dataset, studies: dict[str, StudyResult], full_seconds: dict[str, float]
) -> dict[str, Any]:
    carver_truth = studies["carver"].truth
    rows = []
    for size in studies["carver"].sizes:
        row: dict[str, Any] = {"size": size, "fraction": size / len(data.frame)}
        for name, study in studies.items():
            if size not in study.sizes:
                continue
            i = study.sizes.index(size)
            row[name] = {
                "trials": len(study.rankings[i]),
                "success": study.success()[i],
                "success_vs_carver": study.success(carver_truth)[i],
                "seconds_per_ranking": study.seconds[i] / len(study.rankings[i]),
            }
        rows.append(row)
    return {
        "dataset": spec_name(spec),
        "path": spec,
        "metric": data.metrics[0],
        "direction": data.direction(),
        "configurations": len(data.frame),
        "parameters": len(data.params),
        "truth": {name: s.truth for name, s in studies.items()},
        "full_ranking_seconds": full_seconds,
        "fractions": rows,
        "_studies": studies,
    }


def print_table(result: dict[str, Any]) -> None:
    truths = "; ".join(f"{m}: {', '.join(t) or '-'}" for m, t in result["truth"].items())
    console.print(
        f"\n[bold]{result['dataset']}[/] ({result['configurations']} configurations, "
        f"{result['parameters']} parameters, {result['metric']} {result['direction']})\n"
        f"full-data top {DEPTH}: {truths}",
        highlight=False,
    )
    table = Table()
    for column in ("fraction", "rows", "method", "trials", "#1", "#2", "#3", "ms/ranking"):
        table.add_column(column, justify="left" if column == "method" else "right")
    for row in result["fractions"]:
        present = [m for m in result["truth"] if m in row]
        for i, method in enumerate(present):
            entry = row[method]
            table.add_row(
                f"{row['fraction']:.2%}" if i == 0 else "",
                str(row["size"]) if i == 0 else "",
                method,
                str(entry["trials"]),
                *("-" if math.isnan(r) else f"{r:.2f}" for r in entry["success"]),
                f"{1000 * entry['seconds_per_ranking']:.3g}",
                end_section=i == len(present) - 1,
            )
    full = ", ".join(f"{m} {s:.2f} s" for m, s in result["full_ranking_seconds"].items())
    console.print(table)
    console.print(f"full-data ranking: {full}", highlight=False)
    gap = result["separation"][PiCorrection.LEVELS]
    first, second = gap["pi"]
    console.print(
        f"full-data #1 by Carver: PI {first:.3g} against the #2's {second:.3g}, "
        f"{gap['share']:.1%} of the variance: {'clear' if gap['clear'] else 'not clear'}",
        highlight=False,
    )


def _entry_name(entry: dict[str, Any]) -> str:
    return spec_name(entry["path"])


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", help="extra dataset specs PATH[@WORKLOAD]")
    parser.add_argument("--fractions", default=DEFAULT_FRACTIONS)
    parser.add_argument("--carver-trials", type=int, default=1000)
    parser.add_argument("--lasso-trials", type=int, default=200)
    parser.add_argument("--fanova-trials", type=int, default=10)
    parser.add_argument("--fanova-max-rows", type=int, default=300)
    parser.add_argument("--fanova-trees", type=int, default=64)
    parser.add_argument("--fanova-depth", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--only-extra", action="store_true", help="skip the default datasets (shared and own)"
    )
    add_only_option(parser)
    parser.add_argument("--plots", type=Path, help="write Fig. 5-style curves here")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "importance.json")
    args = parser.parse_args(argv)
    args.fractions = [float(f) for f in args.fractions.split(",")]
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    defaults = [] if args.only_extra else [str(p) for p in shared_datasets()] + own_specs()
    specs = select(defaults + list(args.datasets), only_patterns(args.only))
    if not specs:
        sys.exit(f"no datasets: none under {SHARED} and none given")
    results = []
    started = time.perf_counter()
    for spec in specs:
        console.print(f"{spec_name(spec)} ...", highlight=False)
        result = bench_dataset(spec, args)
        print_table(result)
        if args.plots:
            from stortune.importance.plots import plot_study

            plot_study(list(result["_studies"].values()), args.plots / spec_name(spec))
        results.append({k: v for k, v in result.items() if k != "_studies"})
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    settings["datasets"] = specs
    seconds = time.perf_counter() - started
    report = {
        "settings": settings,
        "cpus": os.cpu_count(),
        "total_seconds": seconds,
        "results": results,
    }
    if args.only:  # merged: the other datasets' entries and the file's settings stay
        old = previous(args.out)
        update = {k: report[k] for k in ("settings", "cpus", "total_seconds")}
        report = {
            **report,
            **old,
            "results": merge_entries(old.get("results", []), results, _entry_name),
            "updates": [*old.get("updates", []), update],
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(jsonable(report), indent=2, allow_nan=False) + "\n")
    how = "merged into" if args.only else "wrote"
    console.print(f"\n{how} {args.out} ({seconds:.0f} s)", highlight=False)


if __name__ == "__main__":
    main(sys.argv[1:])
