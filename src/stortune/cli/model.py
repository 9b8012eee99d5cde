"""`stortune model`: fit performance models on a dataset, predict with them, evaluate them
(the work is `workflows.model`; this module parses and prints).

The techniques and the protocol follow Noorshams et al. (ICPE'13); see `stortune.models`.
`evaluate --train-size` runs DeepPerf's small-sample protocol (`stortune.models.smallsample`).
"""

from __future__ import annotations

import math
import numbers
import statistics
from collections.abc import Container, Iterable, Sequence
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from stortune.cli import checks
from stortune.cli.common import (
    SOURCE_HELP,
    RawOption,
    StoreOption,
    WorkloadFilterOption,
    console,
    print_json,
)
from stortune.errors import StortuneError
from stortune.units import number
from stortune.workflows import model as workflow
from stortune.workflows.model import AUTO_BUDGET, DEFAULT_OUT, DEFAULT_TIME_LIMIT

# Kept here rather than read from stortune.models for the help: the models pull in
# scikit-learn, SciPy and py-earth (seconds), which `stortune model --help` should not wait
# for; a test checks the list.
TECHNIQUE_NAMES = (
    "linear",
    "linear-int",
    "lasso-int",
    "mars",
    "mars-int",
    "cart",
    "m5",
    "cubist",
    "boosting",
    "network",
)

model_app = typer.Typer(
    help="Performance models: predict a metric from a configuration (Noorshams et al., ICPE'13)."
    "\n\nExample: stortune model fit --from data/localfs.csv --technique mars",
    no_args_is_help=True,
)

JobsOption = typer.Option(
    -1,
    "--jobs",
    "-j",
    help="split search: worker processes, each cross-validating its share of the folds"
    " (-1: every CPU)",
)

TECHNIQUE_HELP = f"technique: {', '.join(TECHNIQUE_NAMES)}, or all (repeat the option for several)"
SourceOption = typer.Option(..., "--from", help=SOURCE_HELP)
MetricOption = typer.Option(None, "--metric", "-m", help="metric (default: the first)")
SplitsOption = typer.Option(4, help="split search: splits per parameter (k)")
ExplorationsOption = typer.Option(5, help="split search: points explored per iteration (n)")
IterationsOption = typer.Option(10, help="split search: most iterations")
FoldsOption = typer.Option(10, help="cross-validation folds")
JsonOption = typer.Option(False, "--json", help="machine-readable output")


def register(app: typer.Typer) -> None:
    """Add the `model` command group to the stortune app."""
    app.add_typer(model_app, name="model")


