"""`stortune model` on a small CSV, through a local Typer app."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from stortune.cli.model import TECHNIQUE_NAMES, register
from stortune.errors import StortuneError
from stortune.models import TECHNIQUES

runner = CliRunner()


@pytest.fixture
def app():
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture
def csv(tmp_path):
    rng = np.random.default_rng(0)
    n = 80
    frame = pd.DataFrame(
        {
            "bs": rng.integers(1, 33, n) * 4,
            "depth": rng.integers(1, 17, n),
            "sched": rng.choice(["noop", "cfq"], n),
        }
    )
    frame["iops"] = 1000 + 30 * frame["bs"] + 50 * frame["depth"] + 200 * (frame["sched"] == "noop")
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    return path


def run(app, *args):
    return runner.invoke(app, ["model", *map(str, args)])


def test_fit_then_predict(app, csv, tmp_path):
    out = tmp_path / "models"
    result = run(
        app,
        "fit",
        "--from",
        csv,
        "--metric",
        "iops",
        "-t",
        "linear",
        "-t",
        "cart",
        "--out",
        out,
        "--json",
    )
    assert result.exit_code == 0, result.output
    models = json.loads(result.output)["models"]
    assert [m["technique"] for m in models] == ["linear", "cart"]
    path = out / "runs.iops.linear.joblib"
    assert path.exists()
    result = run(app, "predict", path, "-c", "bs=16,depth=4", "-c", "sched=noop", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["prediction"] == pytest.approx(1000 + 480 + 200 + 200)
    result = run(app, "predict", path, "-c", "bs=16,depth=4,sched=noop")
    assert "predicted iops: 1880" in result.output


def test_fit_with_optimize_to_a_file(app, csv, tmp_path):
    out = tmp_path / "m.joblib"
    result = run(
        app,
        "fit",
        "--from",
        csv,
        "-t",
        "m5",
        "--optimize",
        "--splits",
        "2",
        "--explorations",
        "1",
        "--iterations",
        "2",
        "--folds",
        "3",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert out.exists() and "m5" in result.output


def test_evaluate_prints_the_papers_tables(app, csv, tmp_path):
    plots = tmp_path / "plots"
    result = run(
        app,
        "evaluate",
        "--from",
        csv,
        "-t",
        "linear",
        "-t",
        "cart",
        "--optimize",
        "--splits",
        "2",
        "--explorations",
        "1",
        "--iterations",
        "2",
        "--folds",
        "3",
        "--plots",
        plots,
    )
    assert result.exit_code == 0, result.output
    assert "interp. MRE %" in result.output and "Error reduction" in result.output
    assert (plots / "error-cdf.svg").exists() and (plots / "predicted-cart.png").exists()


def test_evaluate_json(app, csv):
    result = run(app, "evaluate", "--from", csv, "--metric", "iops", "-t", "linear", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    distinct = len(pd.read_csv(csv).drop_duplicates(["bs", "depth", "sched"]))
    assert data["metric"] == "iops" and data["rows"] == distinct  # repetitions are averaged
    (linear,) = data["techniques"]
    assert linear["r2_fit"] > 0.999 and linear["interpolation_mre"] < 1e-6


def test_user_errors(app, csv, tmp_path):
    result = run(app, "fit", "--from", csv, "-t", "forest")
    assert isinstance(result.exception, StortuneError) and "unknown technique" in str(
        result.exception
    )
    result = run(app, "fit", "--from", csv, "--metric", "latency")
    assert isinstance(result.exception, StortuneError) and "latency" in str(result.exception)
    result = run(app, "fit", "--from", csv, "-t", "all", "--out", tmp_path / "one.joblib")
    assert isinstance(result.exception, StortuneError)
    result = run(app, "predict", tmp_path / "none.joblib", "-c", "bs=1")
    assert isinstance(result.exception, StortuneError)
    result = run(app, "fit", "--from", csv, "--optimize", "--jobs", "0")
    assert isinstance(result.exception, StortuneError) and "--jobs" in str(result.exception)


@pytest.mark.parametrize("command", ["fit", "predict", "evaluate"])
def test_help_has_an_example(app, command):
    result = run(app, command, "--help")
    assert result.exit_code == 0 and "Example: stortune model" in result.output


def test_the_help_lists_every_technique():
    assert tuple(TECHNIQUES) == TECHNIQUE_NAMES
