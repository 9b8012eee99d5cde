"""SPA's workload x system space: workload parameters as dimensions, composed spaces, the `spa`
workload bound per config by the runner, the scenario designs, and predicting every system
config for one workload."""

from __future__ import annotations

import itertools
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fixtures.localfs import guarded_state_dir, needs_fio, needs_root
from typer.testing import CliRunner

from stortune.cli import app
from stortune.errors import ConfigError, SpaceError
from stortune.models import make_model
from stortune.models.spa_scenarios import (
    consolidation_configs,
    extrapolation_configs,
    interpolation_configs,
    wide_space,
)
from stortune.models.surrogate import SurrogateModel
from stortune.space import load_space, parse_space
from stortune.store import Store
from stortune.targets.localfs import LocalFsTarget
from stortune.workloads import FioWorkload, make_workload, workload_named
from stortune.workloads.fio import fio_parse
from stortune.workloads.spa import SpaWorkload

runner = CliRunner()


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    yield from guarded_state_dir(tmp_path)


# ---- the spaces ----------------------------------------------------------------------------
def test_the_spa_space_is_workload_x_system_and_its_factorial_has_600_configs() -> None:
    space = load_space("spa")
    workload = [p.name for p in space.parameters if p.describes_workload]
    assert workload == load_space("spa-workload").names
    assert {"fs", "scheduler", "read_ahead_kb"} <= set(space.names) - set(workload)
    assert space.grid_size() == 600
    grid = list(space.grid())
    assert sorted({c["request_size"] for c in grid}) == [4096, 8192, 16384, 24576, 32768]
    assert sorted({c["file_set_size"] for c in grid}) == [128, 512, 2048]
    assert {c["fs"] for c in grid} == {"ext4"}
    assert space.workload_values(space.default_config()) == {
        "request_size": 16384, "read_share": 50, "access": "random", "file_set_size": 512,
        "threads": 12, "instances": 1, "direct": False,
    }  # fmt: skip


def test_a_composed_space_takes_the_parts_parameters_and_refuses_a_name_twice(
    tmp_path: Path,
) -> None:
    own = textwrap.dedent(
        """\
        name: mine
        compose: [spa-workload]
        parameters:
          scheduler: {type: categorical, values: [none, bfq], default: none, layer: block,
                      option: scheduler, grid: [bfq]}
        """
    )
    space = parse_space(own)
    assert space.names[-1] == "scheduler" and "request_size" in space.names
    assert {c["scheduler"] for c in space.grid()} == {"bfq"}
    clash = own.replace("  scheduler:", "  threads:")
    with pytest.raises(SpaceError, match="'threads' is also in the composed space"):
        parse_space(clash)
    with pytest.raises(SpaceError, match="compose: no space file or bundled space"):
        parse_space(own.replace("spa-workload", "no-such-space"))
    with pytest.raises(SpaceError, match="grid: 'bfq' is given twice"):
        parse_space(own.replace("grid: [bfq]", "grid: [bfq, bfq]"))
    with pytest.raises(SpaceError, match="grid: 'cfq'"):
        parse_space(own.replace("grid: [bfq]", "grid: [cfq]"))
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(f"name: a\ncompose: [{second}]\nparameters: {{}}\n")
    second.write_text(f"name: b\ncompose: [{tmp_path}/./a.yaml]\nparameters: {{}}\n")
    with pytest.raises(SpaceError, match="composes itself"):
        load_space(first)


def test_threads_must_split_over_the_instances() -> None:
    space = load_space("spa")
    assert not space.is_valid({**space.default_config(), "threads": 2, "instances": 3})
    assert space.is_valid({**space.default_config(), "threads": 12, "instances": 3})


# ---- the workload ------------------------------------------------------------------------------
@needs_fio
def test_every_corner_of_the_workload_space_renders_a_job_fio_accepts() -> None:
    space = load_space("spa-workload")
    corners = []
    for p in space.parameters:
        corners.append(list(p.values) if p.values else [p.low, p.high])
    checked = 0
    for combo in itertools.product(*corners):
        config = dict(zip(space.names, combo, strict=True))
        if not space.is_valid(config):
            continue
        workload = SpaWorkload(config, runtime=1)
        text = workload.render("/tmp/stortune-corner")
        fio_parse(text, "spa")
        assert f"rwmixread={config['read_share']}" in text
        assert text.count("[instance") == config["instances"]
        assert (
            text.count(f"numjobs={config['threads'] // config['instances']}") == config["instances"]
        )
        checked += 1
    assert checked >= 90


