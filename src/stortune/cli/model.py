"""`stortune model`: fit performance models on a dataset, predict with them, evaluate them.

The techniques and the protocol follow Noorshams et al. (ICPE'13); see `stortune.models`.
`evaluate --train-size` runs DeepPerf's small-sample protocol (`stortune.models.smallsample`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
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
from stortune.errors import ConfigError, DatasetError, StortuneError
from stortune.outputs import writing
from stortune.units import number

if TYPE_CHECKING:
    from sklearn.base import BaseEstimator

    from stortune.models.smallsample import SmallSampleResult
    from stortune.models.study import Assessment, SearchSettings
    from stortune.models.surrogate import SurrogateModel

# Kept here rather than read from stortune.models: every stortune command imports this module,
# and the models pull in scikit-learn, SciPy and py-earth (seconds); a test checks the list.
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

DEFAULT_OUT = Path("stortune-out") / "models"

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

DEFAULT_TIME_LIMIT = 600.0
AUTO_BUDGET = 30.0


def _auto_model(budget: float, seed: int) -> BaseEstimator:
    from stortune.models.auto import AutoModel

    return AutoModel(budget_seconds=budget, random_state=seed)


# Estimators the small-sample protocol (`model evaluate --train-size`) and `model fit` run
# besides the registered techniques, by names no technique has; never part of "all". Each
# takes its time budget per fit (--time-limit, or fit's --budget) and the seed.
EXTRA_ESTIMATORS: dict[str, Callable[[float, int], BaseEstimator]] = {"auto": _auto_model}


def register(app: typer.Typer) -> None:
    """Add the `model` command group to the stortune app."""
    app.add_typer(model_app, name="model")


def _dataset(
    source: str, metric: str | None, store: str, workload: str | None, raw: bool, quiet: bool
) -> tuple[str, pd.DataFrame, np.ndarray]:
    """The metric, and the parameters and metric values (repetitions averaged) where known."""
    from stortune.sources import describe_metric, load_source

    data = load_source(source, store, workload=workload, raw=raw)
    if metric and metric not in data.metrics and metric in data.frame.columns:
        # a column the conventions took for a knob
        data = load_source(source, store, metrics=[metric], workload=workload)
    if not quiet:
        console.print(describe_metric(metric or data.metrics[0]), highlight=False)
    data = data.aggregated()
    name = metric or data.metrics[0]
    target = data.y(name)
    known = target.notna().to_numpy()
    if known.sum() < 4:
        raise DatasetError(f"{source}: fewer than 4 rows with a value of {name!r}")
    X = data.X.loc[known].reset_index(drop=True)
    return name, X, target.to_numpy(dtype=float)[known]


def _techniques(names: list[str], extra: bool = False) -> list[str]:
    """The techniques named (all: every available one); with `extra`, EXTRA_ESTIMATORS too."""
    from stortune.models import available_techniques, technique

    chosen: list[str] = []
    for name in names or ["all"]:
        for item in available_techniques() if name == "all" else [name]:
            if item in EXTRA_ESTIMATORS:
                if not extra:
                    raise StortuneError(f"-t {item} works with --train-size only")
            else:
                technique(item).check()
            if item not in chosen:
                chosen.append(item)
    return chosen


def _settings(
    splits: int, explorations: int, iterations: int, folds: int, time_limit: float, jobs: int
) -> SearchSettings:
    from stortune.models.study import SearchSettings

    if min(splits, explorations, folds - 1) < 1 or iterations < 0 or time_limit <= 0:
        raise StortuneError(
            "--splits and --explorations must be >= 1, --folds >= 2, --time-limit > 0"
        )
    if jobs == 0 or jobs < -1:
        raise StortuneError("--jobs must be a number of processes >= 1, or -1 for every CPU")
    return SearchSettings(
        splits, explorations, iterations, folds, max_seconds=time_limit, n_jobs=jobs
    )


def _model_paths(out: Path | None, stem: str, metric: str, names: list[str]) -> dict[str, Path]:
    if out is not None and out.suffix in (".joblib", ".pkl"):
        if len(names) > 1:
            raise StortuneError(f"--out {out} is a file; give a directory for several techniques")
        return {names[0]: out}
    folder = out or DEFAULT_OUT
    return {name: folder / f"{stem}.{metric}.{name}.joblib" for name in names}


def _parse_config(items: list[str]) -> dict[str, str]:
    config: dict[str, str] = {}
    for item in items:
        for pair in item.split(","):
            if not pair.strip():
                continue
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--config {pair!r}: expected name=value")
            config[key.strip()] = value.strip()
    return config


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pct(value: float) -> str:
    return "-" if value is None or not np.isfinite(value) else f"{100 * value:.2f}"


@model_app.command("fit")
def fit_command(
    source: str = typer.Option(..., "--from", help=SOURCE_HELP),
    workload: str | None = WorkloadFilterOption,
    raw: bool = RawOption,
    store: str = StoreOption,
    metric: str | None = typer.Option(None, "--metric", "-m", help="metric (default: the first)"),
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
    splits: int = typer.Option(4, help="split search: splits per parameter (k)"),
    explorations: int = typer.Option(5, help="split search: points explored per iteration (n)"),
    iterations: int = typer.Option(10, help="split search: most iterations"),
    folds: int = typer.Option(10, help="cross-validation folds"),
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
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Fit performance models of a metric and save them (for `model predict` or as a surrogate).

    With few runs (tens to a few hundred), --auto is the one to try first: it races lasso,
    trees, forests, boosting, MARS and the network on raw and log scale and keeps the best.

    Example: stortune model fit --from runs.csv --metric iops --technique mars-int --optimize

    Example: stortune model fit --from runs.csv --metric iops --auto --budget 30
    """
    from stortune.models import technique
    from stortune.models.crossval import cv_errors, cv_folds
    from stortune.models.study import search
    from stortune.models.surrogate import SurrogateModel

    name, X, y = _dataset(source, metric, store, workload, raw, as_json)
    names = ["auto"] if auto else _techniques(techniques, extra=True)
    if budget <= 0:
        raise StortuneError("--budget must be positive")
    paths = _model_paths(out, Path(source).stem, name, names)
    settings = _settings(splits, explorations, iterations, folds, time_limit, jobs)
    rows = []
    for tech_name in names:
        evaluations, stopped, cv_rmse, cv_mre = 0, "", None, None
        if tech_name in EXTRA_ESTIMATORS:
            estimator = EXTRA_ESTIMATORS[tech_name](budget, 0).fit(X, y)
            params = {"chosen": estimator.chosen_, "cv": estimator.cv_}
            cv_mre, evaluations = estimator.cv_mre_, len(estimator.leaderboard_)
            stopped, optimized = f"{estimator.fit_seconds_:.1f} s", True
        else:
            tech = technique(tech_name)
            estimator = tech.make()
            space = tech.search_space(len(X))
            optimized = bool(optimize and space)
            if optimized:
                tuned = search(estimator, space, X, y, settings)
                estimator, evaluations = tuned.best_estimator_, tuned.search_.n_evaluations
                cv_rmse, stopped = tuned.best_score_, tuned.search_.stop_reason
            else:
                cv_rmse = float(np.mean(cv_errors(estimator, X, y, cv_folds(len(X), folds))))
                estimator.fit(X, y)
            params = {k: v for k, v in estimator.get_params().items() if k not in tech.fixed}
        model = SurrogateModel.from_fit(
            estimator,
            X,
            name,
            tech_name,
            source=str(source),
            params=params,
            optimized=optimized,
            cv_rmse=cv_rmse,
            cv_mre=cv_mre,
            evaluations=evaluations,
        )
        with writing(paths[tech_name], "model"):
            path = model.save(paths[tech_name])
        rows.append(
            {
                "technique": tech_name,
                "path": str(path),
                "params": params,
                "cv_rmse": cv_rmse,
                "cv_mre": cv_mre,
                "evaluations": evaluations,
                "stop_reason": stopped,
                "rows": len(X),
            }
        )
    if as_json:
        print_json({"dataset": str(source), "metric": name, "models": rows})
        return
    table = Table(title=f"{name} models from {Path(source).name} ({len(X)} configurations)")
    for column in ("technique", "hyperparameters", "CV error", "search", "file"):
        table.add_column(column)
    for row in rows:
        params = ", ".join(f"{k}={_fmt(v)}" for k, v in row["params"].items())
        searched = (
            f"{row['evaluations']} points ({row['stop_reason']})" if row["stop_reason"] else "-"
        )
        error = (
            f"MRE {_pct(row['cv_mre'])}%"
            if row["cv_mre"] is not None
            else f"RMSE {_fmt(row['cv_rmse'])}"
        )
        table.add_row(row["technique"], params or "-", error, searched, row["path"])
    console.print(table)


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
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Predict the metric for one configuration, for every row of a file, or for every system
    configuration under one workload (which config for this workload?).

    Example: stortune model predict stortune-out/models/runs.iops.mars-int.joblib
    -c scheduler=mq-deadline -c read_ahead_kb=512

    Example: stortune model predict runs.iops.mars-int.joblib --from candidates.csv --out p.csv

    Example: stortune model predict spa.RT_r.cubist.joblib --space spa --lower-is-better
    -W request_size=8192,read_share=70,access=random,file_set_size=1024
    """
    from stortune.models.surrogate import SurrogateModel

    if workload:
        if config or source is not None:
            raise StortuneError("give --workload, -c or --from, one of them")
        _predict_systems(SurrogateModel.load(model), workload, space, lower_is_better, top, as_json)
        return
    if source is not None and config:
        raise StortuneError("give one config with -c or a file with --from, not both")
    if out is not None and source is None:
        raise StortuneError("--out writes the predictions of a --from file: give --from too")
    surrogate = SurrogateModel.load(model)
    if source is not None:
        _predict_file(surrogate, source, out, as_json)
        return
    if not config:
        raise StortuneError(
            f"say what to predict: -c name=value for {', '.join(surrogate.params)}, or --from FILE"
        )
    values = surrogate.coerce(_parse_config(config))
    prediction = surrogate.predict_config(values)
    if as_json:
        print_json(
            {
                "metric": surrogate.metric,
                "technique": surrogate.technique,
                "config": values,
                "prediction": prediction,
            }
        )
        return
    console.print(
        f"predicted {surrogate.metric}: [bold]{number(prediction)}[/] ({surrogate.technique})",
        highlight=False,
    )


def _predict_systems(
    surrogate: Any, items: list[str], space_name: str | None, ascending: bool, top: int,
    as_json: bool,
) -> None:  # fmt: skip
    """The table of `model predict --workload`: every system config, best first."""
    from stortune.space import load_space

    space = load_space(space_name) if space_name else None
    workload = _parse_config(items)
    ranked = surrogate.predict_systems(workload, space, ascending)
    column = f"predicted_{surrogate.metric}"
    if as_json:
        print_json(
            {
                "metric": surrogate.metric,
                "technique": surrogate.technique,
                "workload": workload,
                "ranking": "lowest first" if ascending else "highest first",
                "configs": ranked.to_dict(orient="records"),
            }
        )
        return
    shown = ranked if top <= 0 else ranked.head(top)
    order = "lowest" if ascending else "highest"
    table = Table(
        title=f"{surrogate.metric} predicted by {surrogate.technique} for "
        + ", ".join(f"{k}={_fmt(v)}" for k, v in workload.items()),
        caption=f"{len(shown)} of {len(ranked)} system configs, {order} first",
    )
    table.add_column("#", justify="right")
    for name in ranked.columns:
        table.add_column(str(name), justify="right" if name == column else "left")
    for rank, record in enumerate(shown.itertuples(index=False), start=1):
        table.add_row(str(rank), *(_fmt(value) for value in record))
    console.print(table)


def _config_table(path: Path, text_params: list[str]) -> pd.DataFrame:
    """The rows of a file as written: no column roles guessed (a file of configs to predict
    may have no metric column), and text parameters kept as text, as `-c` gives them."""
    from stortune.datasets import load_dataset, read_dataset_file, read_table

    suffix = path.suffix.lower()
    if suffix == ".arff":
        return load_dataset(path).frame
    data = read_dataset_file(path)
    try:
        frame = read_table(data, suffix, dtype={name: str for name in text_params})
    except DatasetError:
        raise
    except Exception as exc:  # pandas raises many kinds; the user needs the file and the reason
        raise DatasetError(f"{path}: cannot read: {exc}") from None
    if frame.empty:
        raise DatasetError(f"{path}: no rows")
    return frame


def _predict_file(surrogate: SurrogateModel, source: Path, out: Path | None, as_json: bool) -> None:
    """Each row's prediction, exactly as `-c` with that row's values would give it."""
    from stortune.datasets import with_inactive_level

    encoder = surrogate.estimator.encoder_
    text_params = [name for name in surrogate.params if not encoder.is_numeric(name)]
    frame = _config_table(source, text_params)
    missing = [name for name in surrogate.params if name not in frame.columns]
    if missing:
        raise DatasetError(
            f"{source} lacks column(s) the {surrogate.metric} model needs: {', '.join(missing)}"
        )
    inputs = frame[surrogate.params].copy()
    for name in text_params:
        inputs[name] = with_inactive_level(inputs[name])  # empty cells as the training saw them
    rows = []
    for line, row in enumerate(inputs.to_dict(orient="records"), start=1):
        try:
            rows.append(surrogate.coerce(row))
        except ConfigError as exc:
            raise ConfigError(f"{source}, row {line}: {exc}") from None
    column = f"predicted_{surrogate.metric}"
    result = frame.copy()
    result[column] = surrogate.predict(pd.DataFrame(rows, columns=surrogate.params))
    if out is not None:
        with writing(out):
            out.parent.mkdir(parents=True, exist_ok=True)
            result.to_csv(out, index=False)
    if as_json:
        print_json(
            {
                "metric": surrogate.metric,
                "technique": surrogate.technique,
                "source": str(source),
                "column": column,
                "out": None if out is None else str(out),
                "rows": result.to_dict(orient="records"),
            }
        )
        return
    if out is not None:
        console.print(f"wrote {len(result)} predictions of {surrogate.metric} to {out}")
        return
    # A parameter that is the same in every row goes to the caption: files of candidate
    # configs often vary a few of many knobs, and a column per knob overflows the terminal.
    same = [name for name in surrogate.params if frame[name].nunique(dropna=False) == 1]
    shown = [name for name in result.columns if name not in same]
    table = Table(
        title=f"{surrogate.metric} predicted by {surrogate.technique} for {source.name}",
        caption=f"in every row: {', '.join(f'{n}={_fmt(frame[n].iloc[0])}' for n in same)}"
        if same
        else None,
    )
    for name in shown:
        table.add_column(
            str(name), justify="left" if name in text_params else "right", overflow="fold"
        )
    for record in result[shown].itertuples(index=False):
        table.add_row(*(_fmt(value) for value in record))
    console.print(table)


@model_app.command("evaluate")
def evaluate_command(
    source: str = typer.Option(..., "--from", help=SOURCE_HELP),
    workload: str | None = WorkloadFilterOption,
    raw: bool = RawOption,
    store: str = StoreOption,
    metric: str | None = typer.Option(None, "--metric", "-m", help="metric (default: the first)"),
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
    splits: int = typer.Option(4, help="split search: splits per parameter (k)"),
    explorations: int = typer.Option(5, help="split search: points explored per iteration (n)"),
    iterations: int = typer.Option(10, help="split search: most iterations"),
    folds: int = typer.Option(10, help="cross-validation folds"),
    time_limit: float | None = typer.Option(
        None,
        help=f"split search: seconds per technique, then the best point so far is kept (default"
        f" {DEFAULT_TIME_LIMIT:.0f}); -t auto: seconds per fit (default {AUTO_BUDGET:.0f})",
    ),
    jobs: int = JobsOption,
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
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
    from stortune.models.study import assess_technique, prepare

    if not 0 < test_fraction < 1:
        raise StortuneError("--test-fraction must be between 0 and 1")
    if train_size is not None and plots is not None:
        raise StortuneError("--plots draws the paper's protocol: leave it out with --train-size")
    if repeats < 1:
        raise StortuneError("--repeats must be >= 1")
    name, X, y = _dataset(source, metric, store, workload, raw, as_json)
    names = _techniques(techniques, extra=train_size is not None)
    settings = _settings(
        splits,
        explorations,
        iterations,
        folds,
        DEFAULT_TIME_LIMIT if time_limit is None else time_limit,
        jobs,
    )
    if train_size is not None:
        size = _train_size(train_size, X.shape[1], len(X), source)
        budget = AUTO_BUDGET if time_limit is None else time_limit
        _small_sample(
            names, X, y, size, repeats, seed, optimize, settings, budget, name, source, as_json
        )
        return
    interpolation, extrapolation, cv = prepare(X, y, test_fraction, seed, folds)
    if len(interpolation.test) == 0:
        raise DatasetError(f"{source}: no held-out row lies inside the training ranges")
    results = [
        assess_technique(n, X, y, interpolation, extrapolation, cv, optimize, settings)
        for n in names
    ]
    figures = []
    if plots:
        with writing(plots, "plots in"):
            figures = _plots(plots, results, name)
    if as_json:
        print_json(
            {
                "dataset": str(source),
                "metric": name,
                "rows": len(X),
                "interpolation_rows": len(interpolation.test),
                "extrapolation_scenarios": len(extrapolation),
                "techniques": [r.as_dict() for r in results],
                "plots": [str(p) for p in figures],
            }
        )
        return
    _print_tables(results, name, source, len(X), len(interpolation.test), len(extrapolation))
    for path in figures:
        console.print(f"wrote {path}", highlight=False)


def _train_size(text: str, n_params: int, n_rows: int, source: str) -> int:
    """--train-size in rows: a count (30) or a multiple of the parameters (2N, 1.5N), which is
    how DeepPerf states its sample sizes so that they scale with the configuration space."""
    value = text.strip().lower()
    try:
        multiple = value.endswith("n")
        size = round(float(value[:-1] or 1) * n_params) if multiple else int(value)
    except (ValueError, OverflowError):
        raise StortuneError(
            f"--train-size {text!r}: give a number of rows (30) or a multiple of the"
            f" {n_params} parameters (2N)"
        ) from None
    if not 2 <= size < n_rows:
        shown = text if str(size) == value else f"{text} ({size} rows)"
        raise StortuneError(
            f"--train-size {shown}: {source} has {n_rows} configurations, so train on 2 to"
            f" {n_rows - 1} of them and leave the rest to test"
        )
    return size


def _small_sample_factory(
    name: str, size: int, optimize: bool, settings: SearchSettings, budget: float, seed: int
) -> Callable[[], BaseEstimator]:
    """A fresh unfitted estimator per training set: the technique at its defaults, or its split
    search over the ranges this training size allows (refit on the whole training set)."""
    from stortune.models import technique
    from stortune.models.study import split_search_cv

    if name in EXTRA_ESTIMATORS:
        return lambda: EXTRA_ESTIMATORS[name](budget, seed)
    tech = technique(name)
    space = tech.search_space(size)
    if not optimize or not space:
        return tech.make
    return lambda: split_search_cv(tech.make(), space, settings)


def _small_sample(
    names: list[str],
    X: pd.DataFrame,
    y: np.ndarray,
    size: int,
    repeats: int,
    seed: int,
    optimize: bool,
    settings: SearchSettings,
    budget: float,
    metric: str,
    source: str,
    as_json: bool,
) -> None:
    """Every technique on the same training sets, so that their errors are paired."""
    from stortune.models.smallsample import small_sample_protocol, train_subsets

    subsets = train_subsets(len(X), size, repeats, seed)
    results: list[tuple[str, SmallSampleResult]] = []
    for name in names:
        make = _small_sample_factory(name, size, optimize, settings, budget, seed)
        try:
            result = small_sample_protocol(make, X, y, size, subsets=subsets)
        except NotImplementedError:
            raise StortuneError(f"-t {name} is not available in this version") from None
        results.append((name, result))
    if as_json:
        print_json(
            {
                "dataset": str(source),
                "metric": metric,
                "rows": len(X),
                "parameters": X.shape[1],
                "train_size": size,
                "test_rows": len(X) - size,
                "repeats": repeats,
                "seed": seed,
                "optimized": optimize,
                "techniques": [
                    {
                        "technique": name,
                        **r.as_dict(),
                        "mean_fit_seconds": float(np.mean(r.fit_seconds)),
                    }
                    for name, r in results
                ],
            }
        )
        return
    table = Table(
        title=f"{metric} from {Path(source).name}: trained on {size} of {len(X)} configurations,"
        f" tested on the other {len(X) - size}; {repeats} draws (seed {seed})"
        + (", tuned in each" if optimize else "")
    )
    for column in ("technique", "MRE %", "95% CI %", "fit s"):
        table.add_column(column, justify="left" if column == "technique" else "right")
    for name, r in results:
        low, high = r.ci95
        interval = f"{_pct(low)} to {_pct(high)}" if np.isfinite(low) else "-"
        table.add_row(name, _pct(r.mean), interval, f"{np.mean(r.fit_seconds):.3g}")
    console.print(table)


def _plots(folder: Path, results: list[Assessment], metric: str) -> list[Path]:
    from stortune.models.plots import plot_error_cdf, plot_predicted_vs_measured

    paths: list[Path] = []
    for r in results:
        paths += plot_predicted_vs_measured(
            r.measured, r.predicted, folder / f"predicted-{r.name}", f"{r.name}: {metric}", metric
        )
    paths += plot_error_cdf(
        {r.name: (r.measured, r.predicted) for r in results},
        folder / "error-cdf",
        f"relative error of {metric} predictions (interpolation)",
    )
    return paths


def _print_tables(
    results: list[Assessment], metric: str, source: str, rows: int, held: int, scenarios: int
) -> None:
    table = Table(
        title=f"{metric} from {Path(source).name}: {rows} configurations, {held} held out"
    )
    for column in (
        "technique",
        "R² (fit)",
        "CV RMSE",
        "interp. MRE %",
        "p90 %",
        f"extrap. MRE % ({scenarios})",
    ):
        table.add_column(column, justify="left" if column == "technique" else "right")
    for r in results:
        table.add_row(
            r.name,
            f"{r.r2_fit:.4f}",
            _fmt(r.cv_rmse),
            _pct(r.interpolation_mre),
            _pct(r.interpolation_p90),
            _pct(r.extrapolation_mre),
        )
    console.print(table)
    tuned = [r for r in results if r.optimisation is not None]
    if not tuned:
        return
    table = Table(title="Error reduction by the split search (held-out MRE; t-test on CV folds)")
    for column in (
        "technique",
        "MRE % default",
        "MRE % optimised",
        "reduction %",
        "p-value",
        "evaluations",
        "stopped",
        "hyperparameters",
    ):
        table.add_column(
            column, justify="left" if column in ("technique", "hyperparameters") else "right"
        )
    for r in tuned:
        o = r.optimisation
        params = ", ".join(f"{k}={_fmt(v)}" for k, v in o.params.items()) or "(defaults)"
        table.add_row(
            r.name,
            _pct(o.mre_default),
            _pct(o.mre_optimized),
            _pct(o.reduction),
            f"{o.test.pvalue:.3g}",
            str(o.evaluations),
            o.stop_reason,
            params,
        )
    console.print(table)
