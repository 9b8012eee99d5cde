"""`stortune demo`: the main job on an embedded default, end to end (`workflows.demo`)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from stortune.cli import checks
from stortune.cli.common import check_achieved, console, print_json
from stortune.cli.progress import ConsoleReporter
from stortune.workflows.demo import run_demo
from stortune.workflows.recommend import advice_line


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        out: Path = typer.Option(
            Path("stortune-demo"),
            "--out",
            help="Folder for store+report.",
            callback=checks.OUTPUT_FOLDER,
        ),
        budget: int = typer.Option(
            10, help="Evaluations, the default config included.", callback=checks.COUNT
        ),
        repetitions: int = typer.Option(
            3,
            "--repetitions",
            "-r",
            help="The most race pairs of a challenger.",
            callback=checks.REPETITIONS,
        ),
        runtime: float = typer.Option(
            3.0, help="Seconds each fio run lasts.", callback=checks.RUNTIME
        ),
        workload: str = typer.Option(
            "dbfsync",
            help="fio template (as root); its file set's size after a colon: dbfsync:size=64m.",
        ),
        tuner: str = typer.Option("bo", help="Tuner to use."),
        sample: int = typer.Option(
            12, help="Configs the ranking samples (short runs).", callback=checks.COUNT
        ),
        verify: int = typer.Option(
            5,
            "--verify",
            help="The fewest rounds of default vs best re-measured side by side.",
            callback=checks.ROUNDS,
        ),
        verify_max: int = typer.Option(
            20,
            "--verify-max",
            help="The most rounds before an open verdict is undecided.",
            callback=checks.ROUNDS,
        ),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Rank and tune a real storage stack for a few minutes, re-measure default and best
        side by side (and what each risky option would buy), and write an HTML report.

        Example: stortune demo --budget 10 --runtime 3
        """
        result = run_demo(
            out,
            ConsoleReporter(json_out),
            budget,
            repetitions,
            runtime,
            workload,
            tuner,
            sample,
            verify=verify,
            verify_max=verify_max,
        )
        if json_out:
            print_json(result.to_dict())
        else:
            console.print(result.headline, highlight=False, soft_wrap=True)
            console.print(result.finding, highlight=False, soft_wrap=True)
            verification = result.tuned.verification
            for label, found in (verification.results if verification else {}).items():
                console.print(
                    f"  {label}: {found.gain.ratio_text()} on {found.gain.metric}, "
                    f"{found.judgement}",
                    highlight=False,
                    soft_wrap=True,
                )
                for check in found.guardrails:
                    console.print(f"    guardrail {check.text()}", highlight=False, soft_wrap=True)
            console.print(
                advice_line(verification, result.campaign), highlight=False, soft_wrap=True
            )
            console.print(f"report: {result.report.resolve()}", highlight=False, soft_wrap=True)
            console.print(  # a command to copy: never broken across lines
                f"store:  {result.store.resolve()}  (try: stortune show {result.campaign} "
                f"--store {result.store})",
                highlight=False,
                soft_wrap=True,
            )
            sys.stdout.flush()
        check_achieved(result.tuned.outcome)
