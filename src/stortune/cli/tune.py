"""`stortune tune` and `stortune recommend`: rank, tune, check the gain, hand the config over
(the work is `workflows.tune` and `workflows.recommend`; this module parses and prints)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.table import Table

from stortune.cli import checks
from stortune.cli import targets as target_options
from stortune.cli.common import (
    GuardrailOption,
    NoGuardrailsOption,
    SchedulerOption,
    StoreOption,
    best_text,
    campaign_objective,
    check_achieved,
    cluster_of,
    console,
    err_console,
    print_json,
)
from stortune.cli.progress import ConsoleReporter
from stortune.cli.run import settings_of
from stortune.enums import RiskScope
from stortune.errors import StortuneError
from stortune.measure.runner import RunRules
from stortune.measure.tuning import DEFAULT_BUDGET
from stortune.objective import Objective, parse_bounds
from stortune.outputs import writing
from stortune.space import Config, Space, load_space
from stortune.store import Store
from stortune.tuners import DEFAULT_TUNER, tuner_names
from stortune.units import number
from stortune.workflows.rank import Hold, RankOptions
from stortune.workflows.recommend import Recommendation, advice_line, recommend
from stortune.workflows.tune import TuneJob, TuneResult, resume_tuning, start_tuning


def compared_configs(files: list[str], space: Space) -> dict[str, Config]:
    """Configs to re-measure beside default and best, by the name their file gives."""
    from stortune.cephspace.configs import config_of, read_config_file

    out: dict[str, Config] = {}
    for item in files:
        doc = read_config_file(item)
        label = str(doc.get("name") or Path(item).stem)
        if label in out or label in ("default", "best"):
            raise StortuneError(f"--compare {item}: the label {label!r} is taken; rename it")
        out[label] = config_of(doc, item, space)
    return out


def print_result(result: TuneResult, json_out: bool, told: frozenset[str] = frozenset()) -> None:
    """The outcome, its notes but those the progress already `told` (a stop's)."""
    if json_out:
        print_json(result.to_dict())
        check_achieved(result.outcome)
        return
    outcome = result.outcome
    if result.widened:  # SAPPHIRE's dynamic bounds: say where the search left the declared box
        ranges = ", ".join(f"{k} [{lo:g}, {hi:g}]" for k, (lo, hi) in result.widened.items())
        console.print(f"bounds grown: {ranges}", highlight=False)
    metric = result.objective.metric if result.objective else ""
    console.print(
        f"campaign {outcome.campaign!r}: {outcome.evaluations} evaluations; "
        + best_text(outcome, metric),
        highlight=False,
        soft_wrap=True,
    )
    for note in outcome.notes:
        if note not in told:
            console.print(note, highlight=False, soft_wrap=True)
    for risk in result.risks:
        console.print(f"[bold yellow]risk[/]: {risk.text()}", highlight=False, soft_wrap=True)
    if result.in_loop is not None:  # a ratio: its values are relative to a reference, no MB/s
        loop = result.in_loop
        over = "the default" if loop.baseline == "default" else "the config tuning started from"
        console.print(f"in the loop: {loop.ratio_text()} over {over}", highlight=False)
    results = result.verification.results if result.verification else {}
    for found in results.values():
        console.print(f"{found.gain.text()}: {found.judgement}", highlight=False)
        for check in found.guardrails:
            console.print(f"  guardrail {check.text()}", highlight=False)
    if outcome.best_config is not None:
        console.print(
            advice_line(result.verification, outcome.campaign), highlight=False, soft_wrap=True
        )
    if result.pareto and result.objective is not None and result.objective.scalarizer:
        specs = result.objective.scalarizer.objectives
        table = Table(title="Pareto front (no other trial is better on every objective)")
        table.add_column("trial", justify="right")
        for o in specs:
            table.add_column(f"{o.metric} ({o.direction})", justify="right")
        table.add_column("config")
        for row in result.pareto:
            config = ", ".join(f"{k}={v}" for k, v in row["config"].items())
            table.add_row(str(row["seq"]), *(number(row[o.metric]) for o in specs), config)
        console.print(table)
    check_achieved(outcome)


def register(app: typer.Typer) -> None:
    @app.command("tune")
    @target_options.with_target_options
    def tune_command(
        targets: target_options.TargetOptions,
        space: str = typer.Option(
            None, "--space", "-s", help="Space file or bundled name \\[default: the target's own]."
        ),
        check_disturbance: bool = target_options.CHECK_DISTURBANCE,
        busy_wait: float = target_options.BUSY_WAIT,
        reference_every: int = target_options.REFERENCE_EVERY,
        tuner: str = typer.Option(
            DEFAULT_TUNER, help=f"One of {', '.join(tuner_names())} (bo: SAPPHIRE's GP-BO)."
        ),
        objective: list[str] = typer.Option(
            [],
            "--objective",
            "-o",
            help="METRIC[:max|min[:WEIGHT]]; repeat for several (weighted min-max "
            "scalarisation, Pareto front reported) \\[default: the objective the workloads' "
            "job files declare alike].",
        ),
        guardrail: list[str] = GuardrailOption,
        no_guardrails: bool = NoGuardrailsOption,
        bounds: list[str] = typer.Option(
            [],
            "--bounds",
            help="Several objectives: METRIC=LOW:HIGH normalisation bounds \\[default: 0 to twice "
            "the default config's value].",
        ),
        budget: int = typer.Option(
            None,
            help=f"Evaluations in total \\[default: {DEFAULT_BUDGET}; on --resume: as stored].",
            callback=checks.COUNT,
        ),
        seconds: float = typer.Option(
            None,
            help="A time budget for tuning: no run starts that would end after it.",
            callback=checks.SECONDS,
        ),
        repetitions: int = typer.Option(
            3,
            "--repetitions",
            "-r",
            callback=checks.REPETITIONS,
            help="Runs per config; with --intensify, the most race pairs of a challenger (at "
            "least 2).",
        ),
        intensify: bool = typer.Option(
            True,
            "--intensify/--no-intensify",
            help="Race each config against the best so far: paired runs next to each other in "
            "time, replace it only when it wins with 90% confidence; the best is the last "
            "incumbent, never the best single run.",
        ),
        rank: str = typer.Option(
            None,
            "--rank",
            help="Rank parameters first (carver, lasso or carver-lasso) and tune the top K (and "
            "the parameters their conditions read).",
        ),
        top_k: int = typer.Option(
            5, "--top-k", "-k", help="With --rank: parameters to tune.", callback=checks.COUNT
        ),
        rank_budget: int = typer.Option(
            None,
            "--rank-budget",
            callback=checks.COUNT,
            help="With --rank: configs to sample (by LHS, one run each) for the ranking, counting "
            "runs already stored for this space \\[default: max(20, 2 x parameters)].",
        ),
        hold: str = typer.Option(
            Hold.BEST.value,
            "--hold",
            help="With --rank: pin the others at the sample's 'best' config (where the tuning "
            "then starts) or at their 'default'. 'default' for large spaces such as Ceph's: "
            "there the sample's best holds hundreds of random values, and held at them a tuned "
            "config re-measured below the default.",
        ),
        verify: int = typer.Option(
            5,
            "--verify",
            callback=checks.ROUNDS,
            help="Re-measure default and best side by side in at least this many rounds, then "
            "round by round until the verdict is decided (0: skip).",
        ),
        verify_max: int = typer.Option(
            None,
            "--verify-max",
            callback=checks.ROUNDS,
            help="The most verification rounds before an open verdict is called undecided "
            "\\[default: 4 x --verify, at least 12].",
        ),
        verify_seconds: float = typer.Option(
            None,
            "--verify-seconds",
            callback=checks.SECONDS,
            help="A time cap on the verification, beside --verify-max: what is open then is "
            "undecided.",
        ),
        compare: list[str] = typer.Option(
            [],
            "--compare",
            help="A config file (YAML with a 'config' mapping; 'expert' is the bundled Ceph "
            "expert config) re-measured beside default and best; repeatable.",
        ),
        agent: Path = typer.Option(
            None,
            "--agent",
            help="ddpg: continue from this saved agent and save it back.",
            callback=checks.OUTPUT_FILE,
        ),
        allow_risk: bool = typer.Option(
            False,
            "--allow-risk",
            help="Also search values that can lose or corrupt data on a crash or power cut (a "
            "space's `risk`, e.g. barrier off); the best safe config is then re-measured beside "
            "the best one.",
        ),
        measure_risks: RiskScope = typer.Option(
            RiskScope.APPLICATION,
            "--measure-risks",
            help="Verify, beside the best config, the best with each risky value of: the "
            "application's own options (a database's fsync, synchronous_commit, unsynced WAL), "
            "every layer's, or none: measured on the benchmark's file system, listed with what "
            "each would buy, never recommended.",
            case_sensitive=False,
        ),
        timeout: float = typer.Option(
            600.0, help="Kill a run after this many seconds.", callback=checks.TIMEOUT
        ),
        seed: int = typer.Option(0, help="Random seed of the tuner.", callback=checks.SEED),
        name: str = typer.Option(None, "--name", "-n", help="Campaign name (default: made up)."),
        resume: str = typer.Option(None, "--resume", help="Continue this stored campaign."),
        store: str = StoreOption,
        scheduler: str = SchedulerOption,
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
        json_out: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
    ) -> None:
        """Tune a target: rank first if asked, tune, then re-measure default and best and
        report the gain with its confidence interval. Ctrl-C loses nothing: --resume NAME.

        Without --objective, the one the workloads' job files declare is tuned, and their
        declared guardrails are kept (dbfsync: dblog.write.iops:max, guarded by
        dbdata.total.iops and dblog.sync.lat_p99_ms); `stortune workload check` shows them.

        Example: stortune tune --space localfs --workload fileserver -o total.bw_mbs:max
        --rank carver --top-k 4 --budget 40 --runtime 10

        Example: stortune tune --space stack -w dbfsync --rank carver --budget 40

        Example: stortune tune --space postgres-stack -w pgbench --memory-limit 384m
        --image-size 4g --rank carver --budget 20 --verify 5

        Example: stortune tune --target table --dataset runs.csv -o Performance:min --budget 30

        Example: stortune tune --space my.yaml --model cart.joblib -o iops:max --tuner bo
        --budget 30

        Example: stortune tune --space localfs -o total.bw_mbs:max -o total.lat_mean_ms:min
        --tuner bo --budget 40

        Example: stortune tune --target ceph --osds 1 --space ceph --workload rados-rand
        -o bw_mbs:max --rank lasso --rank-budget 30 --top-k 16 --hold default --compare expert

        Example: stortune tune --target command --command "./bench.sh {threads}" --space my.yaml
        -o iops:max --budget 40 --scheduler tcp://coordinator:8786
        """
        reporter = ConsoleReporter(quiet or json_out)
        with Store(store) as db, cluster_of(scheduler) as cluster:
            if resume:
                whole = load_space(space) if space else None
                result = resume_tuning(
                    db,
                    resume,
                    budget=budget,
                    seconds=seconds,
                    space=whole,
                    compare=compared_configs(compare, whole) if whole and compare else None,
                    verify_repetitions=verify,
                    verify_max=verify_max,
                    verify_seconds=verify_seconds,
                    agent=agent,
                    reporter=reporter,
                    measure_risks=measure_risks,
                    cluster=cluster,
                )
            else:
                target = targets.build_with_space(space)
                whole = target.space
                assert whole is not None
                compared = compared_configs(compare, whole)  # a bad file fails before tuning
                workloads = targets.workloads(target)
                job = TuneJob(
                    space=whole,
                    target=target,
                    workloads=workloads,
                    objective=campaign_objective(
                        workloads,
                        target,
                        Objective.of(objective, parse_bounds(bounds))
                        if objective or bounds
                        else None,
                        guardrail,
                        no_guardrails,
                        json_out,
                    ),
                    settings=settings_of(
                        budget,
                        seconds,
                        repetitions,
                        reference_every=target_options.reference_every(reference_every, target),
                        baseline=intensify,
                        intensify=intensify,
                    ),
                    rules=RunRules(
                        timeout=timeout,
                        check_disturbance=check_disturbance and target.measures_machine,
                        busy_wait=busy_wait,
                    ),
                    tuner=tuner,
                    seed=seed,
                    name=name,
                    rank=RankOptions(rank, top_k, hold, rank_budget) if rank else None,
                    verify=verify,
                    verify_max=verify_max,
                    verify_seconds=verify_seconds,
                    compare=compared,
                    agent=agent,
                    allow_risk=allow_risk,
                    measure_risks=measure_risks,
                    cluster=cluster,
                )
                result = start_tuning(db, job, reporter)
        print_result(result, json_out, frozenset(reporter.told))

    @app.command("recommend")
    def recommend_command(
        campaign: str = typer.Argument(..., help="A tuned campaign."),
        out: Path = typer.Option(
            None,
            "--out",
            help="Write the recommendation to this file.",
            callback=checks.OUTPUT_FILE,
        ),
        out_dir: Path = typer.Option(
            None,
            "--out-dir",
            callback=checks.OUTPUT_FOLDER,
            help="Write each file to install under this folder, laid out as under / "
            "(etc/fstab, etc/sysctl.d/..., etc/tmpfiles.d/..., etc/udev/rules.d/..., mkfs.sh, "
            "ceph.conf), with a README saying how.",
        ),
        force: bool = typer.Option(
            False,
            "--force",
            help="With --out-dir: write the files even when the verdict is open (MEASURE MORE, "
            "UNDECIDED), which leaves them out.",
        ),
        store: str = StoreOption,
        json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Say what to do with a tuned campaign (apply it, keep the default, or measure
        more), with its verified gain and risky values, and write its changes from the
        defaults as files a production system installs: for localfs an mkfs command without
        the benchmark's own flags, an /etc/fstab line, an /etc/sysctl.d file, an
        /etc/tmpfiles.d file and a udev rule for the block queue; ceph.conf sections for Ceph;
        name = value lines otherwise. /dev/DEVICE stands for your device, DISK for its disk's
        name under /sys/block. An open verdict writes no files to install unless --force.

        Example: stortune recommend my-campaign --out-dir recommended/
        """
        with Store(store, existing=True) as db:
            found = recommend(db, campaign)
        installs = found.decided or force
        if out_dir is not None and installs:
            write_install_files(out_dir, found)
        if json_out:
            print_json(found.to_dict())
        elif out is None:
            sys.stdout.write(found.text)  # verbatim: a terminal's width must not wrap config lines
        if out is not None:
            with writing(out):
                out.write_text(found.text)
            if not json_out:
                console.print(f"wrote {out}", highlight=False)
        if out_dir is not None and not installs:  # under --json on stderr: stdout is the JSON
            (err_console if json_out else console).print(
                f"not written: the verdict is {found.advice.upper()}; --force writes them anyway",
                highlight=False,
                soft_wrap=True,
            )
        elif out_dir is not None and not json_out:
            console.print(
                f"wrote {len(found.files)} file(s) to install and a README to {out_dir}",
                highlight=False,
                soft_wrap=True,
            )


def write_install_files(folder: Path, found: Recommendation) -> None:
    """The recommendation's files under `folder` (as under /), and a README: the verdict and
    how to install each."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for f in found.files:
            path = folder / f.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f.text)
        readme = [
            line.removeprefix("# ").removeprefix("#")
            for line in found.text.splitlines()
            if line.startswith("#") and not line.startswith("# ==>")
        ]
        readme += ["", "Files:"] + [f"- {f.path}: {f.how}" for f in found.files]
        (folder / "README").write_text("\n".join(readme) + "\n")
    except OSError as exc:
        raise StortuneError(f"cannot write to {folder}: {exc.strerror or exc}") from None
