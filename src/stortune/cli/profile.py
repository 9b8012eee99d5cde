"""`stortune profile | profile-compare`: sequential-to-random throughput ratios of a device
(SeRRa), estimated fast or measured in full, serially or over MPI; and estimate vs reference.

The work is `stortune.profile`; this module parses options, shows progress and prints.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from stortune.cli import checks
from stortune.cli.common import StoreOption, console, err_console, print_json
from stortune.outputs import writing
from stortune.profile.compare import compare_profiles
from stortune.profile.design import DEFAULT_INTERVALS_TEXT, parse_intervals
from stortune.profile.parallel import MpiRunner, Runner, SerialRunner
from stortune.profile.profiler import (
    DEFAULT_FILE_SIZE,
    DEFAULT_MAX_REQUESTS,
    Settings,
    load_profile,
    make_target,
    run_profile,
)
from stortune.units import human_size, parse_size

DEFAULT_OUT = Path("stortune-out") / "profile"
JsonOption = typer.Option(False, "--json", help="Print JSON.")


def register(app: typer.Typer) -> None:
    """Add `profile` and `profile-compare` to the stortune app."""

    @app.command("profile")
    def profile_command(
        directory: Path = typer.Argument(
            None, help="Directory to profile (a test file is written there and removed)."
        ),
        device: str = typer.Option(
            None, "--device", help="Profile a scratch block device instead (overwritten)."
        ),
        destroy_data: bool = typer.Option(
            False, "--destroy-data", help="Allow --device to be overwritten."
        ),
        file_size: str = typer.Option(
            DEFAULT_FILE_SIZE, "--file-size", help="Bytes each run reads or writes (e.g. 256m)."
        ),
        max_requests: int = typer.Option(
            DEFAULT_MAX_REQUESTS,
            "--max-requests",
            help="Requests per run at most (the whole file when it holds fewer); 0: no limit.",
        ),
        intervals: str = typer.Option(
            DEFAULT_INTERVALS_TEXT, "--intervals", help="Request sizes: LOW:HIGH:STEP,..."
        ),
        points: int = typer.Option(2, "--points", help="Monte Carlo sizes per interval."),
        repetitions: int = typer.Option(2, "--repetitions", help="Runs of each picked size."),
        seed: int = typer.Option(None, "--seed", help="Seed of the size picks (default: random)."),
        full: bool = typer.Option(
            False, "--full", help="Measure every size until its CI is narrow (the slow reference)."
        ),
        min_runs: int = typer.Option(6, "--min-runs", help="--full: at least this many runs."),
        max_runs: int = typer.Option(20, "--max-runs", help="--full: at most this many runs."),
        confidence: float = typer.Option(
            0.9, "--confidence", help="Level of the ratios' intervals (and --full's t-interval)."
        ),
        max_error: float = typer.Option(
            0.1, "--max-error", help="--full: CI half-width allowed, relative to the mean."
        ),
        mpi: bool = typer.Option(
            False, "--mpi", help="Run on the workers of `python -m mpi4py.futures` (see docs)."
        ),
        out: Path = typer.Option(
            None,
            "--out",
            help="JSON file (default stortune-out/profile/MODE.json).",
            callback=checks.OUTPUT_FILE_MADE,
        ),
        plot: bool = typer.Option(True, "--plot/--no-plot", help="PNG + SVG beside the JSON."),
        name: str = typer.Option(
            None, "--name", help="Store the profile as this campaign (default: made up)."
        ),
        store: str = StoreOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Profile a directory's device (or a scratch device): the sequential-to-random
        throughput ratio of reads and writes for each request size, estimated with SeRRa's
        linear models from a few sizes, or measured in full with --full.

        Example: stortune profile /var/tmp --file-size 64m --seed 1
        """
        settings = Settings(
            intervals=parse_intervals(intervals),
            points=points,
            repetitions=repetitions,
            seed=seed,
            full=full,
            min_runs=min_runs,
            max_runs=max_runs,
            confidence=confidence,
            max_error=max_error,
        )
        spec = make_target(
            str(directory) if directory is not None else None,
            device,
            destroy_data,
            parse_size(file_size),
            max_requests,
        )
        runner: Runner = MpiRunner() if mpi else SerialRunner()
        try:
            with _progress_bar() as update:
                profile = run_profile(spec, settings, runner, update)
        finally:
            runner.close()
        path = out or DEFAULT_OUT / f"{profile['mode']}.json"
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(profile, indent=1) + "\n")
        campaign = store_profile(store, name, profile)
        written = [path]
        if plot:
            from stortune.plots import profile as figures
            from stortune.plots.render import save

            with writing(path.with_suffix(""), "plot"):
                written += save(figures.access_times(profile), path.with_suffix(""))
        if json_out:
            print_json(profile | {"files": [str(p) for p in written]})
            return
        _print_profile(profile)
        for item in written:
            console.print(f"wrote {item}", highlight=False)
        console.print(
            f"stored as campaign {campaign!r} (stortune report finds it)",
            highlight=False,
            soft_wrap=True,
        )

    @app.command("profile-compare")
    def profile_compare_command(
        estimated: Path = typer.Argument(..., help="Profile from `stortune profile`."),
        full: Path = typer.Argument(..., help="Profile from `stortune profile --full`."),
        plot: Path = typer.Option(
            None,
            "--plot",
            help="Write both ratio curves (PNG + SVG).",
            callback=checks.OUTPUT_FIGURE,
        ),
        json_out: bool = JsonOption,
    ) -> None:
        """How far an estimated profile's ratios are from the full profile's, and the time
        each took.

        Example: stortune profile-compare estimated.json full.json --plot compare
        """
        est, ref = load_profile(estimated), load_profile(full)
        result = compare_profiles(est, ref)
        written = []
        if plot:
            from stortune.plots import profile as figures
            from stortune.plots.render import save

            with writing(plot, "plot"):
                written = save(figures.compare(est, ref), plot)
        if json_out:
            print_json(result | {"files": [str(p) for p in written]})
            return
        _print_compare(result)
        for item in written:
            console.print(f"wrote {item}", highlight=False)


