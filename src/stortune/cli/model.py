"""`stortune model`: fit performance models on a dataset, predict with them, evaluate them.

The techniques and the protocol follow Noorshams et al. (ICPE'13); see `stortune.models`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import typer
from rich.table import Table

from stortune.cli.common import (
    SOURCE_HELP,
    RawOption,
    StoreOption,
    WorkloadFilterOption,
    console,
    print_json,
)
from stortune.errors import ConfigError, DatasetError, StortuneError

if TYPE_CHECKING:
    from stortune.models.study import Assessment, SearchSettings

# Kept here rather than read from stortune.models: every stortune command imports this module,
# and the models pull in scikit-learn, SciPy and py-earth (seconds); a test checks the list.
TECHNIQUE_NAMES = ("linear", "linear-int", "mars", "mars-int", "cart", "m5", "cubist", "boosting")

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


def _techniques(names: list[str]) -> list[str]:
    from stortune.models import available_techniques, technique

    chosen: list[str] = []
    for name in names or ["all"]:
        for item in available_techniques() if name == "all" else [name]:
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
        None, "--out", "-o", help=f"model file (*.joblib) or directory (default: {DEFAULT_OUT})"
    ),
    splits: int = typer.Option(4, help="split search: splits per parameter (k)"),
    explorations: int = typer.Option(5, help="split search: points explored per iteration (n)"),
    iterations: int = typer.Option(10, help="split search: most iterations"),
    folds: int = typer.Option(10, help="cross-validation folds"),
    time_limit: float = typer.Option(
        600, help="split search: seconds per technique, then the best point so far is kept"
    ),
    jobs: int = JobsOption,
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Fit performance models of a metric and save them (for `model predict` or as a surrogate).

    Example: stortune model fit --from runs.csv --metric iops --technique mars-int --optimize
    """
    from stortune.models import technique
    from stortune.models.crossval import cv_errors, cv_folds
    from stortune.models.study import search
    from stortune.models.surrogate import SurrogateModel

    name, X, y = _dataset(source, metric, store, workload, raw, as_json)
    names = _techniques(techniques)
    paths = _model_paths(out, Path(source).stem, name, names)
    settings = _settings(splits, explorations, iterations, folds, time_limit, jobs)
    rows = []
    for tech_name in names:
        tech = technique(tech_name)
        estimator, evaluations, stopped = tech.make(), 0, ""
        space = tech.search_space(len(X))
        if optimize and space:
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
            optimized=bool(optimize and space),
            cv_rmse=cv_rmse,
            evaluations=evaluations,
        )
        path = model.save(paths[tech_name])
        rows.append(
            {
                "technique": tech_name,
                "path": str(path),
                "params": params,
                "cv_rmse": cv_rmse,
                "evaluations": evaluations,
                "stop_reason": stopped,
                "rows": len(X),
            }
        )
    if as_json:
        print_json({"dataset": str(source), "metric": name, "models": rows})
        return
    table = Table(title=f"{name} models from {Path(source).name} ({len(X)} configurations)")
    for column in ("technique", "hyperparameters", "CV RMSE", "search", "file"):
        table.add_column(column)
    for row in rows:
        params = ", ".join(f"{k}={_fmt(v)}" for k, v in row["params"].items())
        searched = (
            f"{row['evaluations']} points ({row['stop_reason']})" if row["stop_reason"] else "-"
        )
        table.add_row(row["technique"], params or "-", _fmt(row["cv_rmse"]), searched, row["path"])
    console.print(table)


@model_app.command("predict")
def predict_command(
    model: Path = typer.Argument(..., help="model file written by `stortune model fit`"),
    config: list[str] = typer.Option(
        [], "--config", "-c", help="name=value; repeat, or join with commas"
    ),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Predict the metric for one configuration.

    Example: stortune model predict stortune-out/models/runs.iops.mars-int.joblib
    -c scheduler=mq-deadline -c read_ahead_kb=512
    """
    from stortune.models.surrogate import SurrogateModel

    surrogate = SurrogateModel.load(model)
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
        f"predicted {surrogate.metric}: [bold]{prediction:.6g}[/] ({surrogate.technique})",
        highlight=False,
    )


@model_app.command("evaluate")
def evaluate_command(
    source: str = typer.Option(..., "--from", help=SOURCE_HELP),
    workload: str | None = WorkloadFilterOption,
    raw: bool = RawOption,
    store: str = StoreOption,
    metric: str | None = typer.Option(None, "--metric", "-m", help="metric (default: the first)"),
    techniques: list[str] = typer.Option(["all"], "--technique", "-t", help=TECHNIQUE_HELP),
    optimize: bool = typer.Option(
        False, "--optimize", help="also tune each technique and test the gain (paired t-test)"
    ),
    plots: Path | None = typer.Option(None, "--plots", help="write PNG and SVG figures here"),
    test_fraction: float = typer.Option(0.1, help="share of rows held out for interpolation"),
    seed: int = typer.Option(0, help="seed of the held-out rows and the folds"),
    splits: int = typer.Option(4, help="split search: splits per parameter (k)"),
    explorations: int = typer.Option(5, help="split search: points explored per iteration (n)"),
    iterations: int = typer.Option(10, help="split search: most iterations"),
    folds: int = typer.Option(10, help="cross-validation folds"),
    time_limit: float = typer.Option(
        600, help="split search: seconds per technique, then the best point so far is kept"
    ),
    jobs: int = JobsOption,
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Score techniques as the paper does: fit, interpolation and extrapolation error, tuning gain.

    R² of the fit on all rows, mean relative error (MRE) on held-out rows inside the training
    ranges and beyond a cut per parameter; with --optimize, the MRE reduction by the split
    search and a paired t-test over the cross-validation folds.

    Example: stortune model evaluate --from runs.csv --metric iops -t cart -t m5 --optimize
    """
    from stortune.models.study import assess_technique, prepare

    if not 0 < test_fraction < 1:
        raise StortuneError("--test-fraction must be between 0 and 1")
    name, X, y = _dataset(source, metric, store, workload, raw, as_json)
    names = _techniques(techniques)
    settings = _settings(splits, explorations, iterations, folds, time_limit, jobs)
    interpolation, extrapolation, cv = prepare(X, y, test_fraction, seed, folds)
    if len(interpolation.test) == 0:
        raise DatasetError(f"{source}: no held-out row lies inside the training ranges")
    results = [
        assess_technique(n, X, y, interpolation, extrapolation, cv, optimize, settings)
        for n in names
    ]
    figures = _plots(plots, results, name) if plots else []
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
