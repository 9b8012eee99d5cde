"""`stortune tune` and `stortune recommend` on a table target replaying a small full grid."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

from stortune.cli import tune
from stortune.store import Store

torch.set_num_threads(1)

SPACE = """\
name: grid
parameters:
  a: {type: ordinal, values: [1, 2, 3, 4], default: 1}
  b: {type: categorical, values: [x, y, z], default: x}
  c: {type: ordinal, values: [0, 1], default: 0}
  d: {type: ordinal, values: [0, 1], default: 0}
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    two, one = ["a,b,c,d,thr+,lat-"], ["a,b,c,d,thr"]
    for a, b, c, d in itertools.product([1, 2, 3, 4], "xyz", [0, 1], [0, 1]):
        for rep in range(2):
            thr = 100 + 20 * a + (15 if b == "y" else 0) + 5 * c + rep
            lat = 10 - a + (3 if b == "y" else 0) + 0.1 * rep
            two.append(f"{a},{b},{c},{d},{thr},{lat}")
            one.append(f"{a},{b},{c},{d},{thr}")
    (tmp_path / "grid.csv").write_text("\n".join(two) + "\n")
    (tmp_path / "thr.csv").write_text("\n".join(one) + "\n")  # one metric: the last column
    (tmp_path / "grid.yaml").write_text(SPACE)
    return {
        "space": str(tmp_path / "grid.yaml"),
        "dataset": str(tmp_path / "grid.csv"),
        "single": str(tmp_path / "thr.csv"),
        "store": str(tmp_path / "runs.db"),
    }


def invoke(*args: str) -> str:
    app = typer.Typer()
    tune.register(app)
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def test_tune_ranks_tunes_and_measures_the_gain_then_recommends(files: dict) -> None:
    common = ["--space", files["space"], "--dataset", files["single"], "--store", files["store"]]
    out = invoke(
        "tune", *common, "-o", "thr:max", "--tuner", "bestconfig", "--budget", "12",
        "--rank", "lasso", "--top-k", "2", "--verify", "3", "-r", "1", "--name", "t1", "--json",
    )  # fmt: skip
    report = json.loads(out)
    assert report["ranking"]["tuned"] == ["a", "b"]  # c adds little, d nothing
    assert set(report["ranking"]["pinned"]) == {"c", "d"}
    assert report["outcome"]["evaluations"] == 12
    assert (
        report["outcome"]["best_config"]["a"] == 4 and report["outcome"]["best_config"]["b"] == "y"
    )
    gain = report["gain"]
    assert gain["n_default"] == gain["n_best"] == 3 and gain["gain"] > 0.3
    with Store(files["store"]) as db:
        kinds = {c.name: c.kind for c in db.campaigns()}
    assert kinds == {"t1-rank": "sample", "t1": "tune", "t1-verify": "verify"}

    text = invoke("recommend", "t1", "--store", files["store"])
    assert text.startswith("# stortune recommendation from campaign t1")
    assert "APPLY IT" in text and "a = 4" in text and "b = y" in text

    out = invoke("tune", "--resume", "t1", "--budget", "14", "--store", files["store"], "--json")
    report = json.loads(out)
    assert report["outcome"]["evaluations"] == 14 and "gain" in report
    with Store(files["store"]) as db:
        assert "t1-verify-2" in {c.name for c in db.campaigns()}


def test_several_objectives_are_scalarised_and_their_pareto_front_reported(files: dict) -> None:
    out = invoke(
        "tune", "--space", files["space"], "--dataset", files["dataset"], "--store",
        files["store"], "-o", "thr:max", "-o", "lat:min:2", "--budget", "6", "--verify", "0",
        "--tuner", "bo", "-r", "1", "--json",
    )  # fmt: skip
    report = json.loads(out)
    weights = [o["weight"] for o in report["scalarizer"]["objectives"]]
    assert weights == [1.0, 2.0]
    assert report["pareto"]
    for row in report["pareto"]:
        assert {"thr", "lat", "config"} <= set(row)


def test_commands_document_an_example() -> None:
    app = typer.Typer()
    tune.register(app)
    for command in app.registered_commands:
        assert "Example:" in command.callback.__doc__


def test_a_new_campaign_needs_a_space_and_an_objective(files: dict) -> None:
    app = typer.Typer()
    tune.register(app)
    result = CliRunner().invoke(app, ["tune", "--dataset", files["dataset"]])
    assert result.exit_code != 0
    assert "--space and --objective" in str(result.exception)


def test_recommendations_take_the_targets_native_form() -> None:
    from stortune.space import Config, Space, load_space
    from stortune.targets.install import install_files_for, render_files
    from stortune.targets.localfs import available_filesystems

    def render(kind: str, config: Config, space: Space, header: str) -> str:
        return render_files(install_files_for(kind, config, space), header)

    ceph = load_space("ceph")
    config = ceph.default_config()
    changed = next(p for p in ceph.parameters if p.is_numeric and p.layer == "osd")
    config[changed.name] = changed.high
    text = render("ceph", config, ceph, "from campaign c1")
    assert text.startswith("# from campaign c1") and "[osd]" in text
    assert f"{changed.name} = " in text
    if "ext4" not in available_filesystems():
        pytest.skip("no ext4 here for the localfs rendering")
    localfs = load_space("localfs")
    text = render("localfs", localfs.default_config(), localfs, "h")
    # the defaults change nothing: no mkfs, fstab, sysctl or queue file
    assert "mkfs" not in text and "sysctl" not in text and "/sys/block" not in text
    assert "nothing to install: every value is the default" in text and "fstab" not in text
    changed = {**localfs.default_config(), "dirty_ratio": 40}
    assert "\nvm.dirty_ratio = 40\n" in render("localfs", changed, localfs, "h")


