"""`stortune workload`: the bundled fio templates, and a check of a user's own job file before a
campaign spends anything on it."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from rich.table import Table

from stortune.cli import checks
from stortune.cli.common import console, print_json
from stortune.errors import ConfigError
from stortune.workloads.fio import (
    PLACEHOLDER_HELP,
    TEMPLATES,
    FioWorkload,
    placeholders_in,
    template_text,
)

_JOB_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$", re.MULTILINE)


def register(app: typer.Typer) -> None:
    workload_app = typer.Typer(
        help="The bundled fio templates, and checking your own job file.\n\n"
        "Example: stortune workload check my.fio --runtime 10",
        no_args_is_help=True,
    )
    app.add_typer(workload_app, name="workload")

    @workload_app.command("list")
    def list_templates(json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """List the bundled fio templates and what each approximates.

        Example: stortune workload list
        """
        rows = {name: template_summary(name) for name in TEMPLATES}
        if json_out:
            print_json(rows)
            return
        table = Table("template", "what it approximates", title="fio templates (-w NAME)")
        for name, summary in rows.items():
            table.add_row(name, summary)
        console.print(table)

    @workload_app.command("show")
    def show(
        name: str = typer.Argument(..., help="A bundled template's name."),
    ) -> None:
        """Print a template's job file, placeholders and all: a start for your own.

        Example: stortune workload show dbfsync > my.fio
        """
        if name not in TEMPLATES:
            raise ConfigError(f"unknown fio template {name!r} (templates: {', '.join(TEMPLATES)})")
        print(template_text(name), end="")

    @workload_app.command(
        "check",
        help=(
            "Check a fio job file the way a campaign will use it: its placeholders, its "
            "runtime, its declarations and fio's own parse (`fio --parse-only`). Nothing is "
            f"formatted or written.\n\nPlaceholders: {PLACEHOLDER_HELP}. Every file a job names "
            "must lie under ${DIR}.\n\nDeclarations, in comment lines fio ignores: "
            "'# stortune objective: METRIC:max|min' (what a campaign without --objective "
            "optimises), '# stortune guardrail: METRIC:max|min[:SHARE]' (repeatable; a metric "
            "that may get worse by SHARE at most, 10% unless given), '# stortune start: "
            "cold|warm' (cold, the default: files laid out and the page cache dropped before "
            "the timed part; warm: measured from memory on purpose). Metrics are the totals "
            "(total.iops, read.bw_mbs, sync.lat_p99_ms, ...) and each job's (JOB.write.iops, "
            "...).\n\nExample: stortune workload check my.fio --runtime 10"
        ),
    )
    def check(
        job: Path = typer.Argument(..., help="Your .fio job file."),
        runtime: float = typer.Option(
            None,
            "--runtime",
            help="Check it as `--runtime` would run it (seconds).",
            callback=checks.RUNTIME,
        ),
        json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        workload = FioWorkload(  # reading the file checks it, fio's own parse included
            job, **({"runtime": runtime, "runtime_given": True} if runtime else {})
        )
        placeholders = placeholders_in(workload.text)
        jobs = [s for s in _JOB_SECTION.findall(workload.text) if s.strip() != "global"]
        if workload.runtime_added:
            length = (
                "each run lasts --runtime seconds: the file sets no runtime, so time_based=1 and "
                "runtime=${RUNTIME} are added to its [global] section"
            )
        elif workload.timed:
            length = "each run lasts --runtime seconds (runtime=${RUNTIME})"
        else:
            length = "each run lasts as long as the job takes (it sets its own length)"
        declared = workload.declared
        result = {
            "job": str(job),
            "jobs": jobs,
            "placeholders": placeholders,
            "runtime": length,
            "size_bytes": workload.size_bytes if "SIZE" in placeholders else None,
            "declared": declared.to_dict(),
        }
        if json_out:
            print_json(result)
            return
        console.print(f"[green]ok[/]: {job}: fio parses it", highlight=False)
        console.print(f"  jobs: {', '.join(jobs) or '(none)'}", highlight=False, markup=False)
        used = ", ".join("${" + p + "}" for p in placeholders) or "none"
        console.print(f"  placeholders: {used}", highlight=False)
        console.print(f"  {length}", highlight=False, markup=False)
        if declared.empty:
            console.print(
                "  declares no objective or guardrail (# stortune objective: METRIC:max|min)",
                highlight=False,
                markup=False,
            )
        for line in declared.lines():
            console.print(f"  declares {line}", highlight=False, markup=False)


def template_summary(name: str) -> str:
    """A template's header comment, first sentence: what it approximates."""
    lines = []
    for line in template_text(name).splitlines():
        text = line.lstrip("#").strip()
        if not line.startswith("#") or not text or text.startswith("stortune "):
            break
        lines.append(text)
    first = " ".join(lines).split(": ", 1)[-1]
    return first.split(". ")[0].rstrip(".") + "."