def store_profile(url: str, name: str | None, profile: dict[str, Any]) -> str:
    """Keep the profile in the results store as a campaign of kind ``profile`` (the profile in
    its settings), where `stortune report` looks for the device profile."""
    from stortune.store import Store

    name = name or f"profile-{profile.get('mode', 'device')}-{time.strftime('%Y%m%d-%H%M%S')}"
    with Store(url) as db:
        db.create_campaign(
            name,
            kind="profile",
            space_name="",
            space_yaml="",
            target={"kind": "profile", "mode": profile.get("mode")},
            workload={},
            objective={"metric": "ratio", "direction": "max"},
            tuner="serra",
            settings={"profile": profile},
        )
        db.set_status(db.campaign(name).id, "finished")
    return name


@contextlib.contextmanager
def _progress_bar() -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on stderr (stdout stays clean for --json); yields the runner's
    (done, planned) callback, planned growing as --full adds rounds."""
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("fio runs", total=None)
        yield lambda done, planned: bar.update(task, completed=done, total=planned)


def _print_profile(profile: dict[str, Any]) -> None:
    target, runner = profile["target"], profile["runner"]
    where = f"{runner['workers']} MPI workers" if runner["mode"] == "mpi" else "serial"
    console.print(
        f"{profile['mode']} profile of {target['path']} ({target['file_size'] >> 20} MiB per run"
        + (f", at most {target['max_requests']} requests" if target.get("max_requests") else "")
        + f", {where}): {profile['runs']} runs in {profile['elapsed_s']:.1f} s",
        highlight=False,
    )
    if profile.get("fits"):
        _print_fits(profile["fits"])
    picked = {s for sizes in profile.get("picked_sizes", []) for s in sizes}
    level = f"{profile.get('confidence', 0.9):.0%} CI"
    table = Table(title="sequential / random throughput")
    for column in ("size", "read", level, "write", level, "measured"):
        table.add_column(column, justify="right")
    for row in profile["curve"]:
        n = row.get("n")
        ratio, ci = row["ratio"], row.get("ratio_ci") or {}
        table.add_row(
            human_size(row["size"]),
            _num(ratio.get("read")),
            _interval(ci.get("read")),
            _num(ratio.get("write")),
            _interval(ci.get("write")),
            f"{min(n.values())} runs" if n else _how_estimated(row, picked),
        )
    console.print(table)
    summary = Table(title="ratio summary")
    for column in ("operation", "mean", level, "min", "at", "max", "at"):
        summary.add_column(column, justify="right")
    for op, values in profile["summary"].items():
        summary.add_row(
            op,
            _num(values["mean"]),
            _interval(values.get("mean_ci")),
            _num(values["min"]),
            human_size(values["min_size"]),
            _num(values["max"]),
            human_size(values["max_size"]),
        )
    console.print(summary)
    for values in profile["summary"].values():
        console.print(f"verdict: {values['verdict']}", highlight=False)
    for note in _notes(profile):
        console.print(f"note: {note}", highlight=False)


def _how_estimated(row: dict[str, Any], picked: set[int]) -> str:
    """ "yes" for a measured size; otherwise how its ratios were estimated, when not simply
    interpolated between measured sizes."""
    if row["size"] in picked:
        return "yes"
    kinds = sorted({kind for kind in row.get("estimate", {}).values() if kind != "interpolated"})
    return ", ".join(kinds)


def _interval(bounds: list[float] | None) -> str:
    return "-" if not bounds else f"{bounds[0]:.3g}-{bounds[1]:.3g}"


def _print_fits(fits: list[dict[str, Any]]) -> None:
    table = Table(title="linear model per interval (access time vs request size)")
    for column in ("pattern", "interval", "sizes", "n", "ms + ms/MiB", "R²", "p (slope)"):
        table.add_column(column, justify="right")
    for fit in fits:
        low, high, step = fit["interval"]
        table.add_row(
            fit["pattern"],
            f"{human_size(low)}-{human_size(high)}/{human_size(step)}",
            ",".join(human_size(s) for s in fit["sizes"]),
            str(fit["n"]),
            f"{fit['intercept_ms']:.3f} + {fit['slope_ms_per_mib']:.3f}",
            _num(fit["r2"]),
            _num(fit["p_value"]),
        )
    console.print(table)


def _notes(profile: dict[str, Any]) -> list[str]:
    notes = []
    runner = profile["runner"]
    if runner.get("shared_hosts"):
        notes.append(
            f"several workers ran on {', '.join(runner['shared_hosts'])}: their runs contended "
            "for the same device (use one worker per node)"
        )
    if runner["mode"] == "mpi" and runner.get("imbalance"):
        notes.append(f"load imbalance (busiest worker / mean): {runner['imbalance']:.2f}")
    if profile.get("unconverged"):
        notes.append(
            f"{profile['unconverged']} size/pattern pairs reached --max-runs before their "
            "confidence interval was narrow enough"
        )
    clamped = profile.get("clamped") or {}
    if any(clamped.values()):
        counts = " and ".join(f"{n} {op}" for op, n in clamped.items() if n)
        notes.append(
            f"{counts} ratios were held inside the range the measured points allow (the "
            "quotient of the two lines left it): marked 'clamped'"
        )
    if profile.get("extrapolated_sizes"):
        notes.append(
            f"{profile['extrapolated_sizes']} sizes lie beyond the measured sizes of their "
            "interval: their estimates are extrapolated (marked), and less sure"
        )
    return notes


def _print_compare(result: dict[str, Any]) -> None:
    time = result["time"]
    console.print(
        f"estimated vs full profile at {result['sizes']} request sizes: "
        f"{time['estimated_s']:.1f} s ({time['estimated_runs']} runs) vs "
        f"{time['full_s']:.1f} s ({time['full_runs']} runs)"
        + (f", 1/{time['speedup']:.0f} of the time" if time["speedup"] else ""),
        highlight=False,
    )
    table = Table(title="error of the sequential / random ratio (relative to the full profile)")
    columns = ("operation", "estimated mean", "full mean", "mean |error|", "max", "at", "bias")
    for column in (*columns, "|error| where ratio >= 1.5", "full inside CI"):
        table.add_column(column, justify="right")
    for op, err in result["ratio_error"].items():
        asymmetric = err.get("asymmetric_mean_abs")
        coverage = err.get("coverage")
        table.add_row(
            op,
            _num(err["estimated_mean"]),
            _num(err["full_mean"]),
            f"{err['mean_abs']:.1%}",
            f"{err['max_abs']:.1%}",
            human_size(err["max_size"]),
            f"{err['bias']:+.1%}",
            "no such size"
            if asymmetric is None
            else f"{asymmetric:.1%} ({err['asymmetric_sizes']})",
            "-" if coverage is None else f"{coverage:.0%}",
        )
    console.print(table)
    access = Table(title="error of the access times")
    for column in ("pattern", "mean |error|", "max", "at", "bias"):
        access.add_column(column, justify="right")
    for pattern, err in result["access_time_error"].items():
        access.add_row(
            pattern,
            f"{err['mean_abs']:.1%}",
            f"{err['max_abs']:.1%}",
            human_size(err["max_size"]),
            f"{err['bias']:+.1%}",
        )
    console.print(access)
    for warning in result["warnings"]:
        console.print(f"warning: {warning}", highlight=False)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
