"""`stortune run`: a tuning campaign on a target, with a progress bar, resumable; and
`stortune resume`, which continues any stored campaign."""

from __future__ import annotations

from dataclasses import replace

import typer

from stortune.cli import checks
from stortune.cli import targets as target_options
from stortune.cli.common import (
    MEASURES_BEST,
    GuardrailOption,
    NoGuardrailsOption,
    SchedulerOption,
    StoreOption,
    best_text,
    campaign_objective,
    check_achieved,
    cluster_of,
    console,
    print_json,
    told_last,
)
from stortune.cli.progress import ConsoleReporter
from stortune.measure.campaigns import open_campaign
from stortune.measure.runner import Outcome, RunRules
from stortune.measure.tuning import DEFAULT_BUDGET, TuneSettings
from stortune.objective import Objective, parse_bounds
from stortune.store import Store
from stortune.tuners import tuner_names
from stortune.workflows.recommend import advice_line
from stortune.workflows.reporting import run_measuring
from stortune.workflows.tune import TuneJob, TuneResult, resume_tuning, start_tuning


def print_outcome(outcome: Outcome, metric: str, json_out: bool) -> None:
    """What a campaign achieved; exits 1 when it achieved nothing (saying why). A campaign
    that stopped on a busy machine ends with how to continue it."""
    notes, last = told_last(outcome)
    if json_out:
        print_json(outcome.to_dict())
    else:
        disturbed = f", {outcome.runs_disturbed} disturbed" if outcome.runs_disturbed else ""
        console.print(
            f"campaign {outcome.campaign!r}: {outcome.evaluations} evaluations, "
            f"{outcome.runs_ok} runs ok, {outcome.runs_failed} failed{disturbed} "
            f"(stopped by {outcome.stopped_by})",
            highlight=False,
        )
        for note in notes:
            console.print(note, highlight=False, soft_wrap=True)
        if outcome.achieved or outcome.kind in MEASURES_BEST:
            console.print(best_text(outcome, metric), highlight=False, soft_wrap=True)
        if outcome.kind == "tune" and outcome.achieved:
            console.print(advice_line(None, outcome.campaign), highlight=False, soft_wrap=True)
        for note in last if outcome.achieved else ():  # else the error line ends with it
            console.print(note, highlight=False, soft_wrap=True)
    check_achieved(outcome)


def settings_of(
    budget: int | None,
    seconds: float | None,
    repetitions: int,
    target_ci: float | None = None,
    min_repetitions: int = 2,
    reference_every: int = 0,
    baseline: bool = False,
    intensify: bool = False,
) -> TuneSettings:
    return TuneSettings(
        intensify=intensify,
        budget=budget if budget is not None or seconds is not None else DEFAULT_BUDGET,
        seconds=seconds,
        repetitions=repetitions,
        target_ci=target_ci,
        min_repetitions=min_repetitions,
        reference_every=reference_every,
        baseline=baseline,
    )


