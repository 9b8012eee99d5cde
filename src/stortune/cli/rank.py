"""`stortune rank | rank-study`: which parameters matter, and how few runs tell.

The commands only resolve where the data comes from and print; the work is
`stortune.importance.rank_dataset` and `subsample_study`, so other sources of a `Dataset` (a
stored campaign, a live sampled budget) plug in here without touching the ranking.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from stortune import importance
from stortune.cli import checks
from stortune.cli import targets as target_options
from stortune.cli.common import (
    SOURCE_HELP,
    RawOption,
    SchedulerOption,
    StoreOption,
    WorkloadFilterOption,
    check_achieved,
    cluster_of,
    console,
    print_json,
)
from stortune.cli.progress import ConsoleReporter
from stortune.datasets import Dataset
from stortune.enums import Direction
from stortune.importance.carver import DEFAULT_BINS, DEFAULT_RSD, PiCorrection
from stortune.importance.common import RankError
from stortune.importance.study import FANOVA_TRIALS
from stortune.measure.metricnames import check_campaign_metrics
from stortune.measure.runner import RunRules
from stortune.objective import Objective
from stortune.outputs import writing
from stortune.store import Store
from stortune.units import number
from stortune.workflows.rank import sample_space

if TYPE_CHECKING:
    from stortune.effects import EffectTable
    from stortune.importance import CarverResult, FanovaResult, LassoResult, StudyResult

DEFAULT_FRACTIONS = "0.001,0.002,0.004,0.008,0.016,0.032,0.064,0.128,0.256,0.512"
LASSO_ROWS = 20
STOP_TEXT = {
    "top-n": "reached --top",
    "no-reduction": "no remaining parameter reduces the variance of any cell",
    "exhausted": "every parameter is selected",
}

JsonOption = typer.Option(False, "--json", help="Print JSON.")
MetricOption = typer.Option(None, "--metric", help="Metric to rank for (default: the first).")
BinsOption = typer.Option(
    DEFAULT_BINS, "--bins", help="Quantile bins for a numeric parameter with more distinct values."
)
CorrectionOption = typer.Option(
    None,
    "--pi-correction",
    help="Carver: levels (default) takes off PI/CPI the variance a split by k levels of n rows "
    "removes by chance, (k-1)/(n-1) of it; none: PI/CPI as published, which favour "
    "many-level parameters on small samples.",
)
CORRECTION_TEXT = {
    PiCorrection.LEVELS: "less the share its levels explain by chance",
    PiCorrection.NONE: "uncorrected",
}


def resolve_dataset(
    source: str | None, store: str, workload: str | None, raw: bool, metric: str | None, quiet: bool
) -> Dataset:
    """The data to rank (a file or a stored campaign), saying which metric is ranked. A file's
    one-hot groups rank as one categorical each, as they do once imported."""
    from stortune.sources import describe_metric, load_source

    if source is None:
        raise RankError("say what to rank: --from FILE|CAMPAIGN, or --budget N on a live target")
    dataset = load_source(source, store, workload=workload, raw=raw, fold=True)
    if not quiet:
        name = metric or dataset.metrics[0]
        console.print(describe_metric(name), highlight=False)
        for warning in ranking_warnings(dataset, name):
            console.print(f"[yellow]warning[/]: {warning}", highlight=False, soft_wrap=True)
    return dataset


def ranking_warnings(dataset: Dataset, metric: str) -> list[str]:
    """What a reader of the ranking must know first: too few configs to stand above the noise
    (the report's own limit), a direction that was assumed."""
    from stortune.findings.table import MIN_CONFIGS

    out = []
    configs = len(dataset.frame[dataset.params].drop_duplicates()) if dataset.params else 0
    if configs < MIN_CONFIGS:
        out.append(
            f"only {configs} distinct configs: a ranking needs at least {MIN_CONFIGS} to stand "
            "above the run-to-run noise, so read this one as a guess"
        )
    if metric not in dataset.directions and not dataset.source.startswith("campaign"):
        out.append(
            f"{dataset.source or 'the table'} says nothing of {metric}'s direction, so higher "
            f"is taken as better (name the column {metric}- if lower is better, {metric}+ to "
            "say so)"
        )
    return out


def measure_sample(
    targets: target_options.TargetOptions,
    store: str,
    space_name: str | None,
    objective: str | None,
    budget: int,
    repetitions: int,
    rules: RunRules,
    reference_every: int | None,
    name: str | None,
    quiet: bool,
    scheduler: str | None = None,
) -> str:
    """`rank --budget N`: a Latin hypercube of N configs measured on the target (stored as a
    campaign of kind sample, so it can be ranked again or resumed); returns its name."""
    if budget < 2:
        raise RankError(f"--budget must be at least 2 configs to rank, not {budget}")
    target = targets.build_with_space(space_name)
    space = target.space
    assert space is not None
    objective = objective or target.default_objective
    if not objective:
        raise RankError(f"--budget on the {targets.kind} target needs --objective METRIC")
    workloads = targets.workloads(target)
    measured = Objective.parse(objective)
    check_campaign_metrics(measured, workloads, target)  # before anything is stored
    name = name or f"{space.name}-rank-{time.strftime('%Y%m%d-%H%M%S')}"
    with Store(store) as db, cluster_of(scheduler) as cluster:
        outcome = sample_space(
            db, name, space, target, workloads, measured,
            budget, rules, ConsoleReporter(quiet),
            reference_every=target_options.reference_every(reference_every, target),
            repetitions=repetitions, cluster=cluster,
        )  # fmt: skip
    check_achieved(outcome)
    return name


def parse_fractions(text: str) -> list[float]:
    try:
        fractions = [float(f) for f in text.split(",") if f.strip()]
    except ValueError:
        raise RankError(f"--fractions: {text!r} is not a comma-separated list of numbers") from None
    bad = [f for f in fractions if not 0 < f <= 1]
    if not fractions or bad:
        raise RankError(f"--fractions must be in (0, 1], e.g. 0.001,0.01,0.1 (got {text!r})")
    return fractions


def register(app: typer.Typer) -> None:
    @app.command("rank")
    @target_options.with_target_options
    def rank_command(
        targets: target_options.TargetOptions,
        source: str = typer.Option(None, "--from", help=SOURCE_HELP),
        budget: int = typer.Option(
            None,
            "--budget",
            callback=checks.COUNT,
            help="Instead of --from: measure this many configs of --space, a Latin hypercube, "
            "on the target, then rank them.",
        ),
        space: str = typer.Option(
            None,
            "--space",
            "-s",
            help="--budget: space file or name \\[default: the target's own].",
        ),
        objective: str = typer.Option(
            None,
            "--objective",
            "-o",
            help="--budget: METRIC[:max|min] to measure \\[default: the target's own, "
            "total.bw_mbs:max on localfs].",
        ),
        repetitions: int = typer.Option(
            1,
            "--repetitions",
            "-r",
            help="--budget: runs per config.",
            callback=checks.REPETITIONS,
        ),
        timeout: float = typer.Option(
            600.0, help="--budget: kill a run after this many seconds.", callback=checks.TIMEOUT
        ),
        check_disturbance: bool = target_options.CHECK_DISTURBANCE,
        busy_wait: float = target_options.BUSY_WAIT,
        reference_every: int = target_options.REFERENCE_EVERY,
        name: str = typer.Option(
            None, "--name", help="--budget: campaign name (default: made up)."
        ),
        method: str = typer.Option(
            "carver", "--method", help="carver, lasso or fanova (Optuna's; seconds per ranking)."
        ),
        metric: str = MetricOption,
        stop: str = typer.Option(
            None, "--stop", help="Carver's stop rule: rsd (default), top-n or none."
        ),
        top: int = typer.Option(None, "--top", help="At most this many parameters (top-n: 3)."),
        rsd: float = typer.Option(DEFAULT_RSD, "--rsd", help="RSD threshold of --stop rsd."),
        bins: int = BinsOption,
        correction: PiCorrection = CorrectionOption,
        plots: Path = typer.Option(
            None,
            "--plots",
            help="Write PNG and SVG figures here.",
            callback=checks.OUTPUT_FOLDER,
        ),
        raw: bool = RawOption,
        store: str = StoreOption,
        scheduler: str = SchedulerOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Rank parameters by importance: Carver's greedy variance reduction or Lasso, on a
        dataset file, a stored campaign, or configs measured now (--budget).

        Runs of a campaign with reference runs are ranked by their value relative to the
        reference measured around them (drift-corrected); --raw ranks absolute values. With
        several workloads in the data, --workload names the one to rank.

        Example: stortune rank --from runs.csv --method carver --stop rsd --plots figs/

        Example: stortune rank --from data/localfs.csv --workload fileserver --method lasso

        Example: stortune rank --budget 40 --space localfs -w mailserver --runtime 5
        """
        if len(targets.workload) > 1:
            raise RankError("rank one workload at a time: give --workload once")
        workload = targets.workload[0] if targets.workload else None
        if budget is not None:
            if source is not None:
                raise RankError("give --from or --budget, not both")
            rules = RunRules(
                timeout=timeout, check_disturbance=check_disturbance, busy_wait=busy_wait
            )
            source = measure_sample(
                targets,
                store,
                space,
                objective,
                budget,
                repetitions,
                rules,
                reference_every,
                name,
                json_out,
                scheduler,
            )
            workload = None
        dataset = resolve_dataset(source, store, workload, raw, metric, json_out)
        result = importance.rank_dataset(dataset, method, metric, stop, top, rsd, bins, correction)
        written = []
        if plots:
            with writing(plots, "plots in"):
                written = importance.write_plots(dataset, result, plots)
        if json_out:
            print_json(result.to_dict() | {"plots": [str(p) for p in written]})
            return
        if isinstance(result, importance.CarverResult):
            _print_carver(result)
        elif isinstance(result, importance.LassoResult):
            _print_lasso(result, top or LASSO_ROWS)
        else:
            _print_fanova(result, top or LASSO_ROWS)
        for path in written:
            console.print(f"wrote {path}", highlight=False)

    @app.command("effects")
    def effects_command(
        source: str = typer.Option(..., "--from", help=SOURCE_HELP),
        metric: str = MetricOption,
        workload: str = WorkloadFilterOption,
        raw: bool = RawOption,
        store: str = StoreOption,
        markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table."),
        json_out: bool = JsonOption,
    ) -> None:
        """Main effects beside the noise: for each parameter, the metric's mean at each value,
        the spread (best value's mean over the worst's), Welch's p-value between them, and the
        median repeat RSD of a config.

        Example: stortune effects --from data/localfs.csv --workload fileserver --markdown
        """
        from stortune.effects import main_effects

        dataset = resolve_dataset(source, store, workload, raw, metric, json_out or markdown)
        table = main_effects(dataset, metric)
        if json_out:
            print_json(table.to_dict())
            return
        _print_effects(table, markdown)

    @app.command("rank-study")
    def rank_study_command(
        source: str = typer.Argument(..., help=SOURCE_HELP),
        fractions: str = typer.Option(
            DEFAULT_FRACTIONS, "--fractions", help="Comma-separated shares of the rows."
        ),
        trials: int = typer.Option(
            1000,
            "--trials",
            help=f"Random subsets per fraction (fanova: at most {FANOVA_TRIALS}).",
        ),
        method: str = typer.Option(
            "carver",
            "--method",
            help="carver, lasso (slower) or fanova (Optuna's fANOVA, forests of depth 8: "
            f"0.1-2 s per subset of a few hundred rows, so at most {FANOVA_TRIALS} subsets per "
            "fraction).",
        ),
        metric: str = MetricOption,
        depth: int = typer.Option(3, "--depth", help="Ranks to check (1st, 2nd, ...)."),
        bins: int = BinsOption,
        correction: PiCorrection = CorrectionOption,
        seed: int = typer.Option(0, "--seed", help="Seed of the subsets.", callback=checks.SEED),
        plot: Path = typer.Option(
            None,
            "--plot",
            help="Write the success curves (PNG + SVG).",
            callback=checks.OUTPUT_FIGURE,
        ),
        workload: str = WorkloadFilterOption,
        raw: bool = RawOption,
        store: str = StoreOption,
        json_out: bool = JsonOption,
    ) -> None:
        """How often a random share of the data finds the full data's top parameters
        (Carver's subsample study, Fig. 5).

        Example: stortune rank-study runs.csv --fractions 0.01,0.05,0.2 --trials 1000
        """
        if depth < 1:
            raise RankError(f"--depth must be at least 1 (got {depth})")
        if correction is not None and method != "carver":
            raise RankError("--pi-correction applies to --method carver only")
        dataset = resolve_dataset(source, store, workload, raw, metric, json_out)
        study = importance.subsample_study(
            dataset,
            parse_fractions(fractions),
            trials,
            method,
            metric,
            depth,
            bins,
            seed,
            correction or PiCorrection.LEVELS,
        )
        written = []
        if plot:
            from stortune.importance.plots import plot_study

            with writing(plot, "plot"):
                written = plot_study([study], plot)
        if json_out:
            print_json(study.to_dict() | {"plots": [str(p) for p in written]})
            return
        _print_study(study)
        for path in written:
            console.print(f"wrote {path}", highlight=False)


def _direction(direction: str) -> str:
    return "lower is better" if direction == Direction.MIN else "higher is better"


def _print_carver(result: CarverResult) -> None:
    console.print(
        f"Carver ranking of {result.metric} ({_direction(result.direction)}): "
        f"{result.n_rows} configurations, RSD {_percent(result.rsd)}; PI/CPI "
        f"{CORRECTION_TEXT[result.correction]}",
        highlight=False,
    )
    table = Table()
    columns = ("#", "parameter", "PI/CPI", "runner-up", "best value", "rows", "mean", "RSD")
    for column in columns:
        table.add_column(column, no_wrap=column == "parameter")
    for i, step in enumerate(result.steps, start=1):
        others = {p: s for p, s in step.scores.items() if p != step.param}
        runner = max(others, key=lambda p: others[p]) if others else None
        table.add_row(
            str(i),
            step.param,
            f"{step.kind} {step.score:.3g}",
            f"{runner} {others[runner]:.3g}" if runner else "",
            step.best_values[step.param],
            str(step.best_size),
            number(step.best_mean),
            _percent(step.best_rsd),
        )
    footnote = ""
    if result.steps:
        console.print(table)
        footnote = (
            " Best value: of that parameter in the best-performing cell of the selected ones "
            "(mean, RSD and rows of that cell)."
        )
    console.print(f"stopped: {_stop_text(result)}.{footnote}", highlight=False)


def _stop_text(result: CarverResult) -> str:
    if result.stop == "no-reduction" and result.correction == PiCorrection.LEVELS:
        return STOP_TEXT[result.stop] + " more than chance would"
    if result.stop != "rsd":
        return STOP_TEXT[result.stop]
    if not result.steps:
        return "the metric's RSD is already below the threshold: no parameter matters"
    return "the best cell's RSD is below the threshold"


def _percent(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1%}"


def _print_lasso(result: LassoResult, rows: int) -> None:
    logged = ", ".join(result.logged) or "none"
    console.print(
        f"Lasso ranking of {result.metric} ({_direction(result.direction)}): {result.n_rows} "
        f"configurations, CV alpha {result.alpha_cv:.3g}; log10 applied to: {logged}",
        highlight=False,
    )
    table = Table()
    for column in ("#", "parameter", "enters at alpha", "|coef| at CV alpha", "rank by |coef|"):
        table.add_column(column, no_wrap=column == "parameter")
    coef_rank = {p: i for i, p in enumerate(result.coef_ranking, start=1)}
    for i, param in enumerate(result.ranking[:rows], start=1):
        alpha = result.entry_alpha[param]
        table.add_row(
            str(i),
            param,
            "never" if alpha is None else f"{alpha:.3g}",
            f"{result.coef[param]:.3g}",
            str(coef_rank[param]),
        )
    console.print(table)


def _print_fanova(result: FanovaResult, rows: int) -> None:
    console.print(
        f"fANOVA ranking of {result.metric} ({_direction(result.direction)}): {result.n_rows} "
        f"configurations, {result.trees} trees of depth {result.max_depth}",
        highlight=False,
    )
    table = Table()
    for column in ("#", "parameter", "importance"):
        table.add_column(column, no_wrap=column == "parameter")
    for i, param in enumerate(result.ranking[:rows], start=1):
        table.add_row(str(i), param, f"{result.importance[param]:.3f}")
    console.print(table)


def _print_effects(table: EffectTable, markdown: bool) -> None:
    head = (
        f"{table.metric} ({_direction(table.direction)}): {table.runs} runs of {table.configs} "
        f"configs; repeat RSD of a config (median): {_percent(table.repeat_rsd)}"
    )
    rows = [
        (
            e.parameter,
            ", ".join(f"{k} {v:.3g}" for k, v in e.means.items()),
            f"{e.spread:.2f}x",
            f"{e.p_value:.2g}",
        )
        for e in table.effects
    ]
    if markdown:
        print(head + "\n")
        print("| parameter | mean per value | spread (best/worst) | p (best vs worst) |")
        print("|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    console.print(head, highlight=False)
    out = Table()
    for column in ("parameter", "mean per value", "spread", "p"):
        out.add_column(column)
    for row in rows:
        out.add_row(*row)
    console.print(out)


def _print_study(study: StudyResult) -> None:
    how = f" (PI/CPI {CORRECTION_TEXT[study.correction]})" if study.correction else ""
    console.print(
        f"{study.method}{how} on {study.source}: full-data top {study.depth} for "
        f"{study.metric}: {', '.join(study.truth) or '-'}",
        highlight=False,
    )
    table = Table()
    for column in ("fraction", "rows", "trials", *(f"#{k + 1}" for k in range(study.depth))):
        table.add_column(column, justify="right")
    table.add_column("s/ranking", justify="right")
    for f, size, picks, seconds, rates in zip(
        study.fractions, study.sizes, study.rankings, study.seconds, study.success(), strict=True
    ):
        table.add_row(
            f"{f:.2%}",
            str(size),
            str(len(picks)),
            *(_percent(r) for r in rates),
            f"{seconds / len(picks):.2g}",
        )
    console.print(table)
