"""SPA's own experiment (Noorshams et al., ICPE 2013, sections 4-6) measured on this machine.

The bundled `spa` space is workload x system: request size, read share, random or sequential
access, file set size (around the page cache, capped at 512 MiB by a memory cgroup), 12 threads,
and the I/O scheduler, on ext4 over a loop device. Four campaigns, one store, each resumable:

1. ``spa-factorial``: the full factorial (600 configs: 5 request sizes x 5 read shares x 2
   access patterns x 3 file set sizes x 4 schedulers), 2 repetitions interleaved, the default
   config as a reference every 10 configs. Exported drift-corrected to data/spa.csv.
2. ``spa-interpolation``: 100 configs drawn at random inside the ranges (request sizes rounded
   to 512 bytes, file sets to 16 MiB: the paper's Table 4), measured, not taken from the grid.
3. ``spa-extrapolation``: the paper's Table 5 scheme: request sizes 1, 2, 36 and 40 KiB, file
   sets at 0.5/0.75 of the smallest and 1.1/1.2 of the largest, read shares 15/20/80/85%, random
   and sequential, schedulers none and bfq (NOOP and CFQ there): 256 configs.
4. ``spa-consolidation``: 48 random configs (12 per scheduler none/bfq x access) run as 2 and as
   3 co-located instances (threads and file set split evenly), each a fio job of its own.
5. ``spa-disk-cache``: the virtual disk's own cache, probed with O_DIRECT 4 KiB random reads over
   file sets of 256 MiB to 6 GiB (3 repetitions each).
6. ``spa-interpolation-aligned``: 100 more random configs, request sizes rounded to 4 KiB: the
   fio job is buffered, and a request of part of a page makes a write read-modify-write it, an
   effect the page-aligned factorial never saw.

Every run is divided by the reference measured around it and multiplied by the reference's
mean over all campaigns (drift correction; MEASURING.md). Then, per technique (SPA's: linear
with interactions, MARS, CART, Cubist, plus M5 and stortune's AutoModel), each with its split-
searched hyperparameters, fitted on the factorial: R^2 on the training data, and the mean
relative error of the interpolation, extrapolation and consolidation configs, for read and
write response time and throughput separately (RT_r, RT_w, TP_r, TP_w). Read metrics are
scored where the read share is at least 25%, write metrics where it is at most 75% (Table 4).

Results: bench/results/spa.json (``rows``: scenario, technique, metric, mre, ...) and the
Markdown tables printed at the end, the paper's numbers beside ours.

Needs root. Run: python bench/spa.py [--runtime 1] [--store bench/results/spa.db]
                 [--only-measure | --only-evaluate]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from spa_tables import (
    METRICS,
    PAPER_CONSOLIDATION,
    PAPER_EXTRAPOLATION,
    PAPER_INTERPOLATION,
    PAPER_R2,
    probe_table,
    tables,
)

from stortune.cli.progress import ConsoleReporter
from stortune.enums import CampaignStatus, RunStatus
from stortune.measure.campaigns import open_campaign
from stortune.measure.reference import is_reference, relative_values
from stortune.measure.runner import RunRules
from stortune.measure.sweeping import SweepSettings
from stortune.models import technique
from stortune.models.metrics import mean_relative_error, r2
from stortune.models.spa_scenarios import (
    ACCESSES,
    PAPER_SCHEDULERS,
    consolidation_configs,
    extrapolation_configs,
    interpolation_configs,
    wide_space,
)
from stortune.models.study import SearchSettings, search
from stortune.objective import Objective
from stortune.space import Config, Space, load_space
from stortune.store import Store
from stortune.targets.localfs import LocalFsTarget
from stortune.workflows.model import EXTRA_ESTIMATORS
from stortune.workflows.reporting import run_measuring
from stortune.workflows.sweep import new_sweep
from stortune.workloads.spa import SpaWorkload

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DATA = HERE.parent / "data"
CACHE_CAP = "512m"
IMAGE = "8g"
INTERPOLATION = 100
PAGE = 4096


# ---- measuring -----------------------------------------------------------------------------------
def campaign_status(store: Store, name: str) -> str | None:
    found = {c.name: c for c in store.campaigns()}
    return found[name].status if name in found else None


def measure(
    store: Store,
    name: str,
    space: Space,
    configs: list[Config],
    repetitions: int,
    runtime: float,
    console: Console,
) -> None:
    """Measure (or resume) one campaign of `configs`, the default config as the reference."""
    status = campaign_status(store, name)
    if status == CampaignStatus.FINISHED:
        return
    target = LocalFsTarget(space, memory_limit=CACHE_CAP, image_size=IMAGE)
    if status is None:
        measuring = new_sweep(
            store, name, space, target, [SpaWorkload(runtime=runtime)],
            Objective("total.bw_mbs"), [space.validate(c) for c in configs],
            SweepSettings(repetitions, reference_every=10, seed=0),
            RunRules(timeout=30.0 + 5 * runtime, check_disturbance=True, busy_wait=900.0),
        )  # fmt: skip
    else:
        measuring = open_campaign(store, name, target=target)
    run_measuring(measuring, ConsoleReporter(False), name)
    if campaign_status(store, name) != CampaignStatus.FINISHED:
        raise SystemExit(f"{name}: stopped before the end; run again to resume")


DISK_CACHE_SETS = (256, 1024, 4096, 6144)  # MiB


def disk_cache_configs() -> list[Config]:
    """The virtual disk's own cache, probed: O_DIRECT 4 KiB random reads over growing file
    sets. A cache below the loop device shows as faster reads over the sets that fit in it."""
    return [
        {"direct": True, "read_share": 100, "request_size": 4096, "access": "random",
         "file_set_size": size}
        for size in DISK_CACHE_SETS
    ]  # fmt: skip


def disk_cache(store: Store) -> list[dict[str, Any]]:
    """Per file set size of the probe: the mean 4 KiB O_DIRECT random-read IOPS and latency."""
    trials = [t for t in store.trials(store.campaign("spa-disk-cache").id) if not is_reference(t)]
    out = []
    for trial in trials:
        ok = [r for r in trial.runs if r.status == RunStatus.OK]
        out.append(
            {
                "file_set_mib": trial.config["file_set_size"],
                "runs": len(ok),
                "read_iops": float(np.mean([r.metrics["read.iops"] for r in ok])),
                "read_lat_ms": float(np.mean([r.metrics["read.lat_mean_ms"] for r in ok])),
            }
        )
    return sorted(out, key=lambda row: row["file_set_mib"])


def measure_all(store: Store, runtime: float, seed: int, console: Console) -> None:
    space = load_space("spa")
    wide = wide_space(space)
    plan = [
        ("spa-factorial", space, list(space.grid()), 2),
        ("spa-interpolation", space, interpolation_configs(space, INTERPOLATION, seed), 1),
        ("spa-extrapolation", wide, extrapolation_configs(space), 1),
        ("spa-consolidation", space, consolidation_configs(space, seed), 1),
        ("spa-disk-cache", wide, disk_cache_configs(), 3),
        (ALIGNED, space, interpolation_configs(space, INTERPOLATION, seed + 2, PAGE), 1),
    ]
    for name, s, configs, repetitions in plan:
        started = time.monotonic()
        console.print(f"{name}: {len(configs)} configs x {repetitions} repetitions")
        measure(store, name, s, configs, repetitions, runtime, console)
        console.print(f"{name}: done in {time.monotonic() - started:.0f} s")


# ---- the drift-corrected dataset ----------------------------------------------------------------
FEATURES = ["request_size", "read_share", "access", "file_set_size", "scheduler"]
ALIGNED = "spa-interpolation-aligned"
CAMPAIGNS = (
    "spa-factorial",
    "spa-interpolation",
    "spa-extrapolation",
    "spa-consolidation",
    ALIGNED,
)


def corrected_frame(store: Store, names: Iterable[str]) -> pd.DataFrame:
    """One row per config and campaign: the mean over its successful runs of each metric,
    each run divided by the reference interpolated at its start (within its campaign) and
    multiplied by the reference's mean over every campaign named."""
    trials = {name: store.trials(store.campaign(name).id) for name in names}
    references = {name: next(t for t in ts if is_reference(t)) for name, ts in trials.items()}
    level = {
        short: float(np.mean([r.metrics[metric] for t in references.values() for r in t.runs
                              if r.status == RunStatus.OK and metric in r.metrics]))
        for short, metric in METRICS.items()
    }  # fmt: skip
    rows = []
    for name, ts in trials.items():
        runs = [r for t in ts if not is_reference(t) for r in t.runs]
        relative = {
            short: relative_values(runs, references[name].runs, metric, "spa")
            for short, metric in METRICS.items()
        }
        for trial in ts:
            if is_reference(trial):
                continue
            row: dict[str, Any] = {"campaign": name, **trial.config}
            ok = [r for r in trial.runs if r.status == RunStatus.OK]
            row["runs"] = len(ok)
            for short in METRICS:
                values = [
                    relative[short][r.id] * level[short] for r in ok if r.id in relative[short]
                ]
                row[short] = float(np.mean(values)) if values else np.nan
                spread = len(values) > 1 and np.mean(values) > 0
                row[f"{short}_rsd"] = (
                    float(np.std(values, ddof=1) / np.mean(values)) if spread else np.nan
                )
            rows.append(row)
    return pd.DataFrame(rows)


