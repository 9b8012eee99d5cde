"""Tuning over a measured table's rows (pool mode) and replaying it with seeded noise."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from stortune.cli import tune
from stortune.errors import StortuneError, TargetError
from stortune.sampling import config_key
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.table import TableSettings, TableTarget
from stortune.tuners import make_tuner
from stortune.tuners.pool import Pool

torch.set_num_threads(1)

SPACE_TEXT = """
name: grid
parameters:
  a: {type: int, low: 0, high: 9, default: 0}
  b: {type: int, low: 0, high: 9, default: 0}
  c: {type: categorical, values: [x, y, z], default: x}
"""
SPACE = parse_space(SPACE_TEXT)


def throughput(a: int, b: int, c: str) -> float:
    return 100.0 + 10 * a - (b - 6) ** 2 + (25 if c == "z" else 0)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A measured table that is not a full grid: 60 of the 300 configs, two runs each."""
    grid = list(itertools.product(range(10), range(10), "xyz"))
    rng = np.random.default_rng(5)
    rows = ["a,b,c,thr"]
    for i in rng.choice(len(grid), 60, replace=False):
        a, b, c = grid[i]
        for rep in range(2):
            rows.append(f"{a},{b},{c},{throughput(a, b, c) + rep}")
    path = tmp_path / "pool.csv"
    path.write_text("\n".join(rows) + "\n")
    (tmp_path / "grid.yaml").write_text(SPACE_TEXT)
    return path


def target(path: Path, **settings: object) -> TableTarget:
    return TableTarget(SPACE, TableSettings(dataset=str(path), **settings))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["bo", "flash", "random", "lhs", "bestconfig", "ddpg", "tpe"])
def test_every_tuner_proposes_only_unmeasured_pool_rows(table: Path, name: str) -> None:
    replay = target(table, pool=True)
    rows = replay.tuning_pool()
    assert rows is not None and len(rows) == 60
    tuner = make_tuner(name, SPACE, "max", seed=2, budget=20, pool=rows)
    keys = {config_key(r) for r in rows}
    asked: list[str] = []
    for _ in range(20):
        config = tuner.ask()
        replay.apply(config)  # a config outside the pool would raise here
        asked.append(config_key(config))
        tuner.tell(config, replay.run().metrics["thr"])
    # bo and DDPG re-measure one leader, see the same value (this table is exact) and repeat
    # no more
    repeats = 1 if name in ("bo", "ddpg") else 0
    assert set(asked) <= keys and len(set(asked)) == 20 - repeats


def test_pool_mode_refuses_a_config_outside_the_pool_in_one_line(table: Path) -> None:
    replay = target(table, pool=True)
    inside = {config_key(c) for c in replay.configs()}
    outside = next(
        {"a": a, "b": b, "c": c}
        for a, b, c in itertools.product(range(10), range(10), "xyz")
        if config_key({"a": a, "b": b, "c": c}) not in inside
    )
    with pytest.raises(TargetError, match="not in the pool of pool.csv") as error:
        replay.apply(outside)
    assert "\n" not in str(error.value)
    with pytest.raises(TargetError, match="exclude each other"):
        target(table, pool=True, nearest=True)


def test_noisy_replay_is_reproducible_by_seed_and_unbiased(table: Path) -> None:
    config = target(table).configs()[0]

    def runs(seed: int, n: int = 400) -> list[float]:
        replay = target(table, noise=0.07, noise_seed=seed)
        replay.apply(config)
        return [replay.run(repetition=0).metrics["thr"] for _ in range(n)]

    first, again, other = runs(1), runs(1), runs(2)
    assert first == again and first != other
    assert len(set(first)) == len(first)  # each run again is a fresh draw
    true = target(table).true_value(config)
    assert true == pytest.approx(throughput(**config) + 0.5)
    assert np.mean(first) == pytest.approx(true, rel=0.02)
    assert np.std(first) / true == pytest.approx(0.07, rel=0.2)
    exact = target(table)
    exact.apply(config)
    assert exact.run(repetition=0).metrics["thr"] == throughput(**config)


def test_noise_outside_zero_to_one_is_refused(table: Path) -> None:
    with pytest.raises(TargetError, match="relative SD from 0 to 1"):
        target(table, noise=1.5)


def test_recommend_takes_the_best_mean_not_the_best_single_run() -> None:
    tuner = make_tuner("random", SPACE, "max", seed=0)
    lucky, steady = {"a": 1, "b": 1, "c": "x"}, {"a": 2, "b": 2, "c": "y"}
    for config, value in [(lucky, 10.0), (lucky, 2.0), (steady, 7.0), (steady, 7.5)]:
        tuner.tell(config, value)
    assert tuner.best.config == lucky
    assert tuner.recommend() == steady


def test_a_finished_pool_says_so() -> None:
    pool = Pool(SPACE, [{"a": 1, "b": 1, "c": "x"}])
    pool.close({"a": 1, "b": 1, "c": "x"})
    with pytest.raises(StortuneError, match="every one of the 1 configs of the pool"):
        pool.open_rows()


