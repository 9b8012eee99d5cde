"""SeRRa's estimate against the full reference profile, on this VM's disk and on a disk with a head.

Two devices, one after the other, each profiled in full and estimated several ways:

- ``vm``: a directory on the root file system (default /var/tmp/stortune-bench-profile). The
  virtual disk behaves like flash: sequential and random access within a few percent, so the
  right answer is "no sequential advantage measurable". Its full profile uses a coarser
  large-size step (192 KiB instead of 32 KiB: 29 sizes instead of 134) to stay under about 20
  minutes; its time is extrapolated to the paper's grid from the measured time per size.
- ``simdisk``: `stortune.profile.simdisk` mounted by the bench (a FUSE file system whose files
  answer like a disk with a seeking head, 4.2 ms average seek, 200 MiB/s): a real sequential
  advantage, measured through fio, O_DIRECT and the kernel. Profiled on the paper's grid.

For each device:

1. the full profile (`--full`: every size, at least 6 runs and until the 90% t interval is
   within 10%, capped by `--max-runs`), serially;
2. estimated profiles, serially: 1 repetition with a few seeds (the paper's "sequential SeRRa,
   1 repetition", 1/155 of the reference's time), 2 repetitions (the CLI's default, the least
   that gives intervals) and 4;
3. estimated profiles over MPI with 2 and 4 workers on this one machine, 1 and 4 repetitions
   (`mpiexec -n K+1 --oversubscribe python -m mpi4py.futures`; the paper: 1/199).

Reported: each profile's time and its fraction of the full one's, the mean error of its ratios
against the full profile (over all sizes, and over the sizes whose full ratio is >= 1.5), how
often the full ratio lies inside the estimate's interval, the verdicts, and per size the
estimated and full ratios with their intervals. The numbers depend on this VM: read the notes.

Usage: python bench/device_profile.py [--devices vm,simdisk] [--dir DIR] [--file-size 64m]
       [--paper-grid] [--max-runs 10] [--workers 2,4] [--seeds 3] [--quick]
       [--out bench/results/profile.json]
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from device_profile_tables import console, notes, print_report

from stortune.profile.compare import compare_profiles
from stortune.profile.design import DEFAULT_INTERVALS, DEFAULT_INTERVALS_TEXT, grid, parse_intervals
from stortune.profile.parallel import MpiRunner
from stortune.profile.profiler import DEFAULT_MAX_REQUESTS, Settings, make_target, run_profile
from stortune.profile.simdisk import DiskModel, mounted
from stortune.units import parse_size

REPO = Path(__file__).resolve().parents[1]
BENCH_INTERVALS = "8k:64k:8k,64k:4m:192k"
QUICK_INTERVALS = "8k:64k:16k,64k:1m:192k"
SIMDISK_FILE_SIZE = "64m"  # the CLI's default
MAX_REQUESTS = DEFAULT_MAX_REQUESTS  # what `stortune profile` does
MPI_TIMEOUT = 1800


@dataclass(frozen=True)
class Device:
    """What one part of the bench profiles: where, on which grid, how much per run."""

    name: str
    directory: str
    intervals: str
    file_size: str


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="vm,simdisk", help="vm, simdisk or both")
    parser.add_argument("--dir", default="/var/tmp/stortune-bench-profile")
    parser.add_argument("--file-size", default="64m", help="per run on the vm disk")
    parser.add_argument("--intervals", default=BENCH_INTERVALS, help="the vm disk's grid")
    parser.add_argument("--paper-grid", action="store_true", help="the paper's grid on vm too")
    parser.add_argument("--min-runs", type=int, default=6)
    parser.add_argument("--max-runs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3, help="1-repetition estimates to average")
    parser.add_argument("--workers", default="2,4")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to try the bench out")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "profile.json"))
    parser.add_argument("--mpi-child", help=argparse.SUPPRESS)  # internal: one MPI profile
    args = parser.parse_args(argv)
    if args.paper_grid:
        args.intervals = DEFAULT_INTERVALS_TEXT
    if args.quick:
        args.intervals, args.file_size, args.max_runs, args.seeds = QUICK_INTERVALS, "16m", 6, 1
        args.workers = "2"
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


def serial_profile(device: Device, name: str, **settings: Any) -> dict[str, Any]:
    spec = make_target(device.directory, None, False, parse_size(device.file_size), MAX_REQUESTS)
    config = Settings(intervals=parse_intervals(device.intervals), **settings)
    return run_profile(spec, config, progress=progress_printer(name))


def mpi_profile(
    device: Device, workers: int, repetitions: int, seed: int
) -> tuple[dict[str, Any], float]:
    """One estimated profile over `workers` MPI workers; its JSON and the command's wall time."""
    with tempfile.TemporaryDirectory(prefix="stortune-bench-") as tmp:
        config = Path(tmp) / "config.json"
        out = Path(tmp) / "profile.json"
        child = {"dir": device.directory, "file_size": device.file_size}
        child |= {"intervals": device.intervals, "repetitions": repetitions}
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
    spec = make_target(config["dir"], None, False, parse_size(config["file_size"]), MAX_REQUESTS)
    settings = Settings(
        intervals=parse_intervals(config["intervals"]),
        repetitions=config["repetitions"],
        seed=config["seed"],
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
        **{f"error_{op}": errors[op]["mean_abs"] for op in ("read", "write")},
        **{f"asymmetric_error_{op}": errors[op]["asymmetric_mean_abs"] for op in ("read", "write")},
        **{f"coverage_{op}": errors[op]["coverage"] for op in ("read", "write")},
        **{f"mean_ratio_{op}": profile["summary"][op]["mean"] for op in ("read", "write")},
        **{f"verdict_{op}": profile["summary"][op]["verdict"] for op in ("read", "write")},
        "imbalance": profile["runner"].get("imbalance"),
        "picked_sizes": profile["picked_sizes"],
        "ratios": ratio_table(profile),
        **extra,
    }


