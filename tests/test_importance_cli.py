"""`stortune rank` and `stortune rank-study` on small files, and one real shared dataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from stortune.cli import app as stortune_app
from stortune.errors import StortuneError
from stortune.importance import rank_carver, rank_lasso, subsample_study
from stortune.importance.plots import plot_study
from stortune.importance.synthetic import STRONG, additive_dataset

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
HSQLDB = SHARED / "moot-promisetune" / "HSQLDB.csv"


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    """The real `stortune` app, where the rank commands are registered."""
    return stortune_app


@pytest.fixture(scope="module")
def csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "runs.csv"
    frame = additive_dataset(600, seed=21).frame.rename(columns={"throughput": "throughput+"})
    frame.to_csv(path, index=False)
    return path


def invoke(app: typer.Typer, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_rank_carver_json(app: typer.Typer, csv: Path) -> None:
    data = json.loads(invoke(app, "rank", "--from", str(csv), "--stop", "top-n", "--json"))
    assert data["method"] == "carver" and data["direction"] == "max"
    assert data["selected"][:2] == list(STRONG)
    assert data["stop"] == "top-n"
    assert data["correction"] == "levels"


def test_uncorrected_pi_is_an_option_and_is_recorded(app: typer.Typer, csv: Path) -> None:
    args = ["--pi-correction", "none", "--json"]
    ranked = json.loads(invoke(app, "rank", "--from", str(csv), "--stop", "top-n", *args))
    assert ranked["correction"] == "none" and ranked["selected"][:2] == list(STRONG)
    study = json.loads(invoke(app, "rank-study", str(csv), "--fractions", "0.1", *args))
    assert study["method"] == "carver" and study["correction"] == "none"
    assert "PI/CPI uncorrected" in invoke(
        app, "rank", "--from", str(csv), "--pi-correction", "none"
    )


def test_rank_lasso_table_and_plots(app: typer.Typer, csv: Path, tmp_path: Path) -> None:
    out = invoke(app, "rank", "--from", str(csv), "--method", "lasso", "--plots", str(tmp_path))
    assert "Lasso ranking of throughput" in out
    assert {p.name for p in tmp_path.iterdir()} == {
        "lasso-path.png",
        "lasso-path.svg",
        "boxplots.png",
        "boxplots.svg",
    }


def test_rank_carver_table_and_plots(app: typer.Typer, csv: Path, tmp_path: Path) -> None:
    out = invoke(app, "rank", "--from", str(csv), "--plots", str(tmp_path / "figs"))
    assert "journal" in out and "stopped:" in out
    names = {p.name for p in (tmp_path / "figs").iterdir()}
    assert {"carver-steps.png", "fixed-sets.svg", "boxplots.png"} <= names


def test_rank_with_nothing_ranked_has_no_best_value_footnote(
    app: typer.Typer, tmp_path: Path
) -> None:
    flat = tmp_path / "flat.csv"
    rows = [f"{a},{b},100.0" for a in ("x", "y", "z") for b in (1, 2, 3)]
    flat.write_text("a,b,throughput+\n" + "\n".join(rows) + "\n")
    out = invoke(app, "rank", "--from", str(flat))
    assert "no parameter matters" in out and "Best value" not in out


def test_rank_study_json_and_plot(app: typer.Typer, csv: Path, tmp_path: Path) -> None:
    out = invoke(
        app,
        "rank-study",
        str(csv),
        "--fractions",
        "0.02,0.5",
        "--trials",
        "50",
        "--json",
        "--plot",
        str(tmp_path / "study.png"),
    )
    data = json.loads(out)
    assert data["truth"][:2] == list(STRONG)
    assert data["rows"][-1]["success"][0] == 1.0
    assert (tmp_path / "study.svg").exists()
    table = invoke(app, "rank-study", str(csv), "--fractions", "0.1", "--trials", "20")
    assert "s/ranking" in table


def test_fanova_ranks_and_studies_from_the_command_line(app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "small.csv"
    frame = additive_dataset(80, seed=23).frame.rename(columns={"throughput": "throughput+"})
    frame.to_csv(path, index=False)
    ranked = json.loads(invoke(app, "rank", "--from", str(path), "--method", "fanova", "--json"))
    assert ranked["method"] == "fanova" and ranked["ranking"][:2] == list(STRONG)
    args = ["--method", "fanova", "--fractions", "0.5", "--trials", "3", "--depth", "2"]
    study = json.loads(invoke(app, "rank-study", str(path), *args, "--json"))
    assert study["method"] == "fanova" and study["correction"] is None
    assert study["truth"] == list(STRONG)
    assert study["rows"][0]["size"] == 40 and study["rows"][0]["trials"] == 3
    assert "fANOVA ranking of throughput" in invoke(
        app, "rank", "--from", str(path), "--method", "fanova"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["rank"],
        ["rank", "--from", "missing.csv"],
        ["rank", "--from", "{csv}", "--method", "forest"],
        ["rank", "--from", "{csv}", "--method", "lasso", "--stop", "rsd"],
        ["rank", "--from", "{csv}", "--stop", "never"],
        ["rank", "--from", "{csv}", "--method", "lasso", "--pi-correction", "none"],
        ["rank", "--from", "{csv}", "--method", "fanova", "--stop", "rsd"],
        ["rank-study", "{csv}", "--method", "lasso", "--pi-correction", "levels"],
        ["rank", "--from", "{csv}", "--metric", "latency"],
        ["rank-study", "{csv}", "--fractions", "0.1,two"],
        ["rank-study", "{csv}", "--fractions", "2"],
    ],
)
def test_user_errors_are_stortune_errors(app: typer.Typer, csv: Path, args: list[str]) -> None:
    result = CliRunner().invoke(app, [a.format(csv=csv) for a in args])
    assert isinstance(result.exception, StortuneError)
    assert "\n" not in str(result.exception)


def test_help_has_examples(app: typer.Typer) -> None:
    for command in ("rank", "rank-study"):
        assert "Example: stortune " + command in invoke(app, command, "--help")


def test_study_plot_overlays_methods(tmp_path: Path) -> None:
    data = additive_dataset(500, seed=22)
    studies = [subsample_study(data, [0.05, 0.5], trials=10, method=m) for m in ("carver", "lasso")]
    written = plot_study(studies, tmp_path / "curves.svg")
    assert [p.suffix for p in written] == [".png", ".svg"]


@pytest.mark.skipif(not HSQLDB.exists(), reason=f"shared dataset {HSQLDB} not present")
def test_real_dataset_hsqldb() -> None:
    from stortune.datasets import load_dataset

    data = load_dataset(HSQLDB)
    carver = rank_carver(data, stop="rsd")
    lasso = rank_lasso(data)
    assert carver.direction == "min"
    # Blowfish encryption dominates HSQLDB's run time: both methods put it first.
    assert carver.selected[0] == lasso.ranking[0] == "crypt_blowfish"
    assert carver.stop == "rsd" and carver.steps[-1].best_rsd < 0.02


LIVE_SPACE = """
name: live
parameters:
  strong: {type: ordinal, values: [1, 2, 3, 4], default: 1}
  weak: {type: ordinal, values: [1, 2, 3, 4], default: 1}
  idle: {type: categorical, values: [a, b], default: a}
