"""`stortune noise`: how noisy is this machine, and how many repetitions does a campaign need?"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from stortune.cli import targets
from stortune.cli.common import DEFAULT_STORE, STORE_HELP, console, parse_assignments, print_json
from stortune.cli.sweep import run_sweep
from stortune.experiment import Objective
from stortune.noise import analyse, plot_drift
from stortune.space import load_space
from stortune.store import Store
from stortune.sweep import Sweep, SweepSettings, sweep_time_estimate


def register(app: typer.Typer) -> None:
    @app.command("noise")
    def noise_command(
        space: str = typer.Option("localfs", "--space", "-s", help="Space file or bundled name."),
        config: list[str] = typer.Option(
            [], "--config", "-c", help="The config to study, NAME=VALUE (default: the default)."
        ),
        seconds: float = typer.Option(600.0, help="How long to measure, about."),
        objective: str = typer.Option("total.bw_mbs", "--objective", "-o", help="METRIC."),
        target_ci: float = typer.Option(0.05, help="CI half-width to size repetitions for."),
        plots: Path = typer.Option(None, "--plots", help="Write the drift plot (PNG, SVG) here."),
        target: str = targets.TARGET,
        workload: str = typer.Option("fileserver", "--workload", "-w", help="fio template."),
        runtime: float = targets.RUNTIME,
        image_size: str = targets.IMAGE_SIZE,
        command: str = targets.COMMAND,
        output: str = targets.OUTPUT,
        check_disturbance: bool = targets.CHECK_DISTURBANCE,
        store: str = typer.Option(
            DEFAULT_STORE, "--store", envvar="STORTUNE_STORE", help=STORE_HELP
        ),
        json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Measure one config again and again, alternating with the reference (default) config,
        and report the raw and reference-normalised repeat RSD, the drift over time, and the
        repetitions a confidence interval of --target-ci needs. Run it before a campaign.

        Example: stortune noise --space localfs -w fileserver --seconds 900 --runtime 10
        """
        s = load_space(space)
        studied = s.validate(parse_assignments(config))
        kind = targets.target_kind(target, command, None)
        workloads = targets.build_workloads(kind, [workload] if kind == "localfs" else [], runtime)
        per_pair = 2 * sweep_time_estimate(1, runtime)
        repetitions = max(3, int(seconds // per_pair))
        built = targets.build_target(kind, s, command=command, output=output, image_size=image_size)
        name = f"noise-{s.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        with Store(store) as db:
            sweep = Sweep.start(
                db,
                name,
                s,
                built,
                workloads,
                Objective.parse(objective).metric,
                "max",
                [studied],
                SweepSettings(repetitions, runtime * 10 + 120, 1, 0, check_disturbance),
            )
            run_sweep(sweep, quiet=json_out)
            report = analyse(db, db.campaign(name), target_ci)
        paths = plot_drift(report, plots) if plots else []
        if json_out:
            print_json({**report.to_dict(), "plots": [str(p) for p in paths]})
            return
        console.print(
            f"{report.runs} runs of {report.metric}: mean {report.mean:.4g}, raw RSD "
            f"{report.raw_rsd:.1%}, relative to the reference {report.normalised_rsd:.1%}",
            highlight=False,
        )
        for label, n in (
            ("raw", report.repetitions_for_target_raw),
            ("normalised", report.repetitions_for_target_normalised),
        ):
            needed = f"{n} repetitions" if n else "more than 1000 repetitions"
            console.print(
                f"a {target_ci:.0%} confidence interval ({label}) needs {needed}", highlight=False
            )
        for path in paths:
            console.print(f"plot: {path}", highlight=False)