def ratio_table(profile: dict[str, Any]) -> list[list[Any]]:
    """[size, read, read CI, write, write CI] per size: compact enough to keep every curve."""
    out = []
    for r in profile["curve"]:
        cis = r.get("ratio_ci") or {}
        out.append(
            [
                r["size"],
                *(
                    item
                    for op in ("read", "write")
                    for item in (round(r["ratio"][op], 4), _rounded(cis.get(op)))
                ),
            ]
        )
    return out


def _rounded(bounds: list[float] | None) -> list[float] | None:
    return [round(b, 4) for b in bounds] if bounds else None


def median_rsd(profile: dict[str, Any]) -> float:
    """The typical run-to-run spread of one size and pattern: the noise the ratios carry."""
    runs: dict[tuple[int, str], list[float]] = {}
    for m in profile["measurements"]:
        runs.setdefault((m["size"], m["pattern"]), []).append(m["access_ms"])
    return float(np.median([np.std(v, ddof=1) / np.mean(v) for v in runs.values() if len(v) > 1]))


def bench_device(args: argparse.Namespace, device: Device) -> dict[str, Any]:
    """The full profile, the serial and MPI estimates, and their comparison, on one device."""
    began = time.monotonic()
    console.print(
        f"[{device.name}] full profile of {device.directory} ({device.intervals}, "
        f"{device.file_size} per run) ...",
        highlight=False,
    )
    full = serial_profile(device, "full", full=True, min_runs=args.min_runs, max_runs=args.max_runs)
    rows = []
    for seed in range(1, args.seeds + 1):
        console.print(f"[{device.name}] estimate, serial, 1 repetition, seed {seed} ...")
        rows.append(row("serial", serial_profile(device, "est", repetitions=1, seed=seed), full))
    serial = {}
    for reps in (2, 4):
        console.print(f"[{device.name}] estimate, serial, {reps} repetitions ...")
        serial[reps] = serial_profile(device, "est", repetitions=reps, seed=1)
        rows.append(row("serial", serial[reps], full))
    for reps in (1, 4):
        for workers in (int(w) for w in args.workers.split(",")):
            console.print(
                f"[{device.name}] estimate, MPI, {workers} workers, {reps} repetition(s) ...",
                highlight=False,
            )
            profile, wall = mpi_profile(device, workers, reps, seed=1)
            extra: dict[str, Any] = {"wall_s": wall}
            extra["utilisation"] = profile["runner"]["utilisation"]
            if reps in serial:
                extra["speedup"] = serial[reps]["elapsed_s"] / profile["elapsed_s"]
            rows.append(row("mpi", profile, full, **extra))
    paper_grid = device.intervals == DEFAULT_INTERVALS_TEXT
    full_paper = full["elapsed_s"] if paper_grid else paper_grid_seconds(full)
    for item in rows:
        item["fraction_of_full_paper_grid"] = item["elapsed_s"] / full_paper
    one_rep = [r for r in rows if r["name"] == "serial" and r["repetitions"] == 1]
    return {
        "device": asdict(device),
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
            key: _mean([r[key] for r in one_rep])
            for key in (
                "elapsed_s",
                "fraction_of_full",
                "fraction_of_full_paper_grid",
                "error_read",
                "error_write",
                "asymmetric_error_read",
                "asymmetric_error_write",
            )
        },
        "seconds": time.monotonic() - began,
    }


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if args.mpi_child:
        mpi_child(args.mpi_child)
        return
    began, load_before = time.monotonic(), os.getloadavg()[0]
    results = {}
    for name in args.devices.split(","):
        if name == "vm":
            Path(args.dir).mkdir(parents=True, exist_ok=True)
            device = Device("vm", args.dir, args.intervals, args.file_size)
            results[name] = bench_device(args, device)
            with contextlib.suppress(OSError):  # only when empty: never someone else's files
                Path(args.dir).rmdir()
        elif name == "simdisk":
            with tempfile.TemporaryDirectory(prefix="stortune-simdisk-", dir="/var/tmp") as tmp:
                intervals = QUICK_INTERVALS if args.quick else DEFAULT_INTERVALS_TEXT
                with mounted(Path(tmp), DiskModel()):
                    device = Device("simdisk", tmp, intervals, SIMDISK_FILE_SIZE)
                    results[name] = bench_device(args, device)
        else:
            raise SystemExit(f"unknown device {name!r}: vm or simdisk")
    report = {
        "settings": {
            "min_runs": args.min_runs,
            "max_runs": args.max_runs,
            "confidence": 0.9,
            "max_error": 0.1,
            "simdisk": asdict(DiskModel()),
        },
        "machine": {
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg()[0],
        },
        "devices": results,
        "paper": {"serial_1rep_fraction": 1 / 155, "parallel_fraction": 1 / 199},
        "notes": notes(results),
        "total_seconds": time.monotonic() - began,
    }
    print_report(report)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    console.print(f"\nwrote {args.out} ({report['total_seconds']:.0f} s)", highlight=False)


if __name__ == "__main__":
    main(sys.argv[1:])
