"""The project's own dataset, data/localfs.csv (data/README.md): what the analyses find on
it, and the dataset specs (``PATH@WORKLOAD``) the benchmarks name it by.

The assertions are the robust facts of the data, checked on a partial export (120 of the LHS
configs, one repetition), on random 75% subsets of it, and on the full 216 configs:

* fileserver (2/3 of the I/O is reads of 128 KiB files, the set twice the page-cache cap):
  read-ahead off costs 2.8x (read_ahead_kb alone explains about half the variance between
  configs), the file system 1.8x (btrfs slowest); dirty_ratio and atime (1.3x) rank low.
* mailserver (16 KiB writes, each fsynced): the file system is almost everything (btrfs about
  14x slower than ext4/xfs, 85-90% of the variance); read-ahead and dirty_ratio rank low.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.model_selection import KFold, cross_val_predict

from stortune.datasets import Dataset
from stortune.errors import DatasetError
from stortune.importance import rank_dataset
from stortune.models import make_model
from stortune.models.metrics import r2
from stortune.sources import load_source, load_spec, spec_name, split_spec, workload_specs
from stortune.space import space_from_dataset
from stortune.targets.table import TableTarget
from stortune.tuners import make_tuner

torch.set_num_threads(1)

DATA = Path(__file__).resolve().parents[1] / "data" / "localfs.csv"
RELATIVE = "total.bw_mbs_rel"
PARAMS = ["fs", "journal_mode", "atime", "scheduler", "read_ahead_kb", "dirty_ratio"]


@pytest.fixture(scope="module")
def fileserver() -> Dataset:
    return load_spec(f"{DATA}@fileserver")


@pytest.fixture(scope="module")
def mailserver() -> Dataset:
    return load_spec(f"{DATA}@mailserver")


def rankings(data: Dataset) -> dict[str, list[str]]:
    """Every parameter in order, by Carver (no stop rule; the ones that never beat chance
    last) and by Lasso (entry order)."""
    carver = rank_dataset(data, "carver", stop="none")
    lasso = rank_dataset(data, "lasso")
    assert carver.metric == lasso.metric == RELATIVE  # drift-corrected values, not raw MB/s
    rest = [p for p in carver.params if p not in carver.selected]
    return {"carver": carver.selected + rest, "lasso": lasso.ranking}


# --- dataset specs -------------------------------------------------------------------------


def test_a_spec_names_the_file_and_the_workload() -> None:
    assert split_spec("data/localfs.csv@fileserver") == (
        Path("data/localfs.csv"),
        "fileserver",
    )
    assert split_spec("data/localfs.csv") == (Path("data/localfs.csv"), None)
    assert spec_name(f"{DATA}@mailserver") == "localfs@mailserver"
    assert spec_name("../shared/datasets/moot-promisetune/HSQLDB.csv") == "HSQLDB"
    for bad in ("data/localfs.csv@", "@fileserver"):
        with pytest.raises(DatasetError, match="PATH@WORKLOAD"):
            split_spec(bad)


def test_an_existing_file_with_an_at_sign_is_a_path(tmp_path: Path) -> None:
    path = tmp_path / "runs@night.csv"
    pd.DataFrame({"x": [1, 2], "metric.mbs": [1.0, 2.0]}).to_csv(path, index=False)
    assert split_spec(path) == (path, None)
    assert spec_name(path) == "runs@night"
    assert len(load_spec(str(path)).frame) == 2


def test_the_own_dataset_has_one_spec_per_workload() -> None:
    assert workload_specs(DATA) == [f"{DATA}@fileserver", f"{DATA}@mailserver"]


def test_load_spec_keeps_the_ok_runs_of_its_workload_relative_metric_first(
    fileserver: Dataset,
) -> None:
    assert fileserver.params == PARAMS
    assert fileserver.metrics[0] == RELATIVE
    assert set(fileserver.frame["run.workload"]) == {"fileserver"}
    assert set(fileserver.frame["run.status"]) == {"ok"}
    same = load_source(DATA, workload="fileserver")
    assert len(fileserver.frame) == len(same.frame) > 100


def test_load_spec_says_what_is_wrong() -> None:
    with pytest.raises(
        DatasetError, match="no runs of workload 'webserver'.*fileserver, mailserver"
    ):
        load_spec(f"{DATA}@webserver")
    with pytest.raises(DatasetError, match="several workloads: name one .*@fileserver"):
        load_spec(str(DATA))
    with pytest.raises(DatasetError, match="no such file"):
        load_spec(f"{DATA.with_name('missing.csv')}@fileserver")


# --- what the analyses find ----------------------------------------------------------------


def test_fileserver_is_shaped_by_read_ahead_then_the_file_system(fileserver: Dataset) -> None:
    ranked = rankings(fileserver)
    for method, order in ranked.items():
        assert sorted(order) == sorted(PARAMS), method
        assert order[0] == "read_ahead_kb", (method, order)
        assert "dirty_ratio" not in order[:3], (method, order)  # within noise
        assert "atime" not in order[:2], (method, order)
    assert set(ranked["carver"][:2]) == {"read_ahead_kb", "fs"}, ranked["carver"]
    # Lasso's entry order is noisier: journal_mode partly aliases fs (its n/a is xfs or btrfs).
    assert "fs" in ranked["lasso"][:3], ranked["lasso"]
    carver = rank_dataset(fileserver, "carver", stop="none")
    assert carver.steps[0].scores["read_ahead_kb"] > 0.3 * carver.variance


def test_mailserver_is_shaped_by_the_file_system(mailserver: Dataset) -> None:
    for method, order in rankings(mailserver).items():
        assert order[0] == "fs", (method, order)
        assert not {"read_ahead_kb", "dirty_ratio"} & set(order[:2]), (method, order)
    carver = rank_dataset(mailserver, "carver", stop="none")
    assert carver.steps[0].scores["fs"] > 0.6 * carver.variance


def test_a_tree_predicts_held_out_configs(fileserver: Dataset, mailserver: Dataset) -> None:
    """Out-of-fold R^2 of CART (0.92-0.94 on the partial data); a straight line in read_ahead_kb
    cannot follow fileserver's step at 0 (R^2 under 0.2), a tree can."""

    def cv_r2(data: Dataset, model: str) -> float:
        frame = data.aggregated().frame.dropna(subset=[RELATIVE])
        X, y = frame[data.params], frame[RELATIVE].to_numpy()
        folds = KFold(5, shuffle=True, random_state=0)
        return r2(y, cross_val_predict(make_model(model), X, y, cv=folds))

    cart = cv_r2(fileserver, "cart")
    assert cart > 0.7
    assert cart > cv_r2(fileserver, "linear") + 0.3
    assert cv_r2(mailserver, "cart") > 0.7


