"""The sweep: interleaving, resume, drift cancelled by reference runs, a real localfs sweep."""

import json
import os
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import sweep
from fixtures.sweep import SPACE, start
from typer.testing import CliRunner

from stortune.cli import app
from stortune.measure.campaigns import open_campaign
from stortune.measure.reference import campaign_relative
from stortune.measure.runner import Event, EventKind, RunRules
from stortune.sampling import sample
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.command import CommandTarget

runner = CliRunner()


def test_reference_runs_cancel_drift(store: Store, drifting: CommandTarget) -> None:
    start(store, drifting, reps=2, every=1).run()
    campaign = store.campaign("s")
    trials = store.trials(campaign.id)
    relative = campaign_relative(store, campaign)
    raw_spread, rel_means = {}, {}
    for t in trials[1:]:
        values = [r.metrics["mbs"] for r in t.runs]
        raw_spread[t.config["level"]] = max(values) / min(values)
        rel_means[t.config["level"]] = sum(relative[r.id] for r in t.runs) / len(t.runs)
    assert max(raw_spread.values()) > 1.05  # the drift is visible in the raw repetitions
    for level, value in rel_means.items():
        assert value == pytest.approx(level, rel=0.02)  # ... and gone relative to the reference


def test_repetitions_are_interleaved_and_the_reference_recurs(
    store: Store, drifting: CommandTarget
) -> None:
    start(store, drifting, reps=2, every=2).run()
    trials = store.trials(store.campaign("s").id)
    runs = sorted((r.started_at, t.seq, r.repetition) for t in trials for r in t.runs)
    design_reps = [rep for _, seq, rep in runs if seq != 0]
    assert design_reps == [0, 0, 0, 0, 1, 1, 1, 1]  # a whole pass before any second repetition
    seqs = [seq for _, seq, _ in runs]
    assert seqs[0] == 0 and seqs[-1] == 0  # the reference opens and closes the span
    assert seqs.count(0) == 5  # and recurs after every 2 design configs
    assert all(t.status == "ok" and len(t.runs) == 2 for t in trials[1:])


def test_interrupted_sweep_resumes_without_repeating(store: Store, drifting: CommandTarget) -> None:
    from stortune.measure.runner import Interrupted

    measuring = start(store, drifting, reps=2, every=0)
    seen: list[Event] = []

    def stop_after_three(event: Event) -> None:
        if event.kind == EventKind.RUN:
            seen.append(event)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted):
        measuring.run(stop_after_three)
    assert store.campaign("s").status == "interrupted"
    before = {r.id for t in store.trials(store.campaign("s").id) for r in t.runs}
    assert len(before) == 3
    open_campaign(store, "s").run()
    trials = store.trials(store.campaign("s").id)
    after = {r.id for t in trials for r in t.runs}
    assert before <= after and len(after) == 8
    assert all(sorted(r.repetition for r in t.runs) == [0, 1] for t in trials[1:])


