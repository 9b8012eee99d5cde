"""Performance models of a dataset (`stortune.models`): fit and save them, predict with them,
and score techniques by the protocol of Noorshams et al. (ICPE'13) or DeepPerf's small-sample
one. scikit-learn and the techniques are imported on first use: `stortune model --help` and a
refused option should not wait seconds for them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from stortune.errors import ConfigError, DatasetError, StortuneError
from stortune.outputs import writing

if TYPE_CHECKING:
    from sklearn.base import BaseEstimator

    from stortune.models.smallsample import SmallSampleResult
    from stortune.models.study import Assessment, SearchSettings
    from stortune.models.surrogate import SurrogateModel

DEFAULT_OUT = Path("stortune-out") / "models"
DEFAULT_TIME_LIMIT = 600.0
AUTO_BUDGET = 30.0


def _auto_model(budget: float, seed: int) -> BaseEstimator:
    from stortune.models.auto import AutoModel

    return AutoModel(budget_seconds=budget, random_state=seed)


# Estimators the small-sample protocol and `fit_models` run besides the registered techniques,
# by names no technique has; never part of "all". Each takes its time budget per fit and a seed.
EXTRA_ESTIMATORS: dict[str, Callable[[float, int], BaseEstimator]] = {"auto": _auto_model}


@dataclass
class TrainingData:
    """The rows of a dataset with a value of the metric, repetitions averaged."""

    source: str
    metric: str
    X: pd.DataFrame
    y: np.ndarray
    description: str  # how to read the metric, for the line above the output


def training_data(
    source: str, metric: str | None, store: str, workload: str | None, raw: bool
) -> TrainingData:
    """The metric (default: the first) and the rows where it is known; fewer than 4 rows leave
    nothing to cross-validate."""
    from stortune.sources import describe_metric, load_source

    data = load_source(source, store, workload=workload, raw=raw)
    if metric and metric not in data.metrics and metric in data.frame.columns:
        # a column the conventions took for a knob
        data = load_source(source, store, metrics=[metric], workload=workload)
    description = describe_metric(metric or data.metrics[0])
    data = data.aggregated()
    name = metric or data.metrics[0]
    target = data.y(name)
    known = target.notna().to_numpy()
    if known.sum() < 4:
        raise DatasetError(f"{source}: fewer than 4 rows with a value of {name!r}")
    X = data.X.loc[known].reset_index(drop=True)
    return TrainingData(source, name, X, target.to_numpy(dtype=float)[known], description)


def choose_techniques(names: list[str], extra: bool = False) -> list[str]:
    """The techniques named (all: every available one), each checked to run here; with `extra`,
    EXTRA_ESTIMATORS too."""
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


def search_settings(
    splits: int, explorations: int, iterations: int, folds: int, time_limit: float, jobs: int
) -> SearchSettings:
    """The split search's settings, refused before any fit when they cannot work."""
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


def model_paths(out: Path | None, stem: str, metric: str, names: list[str]) -> dict[str, Path]:
    """Where each technique's model goes: `out` itself when it names one file, else a file per
    technique in `out` (default DEFAULT_OUT), named after the dataset and the metric."""
    if out is not None and out.suffix in (".joblib", ".pkl"):
        if len(names) > 1:
            raise StortuneError(f"--out {out} is a file; give a directory for several techniques")
        return {names[0]: out}
    folder = out or DEFAULT_OUT
    return {name: folder / f"{stem}.{metric}.{name}.joblib" for name in names}


@dataclass
class FittedModel:
    """One saved model: its hyperparameters, its cross-validated error and how it was found."""

    technique: str
    path: str
    params: dict[str, Any]
    cv_rmse: float | None
    cv_mre: float | None
    evaluations: int
    stop_reason: str  # empty when no search ran
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "technique": self.technique,
            "path": self.path,
            "params": self.params,
            "cv_rmse": self.cv_rmse,
            "cv_mre": self.cv_mre,
            "evaluations": self.evaluations,
            "stop_reason": self.stop_reason,
            "rows": self.rows,
        }


@dataclass
class FitResult:
    dataset: str
    metric: str
    rows: int
    models: list[FittedModel] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "metric": self.metric,
            "models": [m.to_dict() for m in self.models],
        }


