"""Tuners side by side on table targets replaying measured datasets.

For each dataset and each tuner (bo, ddpg, bestconfig, Optuna's TPE, random, LHS) it runs
`--seeds` seeded campaigns and reports the median, over the seeds, of the best value found as
a fraction of the dataset's global optimum (1.0 = found it; for a minimised metric the fraction
is optimum / best) after 10, 30 and 100 evaluations, and the median number of evaluations
needed to reach 95% and 99% of the optimum (">100" when the median run did not). 95% is the
the usual mark; on datasets where a few random configs already reach it, 99% is the one that
tells tuners apart. The budgets are read
off one 100-evaluation run per seed (its best-so-far curve), not separate runs: on this 2-core
machine separate runs would cost 40% more. A tuner told a budget of 10 would size its initial
design smaller (bo, bestconfig, lhs), so the @10 and @30 columns are what a 100-evaluation
campaign has found by then.

The objective is a config's mean over the dataset's repetitions (the table target serves the
aggregated dataset), so runs compare search, not luck with noise. Datasets that are not full
grids (every config of the inferred space present) are served with ``nearest=True``: a config
the dataset lacks gets the nearest stored config's value. It also times a BO proposal at 16
parameters and 100 observations (the bar: "under 2 s").

Datasets: ../shared/datasets/moot-promisetune/{HSQLDB,PostgreSQL,redis}.csv and the project's
own data/localfs.csv (once per workload, when it is there: 216 of the 360 valid configs,
so served with nearest=True) by default, plus any dataset specs
``PATH[@WORKLOAD]`` given (bench/benchdata.py). BestConfig's ARFF samples (100 LHS points each)
are left out unless --arff is given: a nearest-neighbour replay of 100 points in 11-28
dimensions measures the replay more than the tuners. Results are keyed by dataset name
(``localfs@fileserver``); --only NAME_SUBSTRING runs the matching datasets and merges
their entries into the existing results file.

Run: python bench/tuners.py [--seeds 30] [--jobs 2] [--arff] [--only NAME_SUBSTRING ...]
     [PATH[@WORKLOAD] ...]
(writes bench/results/tuners.json and prints the Markdown table)
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from benchdata import add_only_option, only_patterns, own_specs, previous, select

from stortune.sources import spec_name

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"
RESULTS = Path(__file__).parent / "results" / "tuners.json"
DEFAULT_DATASETS = [
    SHARED / "moot-promisetune" / f"{n}.csv" for n in ("HSQLDB", "PostgreSQL", "redis")
]
TUNERS = ["bo", "ddpg", "bestconfig", "tpe", "random", "lhs"]
BUDGETS = [10, 30, 100]  # read off one run of the largest
TARGET_FRACTIONS = (0.95, 0.99)


def _limit_threads() -> None:
    import torch

    torch.set_num_threads(1)


@functools.lru_cache(maxsize=16)
def load(spec: str):
    """(table target over the aggregated dataset, its space, metric, direction, nearest).

    The target serves the objective only (the first metric, relative where there is one), on
    the configs that have a value for it."""
    from stortune.datasets import Dataset
    from stortune.sources import load_spec
    from stortune.space import space_from_dataset
    from stortune.targets.table import TableTarget

    full = load_spec(spec).aggregated()
    metric = full.metrics[0]
    frame = full.frame.dropna(subset=[metric]).reset_index(drop=True)
    dataset = Dataset(frame, full.params, [metric], full.directions, full.source)
    space = space_from_dataset(dataset)
    exact = TableTarget.of(dataset, space)
    full_grid = len(exact.configs()) == space.raw_grid_size(levels=10**9)
    target = exact if full_grid else TableTarget.of(dataset, space, nearest=True)
    return target, space, dataset.metrics[0], dataset.direction(), not full_grid


def fraction(value: float, optimum: float, direction: str) -> float:
    return value / optimum if direction == "max" else optimum / value


def campaign(job: tuple[str, str, int, int]) -> dict:
    """One seeded run: the best-so-far fraction after each evaluation."""
    spec, tuner_name, budget, seed = job
    _limit_threads()
    from stortune.tuners import make_tuner

    target, space, metric, direction, _ = load(spec)
    optimum = target.optimum(metric, direction)
    tuner = make_tuner(tuner_name, space, direction, seed, budget)
    curve, best = [], None
    started = time.perf_counter()
    for _ in range(budget):
        config = tuner.ask()
        target.apply(config)
        value = target.run().metrics[metric]
        tuner.observe_state(target.state())
        tuner.tell(config, value)
        if best is None or (value > best if direction == "max" else value < best):
            best = value
        curve.append(fraction(best, optimum, direction))
    return {
        "dataset": spec,
        "tuner": tuner_name,
        "budget": budget,
        "seed": seed,
        "curve": curve,
        "seconds": time.perf_counter() - started,
    }


def to_reach(curve: list[float], target: float) -> float:
    """Evaluations until the best-so-far fraction reaches `target` (inf: never)."""
    return next((i + 1 for i, f in enumerate(curve) if f >= target), math.inf)


def reach_key(target: float) -> str:
    return f"to{round(target * 100)}"


def proposal_seconds(repeats: int = 5) -> float:
    """Median wall time of one BO proposal at 16 parameters and 100 observations."""
    _limit_threads()
    from stortune.space import parse_space
    from stortune.tuners.bo import BOTuner

    text = "name: s16\nparameters:\n"
    text += "".join(f"  x{i}: {{type: float, low: 0, high: 1, default: 0.5}}\n" for i in range(12))
    text += "".join(f"  n{i}: {{type: int, low: 1, high: 64, default: 8}}\n" for i in range(3))
    text += "  c: {type: categorical, values: [a, b, c, d], default: a}\n"
    space = parse_space(text)
    rng = np.random.default_rng(0)
    tuner = BOTuner(space, "max", 0, 200)
    for _ in range(100):
        config = space.decode(rng.random(len(space)))
        value = -sum((config[f"x{i}"] - 0.3) ** 2 for i in range(12)) + 0.01 * rng.normal()
        tuner.tell(config, value)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        config = tuner.ask()
        times.append(time.perf_counter() - started)
        tuner.tell(config, 0.0)
    return statistics.median(times)


def summarise(runs: list[dict], datasets: list[str], info: dict) -> dict:
    out: dict = {}
    for spec in datasets:
        rows = {}
        for name in TUNERS:
            mine = [r for r in runs if (r["dataset"], r["tuner"]) == (spec, name)]
            if not mine:
                continue
            row = {f"best@{b}": statistics.median(r["curve"][b - 1] for r in mine) for b in BUDGETS}
            row["seconds"] = statistics.median(r["seconds"] for r in mine)
            for target in TARGET_FRACTIONS:
                reach = statistics.median(to_reach(r["curve"], target) for r in mine)
                row[reach_key(target)] = None if math.isinf(reach) else reach
            rows[name] = row
        if rows:
            out[spec_name(spec)] = {**info[spec], "tuners": rows}
    return out


def reach_cell(row: dict, target: float) -> str:
    """A table cell: the evaluations, ">100" when the median run never got there, "-" for an
    entry of an older run that did not record this target."""
    if reach_key(target) not in row:
        return "-"
    reach = row[reach_key(target)]
    return f">{max(BUDGETS)}" if reach is None else f"{reach:g}"


def markdown(summary: dict, seeds: int) -> str:
    lines = [
        f"Median over {seeds} seeds: best value found as a fraction of the dataset's optimum "
        f"after 10/30/100 evaluations, and evaluations needed to reach "
        + " and ".join(f"{t:.0%}" for t in TARGET_FRACTIONS)
        + ".",
        "",
        "| dataset | tuner | @10 | @30 | @100 | "
        + " | ".join(f"evals to {t:.0%}" for t in TARGET_FRACTIONS)
        + " |",
        "| --- | --- | --- | --- | --- |" + " --- |" * len(TARGET_FRACTIONS),
    ]
    for name, data in summary.items():
        label = f"{name} ({data['configs']} configs{', nearest' if data['nearest'] else ''})"
        for tuner, row in data["tuners"].items():
            reach_text = " | ".join(reach_cell(row, t) for t in TARGET_FRACTIONS)
            lines.append(
                f"| {label} | {tuner} | {row['best@10']:.3f} | {row['best@30']:.3f} | "
                f"{row['best@100']:.3f} | {reach_text} |"
            )
            label = ""
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("datasets", nargs="*", help="extra dataset specs PATH[@WORKLOAD]")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--arff", action="store_true", help="add BestConfig's ARFF samples")
    parser.add_argument("--tuners", default=",".join(TUNERS), help="comma-separated subset")
    add_only_option(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    TUNERS[:] = args.tuners.split(",")
    datasets = [str(p) for p in DEFAULT_DATASETS if p.exists()] + own_specs()
    datasets += [str(s) for s in args.datasets]
    if args.arff:
        datasets += [str(p) for p in sorted((SHARED / "bestconf-samples").glob("*.arff"))]
    datasets = select(datasets, only_patterns(args.only))
    if not datasets:
        sys.exit("no dataset found (../shared/datasets missing, and none given)")
    info = {}
    for spec in datasets:
        target, space, metric, direction, nearest = load(spec)
        info[spec] = {
            "path": spec,
            "metric": metric,
            "direction": direction,
            "parameters": len(space),
            "configs": len(target.configs()),
            "nearest": nearest,
            "optimum": target.optimum(metric, direction),
            "seeds": args.seeds,
        }
    old = previous(args.out) if args.only else {}
    result = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "jobs": args.jobs},
        "seeds": args.seeds,
        "budgets": BUDGETS,
    }
    if "bo_proposal_seconds_16p_100obs" not in old:
        result["bo_proposal_seconds_16p_100obs"] = proposal_seconds()
    update = dict(result, datasets=[spec_name(s) for s in datasets], tuners=list(TUNERS))
    if old:  # merged: the file's settings and the other datasets' entries stay
        result = {**result, **old, "updates": [*old.get("updates", []), update]}
    started = time.perf_counter()
    runs: list[dict] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for spec in datasets:  # results are written after each dataset
            jobs = [(spec, t, max(BUDGETS), s) for t in TUNERS for s in range(args.seeds)]
            runs += pool.map(campaign, jobs, chunksize=1)
            done = summarise(runs, datasets, info)
            update["wall_seconds"] = time.perf_counter() - started
            if old:
                result["datasets"] = {**old.get("datasets", {}), **done}
            else:
                result["wall_seconds"] = update["wall_seconds"]
                result["datasets"] = done
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(markdown(done, args.seeds))
    seconds = result["bo_proposal_seconds_16p_100obs"]
    print(f"\nBO proposal at 16 parameters, 100 observations: {seconds:.2f} s")


if __name__ == "__main__":
    main()
