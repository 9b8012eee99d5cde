"""`stortune noise`: how noisy is this machine, and how many repetitions does a campaign need?"""

from __future__ import annotations

from pathlib import Path

import typer

from stortune import plots as figures
from stortune.cli import checks
from stortune.cli import targets as target_options
from stortune.cli.common import StoreOption, console, parse_assignments, print_json
from stortune.cli.progress import ConsoleReporter
from stortune.errors import StortuneError
from stortune.measure.campaigns import open_campaign
from stortune.measure.metricnames import check_campaign_metrics
from stortune.measure.noise import analyse
from stortune.measure.runner import RunRules
from stortune.measure.sweeping import sweep_time_estimate
from stortune.objective import Objective
from stortune.outputs import writing
from stortune.store import Store
from stortune.units import number
from stortune.workflows.reporting import run_measuring
from stortune.workflows.sweep import noise_study


def register(app: typer.Typer) -> None:
    @app.command("noise")
    @target_options.with_target_options
    def noise_command(
        targets: target_options.TargetOptions,
        space: str = typer.Option(
            None, "--space", "-s", help="Space file or bundled name \\[default: the target's own]."
        ),
        config: list[str] = typer.Option(
            [], "--config", "-c", help="The config to study, NAME=VALUE (default: the default)."
        ),
        seconds: float = typer.Option(
            600.0,
            callback=checks.SECONDS,
            help="How long to measure, at most (waits for a busy machine count); "
            "the repetitions are planned to fill it.",
        ),
        objective: str = typer.Option("total.bw_mbs", "--objective", "-o", help="METRIC."),
        target_ci: float = typer.Option(
            0.05, help="CI half-width to size repetitions for.", callback=checks.FRACTION
        ),
        plots: Path = typer.Option(
            None,
            "--plots",
            help="Write the drift plot (PNG, SVG) here.",
            callback=checks.OUTPUT_FOLDER,
        ),
        check_disturbance: bool = target_options.CHECK_DISTURBANCE,
        busy_wait: float = target_options.BUSY_WAIT,
        name: str = typer.Option(
            None, "--name", help="Name of the study (default: noise-SPACE-DATE-TIME)."
        ),
        resume: str = typer.Option(None, "--resume", help="Continue this stored noise study."),
        store: str = StoreOption,
        json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Measure one config again and again, alternating with the reference (default) config,
        and report the raw and reference-normalised repeat RSD, the drift over time, and the
        repetitions a confidence interval of --target-ci needs. Run it before a campaign.

        Example: stortune noise --space localfs -w fileserver --seconds 900 --runtime 10
        """
        if not 0 < target_ci < 1:
            raise StortuneError(f"--target-ci is a fraction in (0, 1), not {target_ci}")
        reporter = ConsoleReporter(json_out)
        with Store(store) as db:
            if resume:
                name = resume
                measuring = open_campaign(db, resume)
                measuring.seconds = seconds
                run_measuring(measuring, reporter, resume)
            else:
                target = targets.build_with_space(space)
                s = target.space
                assert s is not None
                studied = s.validate(parse_assignments(config))
                workloads = targets.workloads(target)[:1]
                metric = Objective.parse(objective)
                check_campaign_metrics(metric, workloads, target)  # before anything is stored
                expected = [w.expected_seconds or 0.0 for w in workloads if w is not None]
                runtime = targets.runtime or max(expected, default=10.0)
                per_pair = 2 * sweep_time_estimate(1, runtime)
                repetitions = max(3, int(seconds // per_pair))
                rules = RunRules(
                    timeout=runtime * 10 + 120,
                    check_disturbance=check_disturbance,
                    busy_wait=busy_wait,
                )
                name, _ = noise_study(
                    db, s, target, workloads, metric.metric, studied, repetitions, rules, reporter,
                    name=name, seconds=seconds,
                )  # fmt: skip
            report = analyse(db, db.campaign(name), target_ci)
        paths = []
        if plots:
            with writing(plots, "plots in"):
                drift = figures.noise.drift(report)
                paths = figures.render.save(drift, plots / f"{report.campaign}-drift")
        if json_out:
            print_json({**report.to_dict(), "plots": [str(p) for p in paths]})
            return
        console.print(
            f"{report.runs} runs of {report.metric}: mean {number(report.mean)}, raw RSD "
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