def register(app: typer.Typer) -> None:
    @app.command("run")
    @target_options.with_target_options
    def run_command(
        targets: target_options.TargetOptions,
        space: str = typer.Option(
            None, "--space", "-s", help="Space file or bundled name \\[default: the target's own]."
        ),
        tuner: str = typer.Option("random", help=f"One of {', '.join(tuner_names())}."),
        objective: list[str] = typer.Option(
            [],
            "--objective",
            "-o",
            help="METRIC[:max|min[:WEIGHT]] to optimise; repeat for several (weighted "
            "scalarisation around the default config's values, or --bounds) \\[default: the "
            "objective the workloads' job files declare alike].",
        ),
        guardrail: list[str] = GuardrailOption,
        no_guardrails: bool = NoGuardrailsOption,
        bounds: list[str] = typer.Option(
            [], "--bounds", help="Several objectives: METRIC=LOW:HIGH normalisation bounds."
        ),
        budget: int = typer.Option(
            None,
            help=f"Evaluations (configs) in total \\[default: {DEFAULT_BUDGET}; on --resume: as "
            "stored].",
            callback=checks.COUNT,
        ),
        seconds: float = typer.Option(
            None,
            help="A time budget: no run starts that would end after it.",
            callback=checks.SECONDS,
        ),
        repetitions: int = typer.Option(
            3,
            "--repetitions",
            "-r",
            help="Runs per config (the most, with --target-ci).",
            callback=checks.REPETITIONS,
        ),
        target_ci: float = typer.Option(
            None,
            "--target-ci",
            callback=checks.FRACTION,
            help="Repeat each config until the 90% CI of its mean is "
            "within this fraction (e.g. 0.05), between --min-repetitions and --repetitions.",
        ),
        min_repetitions: int = typer.Option(
            2,
            help="With --target-ci: runs at least; with --intensify: of the first config.",
            callback=checks.REPETITIONS,
        ),
        allow_risk: bool = typer.Option(
            False,
            "--allow-risk",
            help="Also search values that can lose or corrupt data on a crash or power cut.",
        ),
        intensify: bool = typer.Option(
            False,
            "--intensify/--no-intensify",
            help="Race each config against the best so far (paired runs, at most --repetitions "
            "pairs) and replace it only when it wins with 90% confidence.",
        ),
        check_disturbance: bool = target_options.CHECK_DISTURBANCE,
        busy_wait: float = target_options.BUSY_WAIT,
        reference_every: int = target_options.REFERENCE_EVERY,
        timeout: float = typer.Option(
            600.0, help="Kill a run after this many seconds.", callback=checks.TIMEOUT
        ),
        seed: int = typer.Option(0, help="Random seed of the tuner.", callback=checks.SEED),
        name: str = typer.Option(None, "--name", "-n", help="Campaign name (default: made up)."),
        resume: str = typer.Option(
            None, "--resume", help="Continue this stored campaign where it stopped."
        ),
        store: str = StoreOption,
        scheduler: str = SchedulerOption,
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
        reporter = ConsoleReporter(quiet or json_out, stops=False)  # print_outcome tells it
        if resume:
            with Store(store) as db, cluster_of(scheduler) as cluster:
                result = resume_tuning(
                    db, resume, budget=budget, seconds=seconds, reporter=reporter, cluster=cluster
                )
            print_outcome(result.outcome, _metric(result), json_out)
            return
        target = targets.build_with_space(space)
        s = target.space
        assert s is not None
        workloads = targets.workloads(target)
        job = TuneJob(  # built (job files, metric names checked) before the store is touched
            space=s,
            target=target,
            workloads=workloads,
            objective=campaign_objective(
                workloads,
                target,
                Objective.of(objective, parse_bounds(bounds)) if objective or bounds else None,
                guardrail,
                no_guardrails,
                json_out,
            ),
            settings=settings_of(
                budget,
                seconds,
                repetitions,
                target_ci,
                min_repetitions,
                target_options.reference_every(reference_every, target),
                baseline=intensify,
                intensify=intensify,
            ),
            rules=RunRules(
                timeout=timeout,
                check_disturbance=check_disturbance,
                busy_wait=busy_wait,
            ),
            tuner=tuner,
            seed=seed,
            name=name,
            allow_risk=allow_risk,
        )
        with Store(store) as db, cluster_of(scheduler) as cluster:
            job.cluster = cluster
            result = start_tuning(db, job, reporter)
        print_outcome(result.outcome, _metric(result), json_out)

    @app.command("resume")
    def resume_command(
        campaign: str = typer.Argument(..., help="The stored campaign to continue."),
        budget: int = typer.Option(
            None, help="Tuning: raise the budget to this many evaluations.", callback=checks.COUNT
        ),
        seconds: float = typer.Option(
            None, help="A time budget for this sitting.", callback=checks.SECONDS
        ),
        busy_wait: float = typer.Option(
            None,
            "--busy-wait",
            callback=checks.WAIT,
            help="Seconds to wait for a busy machine before stopping again, this sitting "
            "\\[default: as the campaign was started].",
        ),
        check_disturbance: bool = typer.Option(
            None,
            "--check-disturbance/--no-check-disturbance",
            help="Redo runs that other work disturbed and wait while the machine is busy, this "
            "sitting; --no-check-disturbance measures on a busy machine anyway \\[default: as "
            "the campaign was started].",
        ),
        store: str = StoreOption,
        scheduler: str = SchedulerOption,
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
        json_out: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
    ) -> None:
        """Continue any stored campaign where it stopped (tuning, sampling, sweep, noise study,
        verification): the runs it has are kept, the missing ones measured.

        Example: stortune resume fs1 --budget 40

        Example: stortune resume fs1 --busy-wait 1800

        Example: stortune resume fs1 --scheduler tcp://coordinator:8786
        """
        rules = {"busy_wait": busy_wait, "check_disturbance": check_disturbance}
        with Store(store) as db, cluster_of(scheduler) as cluster:
            measuring = open_campaign(db, campaign, budget=budget, seconds=seconds, cluster=cluster)
            given = {k: v for k, v in rules.items() if v is not None}
            measuring.rules = replace(measuring.rules, **given)
            reporter = ConsoleReporter(quiet or json_out, stops=False)  # print_outcome tells it
            outcome = run_measuring(measuring, reporter, campaign)
        print_outcome(outcome, measuring.log.objective.metric, json_out)


def _metric(result: TuneResult) -> str:
    return result.objective.metric if result.objective is not None else ""
