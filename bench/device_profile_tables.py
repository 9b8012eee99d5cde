"""What bench/device_profile.py prints and keeps as text: the caveats of a run (`notes`) and its
tables (`print_report`), from the report it writes to bench/results/profile.json.

A helper module, not a benchmark: running it does nothing.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from stortune.profile.design import DEFAULT_INTERVALS, grid
from stortune.units import human_size

console = Console(width=170)  # a log, often redirected: keep the tables whole


NOTES = [
    "One VM, 2 cores: the MPI workers of the 'parallel' runs share the cores (the paper had one "
    "worker per node). On the vm disk they also share the disk, so they measure a disturbed "
    "device; on the simulated disk each worker's file is its own disk, as each node's was.",
    "The simulated disk is a model (square-root seek curve, constant transfer rate) served "
    "through the real I/O path; it stands for a device with a real sequential advantage, which "
    "this VM kind does not have (no rotational disk, no device mapper, no nbd; FUSE works).",
]


def notes(results: dict[str, Any]) -> list[str]:
    """The fixed caveats, and those the numbers of this run call for."""
    out = list(NOTES)
    for name, result in results.items():
        full = result["full"]
        out.append(
            f"{name}: one size and pattern varied by a median {full['median_rsd']:.0%} (RSD) "
            f"from run to run in the full profile; {full['unconverged']} size/pattern pairs did "
            "not get their 90% interval within 10% before --max-runs."
        )
        if full["paper_grid_extrapolated"]:
            out.append(
                f"{name}: the full profile measured {full['sizes']} sizes, not the paper's "
                f"{len(grid(DEFAULT_INTERVALS))}; the fraction on the paper's grid is "
                "extrapolated from its time per size."
            )
    return out


def print_report(report: dict[str, Any]) -> None:
    for name, result in report["devices"].items():
        full = result["full"]
        console.print(
            f"\n[{name}] full profile: {full['elapsed_s']:.0f} s, {full['runs']} runs over "
            f"{full['sizes']} sizes ({full['unconverged']} size/pattern pairs hit --max-runs); "
            f"on the paper's grid {'(extrapolated) ' if full['paper_grid_extrapolated'] else ''}"
            f"{full['paper_grid_s']:.0f} s",
            highlight=False,
        )
        for values in full["summary"].values():
            console.print(f"  full: {values['verdict']}", highlight=False)
        print_estimates(name, result)
        print_sizes(name, result)
    for note in report["notes"]:
        console.print(f"note: {note}", highlight=False)


def print_estimates(name: str, result: dict[str, Any]) -> None:
    table = Table(title=f"{name}: estimated profiles against the full one")
    columns = ("profile", "reps", "seed", "runs", "time s", "of full", "(paper grid)")
    more = ("|err| r/w", "|err| r/w where >=1.5", "full in CI r/w", "speedup", "verdict (read)")
    for column in (*columns, *more):
        table.add_column(column, justify="right")
    for r in result["estimates"]:
        table.add_row(
            f"MPI {r['workers']} workers" if r["name"] == "mpi" else "serial",
            str(r["repetitions"]),
            str(r["seed"]),
            str(r["runs"]),
            f"{r['elapsed_s']:.1f}",
            f"1/{1 / r['fraction_of_full']:.0f}",
            f"1/{1 / r['fraction_of_full_paper_grid']:.0f}",
            f"{r['error_read']:.1%} / {r['error_write']:.1%}",
            _pair(r["asymmetric_error_read"], r["asymmetric_error_write"], "{:.1%}"),
            _pair(r["coverage_read"], r["coverage_write"], "{:.0%}"),
            f"{r['speedup']:.2f}" if "speedup" in r else "-",
            r["verdict_read"].split(": ", 1)[1].split(" (")[0],
        )
    console.print(table)


def print_sizes(name: str, result: dict[str, Any]) -> None:
    """Every few sizes: the full ratio and the 4-repetition estimate, with their intervals."""
    estimate = next(
        r for r in result["estimates"] if r["name"] == "serial" and r["repetitions"] == 4
    )
    table = Table(title=f"{name}: ratio per size, full vs estimated (4 repetitions), 90% CI")
    for column in ("size", "full read", "estimated read", "full write", "estimated write"):
        table.add_column(column, justify="right")
    full_rows = {r[0]: r for r in result["full"]["ratios"]}
    rows = [r for r in estimate["ratios"] if r[0] in full_rows]
    for r in rows[:: max(1, len(rows) // 12)]:
        f = full_rows[r[0]]
        table.add_row(
            human_size(r[0]), _ci(f[1], f[2]), _ci(r[1], r[2]), _ci(f[3], f[4]), _ci(r[3], r[4])
        )
    console.print(table)


def _ci(value: float, bounds: list[float] | None) -> str:
    return f"{value:.2f}" + (f" [{bounds[0]:.2f}, {bounds[1]:.2f}]" if bounds else "")


def _pair(a: float | None, b: float | None, form: str) -> str:
    return " / ".join("-" if v is None else form.format(v) for v in (a, b))