@pytest.mark.skipif(os.geteuid() != 0, reason="the localfs target needs root")
def test_real_localfs_sweep_and_relative_export(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    common = [
        "--no-check-disturbance",
        "--store",
        db,
        "--space",
        "localfs",
        "-w",
        "randread",
        "--design",
        "random",
        "-n",
        "2",
        "-r",
        "1",
        "--runtime",
        "1",
        "--reference-every",
        "1",
        "--image-size",
        "1g",
        "--objective",
        "total.bw_mbs:max",
    ]
    plan = runner.invoke(app, ["sweep", *common, "--dry-run", "--json"])
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.output)["runs"] == 2
    result = runner.invoke(app, ["sweep", *common, "--name", "real", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "campaign": "real",
        "configs": 2,
        "runs_ok": 5,
        "runs_failed": 0,
        "runs_disturbed": 0,
        "stopped_by": "budget",
        "notes": [],
    }
    out = tmp_path / "real.csv"
    assert runner.invoke(app, ["export", "real", "-o", str(out), "--store", db]).exit_code == 0
    frame = pd.read_csv(out)
    assert frame["metric.total.bw_mbs_rel"].notna().all()
    assert (frame["metric.total.bw_mbs_rel"] > 0).all()


def test_disturbed_runs_are_measured_again_and_replaced(
    store: Store, drifting: CommandTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run still disturbed after its retries is stored as such, then measured again by the
    sweep's second pass; the slot ends with one good run and no disturbed placeholder."""
    from stortune.system import disturbance

    verdicts = iter(["fake load"] * 3)  # one run: the first try and both retries disturbed
    monkeypatch.setattr(disturbance, "judge", lambda *a, **k: next(verdicts, None))
    space = parse_space(SPACE)
    rules = RunRules(check_disturbance=True, settle_seconds=0.0)
    configs = sample(space, "factorial", 0).configs
    measuring = sweep(
        store, "d", space, drifting, "mbs", configs, repetitions=1, reference_every=0, rules=rules
    )
    advanced: list[Event] = []

    def count(event: Event) -> None:
        m = event.measurement
        if event.kind == EventKind.RUN and event.counted and m and m.status != "disturbed":
            advanced.append(event)

    measuring.run(count)
    planned = measuring.plan.planned_runs()
    assert len(advanced) == planned == len(configs)  # the progress bar ends at 100%
    runs = [r for t in store.trials(measuring.campaign.id)[1:] for r in t.runs]
    assert len(runs) == len(configs) and {r.status for r in runs} == {"ok"}
    redone = [r for r in runs if r.info.get("disturbed_attempts")]
    assert redone == [] or all(len(r.info["disturbed_attempts"]) < 3 for r in redone)
    assert store.campaign("d").status == "finished"


def test_resume_measures_a_disturbed_slot_again(store: Store, drifting: CommandTarget) -> None:
    space = parse_space(SPACE)
    configs = sample(space, "factorial", 0).configs
    measuring = sweep(store, "r", space, drifting, "mbs", configs, repetitions=1, reference_every=0)
    trial = store.trials(measuring.campaign.id)[1]
    now = time.time()
    store.add_run(
        measuring.campaign.id,
        trial.id,
        workload="default",
        repetition=0,
        status="disturbed",
        metrics={"mbs": 1.0},
        started_at=now,
        ended_at=now,
        error="another benchmark",
    )
    resumed = open_campaign(store, "r")
    assert resumed.plan.done_runs() == 0  # the disturbed slot is still to do
    resumed.run()
    assert resumed.plan.done_runs() == len(configs)
    slot = store.trial_runs(trial.id)
    assert [r.status for r in slot] == ["ok"]
    kept = slot[0].info["replaced_disturbed"]  # what the placeholder measured is not lost
    assert kept[0]["reason"] == "another benchmark" and kept[0]["metrics"] == {"mbs": 1.0}


def test_a_second_sweep_measures_only_configs_the_first_did_not(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    space_file = tmp_path / "drift.yaml"
    space_file.write_text(SPACE)
    script = tmp_path / "b.py"
    script.write_text("import json, sys\nprint(json.dumps({'mbs': float(sys.argv[1])}))\n")
    common = ["--store", db, "--space", str(space_file), "--command",
              f"{sys.executable} {script} {{level}}", "-o", "mbs:max", "-r", "1",
              "--reference-every", "0", "--no-check-disturbance", "--json",
              "--design", "factorial"]  # fmt: skip

    def run_sweep(*args: str):
        return runner.invoke(app, ["sweep", *common, *args])

    first = run_sweep("-n", "2", "--name", "first")
    assert first.exit_code == 0, first.output
    second = run_sweep("--exclude-measured", "first", "--name", "second")
    assert second.exit_code == 0, second.output
    with Store(db) as store:
        levels = {
            name: sorted(
                t.config["level"] for t in store.trials(store.campaign(name).id) if t.seq
            )  # seq 0 is the reference config's trial
            for name in ("first", "second")
        }
    assert levels == {"first": [1.0, 1.5], "second": [2.0, 3.0]}
    again = run_sweep("--exclude-measured", "first", "--exclude-measured", "second")
    assert "no configs left to measure" in str(again.exception)
    out = tmp_path / "both.csv"
    exported = runner.invoke(app, ["export", "first", "second", "-o", str(out), "--store", db])
    assert exported.exit_code == 0, exported.output
    frame = pd.read_csv(out)
    assert frame.groupby("run.campaign")["level"].apply(lambda s: sorted(set(s))).to_dict() == {
        "first": [1.0, 1.5],
        "second": [2.0, 3.0],
    }
    assert frame["run.id"].is_unique