def test_the_job_follows_ffsb_a_shared_set_of_16_mib_files_256_requests_per_file() -> None:
    one = SpaWorkload({"file_set_size": 256, "threads": 12, "access": "sequential"}).render("/d")
    assert "rw=rw" in one and "file_service_type=random:256" in one and "filesize=16m" in one
    names = next(line for line in one.splitlines() if line.startswith("filename="))
    assert names.split("=", 1)[1].split(":") == [f"spa.{i}" for i in range(16)]
    three = SpaWorkload({"file_set_size": 240, "threads": 12, "instances": 3}).render("/d")
    assert three.count("numjobs=4") == 3 and three.count("size=80m") == 3
    assert "filename=spa3.0:" in three
    rounded = SpaWorkload({"request_size": 5000}).render("/d")
    assert "bs=5120" in rounded  # SPA's Table 4: multiples of 512 bytes


def test_bind_and_the_stored_spec_round_trip() -> None:
    workload = workload_named("spa", runtime=3)
    bound = workload.bind({"read_share": 100, "access": "sequential"})
    assert bound.values["read_share"] == 100 and bound.name == "spa" and bound.runtime == 3
    rebuilt = make_workload(json.loads(json.dumps(bound.describe())))
    assert isinstance(rebuilt, SpaWorkload) and rebuilt.render("/d") == bound.render("/d")
    with pytest.raises(ConfigError, match="unknown parameter"):
        workload.bind({"queue_depth": 4})
    with pytest.raises(ConfigError, match="takes no workload parameters"):
        FioWorkload("randread").bind({"read_share": 50})
    with pytest.raises(ConfigError, match="read_share 101 is over 100"):
        workload.bind({"read_share": 101})


# ---- the scenarios -------------------------------------------------------------------------------
def test_extrapolation_configs_lie_outside_the_trained_ranges_by_construction() -> None:
    space = load_space("spa")
    grid = list(space.grid())
    lo = {n: min(c[n] for c in grid) for n in ("request_size", "file_set_size")}
    hi = {n: max(c[n] for c in grid) for n in ("request_size", "file_set_size")}
    trained_shares = {c["read_share"] for c in grid}
    configs = extrapolation_configs(space)
    assert len(configs) == 256
    wide = wide_space(space)
    for config in configs:
        for name in ("request_size", "file_set_size"):
            assert config[name] < lo[name] or config[name] > hi[name]
        assert config["read_share"] not in trained_shares
        wide.validate(config)
        with pytest.raises(ConfigError):
            space.validate(config)


def test_interpolation_and_consolidation_configs_lie_inside_the_ranges() -> None:
    space = load_space("spa")
    drawn = interpolation_configs(space, 50, seed=3)
    assert drawn == interpolation_configs(space, 50, seed=3)
    assert all(space.is_valid(c) for c in drawn)
    assert all(c["request_size"] % 512 == 0 and c["file_set_size"] % 16 == 0 for c in drawn)
    assert len({c["request_size"] for c in drawn}) > 20  # not the grid's five levels
    consolidated = consolidation_configs(space, seed=0)
    assert sorted({c["instances"] for c in consolidated}) == [2, 3]
    assert all(space.is_valid(space.validate(c)) for c in consolidated)


