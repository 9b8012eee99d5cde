"""`stortune sweep`: measure a whole design (full factorial or a sample), interleaved, resumable."""

from __future__ import annotations

import time

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from stortune.cli import targets as target_options
from stortune.cli.common import (
    DEFAULT_STORE,
    STORE_HELP,
    console,
    print_json,
    sigterm_as_interrupt,
)
from stortune.errors import StortuneError
from stortune.experiment import Event, Objective
from stortune.sampling import config_key, sample
from stortune.space import load_space
from stortune.store import DISTURBED, Store
from stortune.sweep import Sweep, SweepSettings, sweep_time_estimate


def counts_toward_progress(event: Event) -> bool:
    """Whether a run event fills a slot of the design (as `Sweep.completed_runs` counts them:
    the reference config's runs come on top, a disturbed run leaves its slot open)."""
    disturbed = event.measurement is not None and event.measurement.status == DISTURBED
    return event.seq != 0 and not disturbed


def run_sweep(sweep: Sweep, quiet: bool) -> None:
    done = sweep.completed_runs
    with (
        sigterm_as_interrupt(),
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            disable=quiet,
        ) as progress,
    ):
        task = progress.add_task(sweep.campaign.name, total=sweep.total_runs, completed=done)

        def on_event(event: Event) -> None:
            if counts_toward_progress(event):
                progress.advance(task)

        sweep.on_event = on_event
        sweep.run()


def _measured_keys(db: Store, campaigns: list[str]) -> set[str]:
    """The configs the named campaigns tried (their reference config too), as `config_key`s."""
    return {
        config_key(trial.config) for name in campaigns for trial in db.trials(db.campaign(name).id)
    }


def register(app: typer.Typer) -> None:
    @app.command("sweep")
    @target_options.with_target_options
    def sweep_command(
        targets: target_options.TargetOptions,
        space: str = typer.Option(None, "--space", "-s", help="Space file or bundled name."),
        objective: str = typer.Option(
            "total.bw_mbs:max", "--objective", "-o", help="METRIC[:max|min] summarised per config."
        ),
        design: str = typer.Option(
            "factorial", "--design", help="factorial (every valid config), lhs or random."
        ),
        levels: int = typer.Option(3, help="factorial: grid levels for numeric parameters."),
        limit: int = typer.Option(
            0, "--limit", "-n", help="At most this many configs (lhs/random: how many)."
        ),
        exclude_measured: list[str] = typer.Option(
            [],
            "--exclude-measured",
            help="Leave out the configs this stored campaign measured (random and factorial "
            "designs; repeatable), so a second sweep adds only new configs.",
        ),
        repetitions: int = typer.Option(2, "--repetitions", "-r", help="Runs per config."),
        reference_every: int = target_options.REFERENCE_EVERY,
        seed: int = typer.Option(0, help="Seed of the run order (and of lhs/random designs)."),
        timeout: float = typer.Option(600.0, help="Kill a run after this many seconds."),
        check_disturbance: bool = target_options.CHECK_DISTURBANCE,
        name: str = typer.Option(None, "--name", help="Campaign name (default: made up)."),
        resume: str = typer.Option(None, "--resume", help="Continue this stored sweep."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan, measure nothing."),
        store: str = typer.Option(
            DEFAULT_STORE, "--store", envvar="STORTUNE_STORE", help=STORE_HELP
        ),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
        json_out: bool = typer.Option(False, "--json", help="Print the plan/outcome as JSON."),
    ) -> None:
        """Measure every config of a space (or a sample of it) under each workload, with
        repetitions interleaved across configs and a reference config measured every few
        configs. Stops and resumes without losing or repeating runs.

        Example: stortune sweep --space localfs -w fileserver -w mailserver -r 2 --runtime 8

        Example: stortune sweep --resume localfs-sweep-20261122
        """
        with Store(store) as db:
            if resume:
                sweep = Sweep.resume(db, resume)
            else:
                if not space:
                    raise StortuneError("a new sweep needs --space")
                s = load_space(space)
                measured = _measured_keys(db, exclude_measured)
                drawn = sample(s, design, limit, seed, levels, exclude=measured)
                configs = drawn.configs
                if not configs:
                    raise StortuneError(
                        f"no configs left to measure: {', '.join(exclude_measured)} measured "
                        f"every config of the design"
                    )
                workloads = targets.workloads()
                runtime = targets.runtime
                runs = len(configs) * repetitions * len(workloads)
                plan = {
                    "space": s.name,
                    "design": design,
                    "configs": len(configs),
                    "runs": runs,
                    "workloads": [w.name if w else "default" for w in workloads],
                    "estimated_hours": sweep_time_estimate(runs, runtime) / 3600,
                    "excluded_configs": len(measured),
                    "notes": drawn.notes,
                }
                if not json_out:
                    for note in drawn.notes:
                        console.print(f"note: {note}", highlight=False)
                if dry_run:
                    if json_out:
                        print_json(plan)
                    else:
                        console.print(
                            f"{plan['configs']} configs x {len(workloads)} workloads x "
                            f"{repetitions} repetitions = {runs} runs, about "
                            f"{plan['estimated_hours']:.1f} h at {runtime:g} s each",
                            highlight=False,
                        )
                    return
                built = targets.build(s)
                every = target_options.reference_every(reference_every, built)
                obj = Objective.parse(objective)
                sweep = Sweep.start(
                    db,
                    name or f"{s.name}-sweep-{time.strftime('%Y%m%d-%H%M%S')}",
                    s,
                    built,
                    workloads,
                    obj.metric,
                    obj.direction,
                    configs,
                    SweepSettings(repetitions, timeout, every, seed, check_disturbance),
                )
            run_sweep(sweep, quiet or json_out)
            trials = db.trials(sweep.campaign.id)
            runs_ok = sum(r.status == "ok" for t in trials for r in t.runs)
            runs_failed = sum(r.status != "ok" for t in trials for r in t.runs)
        result = {
            "campaign": sweep.campaign.name,
            "configs": len(trials) - 1,
            "runs_ok": runs_ok,
            "runs_failed": runs_failed,
        }
        if json_out:
            print_json(result)
            return
        console.print(
            f"sweep {result['campaign']!r}: {result['configs']} configs, {runs_ok} runs ok, "
            f"{runs_failed} failed; export with: stortune export {result['campaign']} -o FILE",
            highlight=False,
        )