def test_tune_in_pool_mode_measures_only_the_tables_rows(table: Path) -> None:
    store = str(table.parent / "runs.db")
    app = typer.Typer()
    tune.register(app)
    result = CliRunner().invoke(app, [
        "tune", "--space", str(table.parent / "grid.yaml"), "--dataset", str(table), "--pool",
        "--noise", "0.05", "--noise-seed", "3", "-o", "thr:max", "--tuner", "tpe",
        "--budget", "15", "-r", "1", "--name", "p", "--store", store, "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert json.loads(result.output)["outcome"]["evaluations"] == 15
    inside = {config_key(c) for c in target(table).configs()}
    with Store(store) as db:
        trials = db.trials(db.campaign("p").id)
    assert len(trials) == 15 and all(config_key(t.config) in inside for t in trials)


def test_a_zero_run_gives_no_ratio_and_no_verdict() -> None:
    from stortune.measure.verify import Judgement, VerifyRules, gain, judge, paired_gain

    measured = gain("latency", "min", [0.015, 0.014, 0.016], [0.0, 0.0, 0.0])
    assert not measured.known and "unknown" in measured.text()
    paired = paired_gain("latency", "min", {0: 0.015, 1: 0.014}, {0: 0.0, 1: 0.0})
    assert not paired.known
    rules = VerifyRules.of(2)
    assert judge(paired, (), rules, final=False) == (None, "a run measured 0 or less: no ratio")
    assert judge(paired, (), rules, final=True)[0] is Judgement.UNDECIDED


def test_bo_models_log_values_when_none_is_negative() -> None:
    from stortune.tuners.base import Observation
    from stortune.tuners.bo import model_scores

    history = [Observation({}, 10.0), Observation({}, 1000.0), Observation({}, None)]
    # minimised: larger is better after the sign; the failed run counts as the worst seen
    assert model_scores(history, "min") == pytest.approx(
        [-np.log(10), -np.log(1000), -np.log(1000)]
    )
    # a minimised metric that reaches 0: the zeros are logged at half the smallest positive
    with_zero = [Observation({}, 0.0), Observation({}, 2e-6), Observation({}, 0.5)]
    assert model_scores(with_zero, "min") == pytest.approx(-np.log([1e-6, 2e-6, 0.5]))
    with_negative = [Observation({}, -1.0), Observation({}, 5.0)]
    assert model_scores(with_negative, "max") == pytest.approx([-1.0, 5.0])


@pytest.mark.parametrize("with_default", [False, True])
def test_a_budget_above_the_pool_is_cut_to_it_and_the_campaign_finishes(
    tmp_path: Path, with_default: bool
) -> None:
    rows = [(1, 2, "y"), (3, 4, "z"), (5, 6, "x"), (7, 8, "y"), (9, 1, "z")]
    rows += [(0, 0, "x")] if with_default else [(2, 2, "x")]  # the default config is (0, 0, x)
    table = tmp_path / "small.csv"
    lines = [f"{a},{b},{c},{throughput(a, b, c)}\n" for a, b, c in rows]
    table.write_text("a,b,c,thr\n" + "".join(lines))
    (tmp_path / "grid.yaml").write_text(SPACE_TEXT)
    store = str(tmp_path / "runs.db")
    app = typer.Typer()
    tune.register(app)
    result = CliRunner().invoke(app, [
        "tune", "--space", str(tmp_path / "grid.yaml"), "--dataset", str(table), "--pool",
        "-o", "thr:max", "--tuner", "random", "--budget", "20", "-r", "1", "--name", "p",
        "--store", store, "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output + repr(result.exception)
    outcome = json.loads(result.output)["outcome"]
    # the default is measured first (racing's baseline); outside the pool it is one more
    most = 6 if with_default else 7
    assert outcome["evaluations"] == most and outcome["stopped_by"] == "budget"
    assert [n for n in outcome["notes"] if "pool" in n] == [
        f"note: the budget is cut to {most} evaluations: the pool holds 6 configs"
        + ("" if with_default else ", and the default config, outside it, is measured first")
    ]
    with Store(store) as db:
        campaign = db.campaign("p")
        measured = {config_key(t.config) for t in db.trials(campaign.id)}
        assert campaign.status == "finished" and campaign.settings["budget"] == most
    resumed = CliRunner().invoke(app, [
        "tune", "--resume", "p", "--budget", "30", "--store", store, "--json"
    ])  # fmt: skip
    assert resumed.exit_code == 0, resumed.output + repr(resumed.exception)
    assert json.loads(resumed.output)["outcome"]["evaluations"] == most  # nothing left to measure
    assert {config_key(dict(zip("abc", r, strict=True))) for r in rows} <= measured


def test_a_table_read_again_reuses_its_index_until_the_file_changes(table: Path) -> None:
    """A resumed campaign rebuilds its table target: an unchanged file's index (every row
    validated and encoded) is reused, and a file rewritten since is indexed afresh."""
    first = target(table, pool=True)
    config = first.configs()[0]
    before = first.true_value(config)
    assert target(table, pool=True)._rows is first._rows
    head, *rows = table.read_text().splitlines()
    values = [r.rsplit(",", 1)[1] for r in rows][::-1]  # the same bytes, in another order
    stat = table.stat()
    table.write_text(
        "\n".join(
            [head, *(r.rsplit(",", 1)[0] + "," + v for r, v in zip(rows, values, strict=True))]
        )
        + "\n"
    )
    os.utime(table, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # rewritten within a clock tick
    assert table.stat().st_size == stat.st_size
    again = target(table, pool=True)
    assert again._rows is not first._rows
    assert again.true_value(config) != pytest.approx(before)


def test_bo_starts_where_the_tables_rows_are_not_at_its_sparse_edges() -> None:
    """A table whose rows crowd at low `a` (90 of 97 below 3): the design's points, moved
    through the rows' quantiles, land in that crowd about as often as the rows do (97% of the
    design rows over five seeds). Moved straight to the nearest row, an evenly spread design
    took the seven sparse rows at high `a` for 29% of its points."""
    rng = np.random.default_rng(0)
    crowd = [{"a": int(a), "b": int(b), "c": c} for a, b, c in itertools.product(
        range(3), range(10), "xyz")]  # fmt: skip
    sparse = [{"a": a, "b": int(rng.integers(10)), "c": "x"} for a in range(3, 10)]
    pool = Pool(SPACE, crowd + sparse)
    crowd_top = max(SPACE.encode(c)[0] for c in crowd)
    unit = np.linspace(0.05, 0.95, 10)[:, None].repeat(len(SPACE), axis=1)
    assert np.mean(pool.quantile_points(unit)[:, 0] <= crowd_top) >= 0.9
    shares = []
    for seed in range(5):
        tuner = make_tuner("bo", SPACE, "max", seed=seed, budget=40, pool=crowd + sparse)
        design = []
        for _ in range(tuner.n_init):  # type: ignore[attr-defined]
            design.append(tuner.ask())
            tuner.tell(design[-1], float(len(design)))
        shares += [config["a"] < 3 for config in design[1:]]  # after the default's row
    assert np.mean(shares) >= 0.9


PLATFORM_TEXT = """
name: platforms
parameters:
  android: {type: ordinal, values: [0, 1], default: 1}
  ios: {type: ordinal, values: [0, 1], default: 0}
  web: {type: ordinal, values: [0, 1], default: 0}
  mipmap: {type: ordinal, values: [0, 1], default: 0}
  threads: {type: int, low: 1, high: 90, default: 10}
"""


def platform_rows() -> list[dict]:
    """A platform as three one-hot columns (android on half the rows, web on a sixth) and a
    column that varies only on android rows: the shape of a table that lists, per row, the
    one platform it built for."""
    rows = []
    for platform, count in (("android", 12), ("ios", 8), ("web", 4)):
        for i in range(count):
            mipmap = i % 2 if platform == "android" else 0
            row = {"android": 0, "ios": 0, "web": 0, "mipmap": mipmap, "threads": 1 + 7 * i}
            row[platform] = 1
            rows.append(row)
    return rows


def test_a_uniform_point_draws_a_uniform_row_through_the_conditional_quantiles() -> None:
    """Each of the 24 rows is drawn about 1/24 of the time by uniform points (200 of 4,800
    each, within 40%). Moved to their nearest row, the same points favour a few rows that lie
    near many of them (one row took 764, another 57)."""
    space = parse_space(PLATFORM_TEXT)
    rows = platform_rows()
    pool = Pool(space, rows)
    rng = np.random.default_rng(0)
    drawn = [config_key(pool.open_row_at(u)) for u in rng.random((4800, len(space)))]
    counts = np.array([drawn.count(config_key(r)) for r in rows])
    assert counts.min() >= 0.6 * 200 and counts.max() <= 1.4 * 200
    nearest = [config_key(pool.nearest_open_to(u)) for u in rng.random((4800, len(space)))]
    hubs = np.array([nearest.count(config_key(r)) for r in rows])
    assert hubs.max() > 2.5 * 200 and hubs.min() < 0.5 * 200


def test_lhs_on_a_pool_draws_every_row_about_as_often() -> None:
    """LHS's 12-row designs on the 24-row table over 40 seeds: only open rows, none twice, and
    every row in 12-28 of the designs (20 is even; 16-26 measured). Its points moved to the
    nearest open row instead put one row in 35 designs and another in 3."""
    space = parse_space(PLATFORM_TEXT)
    rows = platform_rows()
    designs = {config_key(r): 0 for r in rows}
    for seed in range(40):
        tuner = make_tuner("lhs", space, "max", seed=seed, budget=12, pool=rows)
        asked = []
        for _ in range(12):
            asked.append(tuner.ask())
            tuner.tell(asked[-1], 1.0)
        assert all(config in rows for config in asked)
        assert len({config_key(c) for c in asked}) == 12
        for config in asked:
            designs[config_key(config)] += 1
    assert min(designs.values()) >= 12 and max(designs.values()) <= 28
