"""What `tune --rank` ranks on: the stored runs of the job's workloads only (a metric of one
workload is not that of another), relative to the reference runs measured around them when
their campaign has some (the machine drifts), raw values otherwise."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest

from stortune.datasets import from_frame
from stortune.enums import CampaignKind, RunStatus
from stortune.measure.reference import REFERENCE
from stortune.measure.tuning import TuneSettings
from stortune.objective import Objective
from stortune.space import Space, parse_space
from stortune.store import Store
from stortune.targets.base import Target
from stortune.workflows.rank import RankOptions, rank_space, ranked_space, ranking_data
from stortune.workflows.reporting import Silent
from stortune.workflows.tune import TuneJob, _rank

YAML = """\
name: three
parameters:
  a: {type: int, low: 0, high: 9, default: 0}
  b: {type: int, low: 0, high: 9, default: 0}
  c: {type: int, low: 0, high: 9, default: 0}
"""
SPACE = parse_space(YAML)
METRIC = "total.bw_mbs"
OBJECTIVE = Objective(METRIC)


def campaign(store: Store, name: str, space: Space = SPACE) -> int:
    yaml = YAML.replace(SPACE.name, space.name)
    return store.create_campaign(
        name, kind=CampaignKind.SAMPLE, space_name=space.name, space_yaml=yaml,
        target={"kind": "table"}, workload={"workloads": []}, objective=OBJECTIVE.to_dict(),
    ).id  # fmt: skip


def run(store: Store, cid: int, trial: int, workload: str, value: float, at: float, rep: int = 0):
    store.add_run(
        cid, trial, workload=workload, repetition=rep, status=RunStatus.OK,
        metrics={METRIC: value}, started_at=at, ended_at=at + 1.0,
    )  # fmt: skip


def never(n: int) -> str:
    raise AssertionError(f"the store holds enough configs; asked to sample {n} more")


def two_workloads(store: Store, n: int = 40) -> None:
    """One sample measured under two workloads of the same metric name: stream (GB/s, moved
    by b) and fileserver (tens of MB/s, moved by a)."""
    rng = np.random.default_rng(1)
    cid = campaign(store, "shared")
    for seq in range(n):
        config = {p: int(rng.integers(0, 10)) for p in "abc"}
        trial = store.add_trial(cid, seq, config)
        noise = rng.normal(0, 1, 2)
        run(store, cid, trial, "stream", 2000 + 150 * config["b"] + 20 * noise[0], 2.0 * seq)
        run(store, cid, trial, "fileserver", 30 + 4 * config["a"] + 0.5 * noise[1], 2.0 * seq + 1)


def configs(store: Store) -> int:
    frame = store.runs_frame("shared")
    return len(frame[["a", "b", "c"]].drop_duplicates())


def test_each_workload_ranks_on_its_own_runs(store: Store) -> None:
    two_workloads(store)
    options = RankOptions("lasso", 1, budget=10)
    for workload, right in (("fileserver", "a"), ("stream", "b")):
        ranking = rank_space(store, SPACE, options, OBJECTIVE, never, [workload])
        assert ranking.free == [right]
        assert ranking.configs == configs(store) and ranking.workloads == [workload]
        assert ranking.metric == METRIC  # no reference runs: raw values
    # every run mixed, as the store holds them: stream's magnitude decides fileserver's ranking
    frame = store.runs_frame("shared", include_failed=False)
    mixed = from_frame(frame[["a", "b", "c", f"metric.{METRIC}"]], metrics=[f"metric.{METRIC}"])
    assert ranked_space(mixed, SPACE, options, OBJECTIVE).free == ["b"]


def test_a_tuning_of_several_workloads_ranks_on_their_geometric_mean(store: Store) -> None:
    two_workloads(store)
    data, ranked_on = ranking_data(store, SPACE, OBJECTIVE, ["stream", "fileserver"])
    assert ranked_on == OBJECTIVE and len(data.frame) == configs(store)  # one row per config
    frame = store.runs_frame("shared", include_failed=False)
    for row in data.frame.itertuples(index=False):
        runs = frame[(frame["a"] == row.a) & (frame["b"] == row.b) & (frame["c"] == row.c)]
        means = runs.groupby("run.workload")[f"metric.{METRIC}"].mean()
        assert row[-1] == pytest.approx(np.sqrt(means.prod()))
    # a workload without runs: no config has a value for the tuning
    assert ranking_data(store, SPACE, OBJECTIVE, ["stream", "metadata"]) is None


def drifting_sample(store: Store, n: int = 30, every: int = 5) -> None:
    """A sample whose machine triples its speed while b happens to grow with time, measured
    with the default config as a reference every `every` configs: raw values rank b, drift;
    relative to the reference, a (+5% a step) is what matters."""
    rng = np.random.default_rng(2)
    cid = campaign(store, "drifted")
    reference = store.add_trial(cid, -1, SPACE.default_config(), {"source": REFERENCE})

    def drift(at: float) -> float:
        return 1.0 + 2.0 * at / (n * 10.0)

    for seq in range(n):
        at = 10.0 * seq + 5.0
        if seq % every == 0:
            run(store, cid, reference, "fio", 100.0 * drift(at - 5.0), at - 5.0, seq // every)
        config = {"a": int(rng.integers(0, 10)), "b": seq * 10 // n, "c": int(rng.integers(0, 10))}
        trial = store.add_trial(cid, seq, config)
        run(store, cid, trial, "fio", 100.0 * (1 + 0.05 * config["a"]) * drift(at), at)
    end = 10.0 * n
    run(store, cid, reference, "fio", 100.0 * drift(end), end, n // every)


def test_runs_measured_with_reference_runs_rank_relative_to_them(store: Store) -> None:
    drifting_sample(store)
    options = RankOptions("lasso", 1, budget=10)
    ranking = rank_space(store, SPACE, options, OBJECTIVE, never, ["fio"])
    assert ranking.free == ["a"] and ranking.metric == f"{METRIC}_rel"
    assert ranking.space.default_config()["a"] == 9  # the tuning starts at the best: a=9
    data, ranked_on = ranking_data(store, SPACE, OBJECTIVE, ["fio"])
    assert ranked_on.metric == f"{METRIC}_rel"
    rows = data.frame[data.frame["b"] > 0]
    assert rows[ranked_on.metric].to_numpy() == pytest.approx(1 + 0.05 * rows["a"].to_numpy())
    # the same runs raw: the drift ranks b first
    frame = store.runs_frame("drifted", include_failed=False)
    raw = from_frame(frame[["a", "b", "c", f"metric.{METRIC}"]], metrics=[f"metric.{METRIC}"])
    assert ranked_space(raw, SPACE, options, OBJECTIVE).free == ["b"]


def test_raw_runs_do_not_mix_with_relative_ones(store: Store) -> None:
    drifting_sample(store)
    cid = campaign(store, "no-reference")  # same workload, its raw MB/s beside the ratios
    for seq in range(5):
        trial = store.add_trial(cid, seq, {"a": 0, "b": 9, "c": seq})
        run(store, cid, trial, "fio", 900.0, 1000.0 + seq)
    data, ranked_on = ranking_data(store, SPACE, OBJECTIVE, ["fio"])
    assert ranked_on.metric == f"{METRIC}_rel"
    assert len(data.frame) == 30 + 7  # the drifted sample's runs and its reference's
    assert data.frame[ranked_on.metric].max() < 2


def test_tune_rank_ranks_on_the_jobs_workload(store: Store) -> None:
    two_workloads(store)
    fileserver: Any = SimpleNamespace(name="fileserver")  # only its name is read
    job = TuneJob(
        space=SPACE, target=cast(Target, None), workloads=[fileserver], objective=OBJECTIVE,
        settings=TuneSettings(budget=5), rank=RankOptions("lasso", 1, budget=10),
    )  # fmt: skip
    ranking = _rank(store, job, SPACE, "t", Silent())
    assert ranking.free == ["a"] and ranking.to_dict()["workloads"] == ["fileserver"]


def test_other_spaces_and_metrics_are_left_out(store: Store) -> None:
    two_workloads(store)
    other = parse_space(YAML.replace("name: three", "name: other"))
    cid = campaign(store, "elsewhere", other)
    trial = store.add_trial(cid, 0, {"a": 9, "b": 0, "c": 0})
    run(store, cid, trial, "fileserver", 1e6, 0.0)
    data, _ = ranking_data(store, SPACE, OBJECTIVE, ["fileserver"])
    assert len(data.frame) == 40 and data.frame[METRIC].max() < 100  # the runs: 40
    assert ranking_data(store, SPACE, Objective("iops"), ["fileserver"]) is None
    assert isinstance(data.frame, pd.DataFrame)