"""


def test_rank_with_a_budget_measures_a_latin_hypercube_then_ranks(tmp_path: Path) -> None:
    """`rank --budget N` on a live command target: N configs measured (and stored), the
    strong parameter ranked first, the metric relative to the reference runs."""
    import sys

    (tmp_path / "live.yaml").write_text(LIVE_SPACE)
    script = tmp_path / "bench.py"
    script.write_text(
        "import json, sys\n"
        "s, w = float(sys.argv[1]), float(sys.argv[2])\n"
        "print(json.dumps({'ops': 100 * s ** 2 + 5 * w}))\n"
    )
    db = str(tmp_path / "live.db")
    args = ["rank", "--budget", "16", "--space", str(tmp_path / "live.yaml")]
    args += ["--command", f"{sys.executable} {script} {{strong}} {{weak}}", "-o", "ops:max"]
    args += ["--store", db, "--name", "live", "--method", "lasso", "--no-check-disturbance"]
    result = CliRunner().invoke(stortune_app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    ranking = json.loads(result.output)
    assert ranking["metric"] == "ops_rel" and ranking["ranking"][0] == "strong"
    again = CliRunner().invoke(stortune_app, ["rank", "--from", "live", "--store", db, "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["n_rows"] >= 16  # the sample is a stored campaign


def test_rank_with_a_budget_needs_a_space() -> None:
    import subprocess

    from conftest import STORTUNE

    argv = [*STORTUNE, "rank", "--budget", "8", "--command", "true"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: a new campaign needs --space: the command target has no space of its own"
    )


def test_rank_warns_of_too_few_configs_and_an_assumed_direction(
    app: typer.Typer, tmp_path: Path
) -> None:
    few = tmp_path / "few.csv"
    few.write_text("a,b,thr\n" + "".join(f"{i % 3},{i % 2},{10 + i * i}\n" for i in range(7)))
    out = " ".join(invoke(app, "rank", "--from", str(few)).split())
    assert "only 6 distinct configs: a ranking needs at least 8" in out
    assert "higher is taken as better (name the column thr- if lower is better" in out
    stated = tmp_path / "stated.csv"
    stated.write_text(few.read_text().replace("thr", "thr-"))
    assert "taken as better" not in invoke(app, "rank", "--from", str(stated))