def fit_models(
    data: TrainingData,
    names: list[str],
    settings: SearchSettings,
    out: Path | None = None,
    optimize: bool = False,
    auto_budget: float = AUTO_BUDGET,
) -> FitResult:
    """Fit each technique on every row and save it as a `SurrogateModel`. Its error is the
    cross-validated RMSE at its defaults, the split search's best with `optimize`, or AutoModel's
    cross-validated MRE; the saved file keeps it so that a surrogate says how far to trust it."""
    from stortune.models import technique
    from stortune.models.crossval import cv_errors, cv_folds
    from stortune.models.study import search
    from stortune.models.surrogate import SurrogateModel

    if auto_budget <= 0:
        raise StortuneError("--budget must be positive")
    X, y = data.X, data.y
    paths = model_paths(out, Path(data.source).stem, data.metric, names)
    result = FitResult(str(data.source), data.metric, len(X))
    for name in names:
        evaluations, stopped, cv_rmse, cv_mre = 0, "", None, None
        if name in EXTRA_ESTIMATORS:
            estimator = EXTRA_ESTIMATORS[name](auto_budget, 0).fit(X, y)
            params = {"chosen": estimator.chosen_, "cv": estimator.cv_}
            cv_mre, evaluations = estimator.cv_mre_, len(estimator.leaderboard_)
            stopped, optimized = f"{estimator.fit_seconds_:.1f} s", True
        else:
            tech = technique(name)
            estimator = tech.make()
            space = tech.search_space(len(X))
            optimized = bool(optimize and space)
            if optimized:
                tuned = search(estimator, space, X, y, settings)
                estimator, evaluations = tuned.best_estimator_, tuned.search_.n_evaluations
                cv_rmse, stopped = tuned.best_score_, tuned.search_.stop_reason
            else:
                folds = cv_folds(len(X), settings.cv)
                cv_rmse = float(np.mean(cv_errors(estimator, X, y, folds)))
                estimator.fit(X, y)
            params = {k: v for k, v in estimator.get_params().items() if k not in tech.fixed}
        model = SurrogateModel.from_fit(
            estimator,
            X,
            data.metric,
            name,
            source=str(data.source),
            params=params,
            optimized=optimized,
            cv_rmse=cv_rmse,
            cv_mre=cv_mre,
            evaluations=evaluations,
        )
        with writing(paths[name], "model"):
            path = model.save(paths[name])
        result.models.append(
            FittedModel(name, str(path), params, cv_rmse, cv_mre, evaluations, stopped, len(X))
        )
    return result


def load_model(path: str | Path) -> SurrogateModel:
    from stortune.models.surrogate import SurrogateModel

    return SurrogateModel.load(path)


def parse_config(items: list[str]) -> dict[str, str]:
    """name=value pairs, each item one or several joined with commas (later ones win)."""
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


@dataclass
class Prediction:
    metric: str
    technique: str
    config: dict[str, Any]  # as the model read it
    prediction: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "technique": self.technique,
            "config": self.config,
            "prediction": self.prediction,
        }


def predict(surrogate: SurrogateModel, config: dict[str, str]) -> Prediction:
    """The metric for one configuration; every parameter the model uses must be given."""
    if not config:
        raise StortuneError(
            f"say what to predict: -c name=value for {', '.join(surrogate.params)}, or --from FILE"
        )
    values = surrogate.coerce(config)
    prediction = surrogate.predict_config(values)
    return Prediction(surrogate.metric, surrogate.technique, values, prediction)


@dataclass
class FilePrediction:
    """A file's rows as written with the prediction of each in one more column."""

    metric: str
    technique: str
    source: Path
    column: str
    out: Path | None
    frame: pd.DataFrame
    params: list[str]  # the model's parameters
    text_params: list[str]  # those read as text

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "technique": self.technique,
            "source": str(self.source),
            "column": self.column,
            "out": None if self.out is None else str(self.out),
            "rows": self.frame.to_dict(orient="records"),
        }


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


def predict_file(surrogate: SurrogateModel, source: Path, out: Path | None) -> FilePrediction:
    """Each row's prediction, exactly as `predict` with that row's values would give it;
    written to `out` as CSV when given. Columns the model does not use are kept, not read."""
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
    return FilePrediction(
        surrogate.metric,
        surrogate.technique,
        source,
        column,
        out,
        result,
        list(surrogate.params),
        text_params,
    )