def write_dataset(frame: pd.DataFrame, path: Path) -> None:
    """data/spa.csv: the factorial, one row per config, parameters then the four metrics, each
    named with its direction (``RT_r-``: lower is better), so `--from data/spa.csv` reads them
    as metrics."""
    columns = [*load_space("spa").names, *METRICS]
    names = {short: f"{short}{'-' if short.startswith('RT') else '+'}" for short in METRICS}
    table = frame[columns].copy()
    for short in METRICS:  # no reads (writes), no read (write) metric: empty, not 0
        none = table["read_share"] == (0 if short.endswith("_r") else 100)
        table.loc[none, short] = np.nan
    table.rename(columns=names).to_csv(path, index=False, float_format="%.6g")


# ---- models and scenarios ----------------------------------------------------------------------
def scored(frame: pd.DataFrame, short: str) -> pd.DataFrame:
    """The rows a metric is scored on: reads where at least 25% are reads, writes where at
    most 75% are (the paper's Table 4), and a measured value."""
    keep = frame["read_share"] >= 25 if short.endswith("_r") else frame["read_share"] <= 75
    return frame[keep & frame[short].notna() & (frame[short] > 0)]


def training(frame: pd.DataFrame, short: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The factorial's rows that have the metric (any read for RT_r/TP_r, any write for the
    write metrics)."""
    rows = frame[frame[short].notna() & (frame[short] > 0)]
    return rows[FEATURES].reset_index(drop=True), rows[short].to_numpy(float)


def fit_model(name: str, X: pd.DataFrame, y: np.ndarray, budget: float) -> Any:
    """The technique with its split-searched hyperparameters (the paper's k=4, n=5, 10
    iterations, 10-fold CV RMSE) within `budget` seconds; AutoModel picks its own."""
    if name in EXTRA_ESTIMATORS:  # "auto": AutoModel, seed 0
        return EXTRA_ESTIMATORS[name](budget, 0).fit(X, y)
    tech = technique(name)
    space = tech.search_space(len(X))
    if not space:
        return tech.make().fit(X, y)
    settings = SearchSettings(max_seconds=budget)
    return search(tech.make(), space, X, y, settings).best_estimator_


def scenario_mre(model: Any, test: pd.DataFrame, short: str) -> float:
    """Mean relative error (%) of the model on a scenario's configs (NaN without any)."""
    if test.empty:
        return float("nan")
    measured = test[short].to_numpy(float)
    return 100.0 * mean_relative_error(measured, model.predict(test[FEATURES]))


