"""Analyses read files and campaigns alike, drift-corrected by default, one workload at a time."""

import json
from pathlib import Path

import pandas as pd
import pytest
from fixtures.sweep import start
from typer.testing import CliRunner

from stortune.cli import app
from stortune.errors import DatasetError
from stortune.sources import load_source
from stortune.store import Store
from stortune.targets.command import CommandTarget

runner = CliRunner()


@pytest.fixture
def swept(tmp_path: Path, drifting: CommandTarget) -> str:
    url = str(tmp_path / "swept.db")
    with Store(url) as db:
        start(db, drifting, reps=2, every=1).run()
    return url


def test_campaign_source_ranks_relative_values_first(swept: str) -> None:
    data = load_source("s", swept)
    assert data.metrics[0] == "mbs_rel"
    means = data.frame.groupby("level")["mbs_rel"].mean()
    for level, value in means.items():
        assert value == pytest.approx(level, rel=0.02)  # the drift is gone
    raw = load_source("s", swept, raw=True)
    assert raw.metrics[0] == "mbs"


def test_a_named_metric_of_a_campaign_comes_alone_and_relative_on_asking(swept: str) -> None:
    """Naming ``METRIC`` picks that metric (no other metric column becomes a parameter);
    ``METRIC_rel`` picks it relative to the reference runs around each run."""
    raw = load_source("s", swept, metrics=["mbs"])
    assert raw.metrics == ["mbs"] and raw.params == ["level"]
    relative = load_source("s", swept, metrics=["mbs_rel"])
    assert relative.metrics == ["mbs_rel"] and relative.params == ["level"]
    means = relative.frame.groupby("level")["mbs_rel"].mean()
    for level, value in means.items():
        assert value == pytest.approx(level, rel=0.02)


def test_an_open_store_is_read_without_opening_it_again(
    swept: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def second_open(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the store was opened a second time")

    by_url = load_source("s", swept)
    with Store(swept) as db:
        monkeypatch.setattr(Store, "__init__", second_open)
        data = load_source("s", db)
        assert db.campaign("s").name == "s"  # still open
    assert data.frame.equals(by_url.frame) and data.metrics == by_url.metrics


def test_exported_file_and_campaign_give_the_same_rows(swept: str, tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    result = runner.invoke(app, ["export", "s", "-o", str(out), "--store", swept])
    assert result.exit_code == 0, result.output
    from_file, from_store = load_source(out), load_source("s", swept)
    assert from_file.metrics[0] == from_store.metrics[0] == "mbs_rel"
    assert len(from_file.frame) == len(from_store.frame)
    assert from_file.params == from_store.params == ["level"]


def test_several_workloads_need_a_choice_and_failed_rows_are_left_out(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "run.workload": ["a", "a", "b", "b", "a"],
            "run.status": ["ok", "ok", "ok", "ok", "failed"],
            "x": [1, 2, 1, 2, 3],
            "metric.mbs": [10.0, 20.0, 1.0, 2.0, None],
        }
    )
    path = tmp_path / "two.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(DatasetError, match="several workloads \\(a, b\\).*--workload"):
        load_source(path)
    data = load_source(path, workload="a")
    assert data.frame["x"].tolist() == [1, 2]  # b's rows and the failed run are gone
    with pytest.raises(DatasetError, match="no runs of workload 'c'"):
        load_source(path, workload="c")


def test_unknown_source_names_the_store_campaigns(swept: str) -> None:
    with pytest.raises(DatasetError, match="no such dataset file.*campaigns: s"):
        load_source("nope", swept)


def test_rank_and_model_read_a_campaign_and_say_the_metric_is_relative(
    swept: str, tmp_path: Path
) -> None:
    result = runner.invoke(app, ["rank", "--from", "s", "--store", swept, "--method", "lasso"])
    assert result.exit_code == 0, result.output
    assert "mbs_rel" in result.output and "relative to the reference" in result.output
    result = runner.invoke(
        app, ["rank", "--from", "s", "--store", swept, "--raw", "--json", "--method", "lasso"]
    )
    assert json.loads(result.output)["metric"] == "mbs"
    out = tmp_path / "m.joblib"
    result = runner.invoke(
        app,
        ["model", "fit", "--from", "s", "--store", swept, "-t", "linear", "-o", str(out)]
        + ["--folds", "3"],
    )
    assert result.exit_code == 0, result.output
    assert "mbs_rel" in result.output and out.exists()


def test_metrics_a_workload_never_reports_are_not_its_metrics(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "run.workload": ["sync", "sync", "nosync", "nosync"],
            "x": [1, 2, 1, 2],
            "metric.mbs": [10.0, 20.0, 1.0, 2.0],
            "metric.fsync_ms": [0.5, 0.7, None, None],
        }
    )
    path = tmp_path / "w.csv"
    frame.to_csv(path, index=False)
    assert load_source(path, workload="sync").metrics == ["mbs", "fsync_ms"]
    assert load_source(path, workload="nosync").metrics == ["mbs"]


def test_an_imported_table_keeps_the_direction_its_column_declares(tmp_path: Path) -> None:
    """``seconds-`` says lower is better; stored as ``seconds``, the campaign keeps the
    direction, so a ranking of the campaign names the same best value as one of the file."""
    rows = [(a, b, 10.0 + 5 * a + (b % 2)) for a in range(4) for b in range(4)]
    path = tmp_path / "t.csv"
    pd.DataFrame(rows, columns=["a", "b", "seconds-"]).to_csv(path, index=False)
    store = str(tmp_path / "t.db")
    result = runner.invoke(app, ["import", str(path), "--name", "t", "--store", store])
    assert result.exit_code == 0, result.output
    assert load_source("t", store).directions == {"seconds": "min"}
    rankings = []
    for source in (str(path), "t"):
        result = runner.invoke(app, ["rank", "--from", source, "--store", store, "--json"])
        assert result.exit_code == 0, result.output
        rankings.append(json.loads(result.output))
    assert [r["direction"] for r in rankings] == ["min", "min"]
    assert [r["steps"][0]["best_values"] for r in rankings] == [{"a": "0"}] * 2


def test_a_file_and_its_imported_campaign_rank_the_same_parameters(tmp_path: Path) -> None:
    """A one-hot group (``lz``, ``zstd``: exactly one set per row) is one categorical once
    imported; ranked from the file it is the same one, not two binaries that each look half
    as strong."""
    rows = [
        (a, int(codec == "lz"), int(codec == "zstd"), 10.0 + a + (8 if codec == "zstd" else 0))
        for a in range(4)
        for codec in ("lz", "zstd")
        for _ in range(2)
    ]
    path = tmp_path / "codecs.csv"
    pd.DataFrame(rows, columns=["a", "lz", "zstd", "seconds-"]).to_csv(path, index=False)
    store = str(tmp_path / "c.db")
    result = runner.invoke(app, ["import", str(path), "--name", "c", "--store", store])
    assert result.exit_code == 0, result.output
    rankings = []
    for source in (str(path), "c"):
        result = runner.invoke(app, ["rank", "--from", source, "--store", store, "--json"])
        assert result.exit_code == 0, result.output
        rankings.append(json.loads(result.output))
    assert [r["steps"][0]["best_values"] for r in rankings] == [{"lz_or_zstd": "lz"}] * 2
    assert rankings[0]["selected"] == rankings[1]["selected"]