def objective_table(data: Dataset) -> Dataset:
    """A workload's aggregated table with the objective only, as bench/tuners.py replays it."""
    agg = data.aggregated()
    frame = agg.frame.dropna(subset=[RELATIVE]).reset_index(drop=True)
    return Dataset(frame, agg.params, [RELATIVE], agg.directions, agg.source)


def test_bo_finds_a_near_optimal_fileserver_config_in_30_runs(fileserver: Dataset) -> None:
    """As bench/tuners.py drives a campaign: the aggregated dataset replayed, nearest=True
    (216 of the 360 valid configs, not the full grid), the objective only."""
    data = objective_table(fileserver)
    frame, space = data.frame, space_from_dataset(data)
    target = TableTarget.of(data, space, nearest=True)
    assert len(target.configs()) < space.raw_grid_size(levels=10**9)  # why nearest is needed
    optimum = target.optimum(RELATIVE, "max")
    tuner = make_tuner("bo", space, "max", 0, 30)
    values = []
    for _ in range(30):
        config = tuner.ask()
        target.apply(config)
        value = target.run().metrics[RELATIVE]
        tuner.observe_state(target.state())
        tuner.tell(config, value)
        values.append(value)
    assert max(values) >= 0.9 * optimum
    # It exploits what it learnt: its last proposals beat the average config.
    assert np.mean(values[-10:]) > frame[RELATIVE].mean()


@pytest.mark.parametrize("workload", ["fileserver", "mailserver"])
def test_the_default_tuner_reaches_the_stated_quality_at_30_of_100_evaluations(
    workload: str, request: pytest.FixtureRequest
) -> None:
    """bench/tuners.py's protocol on the shipped table: the table's 216 rows as the pool, a
    100-evaluation campaign looked at after 30, ten seeds. The median best is at least 0.96 of
    the optimum (fileserver's fourth-best config is 0.9632; random search's 20-seed median at 30
    is 0.945). A GP fit's floating-point results differ between machines, so seeds do not
    carry over: the first five seeds' median was 1.0 on the machine that ran the bench and
    0.9632 on another; bench/results/tuners.json has the 20-seed medians beside the peers'."""
    from stortune.tuners import DEFAULT_TUNER

    data = objective_table(request.getfixturevalue(workload))
    space, params = space_from_dataset(data), data.params
    table = {tuple(row[params]): row[RELATIVE] for _, row in data.frame.iterrows()}
    rows = [dict(zip(params, key, strict=True)) for key in table]
    optimum = max(table.values())
    torch.set_num_threads(1)
    bests = []
    for seed in range(10):
        tuner = make_tuner(DEFAULT_TUNER, space, "max", seed, budget=100, pool=rows)
        values = []
        for _ in range(30):
            config = tuner.ask()
            values.append(table[tuple(config[p] for p in params)])
            tuner.tell(config, values[-1])
        bests.append(max(values) / optimum)
    assert np.median(bests) >= 0.96
