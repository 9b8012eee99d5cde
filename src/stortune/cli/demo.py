"""`stortune demo`: the main job on an embedded default, end to end (`workflows.demo`)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from stortune.cli.common import console, print_json
from stortune.cli.progress import ConsoleReporter
from stortune.cli.run import check_achieved
from stortune.workflows.demo import run_demo


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        out: Path = typer.Option(Path("stortune-demo"), "--out", help="Folder for store+report."),
        budget: int = typer.Option(10, help="Evaluations, the default config included."),
        repetitions: int = typer.Option(2, "--repetitions", "-r", help="Runs per config."),
        runtime: float = typer.Option(3.0, help="Seconds each fio run lasts."),
        workload: str = typer.Option("fileserver", help="fio template (localfs only)."),
        tuner: str = typer.Option("tpe", help="Tuner to use."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Tune a real storage stack for a few minutes and write an HTML report.

        Example: stortune demo --budget 10 --runtime 3
        """
        result = run_demo(
            out, ConsoleReporter(json_out), budget, repetitions, runtime, workload, tuner
        )
        if json_out:
            print_json(result.to_dict())
        else:
            console.print(result.headline, highlight=False, soft_wrap=True)
            console.print(result.finding, highlight=False, soft_wrap=True)
            console.print(f"report: {result.report.resolve()}", highlight=False)
            console.print(
                f"store:  {result.store.resolve()}  (try: stortune show {result.campaign} "
                f"--store {result.store})",
                highlight=False,
            )
            sys.stdout.flush()
        check_achieved(result.tuned.outcome)
