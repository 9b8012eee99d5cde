"""Where an analysis gets its data: a dataset file or a stored campaign, one `Dataset` either way.

Analyses (ranking, models, tuner benchmarks) should not care whether the runs came from
`stortune sweep` a minute ago or from a CSV measured elsewhere. Two rules hold for both:

* **Relative by default.** Absolute throughput drifts up to 2x within an hour on these VMs
  (MEASURING.md). A campaign with reference runs gets, for its objective, a ``<metric>_rel``
  column: each run divided by the reference config measured around it. That column comes first,
  so analyses use it unless the user names another metric or asks for raw values (`raw=True`).
  Naming ``<metric>_rel`` gets any other metric relative to the reference the same way.
* **One workload at a time.** A sweep over several workloads mixes rows whose metric means
  different things; the caller names the workload to analyse when there is more than one.
  Failed and disturbed runs are left out, and so are metrics the chosen workload never
  reports.

Benchmarks name a dataset file and its workload in one string, a *dataset spec*
``PATH[@WORKLOAD]`` (``data/localfs.csv@fileserver``): `load_spec` loads one,
`spec_name` names its results (``localfs@fileserver``), `workload_specs` lists one spec per
workload of a file.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from stortune.datasets import METRIC_PREFIX, RUN_PREFIX, Dataset, from_frame, load_dataset
from stortune.enums import RunStatus
from stortune.errors import DatasetError, StoreError
from stortune.space import fold_one_hot
from stortune.store import Campaign, Store

RELATIVE_SUFFIX = "_rel"
WORKLOAD_COLUMN = f"{RUN_PREFIX}workload"
STATUS_COLUMN = f"{RUN_PREFIX}status"
SPEC_SEPARATOR = "@"


class WorkloadChoiceError(DatasetError):
    """The data holds runs of several workloads and none was chosen."""

    def __init__(self, message: str, workloads: list[str]) -> None:
        super().__init__(message)
        self.workloads = workloads


def campaign_frame(
    store: Store,
    campaign: Campaign,
    include_failed: bool = True,
    relative: list[str] | None = None,
) -> pd.DataFrame:
    """The export table of a campaign (`Store.runs_frame`) plus ``metric.<objective>_rel`` (and
    ``_rel`` of each metric in `relative`) when the campaign measured a reference config (see
    `stortune.measure.reference`)."""
    from stortune.measure.reference import campaign_relative

    frame = store.runs_frame(campaign.name, include_failed=include_failed)
    for metric in dict.fromkeys([campaign.metric, *(relative or [])]):
        values = campaign_relative(store, campaign, metric)
        if values and not frame.empty:
            frame[f"{METRIC_PREFIX}{metric}{RELATIVE_SUFFIX}"] = frame["run.id"].map(values)
    return frame


def load_source(
    source: str | Path,
    store: Store | str | None = None,
    *,
    metrics: list[str] | None = None,
    workload: str | None = None,
    raw: bool = False,
    fold: bool = False,
) -> Dataset:
    """A dataset file (CSV, Parquet, ARFF) when `source` names one, else the campaign of that name
    in `store` (an open store, or its URL). Relative metrics come first unless `raw` (module
    doc). With `fold`, a file's one-hot groups become categoricals, as `stortune import` stores
    them, so a file and its imported campaign name the same parameters. A caller that holds the
    store open passes it, so one process keeps one connection to the file it writes."""
    path = Path(source)
    if path.exists() or store is None or path.suffix.lower() in (".csv", ".parquet", ".arff"):
        dataset = load_dataset(path, metrics=metrics)
        if fold:
            dataset = fold_one_hot(dataset)
        frame = dataset.frame
    else:
        if isinstance(store, Store):
            frame, declared = _stored_frame(store, str(source), metrics)
        else:
            with Store(store, existing=True) as db:
                frame, declared = _stored_frame(db, str(source), metrics)
        if frame.empty:
            raise DatasetError(f"campaign {str(source)!r} has no successful runs")
        if metrics:  # a campaign's metric columns carry the prefix; a caller names the metric
            metrics = [
                f"{METRIC_PREFIX}{m}" if f"{METRIC_PREFIX}{m}" in frame.columns else m
                for m in metrics
            ]
        dataset = from_frame(frame, metrics=metrics, source=f"campaign {source}")
        for metric, direction in declared.items():
            if metric in dataset.metrics:
                dataset = dataset.with_metric_direction(metric, direction)
        frame = dataset.frame
    frame = _only_ok(frame)
    frame = _one_workload(frame, workload, dataset.source)
    # a metric this workload never reports (fsync latencies of one that never syncs) is not one
    # of its metrics: replaying it would fail every run
    order = [m for m in dataset.metrics if frame[m].notna().any()] or list(dataset.metrics)
    if not raw and not metrics:
        order.sort(key=lambda m: not m.endswith(RELATIVE_SUFFIX))  # stable: relative ones first
    return Dataset(
        frame.reset_index(drop=True), dataset.params, order, dataset.directions, dataset.source
    )


def _stored_frame(
    store: Store, name: str, metrics: list[str] | None = None
) -> tuple[pd.DataFrame, dict[str, str]]:
    """The ok runs' table of the campaign `name`, relative metrics included (the objective's,
    and that of each metric named ``<metric>_rel`` in `metrics`), and the directions its
    objective declares."""
    try:
        campaign = store.campaign(name)
    except StoreError as exc:
        raise DatasetError(f"{name}: no such dataset file, and {exc}") from None
    wanted = [m.removesuffix(RELATIVE_SUFFIX) for m in metrics or [] if m.endswith(RELATIVE_SUFFIX)]
    frame = campaign_frame(store, campaign, include_failed=False, relative=wanted)
    return frame, declared_directions(campaign)


def declared_directions(campaign: Campaign) -> dict[str, str]:
    """Each metric's direction as the campaign's objective declares it (its metric, a combined
    objective's parts, its guardrails), for the metric and its relative column. A metric's name
    alone often does not tell (an imported table's ``Performance-`` is stored as
    ``Performance``), and ranking in the wrong direction names the worst values best."""
    from stortune.objective import Objective

    directions = Objective.from_dict(campaign.objective or {}).directions
    return {
        name: str(direction)
        for metric, direction in directions.items()
        for name in (metric, f"{metric}{RELATIVE_SUFFIX}")
    }


def split_spec(spec: str | Path) -> tuple[Path, str | None]:
    """A dataset spec ``PATH[@WORKLOAD]`` as (path, workload or None).

    A spec that names an existing file as a whole is that file, even with an ``@`` in its name.
    """
    text = str(spec)
    path, sep, workload = text.rpartition(SPEC_SEPARATOR)
    if not sep or Path(text).exists() or "/" in workload:
        return Path(text), None
    if not path or not workload:
        raise DatasetError(f"{text!r}: a dataset spec is PATH or PATH{SPEC_SEPARATOR}WORKLOAD")
    return Path(path), workload


def spec_name(spec: str | Path) -> str:
    """The name results of a spec go by: the file's stem, then ``@workload`` if one is named."""
    path, workload = split_spec(spec)
    return path.stem if workload is None else f"{path.stem}{SPEC_SEPARATOR}{workload}"


def load_spec(spec: str | Path) -> Dataset:
    """The dataset a spec names: `load_source` of its file, only the ok runs of its workload,
    relative metrics first. A file with several workloads needs one named in the spec."""
    path, workload = split_spec(spec)
    try:
        return load_source(path, workload=workload)
    except WorkloadChoiceError as exc:
        choices = ", ".join(f"{path}{SPEC_SEPARATOR}{w}" for w in exc.workloads)
        raise DatasetError(
            f"{path} holds runs of several workloads: name one ({choices})"
        ) from None


def workload_specs(path: str | Path) -> list[str]:
    """One spec per workload with ok runs in the file (``PATH@WORKLOAD``, sorted by workload);
    just ``PATH`` for a file without a workload column."""
    frame = _only_ok(load_dataset(path).frame)
    if WORKLOAD_COLUMN not in frame.columns:
        return [str(path)]
    names = sorted(frame[WORKLOAD_COLUMN].dropna().astype(str).unique())
    return [f"{path}{SPEC_SEPARATOR}{name}" for name in names]


def is_relative(metric: str) -> bool:
    return metric.endswith(RELATIVE_SUFFIX)


def describe_metric(metric: str) -> str:
    """How the analysis's metric should be read, for the line the CLI prints above its output."""
    if is_relative(metric):
        base = metric.removesuffix(RELATIVE_SUFFIX)
        return (
            f"metric: {metric} = {base} relative to the reference config measured around each run "
            "(drift-corrected; --raw for absolute values)"
        )
    return f"metric: {metric}"


def _only_ok(frame: pd.DataFrame) -> pd.DataFrame:
    if STATUS_COLUMN in frame.columns:
        frame = frame[frame[STATUS_COLUMN].astype(str) == RunStatus.OK]
    return frame


def _one_workload(frame: pd.DataFrame, workload: str | None, source: str) -> pd.DataFrame:
    if WORKLOAD_COLUMN not in frame.columns:
        if workload:
            raise DatasetError(f"{source}: no workload column to choose {workload!r} from")
        return frame
    names = sorted(frame[WORKLOAD_COLUMN].astype(str).unique())
    if workload is None:
        if len(names) > 1:
            raise WorkloadChoiceError(
                f"{source} holds runs of several workloads ({', '.join(names)}): "
                "choose one with --workload",
                names,
            )
        return frame
    if workload not in names:
        raise DatasetError(f"{source}: no runs of workload {workload!r} (have: {', '.join(names)})")
    return frame[frame[WORKLOAD_COLUMN].astype(str) == workload]