@dataclass
class SystemsPrediction:
    """Every system config under one workload, ranked by its prediction."""

    metric: str
    technique: str
    workload: dict[str, str]
    ascending: bool
    ranked: pd.DataFrame

    @property
    def column(self) -> str:
        return f"predicted_{self.metric}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "technique": self.technique,
            "workload": self.workload,
            "ranking": "lowest first" if self.ascending else "highest first",
            "configs": self.ranked.to_dict(orient="records"),
        }


def predict_systems(
    surrogate: SurrogateModel, workload: dict[str, str], space_name: str | None, ascending: bool
) -> SystemsPrediction:
    """Which system config for this workload: the levels come from the space named, or from
    the training data."""
    from stortune.space import load_space

    space = load_space(space_name) if space_name else None
    ranked = surrogate.predict_systems(workload, space, ascending)
    return SystemsPrediction(surrogate.metric, surrogate.technique, workload, ascending, ranked)


@dataclass
class Evaluation:
    """The paper's protocol: fit, interpolation and extrapolation error of each technique."""

    dataset: str
    metric: str
    rows: int
    interpolation_rows: int
    extrapolation_scenarios: int
    results: list[Assessment]
    plots: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "metric": self.metric,
            "rows": self.rows,
            "interpolation_rows": self.interpolation_rows,
            "extrapolation_scenarios": self.extrapolation_scenarios,
            "techniques": [r.as_dict() for r in self.results],
            "plots": [str(p) for p in self.plots],
        }


def evaluate(
    data: TrainingData,
    names: list[str],
    settings: SearchSettings,
    test_fraction: float = 0.1,
    seed: int = 0,
    optimize: bool = False,
    plots: Path | None = None,
) -> Evaluation:
    """Every technique on the same held-out rows and folds, so that their errors compare; the
    figures go to `plots` when given."""
    from stortune.models.study import assess_technique, prepare

    X, y = data.X, data.y
    interpolation, extrapolation, cv = prepare(X, y, test_fraction, seed, settings.cv)
    if len(interpolation.test) == 0:
        raise DatasetError(f"{data.source}: no held-out row lies inside the training ranges")
    results = [
        assess_technique(n, X, y, interpolation, extrapolation, cv, optimize, settings)
        for n in names
    ]
    figures: list[Path] = []
    if plots:
        with writing(plots, "plots in"):
            figures = _plots(plots, results, data.metric)
    return Evaluation(
        str(data.source),
        data.metric,
        len(X),
        len(interpolation.test),
        len(extrapolation),
        results,
        figures,
    )


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


def train_size(text: str, n_params: int, n_rows: int, source: str) -> int:
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


@dataclass
class SmallSampleStudy:
    """The small-sample protocol's outcome: each technique's MRE over the same draws."""

    dataset: str
    metric: str
    rows: int
    parameters: int
    train_size: int
    repeats: int
    seed: int
    optimized: bool
    results: list[tuple[str, SmallSampleResult]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "metric": self.metric,
            "rows": self.rows,
            "parameters": self.parameters,
            "train_size": self.train_size,
            "test_rows": self.rows - self.train_size,
            "repeats": self.repeats,
            "seed": self.seed,
            "optimized": self.optimized,
            "techniques": [
                {
                    "technique": name,
                    **r.as_dict(),
                    "mean_fit_seconds": float(np.mean(r.fit_seconds)),
                }
                for name, r in self.results
            ],
        }


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


def small_sample(
    data: TrainingData,
    names: list[str],
    size: int,
    repeats: int,
    settings: SearchSettings,
    seed: int = 0,
    optimize: bool = False,
    budget: float = AUTO_BUDGET,
) -> SmallSampleStudy:
    """DeepPerf's small-sample protocol (ICSE'19) for datasets of tens of runs: every technique
    on the same `repeats` random training sets of `size` rows, so that their errors are paired,
    each scored on all the other rows. `budget` is AutoModel's time per fit."""
    from stortune.models.smallsample import small_sample_protocol, train_subsets

    X, y = data.X, data.y
    subsets = train_subsets(len(X), size, repeats, seed)
    results: list[tuple[str, SmallSampleResult]] = []
    for name in names:
        make = _small_sample_factory(name, size, optimize, settings, budget, seed)
        try:
            result = small_sample_protocol(make, X, y, size, subsets=subsets)
        except NotImplementedError:
            raise StortuneError(f"-t {name} is not available in this version") from None
        results.append((name, result))
    return SmallSampleStudy(
        str(data.source), data.metric, len(X), X.shape[1], size, repeats, seed, optimize, results
    )
