"""`stortune run`: the experiment loop on a target, with a progress bar, resumable."""

from __future__ import annotations

import time

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from stortune.cli import targets as target_options
from stortune.cli.common import (
    DEFAULT_STORE,
    STORE_HELP,
    console,
    print_json,
    sigterm_as_interrupt,
)
from stortune.errors import StortuneError
from stortune.experiment import Event, Experiment, LoopSettings, Objective, Outcome
from stortune.space import load_space
from stortune.store import Store
from stortune.tuners import tuner_names


def run_with_progress(experiment: Experiment, quiet: bool = False) -> Outcome:
    """Run the loop under a rich progress bar; SIGTERM stops it like Ctrl-C (runs are kept)."""

    settings = experiment.settings
    per_trial = settings.repetitions * len(experiment.workloads)
    total = settings.budget * per_trial if settings.budget else None
    done = experiment.store.run_count(experiment.campaign.id)
    best: list[float] = []
    with (
        sigterm_as_interrupt(),
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeRemainingColumn(),
            console=console,
            disable=quiet,
            transient=False,
        ) as progress,
    ):
        task = progress.add_task(experiment.campaign.name, total=total, completed=done, status="")

        def on_event(event: Event) -> None:
            if event.kind == "run":
                progress.advance(task)
            elif event.kind == "told" and event.value is not None:
                if not best or experiment.tuner.better(event.value, best[0]):
                    best[:] = [event.value]
                status = f"trial {event.seq}: {event.value:.4g}  best {best[0]:.4g}"
                progress.update(task, status=status)

        experiment.on_event = on_event
        return experiment.run()


def print_outcome(outcome: Outcome, metric: str, json_out: bool) -> None:
    if json_out:
        print_json(outcome.to_dict())
        return
    console.print(
        f"campaign {outcome.campaign!r}: {outcome.trials} evaluations, {outcome.runs_ok} runs ok, "
        f"{outcome.runs_failed} failed (stopped by {outcome.stopped_by})",
        highlight=False,
    )
    if outcome.best_config is not None:
        console.print(
            f"best {metric} = {outcome.best_value:.6g} at {outcome.best_config}", highlight=False
        )
    else:
        console.print("no successful evaluation yet", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("run")
    @target_options.with_target_options
    def run_command(
        targets: target_options.TargetOptions,
        space: str = typer.Option(None, "--space", "-s", help="Space file or bundled name."),
        tuner: str = typer.Option("random", help=f"One of {', '.join(tuner_names())}."),
        objective: str = typer.Option(
            None, "--objective", "-o", help="METRIC[:max|min] to optimise."
        ),
        budget: int = typer.Option(
            None, help="Evaluations (configs) in total [default: 20; on --resume: as stored]."
        ),
        seconds: float = typer.Option(None, help="Stop after this many seconds."),
        repetitions: int = typer.Option(
            3, "--repetitions", "-r", help="Runs per config (the most, with --target-ci)."
        ),
        target_ci: float = typer.Option(
            None,
            "--target-ci",
            help="Repeat each config until the 90% CI of its mean is "
            "within this fraction (e.g. 0.05), between --min-repetitions and --repetitions.",
        ),
        min_repetitions: int = typer.Option(2, help="With --target-ci: runs at least."),
        check_disturbance: bool = target_options.CHECK_DISTURBANCE,
        reference_every: int = target_options.REFERENCE_EVERY,
        timeout: float = typer.Option(600.0, help="Kill a run after this many seconds."),
        seed: int = typer.Option(0, help="Random seed of the tuner."),
        name: str = typer.Option(None, "--name", "-n", help="Campaign name (default: made up)."),
        resume: str = typer.Option(
            None, "--resume", help="Continue this stored campaign where it stopped."
        ),
        store: str = typer.Option(
            DEFAULT_STORE, "--store", envvar="STORTUNE_STORE", help=STORE_HELP
        ),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
        json_out: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
    ) -> None:
        """Run a campaign: ask the tuner, apply each config, measure it with repetitions, store
        every run. Ctrl-C or a crash loses nothing: continue with --resume NAME.

        Example: stortune run --space localfs --workload fileserver -o total.bw_mbs:max
        --tuner tpe --budget 30 --runtime 10

        Example: stortune run --space my.yaml --target command
        --command 'python3 bench.py --threads {threads}' -o ops_per_s:max --budget 30

        Example: stortune run --resume my-campaign --budget 50
        """
        with Store(store) as db:
            if resume:
                experiment = Experiment.resume(db, resume, budget=budget, seconds=seconds)
            else:
                if not space or not objective:
                    raise StortuneError("a new campaign needs --space and --objective")
                s = load_space(space)
                built = targets.build(s)
                settings = LoopSettings(
                    budget=budget or 20,
                    seconds=seconds,
                    repetitions=repetitions,
                    timeout=timeout,
                    target_ci=target_ci,
                    min_repetitions=min_repetitions,
                    check_disturbance=check_disturbance,
                    reference_every=target_options.reference_every(reference_every, built),
                )
                experiment = Experiment.start(
                    db,
                    name or f"{s.name}-{tuner}-{time.strftime('%Y%m%d-%H%M%S')}",
                    s,
                    built,
                    targets.workloads(),
                    Objective.parse(objective),
                    tuner,
                    settings,
                    seed,
                )
            outcome = run_with_progress(experiment, quiet=quiet or json_out)
            print_outcome(outcome, experiment.objective.metric, json_out)
