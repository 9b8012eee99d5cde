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
from stortune.models.mars import ForwardPass
from stortune.models.surrogate import SurrogateModel

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


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, which are not JSON."""

    def refuse(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def user_error(result) -> str:
    """The message of a StortuneError the command ended with (the CLI prints it as one line)."""
    assert result.exit_code != 0 and isinstance(result.exception, StortuneError), result.output
    message = str(result.exception)
    assert "\n" not in message
    return message


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


def test_evaluate_json_is_strict_when_an_error_is_undefined(app, tmp_path):
    # only categorical parameters: no extrapolation scenario, so no extrapolation error
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {"sched": rng.choice(["noop", "cfq", "bfq"], 60), "fs": rng.choice(["ext4", "xfs"], 60)}
    )
    frame["iops"] = 1000 + 200 * (frame["sched"] == "noop") + rng.normal(0, 5, 60)
    path = tmp_path / "categorical.csv"
    frame.to_csv(path, index=False)
    result = run(app, "evaluate", "--from", path, "-t", "linear", "--json")
    assert result.exit_code == 0, result.output
    (linear,) = strict_json(result.output)["techniques"]
    assert linear["extrapolation_mre"] is None and linear["interpolation_mre"] < 0.05


def small_sample(app, csv, *args):
    result = run(app, "evaluate", "--from", csv, "-t", "linear", "-t", "cart", "--json", *args)
    assert result.exit_code == 0, result.output
    return strict_json(result.output)


def test_evaluate_train_size_scores_each_technique_on_the_same_draws(app, csv):
    data = small_sample(app, csv, "--train-size", 20, "--repeats", 4, "--seed", 3)
    assert data["train_size"] == 20 and data["test_rows"] == data["rows"] - 20
    assert data["repeats"] == 4 and not data["optimized"]
    linear, cart = data["techniques"]
    assert (linear["technique"], cart["technique"]) == ("linear", "cart")
    for technique in (linear, cart):
        assert len(technique["mre"]) == 4 and len(technique["fit_seconds"]) == 4
        assert technique["mean"] == pytest.approx(np.mean(technique["mre"]))
        assert technique["ci_low"] <= technique["mean"] <= technique["ci_high"]
        assert technique["mean_fit_seconds"] > 0
    assert linear["mean"] < 1e-6 < cart["mean"]  # the fixture's metric is linear
    # the same seed draws the same training sets; another seed, others
    assert small_sample(app, csv, "--train-size", 20, "--repeats", 4, "--seed", 3)["techniques"][1][
        "mre"
    ] == pytest.approx(cart["mre"])
    other = small_sample(app, csv, "--train-size", 20, "--repeats", 4, "--seed", 4)
    assert other["techniques"][1]["mre"] != pytest.approx(cart["mre"])


def test_evaluate_train_size_as_a_multiple_of_the_parameters(app, csv):
    result = run(app, "evaluate", "--from", csv, "-t", "cart", "--train-size", "4N", "--repeats", 3)
    assert result.exit_code == 0, result.output
    assert "trained on 12 of" in result.output  # 4 x (bs, depth, sched)
    assert "MRE %" in result.output and "95% CI %" in result.output


def test_evaluate_auto_through_the_small_sample_protocol(app, csv):
    args = ("-t", "auto", "--train-size", 20, "--repeats", 2, "--time-limit", 2)
    (auto,) = small_sample(app, csv, *args)["techniques"][2:]
    # --time-limit is the automatic model's budget per fit
    assert auto["technique"] == "auto" and len(auto["mre"]) == 2
    assert max(auto["fit_seconds"]) < 10


def test_evaluate_train_size_user_errors(app, csv):
    rows = len(pd.read_csv(csv).drop_duplicates(["bs", "depth", "sched"]))
    result = run(app, "evaluate", "--from", csv, "-t", "cart", "--train-size", rows)
    assert f"has {rows} configurations" in user_error(result)
    result = run(app, "evaluate", "--from", csv, "-t", "cart", "--train-size", "30N")
    assert "(90 rows)" in user_error(result)
    result = run(app, "evaluate", "--from", csv, "-t", "cart", "--train-size", "many")
    assert "--train-size 'many'" in user_error(result)
    result = run(app, "evaluate", "--from", csv, "-t", "auto")
    assert "--train-size" in user_error(result)
    result = run(app, "evaluate", "--from", csv, "--train-size", 9, "--plots", "figures")
    assert "--plots" in user_error(result)


def test_no_blas_errors_from_a_search_on_few_rows(app, tmp_path, capfd):
    """A split search on ten rows asks MARS for as many terms as there are rows; py-earth then
    called LAPACK with illegal sizes, and OpenBLAS wrote thousands of lines to the terminal."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.integers(0, 2, (40, 12)), columns=[f"k{i}" for i in range(12)])
    frame["iops"] = 100 + frame.to_numpy() @ rng.normal(0, 1, 12) + rng.normal(0, 0.01, 40)
    path = tmp_path / "knobs.csv"
    frame.to_csv(path, index=False)
    ForwardPass._memo.clear()
    result = run(
        app,
        "evaluate",
        "--from",
        path,
        "-t",
        "mars-int",
        "--train-size",
        10,
        "--repeats",
        3,
        "--optimize",
        "--iterations",
        1,
        "--splits",
        2,
        "--explorations",
        1,
        "--jobs",
        1,
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert strict_json(result.output)["optimized"]
    out, err = capfd.readouterr()  # the file descriptors: BLAS writes past sys.stdout
    assert "illegal value" not in out + err


@pytest.fixture
def cart_model(app, csv, tmp_path):
    path = tmp_path / "cart.joblib"
    result = run(app, "fit", "--from", csv, "-t", "cart", "--out", path)
    assert result.exit_code == 0, result.output
    return path


def test_predict_from_a_file(app, csv, cart_model, tmp_path):
    model = SurrogateModel.load(cart_model)
    frame = pd.read_csv(csv)  # the metric column is in the file too, and ignored
    expected = [model.predict_config(row) for row in frame[model.params].to_dict("records")]
    out = tmp_path / "predicted.csv"
    result = run(app, "predict", cart_model, "--from", csv, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    data = strict_json(result.output)
    assert data["column"] == "predicted_iops" and len(data["rows"]) == len(frame)
    assert [row["predicted_iops"] for row in data["rows"]] == pytest.approx(expected)
    written = pd.read_csv(out)
    assert list(written.columns) == [*frame.columns, "predicted_iops"]
    assert written["predicted_iops"].tolist() == pytest.approx(expected)
    pd.testing.assert_frame_equal(written[frame.columns], frame)
    result = run(app, "predict", cart_model, "--from", csv)
    assert result.exit_code == 0, result.output
    assert "predicted_iops" in result.output and "cart" in result.output


def test_predict_from_a_file_user_errors(app, csv, cart_model, tmp_path):
    partial = tmp_path / "partial.csv"
    pd.read_csv(csv).drop(columns=["depth"]).to_csv(partial, index=False)
    result = run(app, "predict", cart_model, "--from", partial)
    assert "lacks column(s) the iops model needs: depth" in user_error(result)
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"bs": [4, "big"], "depth": [1, 2], "sched": ["noop", "cfq"]}).to_csv(
        bad, index=False
    )
    result = run(app, "predict", cart_model, "--from", bad)
    assert "row 2: bs='big'" in user_error(result)
    result = run(app, "predict", cart_model, "--from", csv, "-c", "bs=4")
    assert "not both" in user_error(result)
    result = run(app, "predict", cart_model, "--from", tmp_path / "none.csv")
    assert "no such file" in user_error(result)
    result = run(app, "predict", cart_model)
    assert "-c name=value" in user_error(result)


def test_fit_auto_saves_a_model_that_predicts_from_a_file(app, csv, tmp_path):
    path = tmp_path / "auto.joblib"
    result = run(
        app, "fit", "--from", csv, "-m", "iops", "--auto", "--budget", 5, "-o", path, "--json"
    )
    assert result.exit_code == 0, result.output
    (row,) = strict_json(result.output)["models"]
    assert row["technique"] == "auto" and row["params"]["chosen"]
    assert 0 <= row["cv_mre"] < 0.2 and row["cv_rmse"] is None
    out = tmp_path / "predicted.csv"
    result = run(app, "predict", path, "--from", csv, "--out", out)
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    relative = np.abs(frame["predicted_iops"] - frame["iops"]) / frame["iops"]
    assert relative.mean() < 0.2
