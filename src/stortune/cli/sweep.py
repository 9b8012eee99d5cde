"""`stortune sweep`: measure a whole design (full factorial or a sample), interleaved, resumable."""

from __future__ import annotations

import time

import typer

from stortune.bounds import MAX_SAMPLES
from stortune.cli import checks
from stortune.cli import targets as target_options
from stortune.cli.common import (
    GuardrailOption,
    NoGuardrailsOption,
    SchedulerOption,
    StoreOption,
    campaign_objective,
    check_achieved,
    cluster_of,
    console,
    print_json,
)
from stortune.cli.progress import ConsoleReporter
from stortune.errors import StortuneError
from stortune.measure.campaigns import open_campaign
from stortune.measure.runner import RunRules
from stortune.measure.sweeping import SweepSettings, sweep_time_estimate
from stortune.objective import Objective
from stortune.sampling import config_key, sample
from stortune.store import Store
from stortune.workflows.reporting import run_measuring
from stortune.workflows.sweep import new_sweep


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
        space: str = typer.Option(
            None, "--space", "-s", help="Space file or bundled name \\[default: the target's own]."
        ),
        objective: str = typer.Option(
            None,
            "--objective",
            "-o",
            help="METRIC[:max|min] summarised per config \\[default: the objective the "
            "workloads' job files declare alike, else the target's own: total.bw_mbs:max on "
            "localfs].",
        ),
        guardrail: list[str] = GuardrailOption,
        no_guardrails: bool = NoGuardrailsOption,
        design: str = typer.Option(
            "factorial", "--design", help="factorial (every valid config), lhs or random."
        ),
        levels: int = typer.Option(
            3, help="factorial: grid levels for numeric parameters.", callback=checks.LEVELS
        ),
        limit: int = typer.Option(
            0,
            "--limit",
            "-n",
            help=f"At most this many configs, {MAX_SAMPLES:,} at most (lhs/random: how many; "
            "factorial: 0 = all).",
            callback=checks.SAMPLES,
        ),
        exclude_measured: list[str] = typer.Option(
            [],
            "--exclude-measured",
            help="Leave out the configs this stored campaign measured (random and factorial "
            "designs; repeatable), so a second sweep adds only new configs.",
        ),
        repetitions: int = typer.Option(
            2, "--repetitions", "-r", help="Runs per config.", callback=checks.REPETITIONS
        ),
        reference_every: int = target_options.REFERENCE_EVERY,
        seed: int = typer.Option(
            0, help="Seed of the run order (and of lhs/random designs).", callback=checks.SEED
        ),
        timeout: float = typer.Option(
            600.0, help="Kill a run after this many seconds.", callback=checks.TIMEOUT
        ),
        check_disturbance: bool = target_options.CHECK_DISTURBANCE,
        busy_wait: float = target_options.BUSY_WAIT,
        name: str = typer.Option(None, "--name", help="Campaign name (default: made up)."),
        resume: str = typer.Option(None, "--resume", help="Continue this stored sweep."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan, measure nothing."),
        store: str = StoreOption,
        scheduler: str = SchedulerOption,
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
        json_out: bool = typer.Option(False, "--json", help="Print the plan/outcome as JSON."),
    ) -> None:
        """Measure every config of a space (or a sample of it) under each workload, with
        repetitions interleaved across configs and a reference config measured every few
        configs. Stops and resumes without losing or repeating runs.

        Example: stortune sweep --space localfs -w fileserver -w mailserver -r 2 --runtime 8

        Example: stortune sweep --resume localfs-sweep-20261122
        """
        with Store(store) as db, cluster_of(scheduler) as cluster:
            if resume:
                measuring = open_campaign(db, resume, cluster=cluster)
            else:
                target = targets.build_with_space(space)
                s = target.space
                assert s is not None
                measured = _measured_keys(db, exclude_measured)
                drawn = sample(s, design, limit, seed, levels, exclude=measured)
                configs = drawn.configs
                if not configs:
                    raise StortuneError(
                        f"no configs left to measure: {', '.join(exclude_measured)} measured "
                        f"every config of the design"
                    )
                workloads = targets.workloads(target)
                chosen = campaign_objective(
                    workloads,
                    target,
                    Objective.parse(objective) if objective else None,
                    guardrail,
                    no_guardrails,
                    json_out,
                )
                runtime = max((w.expected_seconds or 0 for w in workloads if w), default=0)
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
                measuring = new_sweep(
                    db,
                    name or f"{s.name}-sweep-{time.strftime('%Y%m%d-%H%M%S')}",
                    s,
                    target,
                    workloads,
                    chosen,
                    configs,
                    SweepSettings(
                        repetitions, target_options.reference_every(reference_every, target), seed
                    ),
                    RunRules(
                        timeout=timeout, check_disturbance=check_disturbance, busy_wait=busy_wait
                    ),
                )
            measuring.cluster = cluster  # a sweep's visits go in order, to one node
            outcome = run_measuring(measuring, ConsoleReporter(quiet or json_out))
            trials = [t for t in db.trials(measuring.campaign.id) if t.seq > 0]
        result = {
            "campaign": outcome.campaign,
            "configs": len(trials),
            "runs_ok": outcome.runs_ok,
            "runs_failed": outcome.runs_failed,
            "runs_disturbed": outcome.runs_disturbed,
            "stopped_by": outcome.stopped_by,
            "notes": outcome.notes,
        }
        if json_out:
            print_json(result)
            check_achieved(outcome)
            return
        then = (
            f"; export with: stortune export {outcome.campaign} -o FILE" if outcome.runs_ok else ""
        )
        console.print(
            f"sweep {outcome.campaign!r}: {len(trials)} configs, {outcome.runs_ok} runs ok, "
            f"{outcome.runs_failed} failed{then}",
            highlight=False,
            soft_wrap=True,
        )
        for note in outcome.notes:
            console.print(note, highlight=False, soft_wrap=True)
        check_achieved(outcome)
