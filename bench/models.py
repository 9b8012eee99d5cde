"""Benchmark of the performance models (stortune.models) on the shared and the project's datasets.

Per dataset and technique, following Noorshams et al. (ICPE'13): goodness of fit (R^2),
held-out interpolation error (MRE), extrapolation error, and the error reduction that the split
search brings over default hyperparameters (with a paired t-test over 10 CV folds), side by side
with scikit-learn's RandomForestRegressor at its defaults, the peer a user would pick. Then the
time of the paper's full split search (k=4, n=5, 10 iterations, 10-fold CV) on 1,000 rows.

    .venv/bin/python bench/models.py [PATH[@WORKLOAD] ...] [--max-rows N] [--quick]
                                     [--only NAME_SUBSTRING ...]

Datasets: the shared moot/PromiseTune CSVs and BestConfig ARFFs, the project's own
data/localfs.csv once per workload when it is there, plus any dataset specs given
(bench/benchdata.py); entries are named like ``localfs@fileserver``. `--only` runs the
matching datasets and merges their entries into the existing results file (the split-search
timing then runs only if its dataset, redis, is among them).

Big datasets are subsampled (fixed seed) and the table's searches get a time budget each, so
that the default run stays near 15 minutes; the output says where that happened; they run in
one process, so that the budget means the same on every machine. `--timing` picks the
techniques whose full search is timed (default: cart, the quickest); the timed searches use
every CPU, a worker process per share of the folds, as `stortune model fit --optimize` does by
default.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import effective_n_jobs
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from benchdata import (  # noqa: E402
    add_only_option,
    merge_entries,
    only_patterns,
    own_specs,
    previous,
    random_forest,
    select,
)

from stortune.models import available_techniques, technique  # noqa: E402
from stortune.models.evaluation import Scenario  # noqa: E402
from stortune.models.study import (  # noqa: E402
    Assessment,
    SearchSettings,
    assess,
    assess_technique,
    prepare,
    search,
)
from stortune.sources import load_spec, spec_name  # noqa: E402

SHARED = ROOT.parent / "shared" / "datasets"
RESULTS = ROOT / "bench" / "results" / "models.json"
SEED = 0
TIME_LIMIT = 600.0  # the bar for one full split search on 1,000 rows
EXTRAPOLATION_PARAMETERS = 4  # extrapolate along this many parameters per dataset, both ways


def shared_datasets() -> list[Path]:
    return sorted((SHARED / "moot-promisetune").glob("*.csv")) + sorted(
        (SHARED / "bestconf-samples").glob("*.arff")
    )


def load(spec: str, max_rows: int) -> tuple[str, pd.DataFrame, np.ndarray, str]:
    """(metric, parameters, metric values, note): repetitions averaged, subsampled if big."""
    data = load_spec(spec).aggregated()
    metric = data.metrics[0]
    known = data.y(metric).notna().to_numpy()
    frame = data.frame.loc[known].reset_index(drop=True)
    note = ""
    if len(frame) > max_rows:
        note = f"subsampled {max_rows} of {len(frame)} rows (seed {SEED})"
        frame = frame.sample(n=max_rows, random_state=SEED).reset_index(drop=True)
    return metric, frame[data.params], frame[metric].to_numpy(dtype=float), note


def widest(scenarios: list[Scenario], X: pd.DataFrame, count: int) -> list[Scenario]:
    """The scenarios of the `count` parameters with the most distinct values (time budget)."""
    ranked = sorted({s.parameter for s in scenarios}, key=lambda p: -X[p].nunique())[:count]
    return [s for s in scenarios if s.parameter in ranked]


def pct(value: float | None) -> str:
    return "-" if value is None or not np.isfinite(value) else f"{100 * value:7.2f}"


def row(result: Assessment) -> str:
    o = result.optimisation
    cells = [
        f"{result.name:12s}",
        f"{result.r2_fit:7.4f}",
        f"{result.cv_rmse:10.4g}",
        pct(result.interpolation_mre),
        pct(result.extrapolation_mre),
        pct(o.mre_default) if o else "      -",
        pct(o.mre_optimized) if o else "      -",
        pct(o.reduction) if o else "      -",
        f"{o.test.pvalue:8.2g}" if o else "       -",
        f"{o.evaluations:5d}" if o else "    -",
        f"{result.seconds:7.1f}",
    ]
    return " ".join(cells)


HEADER = (
    "technique     R2 fit    CV RMSE  interp%  extrap%  MRE%def  MRE%opt   red.%  p(t-test)"
    " evals    secs"
)


def run_table(specs: list[str], names: list[str], max_rows: int, settings: SearchSettings) -> list:
    datasets = []
    for spec in specs:
        metric, X, y, note = load(spec, max_rows)
        interpolation, extrapolation, folds = prepare(X, y, 0.1, SEED, 10)
        extrapolation = widest(extrapolation, X, EXTRAPOLATION_PARAMETERS)
        print(
            f"\n== {spec_name(spec)}: {metric}, {len(X)} configurations x {X.shape[1]} parameters"
        )
        if note:
            print(f"   ({note})")
        print(
            f"   interpolation: {len(interpolation.test)} held-out rows; extrapolation: "
            f"{len(extrapolation)} scenarios (the {EXTRAPOLATION_PARAMETERS} parameters with the "
            "most distinct values, each way)"
        )
        print(HEADER, flush=True)
        results = []
        for name in names:
            result = assess_technique(
                name, X, y, interpolation, extrapolation, folds, True, settings
            )
            print(row(result), flush=True)
            results.append(result)
        peer = assess(
            "random-forest", random_forest(SEED), X, y, interpolation, extrapolation, folds
        )
        print(row(peer), flush=True)
        datasets.append(
            {
                "dataset": spec,
                "name": spec_name(spec),
                "metric": metric,
                "rows": len(X),
                "parameters": X.shape[1],
                "note": note,
                "interpolation_rows": len(interpolation.test),
                "extrapolation_scenarios": len(extrapolation),
                "results": [r.as_dict() for r in [*results, peer]],
            }
        )
    return datasets


def run_timing(path: Path, names: list[str], rows: int) -> list[dict]:
    """The paper's full split search on `rows` rows, per technique, timed; a search still
    running after 10 minutes is stopped there (it did not meet the bar)."""
    metric, X, y, note = load(str(path), rows)
    print(f"\n== full split search (k=4, n=5, 10 iterations, 10-fold CV) on {path.name}")
    print(
        f"   {metric}, {len(X)} rows{'; ' + note if note else ''}; the folds shared by "
        f"{effective_n_jobs(-1)} worker processes (every CPU, as `model fit`); the bar is 10 "
        "minutes"
    )
    timings = []
    for name in names:
        tech = technique(name)
        started = time.perf_counter()
        settings = SearchSettings(max_seconds=TIME_LIMIT, n_jobs=-1)  # as `model fit` does
        tuned = search(tech.make(), tech.search_space(len(X)), X, y, settings)
        seconds = time.perf_counter() - started
        finished = tuned.search_.stop_reason != "max_seconds"
        timings.append(
            {
                "technique": name,
                "dataset": str(path),
                "rows": len(X),
                "processes": effective_n_jobs(-1),
                "seconds": round(seconds, 1),
                "evaluations": tuned.search_.n_evaluations,
                "iterations": tuned.search_.iterations,
                "stop_reason": tuned.search_.stop_reason,
                "under_10_minutes": finished,
                "best_params": tuned.best_params_,
                "cv_rmse": tuned.best_score_,
            }
        )
        verdict = "finished" if finished else "NOT finished, stopped at 10 min"
        print(
            f"   {name:10s} {seconds:7.1f} s  {tuned.search_.n_evaluations:5d} evaluations  "
            f"{tuned.search_.iterations:2d} iterations  {verdict}  best {tuned.best_params_}",
            flush=True,
        )
    return timings


def finite(value: object) -> object:
    """The results with NaN and infinities as null, so that the file is strict JSON."""
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", help="extra dataset specs PATH[@WORKLOAD]")
    parser.add_argument("--max-rows", type=int, default=1000, help="subsample bigger datasets")
    parser.add_argument(
        "--budget", type=float, default=6, help="seconds per table search (then best so far)"
    )
    parser.add_argument(
        "--timing",
        nargs="*",
        default=["cart"],
        help="techniques whose full split search is timed on 1,000 rows of redis",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny searches, no timing")
    add_only_option(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    specs = [str(p) for p in shared_datasets()] + own_specs() + list(args.datasets)
    specs = select(specs, only_patterns(args.only))
    timing_data = SHARED / "moot-promisetune" / "redis.csv"  # the one with >= 1,000 configs
    if args.only and str(timing_data) not in specs:
        args.timing = []

    names = available_techniques()
    settings = SearchSettings(max_seconds=args.budget)
    if args.quick:
        settings = SearchSettings(splits=2, explorations=1, max_iter=1, cv=3, max_evals=5)
        args.timing = []
    print(
        f"stortune.models benchmark; techniques: {', '.join(names)} + random-forest (defaults)"
        + ("" if "cubist" in names else "; cubist skipped (optional extra not installed)")
    )
    print(
        f"table searches: k={settings.splits}, n={settings.explorations}, "
        f"<= {settings.max_iter} iterations, {settings.cv}-fold CV RMSE, at most "
        f"{settings.max_seconds or '-'} s / {settings.max_evals or '-'} evaluations each, "
        "on the interpolation training rows; red.% = change of held-out MRE, p from a paired "
        "t-test of CV RMSE (optimised vs default) over the same 10 folds"
    )
    started = time.perf_counter()
    with threadpool_limits(limits=1):  # many small fits on a shared 2-core machine
        datasets = run_table(specs, names, args.max_rows, settings)
        timings = run_timing(timing_data, args.timing, 1000) if args.timing else []
    total = time.perf_counter() - started
    print(f"\ntotal {total:.0f} s")
    report = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "command": ["bench/models.py", *sys.argv[1:]],
        "seed": SEED,
        "table_search": settings.__dict__,
        "datasets": datasets,
        "split_search_timing": timings,
        "total_seconds": round(total, 1),
    }
    if args.only:  # merged: the file's settings and the other datasets' entries stay
        for entry in datasets:
            entry["table_search"] = settings.__dict__  # this run's, which the file may not say
        old = previous(args.out)
        keep = ("machine", "command", "seed", "table_search", "total_seconds")
        update = {k: report[k] for k in keep}
        update["datasets"] = [e["name"] for e in datasets]
        report = {
            **report,
            **old,
            "datasets": merge_entries(old.get("datasets", []), datasets, _entry_name),
            "split_search_timing": merge_entries(
                old.get("split_search_timing", []), timings, lambda t: t["technique"]
            ),
            "updates": [*old.get("updates", []), update],
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(finite(report), indent=2, default=str) + "\n")
    print(f"{'merged into' if args.only else 'wrote'} {args.out}")


def _entry_name(entry: dict) -> str:
    return entry.get("name") or spec_name(entry["dataset"])


if __name__ == "__main__":
    main()
