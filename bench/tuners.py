"""Tuners against the strongest peers on measured tables, noise-free and with noise.

Each tuner (stortune's bo, FLASH, DDPG, BestConfig, random and LHS; Optuna's TPE and GPSampler;
SMAC3 and HEBO from their own virtualenv, bench/peer_tuners.py) runs `--seeds` seeded
100-evaluation campaigns per dataset against a `table` target, in two protocols:

* Noise-free: the target answers a config with its mean over the dataset's repetitions. A table
  that is not a full grid is served in pool mode: tuners choose among its rows (FLASH, bo, DDPG,
  random search and LHS search the pool themselves, the others' proposals move to the nearest
  unmeasured row), so every evaluation is a measured config and nothing is served by a
  neighbour. From each campaign's best-so-far curve: the best as a fraction of the optimum
  after 10/20/30/100 evaluations (for a minimised metric, optimum / best), evaluations to
  within 5% and 1% of the optimum, and whether it found the optimum itself.
* Noisy replay: every evaluation is multiplied by seeded log-normal noise of relative SD
  `--noise` (7%, the repeat noise of the project's own dataset). After 30 and 100 evaluations
  the tuner's recommendation (`Tuner.recommend`: its best mean; bo's best lower bound over
  the leaders it re-measured, each repeat counting in the budget) is
  scored by its noise-free value, not by the lucky draw that made it look best.

Each campaign is one of stortune's (`start_tuning`: a run per config, in a store of its own); a
noisy one is stopped after 30 evaluations, as Ctrl-C would, and resumed to 100 (`resume_tuning`,
its tuner rebuilt from the store), and each sitting's tuner recommends. Per tuner the asks
91-100 of the noise-free campaigns are timed (seconds per proposal at about 100 observations).
Medians are over seeds; "evaluations to" is null when the median campaign did not get there in
100. Finished campaigns are appended to bench/results/tuners-runs.jsonl and skipped when the
bench runs again (--fresh starts over). A peer that cannot be installed is reported as such.

The default-tuner check: stortune's default tuner against every peer run at `--seeds` seeds (and,
as `check_with_every_peer`, also those run at fewer). It is met when the default is within 1%
of the best peer's median best at 30 evaluations on every dataset, needs the fewest evaluations
to 1% on 70% of them and never more than 1.5x the best peer's, and its noisy recommendation at
30 and 100 evaluations is the best or within noise of every peer's on 80% of them (no peer's
median ahead beyond a bootstrap interval over the seeds; `noisy_best_or_tied` counts those
where it is the best outright). `within_1pct_or_noise_at_N` counts the datasets where the
default's median best at N evaluations is within 1% of the best peer's or no peer's is ahead
beyond that bootstrap interval: a median over 20 seeds on a table whose good configs are a few
rows moves by more than 1% by chance; `within_1_5x_or_noise` likewise counts the datasets where
the default needs at most 1.5x the best peer's evaluations to 1%, or needs more but not beyond
that interval (the default's median minus 1.5 times the peer's, over resampled seeds; a seed
that never got there counts as 101). Beside it, `own_tuners_against_random_at_100`: per own tuner,
the datasets where its median best after 100 noise-free evaluations is below random search's,
and those where random search is ahead beyond the seeds' spread (a surrogate stuck in one
region).

Run: python bench/tuners.py [--seeds 20] [--jobs 2] [--tuners bo,flash,...]
     [--only NAME_SUBSTRING ...] [PATH[@WORKLOAD] ...] [--no-run]
(writes bench/results/tuners.json and prints the Markdown table, both made by
bench/tuners_table.py; --no-run only summarises)
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

from benchdata import add_only_option, die_with_parent, only_patterns, own_specs, select
from tuners_table import (
    BUDGET,
    RECOMMEND_AT,
    against_random,
    default_check,
    evidence_pick,
    markdown,
    summarise,
)

from stortune.sources import spec_name
from stortune.targets.table import TableSettings, TableTarget

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "moot-promisetune"
RESULTS = Path(__file__).parent / "results" / "tuners.json"
RUNS = Path(__file__).parent / "results" / "tuners-runs.jsonl"
MOOT = ["HSQLDB", "PostgreSQL", "redis", "7z", "dconvert", "deeparch", "exastencils", "storm"]
OWN_TUNERS = ["bo", "flash", "ddpg", "bestconfig", "random", "lhs"]
PEERS = ["smac", "hebo"]  # run in bench/peers' virtualenv
TUNERS = ["bo", "flash", "tpe", "gp", "smac", "hebo", "ddpg", "bestconfig", "random", "lhs"]
NOISE = 0.07
TIMED_ASKS = 10  # asks 91-100: proposals at about 100 observations
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None  # the stores in memory where it can


@functools.lru_cache(maxsize=16)
def load(spec: str) -> tuple[Path, object, str, str, bool, int]:
    """(the dataset's table file, its space, metric, direction, full grid?, configs). The table
    (one row per config, the objective averaged over its repetitions) is written as Parquet to
    the scratch folder, a file per process: a campaign stores its path, and a resume reads the
    same rows back."""
    from stortune.datasets import load_dataset
    from stortune.sources import load_spec
    from stortune.space import space_from_dataset

    full = load_spec(spec).aggregated()
    metric = full.metrics[0]
    frame = full.frame.dropna(subset=[metric]).reset_index(drop=True)[[*full.params, metric]]
    frame.to_parquet(path := scratch() / f"{spec_name(spec)}-{os.getpid()}.parquet")
    dataset = load_dataset(path, [metric])  # as the table target reads it
    space = space_from_dataset(dataset)
    grid = len(TableTarget.of(dataset, space).configs()) == space.raw_grid_size(levels=10**9)
    return path, space, metric, full.direction(), grid, len(frame[full.params].drop_duplicates())


@functools.cache
def scratch() -> Path:
    """The run's scratch folder: made by the first process that needs one, used by the workers
    it starts (they inherit its name), removed when that process exits."""
    if folder := os.environ.get("STORTUNE_BENCH_SCRATCH"):
        return Path(folder)
    folder = os.environ["STORTUNE_BENCH_SCRATCH"] = tempfile.mkdtemp("-tuners", dir=SCRATCH)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return Path(folder)


def make_target(spec: str, noise: float, seed: int) -> TableTarget:
    path, space, metric, _, grid, _ = load(spec)
    pool = not grid  # a table that is not a full grid is served in pool mode
    settings = TableSettings(str(path), pool=pool, noise=noise, noise_seed=seed, metrics=[metric])
    return TableTarget(space, settings)


def fraction(value: float, optimum: float, direction: str) -> float:
    """The value as a fraction of the optimum (1 at the optimum, also where it is 0: storm's
    minimised metric reaches 0, so there only the optimum's configs are within 5% of it)."""
    if value == optimum:
        return 1.0
    return value / optimum if direction == "max" else optimum / value


class Sitting:
    """The reporter (`stortune.workflows.reporting.Reporter`) of one sitting of a campaign: it
    keeps the sitting's tuner, times its asks and, once `stop_at` evaluations are told, stops
    the sitting as Ctrl-C would, before the next config is measured. (A campaign started with
    a budget of 30, raised to 100 on resume, would not do: a tuner's budget sizes its initial
    design, so its first 30 proposals would not be those of a 100-evaluation campaign.)"""

    def __init__(self, stop_at: int) -> None:
        self.stop_at, self.tuner, self.asks = stop_at, None, []

    def measuring(self, label: str, measuring):
        self.tuner, ask = measuring.plan.tuner, measuring.plan.tuner.ask

        def timed():
            started = time.perf_counter()
            config = ask()
            self.asks.append(time.perf_counter() - started)
            return config

        self.tuner.ask = timed
        return contextlib.nullcontext(self.on_event)

    def on_event(self, event) -> None:
        if event.kind == "visit" and event.counted and event.trial.seq == self.stop_at:
            raise KeyboardInterrupt  # start_tuning raises Interrupted; the campaign resumes

    def note(self, text: str) -> None:
        pass


def campaign(job: tuple[str, str, int, float]) -> dict:
    """One seeded campaign (module doc): the true best-so-far fraction after each evaluation,
    the true value of the recommendations (noisy replay) and the seconds each ask took."""
    spec, name, seed, noise = job
    import torch

    from stortune.enums import Direction
    from stortune.errors import Interrupted
    from stortune.measure.tuning import TuneSettings
    from stortune.objective import Objective
    from stortune.store import Store
    from stortune.workflows.tune import TuneJob, resume_tuning, start_tuning

    torch.set_num_threads(1)
    if name in PEERS:
        from peer_tuners import register_peer

        register_peer(name)
    _, space, metric, direction, _, _ = load(spec)
    target = make_target(spec, noise, seed)
    optimum = target.optimum(metric, direction)

    def true(config: dict) -> float:
        return fraction(target.true_value(config, metric), optimum, direction)

    settings = TuneSettings(BUDGET, repetitions=1, baseline=False, reference_every=0)
    tune = TuneJob(
        space, target, [None], Objective(metric, Direction(direction)), settings,
        tuner=name, seed=seed, name="bench", allow_risk=True,
    )  # fmt: skip
    started, recommended = time.perf_counter(), {}
    with tempfile.TemporaryDirectory(dir=scratch()) as folder:
        store = Store(str(Path(folder) / "bench.db"))
        for i, at in enumerate(RECOMMEND_AT if noise else RECOMMEND_AT[-1:]):
            sitting = Sitting(at)
            with contextlib.suppress(Interrupted):
                if i:
                    resume_tuning(store, tune.name, budget=BUDGET, reporter=sitting)
                else:
                    start_tuning(store, tune, sitting)
            if noise:
                recommended[str(at)] = true(sitting.tuner.recommend())
            tuner = getattr(sitting.tuner, "inner", sitting.tuner)  # a peer in a PoolProjection
            if hasattr(tuner, "close"):
                tuner.close()  # the peer's bridge process
        trials = store.trials(store.campaign(tune.name).id)
        store.engine.dispose()
    return {
        "dataset": spec_name(spec),
        "tuner": name,
        "seed": seed,
        "noise": noise,
        "improved": improvements(
            list(itertools.accumulate(map(true, (t.config for t in trials)), max))
        ),
        "recommended": recommended,
        "ask_seconds_100obs": statistics.mean(sitting.asks[-TIMED_ASKS:]),
        "seconds": round(time.perf_counter() - started, 2),
    }


def improvements(curve: list[float]) -> list[list[float]]:
    """The best-so-far curve as [evaluation, fraction] where it rose: a campaign's record in
    the runs file stays small enough to keep in the repository."""
    out: list[list[float]] = []
    for i, value in enumerate(curve):
        if not out or round(value, 9) > out[-1][1]:  # rounded as stored: a tie is no rise
            out.append([i + 1, round(value, 9)])
    return out


def finished(path: Path) -> list[dict]:
    """The campaigns a previous run finished (a torn last line is dropped)."""
    runs = []
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(json.JSONDecodeError):
            runs.append(json.loads(line))
    return runs


def peer_status(tuners: list[str]) -> dict[str, str]:
    """The peers that cannot run here, with the reason (installed on first use)."""
    from peer_tuners import register_peer

    return {t: why for t in tuners if t in PEERS and (why := register_peer(t)) is not None}


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
    missing = {} if args.no_run else peer_status(tuners)  # nothing runs: nothing to install
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
        for noise in dict.fromkeys((0.0, args.noise))  # --noise 0: noise-free only
        if seed < seeds_of.get(name, args.seeds)
        and (spec_name(spec), name, seed, noise) not in done
    ]
    if args.no_run:
        jobs = []
    names = [spec_name(s) for s in datasets]
    info = {}
    for spec in datasets:
        _, space, metric, direction, full_grid, configs = load(spec)
        info[spec_name(spec)] = {
            "path": spec,
            "metric": metric,
            "direction": direction,
            "parameters": len(space),
            "configs": configs,
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
            "own_tuners_against_random_at_100": against_random(rows, OWN_TUNERS),
            "datasets": info,
            "rows": rows,
            "wall_seconds_this_run": time.perf_counter() - started,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
        return result

    with (
        ProcessPoolExecutor(max_workers=args.jobs, initializer=die_with_parent) as pool,
        runs_file.open("a") as log,
    ):
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
            f"best peer on {check['within_1_5x_of_best_peer']} (or within noise on "
            f"{check['within_1_5x_or_noise']}), within 1% of the best peer at 30 "
            f"evaluations on {check['within_1pct_at_30']} (or within noise on "
            f"{check['within_1pct_or_noise_at_30']}), best noisy recommendation on "
            f"{check['noisy_best_or_tied']} (best or within noise on "
            f"{check['noisy_best_or_within_noise']}): {verdict}."
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
            f"{c['noisy_best_or_within_noise']} best noisy or within noise, of {c['datasets']})."
        )
    for name, found in result["own_tuners_against_random_at_100"].items():
        if found["below"]:
            beyond = ", ".join(found["below_beyond_noise"]) or "none"
            print(
                f"{name} below random search at {BUDGET} evaluations: "
                f"{'; '.join(found['below'])} (beyond noise: {beyond})."
            )


if __name__ == "__main__":
    main()