def test_compared_configs_are_remeasured_beside_default_and_best(
    files: dict, tmp_path: Path
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: mine\nconfig:\n  a: 3\n  b: y\n")
    out = invoke(
        "tune", "--space", files["space"], "--dataset", files["single"], "--store",
        files["store"], "-o", "thr:max", "--tuner", "random", "--budget", "4", "-r", "1",
        "--verify", "2", "--compare", str(mine), "--name", "c1", "--json",
    )  # fmt: skip
    report = json.loads(out)
    compared = report["compared"]["mine"]
    # mine: a=3, b=y, c=d=0: 100 + 60 + 15 (+ rep 0/1) against the default's 120 (+ rep)
    assert compared["label"] == "mine" and compared["n_best"] == 2
    assert compared["best_mean"] == pytest.approx(175.5) and compared["default_mean"] == 120.5
    # the geometric mean of the two rounds' ratios (paired: each round's drift cancels)
    assert compared["gain"] == pytest.approx(((175 / 120) * (176 / 121)) ** 0.5 - 1)
    with Store(files["store"]) as db:
        verify = db.campaign("c1-verify")
        assert [t.info["label"] for t in db.trials(verify.id)] == ["default", "best", "mine"]


def test_each_verification_round_starts_with_the_next_label(files: dict, tmp_path: Path) -> None:
    """A label that always ran first (after the pause between rounds) would carry that
    position's effect into its gain."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: mine\nconfig:\n  a: 3\n  b: y\n")
    invoke(
        "tune", "--space", files["space"], "--dataset", files["single"], "--store",
        files["store"], "-o", "thr:max", "--tuner", "random", "--budget", "3", "-r", "1",
        "--verify", "4", "--compare", str(mine), "--name", "turns", "--json",
    )  # fmt: skip
    with Store(files["store"]) as db:
        verify = db.campaign("turns-verify")
        runs = sorted(
            ((r.started_at, r.repetition, t.info["label"]) for t in db.trials(verify.id)
             for r in t.runs),
        )  # fmt: skip
    order = [[label for _, rep, label in runs if rep == n] for n in range(4)]
    assert order == [
        ["default", "best", "mine"],
        ["best", "mine", "default"],
        ["mine", "default", "best"],
        ["default", "best", "mine"],
    ]


def test_a_compared_config_must_fit_the_space_and_have_its_own_label(
    files: dict, tmp_path: Path
) -> None:
    app = typer.Typer()
    tune.register(app)
    common = [
        "tune", "--space", files["space"], "--dataset", files["single"], "--store",
        files["store"], "-o", "thr:max", "--budget", "2", "--verify", "1", "-r", "1",
    ]  # fmt: skip
    bad = tmp_path / "bad.yaml"
    bad.write_text("config:\n  nope: 1\n")
    result = CliRunner().invoke(app, [*common, "--compare", str(bad)])
    assert result.exit_code != 0 and "nope" in str(result.exception)
    taken = tmp_path / "best.yaml"
    taken.write_text("config:\n  a: 2\n")
    result = CliRunner().invoke(app, [*common, "--compare", str(taken)])
    assert result.exit_code != 0 and "label 'best' is taken" in str(result.exception)


def test_rank_budget_sets_how_many_configs_the_ranking_samples(files: dict) -> None:
    out = invoke(
        "tune", "--space", files["space"], "--dataset", files["single"], "--store",
        files["store"], "-o", "thr:max", "--tuner", "random", "--budget", "2", "-r", "1",
        "--rank", "lasso", "--rank-budget", "9", "--top-k", "2", "--verify", "0",
        "--name", "r1", "--json",
    )  # fmt: skip
    ranking = json.loads(out)["ranking"]
    assert len(ranking["tuned"]) == 2
    assert ranking["configs"] == 9 and ranking["warning"] is None  # 9 configs, 4 parameters
    with Store(files["store"]) as db:
        assert len(db.trials(db.campaign("r1-rank").id)) == 9


def test_a_ranking_from_fewer_configs_than_parameters_is_flagged(files: dict) -> None:
    out = invoke(
        "tune", "--space", files["space"], "--dataset", files["single"], "--store",
        files["store"], "-o", "thr:max", "--tuner", "random", "--budget", "2", "-r", "1",
        "--rank", "lasso", "--rank-budget", "3", "--top-k", "2", "--verify", "0",
    )  # fmt: skip
    assert "ranking from 3 configs" in out
    assert "warning: the ranking saw 3 configs for 4 parameters" in " ".join(out.split())


def test_an_unknown_hold_is_one_line_naming_the_choices(files: dict) -> None:
    app = typer.Typer()
    tune.register(app)
    result = CliRunner().invoke(app, [
        "tune", "--space", files["space"], "--dataset", files["single"], "--store",
        files["store"], "-o", "thr:max", "--tuner", "random", "--budget", "2", "-r", "1",
        "--rank", "lasso", "--hold", "sample", "--verify", "0",
    ])  # fmt: skip
    assert result.exit_code != 0
    assert "--hold must be one of best, default, not 'sample'" in str(result.exception)
    with Store(files["store"]) as db:
        assert not db.campaigns()  # refused before anything was measured or stored
