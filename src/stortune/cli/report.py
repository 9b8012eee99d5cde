"""`stortune report`: one self-contained HTML page for a stored campaign.

The command resolves options and prints; the page is `stortune.report.write_report`, which the
demo calls too.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stortune.cli import checks
from stortune.cli.common import StoreOption, console, print_json
from stortune.outputs import writing

DEFAULT_OUT = Path("stortune-out") / "report"


def register(app: typer.Typer) -> None:
    """Add `report` to the stortune app."""

    @app.command("report")
    def report_command(
        campaign: str = typer.Argument(..., help="The campaign to report on (a tuning, sweep...)."),
        out: Path = typer.Option(
            DEFAULT_OUT,
            "--out",
            "-o",
            help="Folder for the HTML page.",
            callback=checks.OUTPUT_FOLDER,
        ),
        profile: Path = typer.Option(
            None, "--profile", help="A device profile JSON (`stortune profile`) to include."
        ),
        workload: str = typer.Option(
            None, "--workload", "-w", help="Workload to analyse when there are several (1st)."
        ),
        store: str = StoreOption,
        json_out: bool = typer.Option(False, "--json", help="Print the sections as JSON."),
    ) -> None:
        """Write an HTML page on a campaign: where it ran, the space, the runs over time,
        which parameters matter, the tuning curve and the re-measured gain, model accuracy,
        the device profile and the recommended config. Plots are inline SVG; the page needs
        no network. Sections without data say why.

        Example: stortune report fs1 -o reports/

        Example: stortune report sweep1 --workload fileserver --profile profile.json
        """
        from stortune.report import write_report  # matplotlib and scikit-learn: only here
        from stortune.store import Store

        data, source = None, ""
        if profile is not None:
            from stortune.profile.profiler import load_profile

            data, source = load_profile(profile), str(profile)
        with Store(store, existing=True) as db, writing(out, "report in"):
            report = write_report(
                db, campaign, out, workload=workload, profile=data, profile_source=source
            )
        if json_out:
            print_json(report.to_dict() | {"report": str(report.path.resolve())})
            return
        console.print(report.headline, highlight=False, soft_wrap=True)
        console.print(f"report: {report.path.resolve()}", highlight=False, soft_wrap=True)