def evaluate(frame: pd.DataFrame, techniques: list[str], budget: float) -> list[dict[str, Any]]:
    """Rows of spa.json: R^2 (fit), interpolation, extrapolation (per group) and
    consolidation (per instances, scheduler and access), per technique and metric."""
    train = frame[frame["campaign"] == "spa-factorial"]
    interp = frame[frame["campaign"] == "spa-interpolation"]
    extra = frame[frame["campaign"] == "spa-extrapolation"]
    consol = frame[frame["campaign"] == "spa-consolidation"]
    groups = {
        "small requests": extra["request_size"] < 4096,
        "large requests": extra["request_size"] > 32768,
        "small file sets": extra["file_set_size"] < 128,
        "large file sets": extra["file_set_size"] > 2048,
    }
    rows: list[dict[str, Any]] = []
    for name in techniques:
        for short in METRICS:
            X, y = training(train, short)
            started = time.monotonic()
            model = fit_model(name, X, y, budget)
            seconds = time.monotonic() - started
            base = {"technique": name, "metric": short, "fit_seconds": round(seconds, 1)}
            fitted = model.predict(X)
            fit_mre = 100.0 * mean_relative_error(y, fitted)
            rows.append({**base, "scenario": "fit", "r2": r2(y, fitted), "mre": fit_mre,
                         "n": len(y), "paper_r2": PAPER_R2.get(name, {}).get(short)})  # fmt: skip
            test = scored(interp, short)
            rows.append({**base, "scenario": "interpolation", "n": len(test),
                         "mre": scenario_mre(model, test, short),
                         "paper_mre": PAPER_INTERPOLATION.get(name, {}).get(short)})  # fmt: skip
            # Buffered I/O: a request that is not a whole number of 4 KiB pages makes writes
            # read-modify-write partial pages, an effect the page-aligned factorial never saw.
            aligned = test["request_size"] % PAGE == 0
            for group, part in (("page-aligned", test[aligned]), ("unaligned", test[~aligned])):
                rows.append({**base, "scenario": "interpolation", "group": group,
                             "n": len(part), "mre": scenario_mre(model, part, short),
                             "paper_mre": None})  # fmt: skip
            test = scored(frame[frame["campaign"] == ALIGNED], short)
            rows.append({**base, "scenario": "interpolation", "group": "page-aligned draw",
                         "n": len(test), "mre": scenario_mre(model, test, short),
                         "paper_mre": PAPER_INTERPOLATION.get(name, {}).get(short)})  # fmt: skip
            for group, mask in groups.items():
                test = scored(extra[mask], short)
                rows.append({**base, "scenario": "extrapolation", "group": group,
                             "n": len(test),
                             "mre": scenario_mre(model, test, short),
                             "paper_mre": PAPER_EXTRAPOLATION.get(group, {}).get(name, {})
                             .get(short)})  # fmt: skip
            for instances in (2, 3):
                for scheduler, access in itertools.product(PAPER_SCHEDULERS, ACCESSES):
                    part = consol[(consol["instances"] == instances)
                                  & (consol["scheduler"] == scheduler)
                                  & (consol["access"] == access)]  # fmt: skip
                    test = scored(part, short)
                    paper = PAPER_CONSOLIDATION[instances][(scheduler, access)].get(name)
                    rows.append({**base, "scenario": f"consolidation-{instances}",
                                 "group": f"{scheduler}, {access}", "n": len(test),
                                 "mre": scenario_mre(model, test, short),
                                 "paper_mre_quarter_sum": paper})  # fmt: skip
            print(f"{name} {short}: fitted in {seconds:.0f} s", flush=True)
    return rows