# ---- a real sweep over workload x system --------------------------------------------------------
@needs_root
@needs_fio
def test_a_sweep_runs_each_configs_own_workload_and_round_trips_through_the_store_and_csv(
    tmp_path: Path, state_dir: Path
) -> None:
    from conftest import sweep

    space = load_space("spa")
    configs = [
        space.validate({"read_share": 100, "file_set_size": 128, "scheduler": "bfq"}),
        space.validate(
            {"read_share": 0, "access": "sequential", "file_set_size": 128, "instances": 2}
        ),
    ]
    db = tmp_path / "spa.db"
    target = LocalFsTarget(space, image_size="1g", state_dir=str(state_dir))
    with Store(str(db)) as store:
        measuring = sweep(
            store, "spa", space, target, "total.bw_mbs", configs, repetitions=1,
            reference_every=0, workloads=[SpaWorkload(runtime=1)],
        )  # fmt: skip
        measuring.run()
        trials = [t for t in store.trials(store.campaign("spa").id) if t.seq > 0]
    reads, writes = (t.runs[0] for t in trials)
    assert reads.status == "ok" and writes.status == "ok", (reads.error, writes.error)
    assert reads.metrics["read.bw_mbs"] > 0 and reads.metrics["write.bw_mbs"] == 0
    assert writes.metrics["write.bw_mbs"] > 0 and writes.metrics["read.bw_mbs"] == 0
    out = tmp_path / "spa.csv"
    result = runner.invoke(app, ["export", "spa", "-o", str(out), "--store", str(db)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    frame = frame[frame["run.trial"] > 0].sort_values("run.trial")
    for (_, row), config in zip(frame.iterrows(), configs, strict=True):
        for name, value in config.items():
            assert str(row[name]) == str(value), name


# ---- which config for this workload --------------------------------------------------------------
def _model(tmp_path: Path) -> Path:
    """A CART model of a known response: bfq halves sequential throughput, mq-deadline helps
    random reads a little, larger requests move more bytes."""
    rng = np.random.default_rng(0)
    rows = []
    for request, access, scheduler in itertools.product(
        (4096, 16384, 32768), ("random", "sequential"), ("none", "mq-deadline", "bfq", "kyber")
    ):
        for _ in range(3):
            value = request / 1024 * (2.0 if access == "sequential" else 1.0)
            value *= {"bfq": 0.5 if access == "sequential" else 1.0, "mq-deadline": 1.1}.get(
                scheduler, 1.0
            )
            rows.append({"request_size": request, "access": access, "scheduler": scheduler,
                         "y": value * rng.uniform(0.99, 1.01)})  # fmt: skip
    frame = pd.DataFrame(rows)
    X = frame[["request_size", "access", "scheduler"]]
    estimator = make_model("cart", minsplit=2, cp=0.0).fit(X, frame["y"].to_numpy())
    return SurrogateModel.from_fit(estimator, X, "TP_r", "cart").save(tmp_path / "m.joblib")


def test_predict_ranks_every_system_config_for_one_workload(tmp_path: Path) -> None:
    model = SurrogateModel.load(_model(tmp_path))
    ranked = model.predict_systems({"request_size": 16384, "access": "random"})
    assert ranked["scheduler"].iloc[0] == "mq-deadline" and len(ranked) == 4
    worst = model.predict_systems({"request_size": 16384, "access": "sequential"}, ascending=True)
    assert worst["scheduler"].iloc[0] == "bfq"
    result = runner.invoke(
        app,
        ["model", "predict", str(tmp_path / "m.joblib"), "-W",
         "request_size=16384,access=sequential", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [c["scheduler"] for c in data["configs"]][-1] == "bfq"
    assert len(data["configs"]) == 4


def test_predict_for_a_workload_needs_the_whole_workload_of_the_space(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["model", "predict", str(tmp_path / "missing.joblib"), "-W", "access=random"],
    )
    assert result.exit_code != 0
    path = _model(tmp_path)
    result = runner.invoke(
        app, ["model", "predict", str(path), "-W", "access=random", "--space", "spa"]
    )
    assert isinstance(result.exception, ConfigError)
    assert "describe the whole workload: give request_size" in str(result.exception)
    result = runner.invoke(app, ["model", "predict", str(path), "-W", "access=random"])
    assert "request_size is numeric" in str(result.exception)


def test_targets_leave_the_workload_parameters_to_the_workload(tmp_path: Path) -> None:
    from stortune.targets.tmpfs import TmpfsTarget

    space = parse_space(
        textwrap.dedent(
            """\
            name: ram
            compose: [spa-workload]
            parameters:
              size: {type: ordinal, values: ["256m", "1g"], default: "256m", layer: mount}
            """
        )
    )
    target = TmpfsTarget(space, state_dir=str(tmp_path))
    assert target.mount_options({"read_share": 0, "size": "1g"}) == "size=1g"
    localfs = LocalFsTarget(load_space("spa"), state_dir=str(tmp_path))
    plan = localfs.plan({"read_share": 0, "scheduler": "bfq"})
    assert plan.block == (("scheduler", "bfq"), ("read_ahead_kb", "128"))
    assert not any("read_share" in part for part in (*plan.mkfs, plan.mount))


def test_the_measured_spa_dataset_answers_which_scheduler_for_a_workload(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parent.parent / "data" / "spa.csv"
    result = runner.invoke(
        app, ["model", "fit", "--from", str(data), "--metric", "TP_r", "-t", "cart",
              "--out", str(tmp_path), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    path = json.loads(result.output)["models"][0]["path"]
    workload = "request_size=8192,read_share=70,access=random,file_set_size=1024,threads=12"
    result = runner.invoke(
        app, ["model", "predict", path, "--space", "spa", "--json",
              "-W", f"{workload},instances=1,direct=false"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    configs = json.loads(result.output)["configs"]
    assert sorted(c["scheduler"] for c in configs) == ["bfq", "kyber", "mq-deadline", "none"]
    predicted = [c["predicted_TP_r"] for c in configs]
    assert predicted == sorted(predicted, reverse=True) and predicted[-1] > 0
