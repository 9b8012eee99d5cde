"""SeRRa's estimate against the full reference profile on this machine's disk, and the MPI speedup.

Runs, in a directory on the root file system (default /var/tmp/stortune-bench-profile):

1. the full profile (`--full`: every size, at least 6 runs and until the 90% t interval is
   within 10%, capped by `--max-runs`), serially;
2. estimated profiles, serially: 1 repetition with a few seeds (the paper's "sequential SeRRa,
   1 repetition", 1/155 of the reference's time) and 4 repetitions;
3. estimated profiles with 4 repetitions over MPI with 1, 2 and 4 workers on this one machine
   (`mpiexec -n K+1 --oversubscribe python -m mpi4py.futures`; the paper: 1/199 with 16 workers).

Reported: each profile's time and its fraction of the full one's, the mean error of its read and
write ratios against the full profile, and the speedup of the MPI runs over the serial one with
the same repetitions. The default full profile uses a coarser large-size step (192 KiB instead of
32 KiB: 29 sizes instead of 134) to stay under about 20 minutes; its time is also extrapolated to
the paper's grid from the measured time per size. `--paper-grid` measures the paper's grid
(about an hour here). The numbers depend on this VM: read the notes printed at the end.

Usage: python bench/device_profile.py [--dir DIR] [--file-size 64m] [--paper-grid] [--max-runs 10]
       [--workers 1,2,4] [--seeds 3] [--quick] [--out bench/results/profile.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from stortune.profile.compare import compare_profiles
from stortune.profile.design import DEFAULT_INTERVALS, DEFAULT_INTERVALS_TEXT, grid, parse_intervals
from stortune.profile.parallel import MpiRunner
from stortune.profile.profiler import Settings, make_target, run_profile
from stortune.units import parse_size

REPO = Path(__file__).resolve().parents[1]
BENCH_INTERVALS = "8k:64k:8k,64k:4m:192k"
QUICK_INTERVALS = "8k:64k:16k,64k:1m:192k"
MPI_TIMEOUT = 1800
console = Console(width=160)  # a log, often redirected: keep the tables whole


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/var/tmp/stortune-bench-profile")
    parser.add_argument("--file-size", default="64m")
    parser.add_argument("--intervals", default=BENCH_INTERVALS)
    parser.add_argument("--paper-grid", action="store_true", help="the paper's 32 KiB steps")
    parser.add_argument("--min-runs", type=int, default=6)
    parser.add_argument("--max-runs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3, help="1-repetition estimates to average")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to try the bench out")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "profile.json"))
    parser.add_argument("--mpi-child", help=argparse.SUPPRESS)  # internal: one MPI profile
    args = parser.parse_args(argv)
    if args.paper_grid:
        args.intervals = DEFAULT_INTERVALS_TEXT
    if args.quick:
        args.intervals, args.file_size, args.max_runs, args.seeds = QUICK_INTERVALS, "16m", 6, 1
        args.workers = "1,2"
    return args


def progress_printer(name: str) -> Any:
    """Print a line at every tenth of the planned runs (the bench's output is a log)."""
    shown = {"tenth": -1}

    def show(done: int, planned: int) -> None:
        tenth = 10 * done // max(planned, 1)
        if tenth > shown["tenth"]:
            shown["tenth"] = tenth
            console.print(f"  {name}: {done}/{planned} runs", highlight=False)

    return show


def serial_profile(args: argparse.Namespace, name: str, **settings: Any) -> dict[str, Any]:
    spec = make_target(args.dir, None, False, parse_size(args.file_size))
    config = Settings(intervals=parse_intervals(args.intervals), **settings)
    return run_profile(spec, config, progress=progress_printer(name))


def mpi_profile(args: argparse.Namespace, workers: int, seed: int) -> tuple[dict[str, Any], float]:
    """One estimated profile over `workers` MPI workers; its JSON and the command's wall time."""
    with tempfile.TemporaryDirectory(prefix="stortune-bench-") as tmp:
        config = Path(tmp) / "config.json"
        out = Path(tmp) / "profile.json"
        child = {"dir": args.dir, "file_size": args.file_size, "intervals": args.intervals}
        config.write_text(json.dumps(child | {"seed": seed, "out": str(out)}))
        argv = [shutil.which("mpiexec") or "mpiexec", "-n", str(workers + 1), "--oversubscribe"]
        argv += ["--allow-run-as-root"] if os.geteuid() == 0 else []
        argv += [sys.executable, "-m", "mpi4py.futures", __file__, "--mpi-child", str(config)]
        started = time.monotonic()
        proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL)
        try:
            proc.wait(timeout=MPI_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise SystemExit(f"the MPI run with {workers} workers did not finish") from None
        wall = time.monotonic() - started
        if proc.returncode != 0:
            raise SystemExit(f"the MPI run with {workers} workers failed ({proc.returncode})")
        return json.loads(out.read_text()), wall


def mpi_child(config_path: str) -> None:
    """Rank 0 of `mpi_profile`'s mpiexec: profile over the pool's workers, write the JSON."""
    config = json.loads(Path(config_path).read_text())
    spec = make_target(config["dir"], None, False, parse_size(config["file_size"]))
    settings = Settings(
        intervals=parse_intervals(config["intervals"]), repetitions=4, seed=config["seed"]
    )
    runner = MpiRunner()
    try:
        profile = run_profile(spec, settings, runner)
    finally:
        runner.close()
    Path(config["out"]).write_text(json.dumps(profile))


def paper_grid_seconds(full: dict[str, Any]) -> float:
    """The full profile's time on the paper's grid, from its time per size (interpolated over
    the sizes it did not measure) and its share of time outside fio runs."""
    per_size: dict[int, float] = {}
    for run in full["measurements"]:
        per_size[run["size"]] = per_size.get(run["size"], 0.0) + run["seconds"]
    sizes = sorted(per_size)
    busy = sum(per_size.values())
    paper = np.interp(grid(DEFAULT_INTERVALS), sizes, [per_size[s] for s in sizes]).sum()
    return float(paper * full["elapsed_s"] / busy)


def row(name: str, profile: dict[str, Any], full: dict[str, Any], **extra: Any) -> dict[str, Any]:
    errors = compare_profiles(profile, full)["ratio_error"]
    return {
        "name": name,
        "repetitions": profile["settings"].get("repetitions"),
        "workers": profile["runner"]["workers"] if profile["runner"]["mode"] == "mpi" else 0,
        "seed": profile["settings"].get("seed"),
        "runs": profile["runs"],
        "elapsed_s": profile["elapsed_s"],
        "fraction_of_full": profile["elapsed_s"] / full["elapsed_s"],
        "error_read": errors["read"]["mean_abs"],
        "error_write": errors["write"]["mean_abs"],
        "mean_ratio_read": profile["summary"]["read"]["mean"],
        "mean_ratio_write": profile["summary"]["write"]["mean"],
        "imbalance": profile["runner"].get("imbalance"),
        "picked_sizes": profile["picked_sizes"],
        "ratios": ratio_table(profile),
        **extra,
    }


def ratio_table(profile: dict[str, Any]) -> list[list[float]]:
    """[size, read ratio, write ratio] per size: compact enough to keep every profile's curve."""
    return [
        [r["size"], round(r["ratio"]["read"], 4), round(r["ratio"]["write"], 4)]
        for r in profile["curve"]
    ]


def median_rsd(profile: dict[str, Any]) -> float:
    """The typical run-to-run spread of one size and pattern: the noise the ratios carry."""
    runs: dict[tuple[int, str], list[float]] = {}
    for m in profile["measurements"]:
        runs.setdefault((m["size"], m["pattern"]), []).append(m["access_ms"])
    return float(np.median([np.std(v, ddof=1) / np.mean(v) for v in runs.values() if len(v) > 1]))


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if args.mpi_child:
        mpi_child(args.mpi_child)
        return
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    began, load_before = time.monotonic(), os.getloadavg()[0]
    console.print(f"full profile of {args.dir} ({args.intervals}, {args.file_size} per run) ...")
    full = serial_profile(args, "full", full=True, min_runs=args.min_runs, max_runs=args.max_runs)
    rows = []
    for seed in range(1, args.seeds + 1):
        console.print(f"estimate, serial, 1 repetition, seed {seed} ...", highlight=False)
        rows.append(row("serial", serial_profile(args, "est", repetitions=1, seed=seed), full))
    console.print("estimate, serial, 4 repetitions ...")
    serial4 = serial_profile(args, "est", repetitions=4, seed=1)
    rows.append(row("serial", serial4, full))
    for workers in (int(w) for w in args.workers.split(",")):
        console.print(f"estimate, MPI, {workers} worker(s), 4 repetitions ...", highlight=False)
        profile, wall = mpi_profile(args, workers, seed=1)
        speedup = serial4["elapsed_s"] / profile["elapsed_s"]
        extra = {
            "wall_s": wall,
            "speedup": speedup,
            "utilisation": profile["runner"]["utilisation"],
        }
        rows.append(row("mpi", profile, full, **extra))
    with contextlib.suppress(OSError):  # only when empty: never someone else's files
        Path(args.dir).rmdir()
    report = make_report(args, full, rows, load_before, time.monotonic() - began)
    print_report(report)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    console.print(f"\nwrote {args.out} ({report['total_seconds']:.0f} s)", highlight=False)


def make_report(
    args: argparse.Namespace,
    full: dict[str, Any],
    rows: list[dict[str, Any]],
    load_before: float,
    total: float,
) -> dict[str, Any]:
    paper_grid = args.intervals == DEFAULT_INTERVALS_TEXT
    full_paper = full["elapsed_s"] if paper_grid else paper_grid_seconds(full)
    for item in rows:
        item["fraction_of_full_paper_grid"] = item["elapsed_s"] / full_paper
    one_rep = [r for r in rows if r["name"] == "serial" and r["repetitions"] == 1]
    return {
        "settings": {
            "dir": args.dir,
            "file_size": args.file_size,
            "intervals": args.intervals,
            "min_runs": args.min_runs,
            "max_runs": args.max_runs,
            "confidence": 0.9,
            "max_error": 0.1,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg()[0],
        },
        "full": {
            "elapsed_s": full["elapsed_s"],
            "runs": full["runs"],
            "sizes": len(full["curve"]),
            "unconverged": full["unconverged"],
            "paper_grid_s": full_paper,
            "paper_grid_extrapolated": not paper_grid,
            "median_rsd": median_rsd(full),
            "summary": full["summary"],
            "ratios": ratio_table(full),
        },
        "estimates": rows,
        "serial_1rep_mean": {
            key: float(np.mean([r[key] for r in one_rep]))
            for key in ("elapsed_s", "fraction_of_full", "error_read", "error_write")
        },
        "paper": {"serial_1rep_fraction": 1 / 155, "parallel_4rep_fraction": 1 / 199},
        "notes": notes(args, full, rows, paper_grid),
        "total_seconds": total,
    }


NOTES = [
    "One VM, 2 cores, one virtual disk: the MPI workers of the 'parallel' runs share the disk "
    "and the cores (the paper had one worker per node, each with its own disk), so the speedup "
    "here comes from overlapping fio's fixed start-up cost (~0.4 s per run, CPU) and the "
    "virtual disk's internal parallelism, not from more devices; and the parallel runs measure "
    "a disturbed device (compare their errors with the serial ones).",
    "The disk behaves like flash: sequential and random throughput are close (ratios near 1), "
    "so relative ratio errors compare small differences and other developers' I/O on the same "
    "machine is of the same order (MEASURING.md). Errors are against a reference measured "
    "earlier in the run, under different load.",
]


def notes(
    args: argparse.Namespace, full: dict[str, Any], rows: list[dict[str, Any]], paper_grid: bool
) -> list[str]:
    """The fixed caveats, and those the numbers of this run call for."""
    out = list(NOTES)
    pairs = sum(len(r["n"]) for r in full["curve"])
    out.append(
        f"Noise: one size and pattern varied by a median {median_rsd(full):.0%} (RSD) from run "
        f"to run in the full profile, and {full['unconverged']} of {pairs} pairs did not get "
        f"their 90% interval within 10% in {args.max_runs} runs. A line through 2 random sizes "
        "of an interval, extrapolated over the whole interval, multiplies that noise: hence the "
        "large errors of the 1-repetition estimates."
    )
    serial = [r for r in rows if r["name"] == "serial" and r["repetitions"] == 4]
    single = [r for r in rows if r["name"] == "mpi" and r["workers"] == 1]
    if serial and single:
        gap = single[0]["elapsed_s"] / serial[0]["elapsed_s"] - 1
        out.append(
            "The MPI run with 1 worker does the serial 4-repetition run's work, yet its time "
            f"differed by {gap:+.0%}: speedups that differ by that much differ by drift."
        )
    if not paper_grid:
        out.append(
            f"The full profile measured {len(full['curve'])} sizes, not the paper's "
            f"{len(grid(DEFAULT_INTERVALS))}; the fraction on the paper's grid is extrapolated "
            "from its time per size (--paper-grid measures that grid)."
        )
    return out


def print_report(report: dict[str, Any]) -> None:
    full = report["full"]
    console.print(
        f"\nfull profile: {full['elapsed_s']:.0f} s, {full['runs']} runs over {full['sizes']} "
        f"sizes ({full['unconverged']} size/pattern pairs hit --max-runs); on the paper's grid "
        f"{'(extrapolated) ' if full['paper_grid_extrapolated'] else ''}"
        f"{full['paper_grid_s']:.0f} s",
        highlight=False,
    )
    table = Table(title="estimated profiles against the full one")
    columns = ("profile", "reps", "seed", "runs", "time s", "of full", "of full (paper grid)")
    for column in (*columns, "|err| read", "|err| write", "speedup", "imbalance"):
        table.add_column(column, justify="right")
    for r in report["estimates"]:
        name = f"MPI {r['workers']} worker(s)" if r["name"] == "mpi" else "serial"
        table.add_row(
            name,
            str(r["repetitions"]),
            str(r["seed"]),
            str(r["runs"]),
            f"{r['elapsed_s']:.1f}",
            f"1/{1 / r['fraction_of_full']:.0f}",
            f"1/{1 / r['fraction_of_full_paper_grid']:.0f}",
            f"{r['error_read']:.1%}",
            f"{r['error_write']:.1%}",
            f"{r['speedup']:.2f}" if "speedup" in r else "-",
            f"{r['imbalance']:.2f}" if r.get("imbalance") else "-",
        )
    console.print(table)
    mean = report["serial_1rep_mean"]
    console.print(
        f"serial, 1 repetition, mean over seeds: 1/{1 / mean['fraction_of_full']:.0f} of the full "
        f"time, ratio error {mean['error_read']:.1%} (read) {mean['error_write']:.1%} (write); "
        "paper: 1/155 serial (1 repetition), 1/199 parallel (4 repetitions, 16 workers)",
        highlight=False,
    )
    console.print("speedup: the serial 4-repetition estimate's time over the MPI run's time")
    for note in report["notes"]:
        console.print(f"note: {note}", highlight=False)


if __name__ == "__main__":
    main(sys.argv[1:])
