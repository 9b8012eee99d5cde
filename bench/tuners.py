"""Tuners against the strongest peers on measured tables, noise-free and with noise.

Each tuner (stortune's bo, FLASH, DDPG, BestConfig, random and LHS; Optuna's TPE and GPSampler;
SMAC3 and HEBO from their own virtualenv, bench/peer_tuners.py) runs `--seeds` seeded
100-evaluation campaigns per dataset against a `table` target, in two protocols:

* Noise-free: the target answers a config with its mean over the dataset's repetitions. A table
  that is not a full grid is served in pool mode: tuners choose among its rows (FLASH, bo and
  random search the pool themselves, the others' proposals move to the nearest unmeasured row),
  so every evaluation is a measured config and nothing is served by a neighbour. From each
  campaign's best-so-far curve: the best as a fraction of the optimum after 10/30/100
  evaluations (for a minimised metric, optimum / best), evaluations to within 5% and 1% of the
  optimum, and whether it found the optimum itself.
* Noisy replay: every evaluation is multiplied by seeded log-normal noise of relative SD
  `--noise` (7%, the repeat noise of the project's own dataset). After 30 and 100 evaluations
  the tuner's recommendation (`Tuner.recommend`: its best mean; bo's best lower bound over
  the leaders it re-measured, each repeat counting in the budget) is
  scored by its noise-free value, not by the lucky draw that made it look best.

Per tuner it also times the asks 91-100 of the noise-free campaigns (seconds per proposal at
about 100 observations). Medians are over seeds; "evaluations to" is null when the median
campaign did not get there in 100. Every finished campaign is appended to
bench/results/tuners-runs.jsonl and skipped when the bench is run again, so an interrupted run
resumes; --fresh starts over. A peer that cannot be installed is reported in the table.

The default-tuner check: stortune's default tuner against every peer run at `--seeds` seeds (and,
as `check_with_every_peer`, also those run at fewer), on evaluations to 1%
(<= every peer's on two thirds of the datasets, never more than 1.5x the best peer's) and on
the noisy recommendations (>= every peer's at 30 and 100 evaluations).

Run: python bench/tuners.py [--seeds 20] [--jobs 2] [--tuners bo,flash,...]
     [--only NAME_SUBSTRING ...] [PATH[@WORKLOAD] ...] [--no-run]
(writes bench/results/tuners.json and prints the Markdown table; --no-run only summarises)
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
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

from benchdata import add_only_option, only_patterns, own_specs, select

from stortune.sources import spec_name

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets" / "moot-promisetune"
RESULTS = Path(__file__).parent / "results" / "tuners.json"
RUNS = Path(__file__).parent / "results" / "tuners-runs.jsonl"
MOOT = ["HSQLDB", "PostgreSQL", "redis", "7z", "dconvert", "deeparch", "exastencils", "storm"]
OWN_TUNERS = ["bo", "flash", "ddpg", "bestconfig", "random", "lhs"]
OPTUNA = ["tpe", "gp"]
PEERS = ["smac", "hebo"]  # run in bench/peers' virtualenv
TUNERS = ["bo", "flash", "tpe", "gp", "smac", "hebo", "ddpg", "bestconfig", "random", "lhs"]
BUDGET = 100
BUDGETS = (10, 30, 100)
RECOMMEND_AT = (30, 100)
NOISE = 0.07
TIMED_ASKS = range(90, 100)  # asks 91-100: proposals at about 100 observations
EXACT = 1 - 1e-9  # a fraction this close to 1 is the optimum itself


@functools.lru_cache(maxsize=4)
def load(spec: str):
    """(dataset with the objective only, its space, metric, direction, full grid?)."""
    from stortune.datasets import Dataset
    from stortune.sources import load_spec
    from stortune.space import space_from_dataset
    from stortune.targets.table import TableTarget

    full = load_spec(spec).aggregated()
    metric = full.metrics[0]
    frame = full.frame.dropna(subset=[metric]).reset_index(drop=True)
    dataset = Dataset(frame, full.params, [metric], full.directions, full.source)
    space = space_from_dataset(dataset)
    configs = len(TableTarget.of(dataset, space).configs())
    return dataset, space, metric, dataset.direction(), configs == space.raw_grid_size(levels=10**9)


def make_target(spec: str, noise: float, seed: int):
    from stortune.targets.table import TableSettings, TableTarget

    dataset, space, _, _, full_grid = load(spec)
    settings = TableSettings(pool=not full_grid, noise=noise, noise_seed=seed)
    return TableTarget(space, settings, data=dataset)


def make_campaign_tuner(name: str, spec: str, seed: int, pool):
    from stortune.tuners import make_tuner
    from stortune.tuners.pool import PoolProjection

    _, space, _, direction, _ = load(spec)
    if name not in PEERS:
        return make_tuner(name, space, direction, seed, BUDGET, pool=pool)
    from peer_tuners import PeerTuner, ensure_peer_venv

    python = ensure_peer_venv(name)
    tuner = PeerTuner(space, direction, seed, BUDGET, peer=name, python=str(python))
    return tuner if pool is None else PoolProjection(tuner, pool)


def fraction(value: float, optimum: float, direction: str) -> float:
    """The value as a fraction of the optimum (1 at the optimum, also where it is 0: storm's
    minimised metric reaches 0, so there only the optimum's configs are within 5% of it)."""
    if value == optimum:
        return 1.0
    return value / optimum if direction == "max" else optimum / value


def campaign(job: tuple[str, str, int, float]) -> dict:
    """One seeded campaign: the true best-so-far fraction after each evaluation, the true
    value of the recommendations (noisy replay) and the seconds each ask took."""
    spec, name, seed, noise = job
    import torch

    torch.set_num_threads(1)
    _, _, metric, direction, _ = load(spec)
    target = make_target(spec, noise, seed)
    optimum = target.optimum(metric, direction)
    tuner = make_campaign_tuner(name, spec, seed, target.tuning_pool())
    curve: list[float] = []
    asks: list[float] = []
    recommended: dict[str, float] = {}
    best: float | None = None
    started = time.perf_counter()
    try:
        for step in range(BUDGET):
            ask_started = time.perf_counter()
            config = tuner.ask()
            asks.append(time.perf_counter() - ask_started)
            target.apply(config)
            value = target.run().metrics[metric]
            tuner.observe_state(target.state())
            tuner.tell(config, value)
            true = fraction(target.true_value(config, metric), optimum, direction)
            best = true if best is None else max(best, true)
            curve.append(best)
            if noise and step + 1 in RECOMMEND_AT:
                choice = tuner.recommend()
                score = fraction(target.true_value(choice, metric), optimum, direction)
                recommended[str(step + 1)] = score
    finally:
        close = getattr(getattr(tuner, "inner", tuner), "close", None)
        if close is not None:
            close()
    return {
        "dataset": spec_name(spec),
        "tuner": name,
        "seed": seed,
        "noise": noise,
        "improved": improvements(curve),
        "recommended": recommended,
        "ask_seconds_100obs": statistics.mean(asks[i] for i in TIMED_ASKS),
        "seconds": round(time.perf_counter() - started, 2),
    }


def improvements(curve: list[float]) -> list[list[float]]:
    """The best-so-far curve as [evaluation, fraction] where it rose: a campaign's record in
    the runs file stays small enough to keep in the repository."""
    out: list[list[float]] = []
    for i, value in enumerate(curve):
        if not out or value > out[-1][1]:
            out.append([i + 1, round(value, 9)])
    return out


def curve_of(run: dict) -> list[float]:
    """The best-so-far fraction after each of the BUDGET evaluations."""
    curve, steps = [], iter(run["improved"])
    step, value = next(steps), 0.0
    for evaluation in range(1, BUDGET + 1):
        while step is not None and step[0] <= evaluation:
            value = step[1]
            step = next(steps, None)
        curve.append(value)
    return curve


def to_reach(run: dict, goal: float) -> float:
    """Evaluations until the best-so-far fraction reaches `goal` (inf: never)."""
    return next((int(e) for e, f in run["improved"] if f >= goal), math.inf)


def median_or_none(values: Iterable[float]) -> float | None:
    m = statistics.median(values)
    return None if math.isinf(m) else m


def summarise(runs: list[dict], datasets: list[str], tuners: list[str], missing: dict) -> list:
    """One row per dataset x tuner."""
    rows = []
    for dataset in datasets:
        for name in tuners:
            clean = [
                r for r in runs if (r["dataset"], r["tuner"], r["noise"]) == (dataset, name, 0)
            ]
            noisy = [
                r for r in runs if (r["dataset"], r["tuner"]) == (dataset, name) and r["noise"]
            ]
            row: dict = {"dataset": dataset, "tuner": name, "seeds": len(clean)}
            if name in missing:
                row["not_installed"] = missing[name]
            if clean:
                curves = [curve_of(r) for r in clean]
                for b in BUDGETS:
                    row[f"best_at_{b}"] = statistics.median(c[b - 1] for c in curves)
                row["evals_to_5pct"] = median_or_none(to_reach(r, 0.95) for r in clean)
                row["evals_to_1pct"] = median_or_none(to_reach(r, 0.99) for r in clean)
                row["exact_share"] = sum(c[-1] >= EXACT for c in curves) / len(clean)
                row["ask_seconds_100obs"] = statistics.median(
                    r["ask_seconds_100obs"] for r in clean
                )
            row["noisy_seeds"] = len(noisy)
            for at in RECOMMEND_AT:
                values = [r["recommended"][str(at)] for r in noisy]
                row[f"noisy_true_at_{at}"] = statistics.median(values) if values else None
            rows.append(row)
    return rows


def rank_value(row: dict | None, key: str) -> float:
    """Evaluations to a mark, with "not reached" and "not run" ranked last."""
    if row is None or row.get(key) is None:
        return math.inf
    return row[key]


def default_check(rows: list[dict], default: str, min_seeds: int = 1) -> dict:
    """The default tuner against every peer that ran at `min_seeds` seeds or more (module doc):
    a median over one seed beside medians over twenty is a draw, not a rank."""
    by = {
        (r["dataset"], r["tuner"]): r
        for r in rows
        if r.get("seeds") and (r["tuner"] == default or r["seeds"] >= min_seeds)
    }
    datasets = sorted({d for d, _ in by}, key=[r["dataset"] for r in rows].index)
    wins, within, noisy_ok, notes = 0, 0, 0, []
    compared = 0
    for dataset in datasets:
        mine = by.get((dataset, default))
        peers = [r for (d, t), r in by.items() if d == dataset and t != default]
        if mine is None or not peers:
            continue
        compared += 1
        own = rank_value(mine, "evals_to_1pct")
        best_peer = min(peers, key=lambda r: rank_value(r, "evals_to_1pct"))
        peer_best = rank_value(best_peer, "evals_to_1pct")
        if own <= peer_best:
            wins += 1
        if own <= 1.5 * peer_best or (math.isinf(own) and math.isinf(peer_best)):
            within += 1
        else:
            notes.append(
                f"{dataset}: {own:g} evaluations to 1% against {best_peer['tuner']}'s {peer_best:g}"
            )
        ok = True
        for at in RECOMMEND_AT:
            key = f"noisy_true_at_{at}"
            top = max(
                (r for r in peers if r.get(key) is not None), key=lambda r: r[key], default=None
            )
            if mine.get(key) is not None and top is not None and mine[key] < top[key]:
                ok = False
                notes.append(
                    f"{dataset}: noisy recommendation at {at} {mine[key]:.3f} "
                    f"against {top['tuner']}'s {top[key]:.3f}"
                )
        noisy_ok += ok
    return {
        "default_tuner": default,
        "datasets": compared,
        "fewest_evals_to_1pct": wins,
        "within_1_5x_of_best_peer": within,
        "noisy_best_or_tied": noisy_ok,
        "met": compared > 0
        and wins >= math.ceil(2 * compared / 3)
        and within == compared
        and noisy_ok == compared,
        "peers_at_fewer_seeds": sorted(
            {r["tuner"] for r in rows if r.get("seeds") and r["tuner"] != default}
            - {t for _, t in by}
        ),
        "misses": notes,
    }


def evidence_pick(rows: list[dict], own: list[str], min_seeds: int = 1) -> tuple[str | None, dict]:
    """Each of stortune's own tuners checked as if it were the default, and the one that
    passes most: fewest evaluations to 1%, within 1.5x of the best peer, best noisy
    recommendation, counted over the datasets (ties: fewer misses listed)."""
    checks = {
        t: default_check(rows, t, min_seeds) for t in own if any(r["tuner"] == t for r in rows)
    }
    if not checks:
        return None, {}

    def passes(c: dict) -> tuple[int, int]:
        score = c["fewest_evals_to_1pct"] + c["within_1_5x_of_best_peer"] + c["noisy_best_or_tied"]
        return score, -len(c["misses"])

    summary = {t: {k: v for k, v in c.items() if k != "misses"} for t, c in checks.items()}
    return max(checks, key=lambda t: passes(checks[t])), summary


def cell(value: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def markdown(rows: list[dict], noise: float) -> str:
    lines = [
        "Medians over the seeds given (noise-free / noisy). Noise-free: best found as a fraction "
        "of the optimum after 10/30/100 evaluations, evaluations to within 5% and 1% (- not "
        "reached in 100), share of seeds that found the optimum. Noisy "
        f"({noise:.0%} relative SD): true value of the recommendation after 30 and 100 "
        "evaluations. s/ask: seconds per proposal at about 100 observations.",
        "",
        "| dataset | tuner | seeds | @10 | @30 | @100 | to 5% | to 1% | optimum | noisy @30 "
        "| noisy @100 | s/ask |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    label = None
    for row in rows:
        name = row["dataset"] if row["dataset"] != label else ""
        label = row["dataset"]
        if "not_installed" in row and not row["seeds"]:
            lines.append(f"| {name} | {row['tuner']} | not installed: {row['not_installed']} |")
            continue
        if not row["seeds"]:
            lines.append(f"| {name} | {row['tuner']} | no campaign finished yet |")
            continue
        lines.append(
            f"| {name} | {row['tuner']} | {row['seeds']}/{row['noisy_seeds']} "
            f"| {cell(row['best_at_10'])} | {cell(row['best_at_30'])} "
            f"| {cell(row['best_at_100'])} | {cell(row['evals_to_5pct'], '{:g}')} "
            f"| {cell(row['evals_to_1pct'], '{:g}')} | {row['exact_share']:.0%} "
            f"| {cell(row['noisy_true_at_30'])} | {cell(row['noisy_true_at_100'])} "
            f"| {row['ask_seconds_100obs']:.2f} |"
        )
    return "\n".join(lines)


def finished(path: Path) -> list[dict]:
    """The campaigns a previous run finished (a torn last line is dropped)."""
    if not path.exists():
        return []
    runs = []
    for line in path.read_text().splitlines():
        try:
            runs.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return runs


def peer_status(tuners: list[str]) -> dict[str, str]:
    """The peers that cannot run here, with the reason (installed on first use)."""
    missing = {}
    for name in tuners:
        if name in PEERS:
            from peer_tuners import ensure_peer_venv

            python = ensure_peer_venv(name)
            if not isinstance(python, Path):
                missing[name] = str(python)
    return missing


def main() -> None:
    from stortune.tuners import DEFAULT_TUNER

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("datasets", nargs="*", help="extra dataset specs PATH[@WORKLOAD]")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--seeds-of",
        default="",
        metavar="TUNER=N,...",
        help="fewer seeds for the named tuners (a peer too slow for all of them: hebo=3)",
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--noise", type=float, default=NOISE, help="relative SD of the replay")
    parser.add_argument("--tuners", default=",".join(TUNERS), help="comma-separated subset")
    parser.add_argument("--fresh", action="store_true", help="forget the finished campaigns")
    parser.add_argument(
        "--no-run", action="store_true", help="run nothing: the table of the finished campaigns"
    )
    add_only_option(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    tuners = args.tuners.split(",")
    seeds_of = {t: int(n) for t, _, n in (x.partition("=") for x in args.seeds_of.split(",") if x)}
    datasets = [str(SHARED / f"{n}.csv") for n in MOOT if (SHARED / f"{n}.csv").exists()]
    datasets = select(datasets + own_specs() + list(args.datasets), only_patterns(args.only))
    if not datasets:
        sys.exit("no dataset found (../shared/datasets missing, and none given)")
    missing = peer_status(tuners)
    runnable = [t for t in tuners if t not in missing]
    runs_file = args.out.with_name(RUNS.name) if args.out != RESULTS else RUNS
    runs_file.parent.mkdir(parents=True, exist_ok=True)
    if args.fresh and runs_file.exists():
        runs_file.unlink()
    runs = finished(runs_file)
    done = {(r["dataset"], r["tuner"], r["seed"], r["noise"]) for r in runs}
    jobs = [  # seed by seed, so that an interrupted run has every cell at about as many seeds
        (spec, name, seed, noise)
        for seed in range(args.seeds)
        for spec in datasets
        for name in runnable
        for noise in (0.0, args.noise)
        if seed < seeds_of.get(name, args.seeds)
        and (spec_name(spec), name, seed, noise) not in done
    ]
    if args.no_run:
        jobs = []
    names = [spec_name(s) for s in datasets]
    info = {}
    for spec in datasets:
        dataset, space, metric, direction, full_grid = load(spec)
        info[spec_name(spec)] = {
            "path": spec,
            "metric": metric,
            "direction": direction,
            "parameters": len(space),
            "configs": int(dataset.frame[dataset.params].drop_duplicates().shape[0]),
            "protocol": "exact lookup (full grid)" if full_grid else "pool",
        }
    print(f"{len(jobs)} campaigns to run ({len(done)} finished before)", file=sys.stderr)
    started = time.perf_counter()

    def write() -> dict:
        rows = summarise(runs, names, tuners, missing)
        for row in rows:
            row["seeds_asked"] = seeds_of.get(row["tuner"], args.seeds)
        pick, own_checks = evidence_pick(rows, OWN_TUNERS, args.seeds)
        result = {
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "jobs": args.jobs},
            "seeds": args.seeds,
            "budget": BUDGET,
            "noise": args.noise,
            "default_tuner": DEFAULT_TUNER,
            "check": default_check(rows, DEFAULT_TUNER, args.seeds),
            "check_with_every_peer": default_check(rows, DEFAULT_TUNER),
            "evidence_pick": pick,
            "own_tuners_as_default": own_checks,
            "datasets": info,
            "rows": rows,
            "wall_seconds_this_run": time.perf_counter() - started,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
        return result

    with ProcessPoolExecutor(max_workers=args.jobs) as pool, runs_file.open("a") as log:
        pending: set[Future] = set()
        queue = iter(jobs)

        def top_up() -> None:
            """Keep two campaigns per worker queued: an interrupt then waits for few."""
            for job in queue:
                pending.add(pool.submit(campaign, job))
                if len(pending) >= 2 * args.jobs:
                    return

        top_up()
        completed = 0
        while pending:
            finished_now, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished_now:
                try:
                    run = future.result()
                except Exception as exc:  # one crashed campaign: say so, keep the others
                    print(f"a campaign failed: {exc}", file=sys.stderr)
                    continue
                runs.append(run)
                log.write(json.dumps(run) + "\n")
                log.flush()
                completed += 1
                if completed % 20 == 0:
                    print(f"  {completed}/{len(jobs)} campaigns", file=sys.stderr)
                    write()
            top_up()
    result = write()
    print(markdown(result["rows"], args.noise))
    for min_seeds, key in ((args.seeds, "check"), (1, "check_with_every_peer")):
        check = result[key]
        verdict = "met" if check["met"] else "not met"
        against = (
            f"peers at {min_seeds} seeds"
            if min_seeds > 1
            else "every peer, also those run at fewer seeds"
        )
        print(
            f"\nDefault tuner {DEFAULT_TUNER} against {against}: fewest evaluations to 1% on "
            f"{check['fewest_evals_to_1pct']}/{check['datasets']} datasets, within 1.5x of the "
            f"best peer on {check['within_1_5x_of_best_peer']}, best noisy recommendation on "
            f"{check['noisy_best_or_tied']}: {verdict}."
        )
        for note in check["misses"]:
            print(f"  {note}")
        if not check["peers_at_fewer_seeds"]:
            break
    pick, own_checks = result["evidence_pick"], result["own_tuners_as_default"]
    if pick is not None:
        c = own_checks[pick]
        print(
            f"Evidence: of stortune's own tuners, {pick} passes most ({c['fewest_evals_to_1pct']} "
            f"fewest to 1%, {c['within_1_5x_of_best_peer']} within 1.5x, "
            f"{c['noisy_best_or_tied']} best noisy, of {c['datasets']})."
        )


if __name__ == "__main__":
    main()