# ---- the bench -----------------------------------------------------------------------------------
def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runtime", type=float, default=1.0, help="fio seconds per run")
    parser.add_argument("--store", default=str(DATA / "spa.db"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only-measure", action="store_true")
    parser.add_argument("--only-evaluate", action="store_true")
    parser.add_argument(
        "--techniques", default="linear-int,mars-int,cart,m5,cubist,auto",
        help="comma-separated; the paper's four, M5 and stortune's AutoModel by default",
    )  # fmt: skip
    parser.add_argument("--budget", type=float, default=120.0, help="seconds per model's search")
    args = parser.parse_args(list(argv) if argv is not None else None)
    console = Console()
    with Store(args.store) as store:
        if not args.only_evaluate:
            measure_all(store, args.runtime, args.seed, console)
        if args.only_measure:
            return 0
        frame = corrected_frame(store, CAMPAIGNS)
        probe = disk_cache(store)
    factorial = frame[frame["campaign"] == "spa-factorial"]
    write_dataset(factorial, DATA / "spa.csv")
    techniques = [t for t in args.techniques.split(",") if t]
    rows = evaluate(frame, techniques, args.budget)
    rsd = {short: float(np.nanmedian(factorial[f"{short}_rsd"])) for short in METRICS}
    result = {
        "benchmark": "spa",
        "command": "python bench/spa.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "configs": {name: int((frame["campaign"] == name).sum()) for name in CAMPAIGNS},
        "runtime_s": args.runtime,
        "cache_cap": CACHE_CAP,
        "median_repeat_rsd": rsd,
        "disk_cache_probe": probe,
        "fit": [r for r in rows if r["scenario"] == "fit"],  # goodness of fit, Table 3
        "rows": [r for r in rows if r["scenario"] != "fit"],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "spa.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(probe_table(probe))
    print(tables(rows, techniques))
    return 0


if __name__ == "__main__":
    sys.exit(main())