def _text(value: Any) -> str:
    """A value in a table: numbers as measured values are shown, anything else as written."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return number(float(value))
    return str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.2f}"


def _printed_json(result: Any, as_json: bool) -> bool:
    """With --json, the result as JSON and nothing else; whether it was printed."""
    if as_json:
        print_json(result.to_dict())
    return as_json


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_text(v)}" for k, v in params.items())


def _show(
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    left: Container[str] = ("technique",),
    caption: str | None = None,
    **options: Any,
) -> None:
    """A table of text cells: the columns in `left` to the left, the others (numbers) right."""
    table = Table(title=title, caption=caption)
    for name in columns:
        table.add_column(name, justify="left" if name in left else "right", **options)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _data(
    source: str, metric: str | None, store: str, workload: str | None, raw: bool, quiet: bool
) -> workflow.TrainingData:
    data = workflow.training_data(source, metric, store, workload, raw)
    if not quiet:
        console.print(data.description, highlight=False)
    return data


@model_app.command("fit")
def fit_command(
    source: str = SourceOption,
    workload: str | None = WorkloadFilterOption,
    raw: bool = RawOption,
    store: str = StoreOption,
    metric: str | None = MetricOption,
    techniques: list[str] = typer.Option(["mars-int"], "--technique", "-t", help=TECHNIQUE_HELP),
    optimize: bool = typer.Option(
        False, "--optimize", help="tune hyperparameters with the split search (10-fold CV RMSE)"
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help=f"model file (*.joblib) or directory (default: {DEFAULT_OUT})",
        callback=checks.OUTPUT_MODEL,
    ),
    splits: int = SplitsOption,
    explorations: int = ExplorationsOption,
    iterations: int = IterationsOption,
    folds: int = FoldsOption,
    time_limit: float = typer.Option(
        600, help="split search: seconds per technique, then the best point so far is kept"
    ),
    jobs: int = JobsOption,
    auto: bool = typer.Option(
        False,
        "--auto",
        help="choose the technique, its hyperparameters and an ensemble by cross-validated"
        " mean relative error within --budget (same as -t auto)",
    ),
    budget: float = typer.Option(AUTO_BUDGET, help="--auto: seconds for the whole fit"),
    as_json: bool = JsonOption,
) -> None:
    """Fit performance models of a metric and save them (for `model predict` or as a surrogate).

    With few runs (tens to a few hundred), --auto is the one to try first: it races lasso,
    trees, forests, boosting, MARS and the network on raw and log scale and keeps the best.

    Example: stortune model fit --from runs.csv --metric iops --technique mars-int --optimize

    Example: stortune model fit --from runs.csv --metric iops --auto --budget 30
    """
    data = _data(source, metric, store, workload, raw, as_json)
    names = ["auto"] if auto else workflow.choose_techniques(techniques, extra=True)
    settings = workflow.search_settings(splits, explorations, iterations, folds, time_limit, jobs)
    result = workflow.fit_models(data, names, settings, out, optimize, budget)
    if _printed_json(result, as_json):
        return
    rows = [
        (
            m.technique,
            _params(m.params) or "-",
            f"MRE {_pct(m.cv_mre)}%" if m.cv_mre is not None else f"RMSE {_text(m.cv_rmse)}",
            f"{m.evaluations} points ({m.stop_reason})" if m.stop_reason else "-",
            m.path,
        )
        for m in result.models
    ]
    columns = ("technique", "hyperparameters", "CV error", "search", "file")
    title = f"{result.metric} models from {Path(source).name} ({result.rows} configurations)"
    _show(title, columns, rows, left=columns)


@model_app.command("predict")
def predict_command(
    model: Path = typer.Argument(..., help="model file written by `stortune model fit`"),
    config: list[str] = typer.Option(
        [], "--config", "-c", help="name=value; repeat, or join with commas"
    ),
    source: Path | None = typer.Option(
        None,
        "--from",
        help="predict every row of this file (CSV, Parquet or ARFF) instead; columns the model"
        " does not use (metrics, say) are ignored",
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="with --from: write the rows and their predictions to this CSV",
        callback=checks.OUTPUT_FILE_MADE,
    ),
    workload: list[str] = typer.Option(
        [],
        "--workload",
        "-W",
        help="name=value of a workload parameter (repeat, or join with commas): predict every "
        "system config for this workload, best first",
    ),
    space: str | None = typer.Option(
        None,
        "--space",
        "-s",
        help="with --workload: the space whose levels the system configs take (its "
        "workload-layer parameters must all be given)",
    ),
    lower_is_better: bool = typer.Option(
        False, "--lower-is-better", help="with --workload: rank the lowest prediction first"
    ),
    top: int = typer.Option(20, "--top", help="with --workload: show the best N (0: all)"),
    as_json: bool = JsonOption,
) -> None:
    """Predict the metric for one configuration, for every row of a file, or for every system
    configuration under one workload (which config for this workload?).

    Example: stortune model predict stortune-out/models/runs.iops.mars-int.joblib
    -c scheduler=mq-deadline -c read_ahead_kb=512

    Example: stortune model predict runs.iops.mars-int.joblib --from candidates.csv --out p.csv

    Example: stortune model predict spa.RT_r.cubist.joblib --space spa --lower-is-better
    -W request_size=8192,read_share=70,access=random,file_set_size=1024
    """
    if workload:
        if config or source is not None:
            raise StortuneError("give --workload, -c or --from, one of them")
        surrogate = workflow.load_model(model)
        workload_config = workflow.parse_config(workload)
        _print_systems(
            workflow.predict_systems(surrogate, workload_config, space, lower_is_better),
            top,
            as_json,
        )
        return
    if source is not None and config:
        raise StortuneError("give one config with -c or a file with --from, not both")
    if out is not None and source is None:
        raise StortuneError("--out writes the predictions of a --from file: give --from too")
    surrogate = workflow.load_model(model)
    if source is not None:
        _print_file(workflow.predict_file(surrogate, source, out), as_json)
        return
    prediction = workflow.predict(surrogate, workflow.parse_config(config))
    if _printed_json(prediction, as_json):
        return
    console.print(
        f"predicted {prediction.metric}: [bold]{number(prediction.prediction)}[/]"
        f" ({prediction.technique})",
        highlight=False,
    )


def _print_systems(result: workflow.SystemsPrediction, top: int, as_json: bool) -> None:
    """The table of `model predict --workload`: every system config, best first."""
    if _printed_json(result, as_json):
        return
    ranked = result.ranked
    shown = ranked if top <= 0 else ranked.head(top)
    order = "lowest" if result.ascending else "highest"
    _show(
        f"{result.metric} predicted by {result.technique} for {_params(result.workload)}",
        ["#", *map(str, ranked.columns)],
        ((str(n), *map(_text, r)) for n, r in enumerate(shown.itertuples(index=False), start=1)),
        left=[str(name) for name in ranked.columns if name != result.column],
        caption=f"{len(shown)} of {len(ranked)} system configs, {order} first",
    )


def _print_file(result: workflow.FilePrediction, as_json: bool) -> None:
    if _printed_json(result, as_json):
        return
    frame = result.frame
    if result.out is not None:
        console.print(f"wrote {len(frame)} predictions of {result.metric} to {result.out}")
        return
    # A parameter that is the same in every row goes to the caption: files of candidate
    # configs often vary a few of many knobs, and a column per knob overflows the terminal.
    same = [name for name in result.params if frame[name].nunique(dropna=False) == 1]
    shown = [name for name in frame.columns if name not in same]
    _show(
        f"{result.metric} predicted by {result.technique} for {result.source.name}",
        [str(name) for name in shown],
        (map(_text, record) for record in frame[shown].itertuples(index=False)),
        left=[str(name) for name in result.text_params],
        caption=f"in every row: {_params({n: frame[n].iloc[0] for n in same})}" if same else None,
        overflow="fold",
    )


@model_app.command("evaluate")
def evaluate_command(
    source: str = SourceOption,
    workload: str | None = WorkloadFilterOption,
    raw: bool = RawOption,
    store: str = StoreOption,
    metric: str | None = MetricOption,
    techniques: list[str] = typer.Option(
        ["all"], "--technique", "-t", help=f"{TECHNIQUE_HELP}; with --train-size also auto"
    ),
    optimize: bool = typer.Option(
        False,
        "--optimize",
        help="also tune each technique and test the gain (paired t-test); with --train-size,"
        " tune inside each training set (slow: up to --time-limit per technique and repeat)",
    ),
    plots: Path | None = typer.Option(
        None, "--plots", help="write PNG and SVG figures here", callback=checks.OUTPUT_FOLDER
    ),
    test_fraction: float = typer.Option(0.1, help="share of rows held out for interpolation"),
    train_size: str | None = typer.Option(
        None,
        "--train-size",
        help="small-sample protocol instead of the paper's: train on this many random rows, a"
        " number (30) or a multiple of the number of parameters (2N), test on all the others",
    ),
    repeats: int = typer.Option(10, help="--train-size: random training sets drawn"),
    seed: int = typer.Option(
        0,
        help="seed of the held-out rows and the folds, or of the --train-size draws",
        callback=checks.SEED,
    ),
    splits: int = SplitsOption,
    explorations: int = ExplorationsOption,
    iterations: int = IterationsOption,
    folds: int = FoldsOption,
    time_limit: float | None = typer.Option(
        None,
        help=f"split search: seconds per technique, then the best point so far is kept (default"
        f" {DEFAULT_TIME_LIMIT:.0f}); -t auto: seconds per fit (default {AUTO_BUDGET:.0f})",
    ),
    jobs: int = JobsOption,
    as_json: bool = JsonOption,
) -> None:
    """Score techniques as the paper does: fit, interpolation and extrapolation error, tuning gain.

    R² of the fit on all rows, mean relative error (MRE) on held-out rows inside the training
    ranges and beyond a cut per parameter; with --optimize, the MRE reduction by the split
    search and a paired t-test over the cross-validation folds.

    With --train-size, the small-sample protocol (DeepPerf, ICSE'19) instead, for datasets of
    tens of runs: each of --repeats draws trains every technique on the same N random rows and
    scores its MRE on all the other rows; the table gives the mean and its 95% confidence
    interval over the draws, and the fit time.

    Example: stortune model evaluate --from runs.csv --metric iops -t cart -t m5 --optimize

    Example: stortune model evaluate --from runs.csv --train-size 2N --repeats 20 -t cart -t m5
    """
    if not 0 < test_fraction < 1:
        raise StortuneError("--test-fraction must be between 0 and 1")
    if train_size is not None and plots is not None:
        raise StortuneError("--plots draws the paper's protocol: leave it out with --train-size")
    if repeats < 1:
        raise StortuneError("--repeats must be >= 1")
    data = _data(source, metric, store, workload, raw, as_json)
    names = workflow.choose_techniques(techniques, extra=train_size is not None)
    limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    settings = workflow.search_settings(splits, explorations, iterations, folds, limit, jobs)
    if train_size is not None:
        size = workflow.train_size(train_size, data.X.shape[1], len(data.X), source)
        budget = AUTO_BUDGET if time_limit is None else time_limit
        study = workflow.small_sample(data, names, size, repeats, settings, seed, optimize, budget)
        _print_small_sample(study, as_json)
        return
    result = workflow.evaluate(data, names, settings, test_fraction, seed, optimize, plots)
    if _printed_json(result, as_json):
        return
    _print_tables(result)
    for path in result.plots:
        console.print(f"wrote {path}", highlight=False)


def _print_small_sample(study: workflow.SmallSampleStudy, as_json: bool) -> None:
    if _printed_json(study, as_json):
        return
    size, rows = study.train_size, study.rows
    title = (
        f"{study.metric} from {Path(study.dataset).name}: trained on {size} of {rows}"
        f" configurations, tested on the other {rows - size}; {study.repeats} draws"
        f" (seed {study.seed})" + (", tuned in each" if study.optimized else "")
    )
    cells = []
    for name, r in study.results:
        low, high = r.ci95
        interval = f"{_pct(low)} to {_pct(high)}" if math.isfinite(low) else "-"
        cells.append((name, _pct(r.mean), interval, number(statistics.fmean(r.fit_seconds))))
    _show(title, ("technique", "MRE %", "95% CI %", "fit s"), cells)


def _print_tables(result: workflow.Evaluation) -> None:
    scenarios = result.extrapolation_scenarios
    _show(
        f"{result.metric} from {Path(result.dataset).name}: {result.rows} configurations,"
        f" {result.interpolation_rows} held out",
        ("technique", "R² (fit)", "CV RMSE", "interp. MRE %", "p90 %")
        + (f"extrap. MRE % ({scenarios})",),
        (
            (r.name, f"{r.r2_fit:.4f}", _text(r.cv_rmse))
            + tuple(map(_pct, (r.interpolation_mre, r.interpolation_p90, r.extrapolation_mre)))
            for r in result.results
        ),
    )
    tuned = [r for r in result.results if r.optimisation is not None]
    if not tuned:
        return
    _show(
        "Error reduction by the split search (held-out MRE; t-test on CV folds)",
        ("technique", "MRE % default", "MRE % optimised", "reduction %", "p-value")
        + ("evaluations", "stopped", "hyperparameters"),
        (
            (r.name, *map(_pct, (o.mre_default, o.mre_optimized, o.reduction)))
            + (f"{o.test.pvalue:.3g}", str(o.evaluations), o.stop_reason)
            + (_params(o.params) or "(defaults)",)
            for r in tuned
            if (o := r.optimisation) is not None
        ),
        left=("technique", "hyperparameters"),
    )
