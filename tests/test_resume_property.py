"""Resume is the uninterrupted campaign: for bo, tpe and random, with racing on and off, a
campaign stopped at three random points and resumed each time measures the same configs, the
same runs and recommends the same config as one that ran straight through (the table target,
with noise, so that racing re-measures and a race winner's value moves as it defends).

The same holds for the `stortune` command SIGKILLed at three random points and continued by
`stortune resume` each time, the kills landing just before a write: any, a trial's finish, or
what its tuner was told (a trial once finished before that was stored, and a kill in between
had the replay tell the tuner the value the trial grew to as it defended, not the live one)."""

import itertools
import os
import signal
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import tune

from stortune.enums import RunStatus
from stortune.errors import Interrupted
from stortune.measure.campaigns import open_campaign
from stortune.measure.results import campaign_best
from stortune.space import parse_space
from stortune.store import Run, Store
from stortune.targets.table import TableSettings, TableTarget

SPACE = parse_space(
    """
name: grid
parameters:
  a: {type: int, low: 0, high: 9, default: 0}
  b: {type: int, low: 0, high: 9, default: 0}
  c: {type: categorical, values: [x, y, z], default: x}
"""
)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    rows = ["a,b,c,thr"]
    for a, b, c in itertools.product(range(10), range(10), "xyz"):
        rows.append(f"{a},{b},{c},{100.0 + 10 * a - (b - 6) ** 2 + (25 if c == 'z' else 0)}")
    path = tmp_path / "grid.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def target(path: Path) -> TableTarget:
    settings = TableSettings(dataset=str(path), noise=0.05, noise_seed=4)  # type: ignore[call-arg]
    return TableTarget(SPACE, settings)


def content(store: Store, name: str) -> tuple:
    campaign = store.campaign(name)
    trials = store.trials(campaign.id)
    runs = sorted(
        (t.seq, r.repetition, r.status, round(r.metrics.get("thr", 0.0), 9))
        for t in trials
        for r in t.runs
    )
    best = campaign_best(campaign, trials)
    return [(t.seq, sorted(t.config.items())) for t in trials], runs, best and best.config


class StopAt:
    """Interrupts the campaign once its `at`-th run (counted over every sitting) is stored."""

    def __init__(self, store: Store, name: str, at: int) -> None:
        self.store, self.name, self.at = store, name, at

    def __call__(self, event: object) -> None:
        stored = self.store.run_count(self.store.campaign(self.name).id)
        if getattr(event, "kind", "") == "run" and stored >= self.at:
            raise KeyboardInterrupt


@pytest.mark.slow
@pytest.mark.parametrize("intensify", [True, False], ids=["racing", "no-racing"])
@pytest.mark.parametrize("tuner", ["bo", "tpe", "random"])
def test_a_campaign_stopped_three_times_and_resumed_equals_one_run_straight(
    tmp_path: Path, table: Path, tuner: str, intensify: bool
) -> None:
    settings = dict(
        tuner=tuner, seed=3, budget=10, repetitions=3, intensify=intensify, baseline=intensify
    )
    with Store(str(tmp_path / "s.db")) as store:
        tune(store, "straight", SPACE, target(table), "thr", **settings)
        straight = content(store, "straight")
        total = len(straight[1])
        rng = np.random.default_rng(zlib.crc32(f"{tuner}-{intensify}".encode()))
        stops = sorted(rng.choice(np.arange(2, total), 3, replace=False).tolist())
        with pytest.raises(Interrupted):
            tune(
                store, "resumed", SPACE, target(table), "thr",
                on_event=StopAt(store, "resumed", stops[0]), **settings,
            )  # fmt: skip
        for at in stops[1:]:
            with pytest.raises(Interrupted):
                open_campaign(store, "resumed", target=target(table)).run(
                    StopAt(store, "resumed", at)
                )
        open_campaign(store, "resumed", target=target(table)).run()
        assert content(store, "resumed") == straight, (tuner, intensify, stops)


# ---- the command line, SIGKILLed ----------------------------------------------------------------
# The stortune command with a kill switch: once this sitting has stored KILL_AFTER_RUNS runs, the
# process SIGKILLs itself just before the next commit of the kind KILL_BEFORE names ("any" write;
# "finish": a trial finished; "told": what the tuner was told), so that write is lost as a kill
# at that moment would lose it. A kill from outside lands wherever the process happens to be: a
# table run takes microseconds, so it would rarely land between two given writes.
KILLABLE = """
import os, signal, sys
import sqlalchemy as sa
from stortune.cli import main

after = int(os.environ.get("KILL_AFTER_RUNS", "-1"))
before = os.environ.get("KILL_BEFORE", "any")
writes = {}  # connection -> what its open transaction wrote

@sa.event.listens_for(sa.engine.Engine, "before_cursor_execute")
def _wrote(conn, cursor, statement, params, context, many):
    kinds = writes.setdefault(id(conn), set())
    if statement.startswith("INSERT INTO runs"):
        kinds.add("run")
    elif statement.startswith("UPDATE trials SET status"):
        kinds.add("finish")
    elif statement.startswith("UPDATE trials SET info") and "told" in repr(params):
        kinds.add("told")

@sa.event.listens_for(sa.engine.Engine, "rollback")
def _dropped(conn):
    writes.pop(id(conn), None)

@sa.event.listens_for(sa.engine.Engine, "commit")
def _committing(conn):
    global after
    kinds = writes.pop(id(conn), set())
    if after == 0 and (before == "any" or before in kinds):
        os.kill(os.getpid(), signal.SIGKILL)
    if after > 0 and "run" in kinds:
        after -= 1

sys.argv[0] = "stortune"
main()
"""
BUDGET, REPETITIONS = 12, 2
MIN_RUNS = BUDGET * REPETITIONS  # racing: 2 runs of the first config, then at least a pair each


def stortune(
    args: list[str], store: Path, temp: Path, kill: tuple[int, str] | None = None
) -> subprocess.Popen:
    """The stortune command on `store`, with TMPDIR `temp`; `kill`: (runs, kind) for KILLABLE."""
    # one thread each: two run side by side, and BO's small fits gain nothing from more
    env = {**os.environ, "TMPDIR": str(temp), "OMP_NUM_THREADS": "1"}
    if kill is not None:
        env["KILL_AFTER_RUNS"], env["KILL_BEFORE"] = str(kill[0]), kill[1]
    return subprocess.Popen(
        [sys.executable, "-c", KILLABLE, *args, "--store", str(store), "-q"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(child: subprocess.Popen) -> tuple[int, str]:
    out, err = child.communicate(timeout=600)
    return child.returncode, (out + err)[-2000:]


def stored(store: Path, name: str) -> tuple:
    """Trials (seq, config, status, value, info) and runs (seq, repetition, status, value,
    race, step) in order, and the recommended config."""
    with Store(str(store), existing=True) as db:
        campaign = db.campaign(name)
        trials = db.trials(campaign.id)
        best = campaign_best(campaign, trials)
    rounded = lambda v: None if v is None else round(v, 9)  # noqa: E731
    return (
        [(t.seq, t.config, t.status, rounded(t.value), t.info) for t in trials],
        sorted(
            (t.seq, r.repetition, r.status, rounded(r.metrics.get("thr")), *race_step(r))
            for t in trials
            for r in t.runs
        ),
        best and best.config,
    )


def race_step(run: object) -> tuple:
    info = getattr(run, "info", None) or {}
    return info.get("race", -1), info.get("step", -1)


def run_count(store: Path, name: str) -> int:
    with Store(str(store), existing=True) as db:
        return db.run_count(db.campaign(name).id)


@pytest.mark.slow
# each tuner once, racing and not between them: the in-process test above takes every pair
@pytest.mark.parametrize(
    ("tuner", "intensify"),
    [("bo", True), ("tpe", False), ("random", True)],
    ids=["bo-racing", "tpe-no-racing", "random-racing"],
)
def test_the_command_sigkilled_three_times_and_resumed_equals_one_run_straight(
    tmp_path: Path, table: Path, tuner: str, intensify: bool
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    tune_args = [
        "tune", "--dataset", str(table), "--noise", "0.05", "--noise-seed", "4", "-o", "thr:max",
        "--tuner", tuner, "--seed", "3", "--budget", str(BUDGET), "-r", str(REPETITIONS),
        "--intensify" if intensify else "--no-intensify", "--verify", "0", "--name", "c",
    ]  # fmt: skip
    straight = stortune(tune_args, tmp_path / "straight.db", temp)  # beside the killed one
    rng = np.random.default_rng(zlib.crc32(f"{tuner}-{intensify}".encode()))
    # first before what a tuner was told is stored (racing keeps it), or before a trial's finish
    kinds = ["told" if intensify else "finish", *rng.permutation(["any", "finish"]).tolist()]
    killed, sittings = tmp_path / "killed.db", []
    args = tune_args
    for i, kind in enumerate(kinds):
        runs = run_count(killed, "c") if i else 0
        at = runs + 1 + int(rng.integers(0, max(1, (MIN_RUNS - runs - 1) // (3 - i))))
        code, said = finished(stortune(args, killed, temp, (at - runs, kind)))
        sittings.append((at, kind, code))
        assert code == -signal.SIGKILL, (sittings, said)
        args = ["resume", "c"]
    code, said = finished(stortune(["tune", "--resume", "c", "--verify", "0"], killed, temp))
    assert code == 0, said
    code, said = finished(straight)
    assert code == 0, said
    assert stored(killed, "c") == stored(tmp_path / "straight.db", "c"), sittings
    left = [p.name for p in temp.glob("stortune-*") if not p.name.startswith("stortune-matplotlib")]
    assert not left, sittings  # matplotlib's cache, without a writable home, is kept on purpose


def test_a_table_told_its_stored_runs_draws_the_noise_one_sitting_would(table: Path) -> None:
    """A config measured again gets a fresh noise draw; a resumed campaign's new target, told
    the runs stored before the stop, gets the draw the one process would have got."""
    config = SPACE.default_config()
    one = target(table)
    one.apply(config)
    first, again = one.run(None, None, 0), one.run(None, None, 0)
    stored_run = Run(
        id=1, trial_id=1, workload="default", repetition=0, status=RunStatus.OK,
        metrics=first.metrics, error=None, info=first.info, started_at=0.0, ended_at=1.0,
    )  # fmt: skip
    resumed = target(table)
    resumed.recall([stored_run])
    resumed.apply(config)
    assert resumed.run(None, None, 0).metrics == again.metrics != first.metrics


def test_a_race_stored_finished_without_its_told_value_keeps_the_value_it_had(
    tmp_path: Path, table: Path
) -> None:
    """A store an earlier version left finished but without what the tuner was told (it wrote
    that last, and was killed in between): the resume keeps the value the trial had then, not
    the one it grows to as it defends its place."""
    settings = dict(tuner="random", seed=3, budget=6, repetitions=2, intensify=True, baseline=True)
    with Store(str(tmp_path / "s.db")) as store:
        with pytest.raises(Interrupted):
            tune(
                store, "c", SPACE, target(table), "thr", on_event=StopAt(store, "c", 3),
                **settings,
            )  # fmt: skip
        first = store.trials(store.campaign("c").id)[0]  # the default: the first incumbent
        info = dict(first.info or {})
        told = info.pop("told")
        store.update_trial(first.id, info=info)
        open_campaign(store, "c", target=target(table)).run()
        after = store.trial(first.id)
        assert after.info["told"] == told != after.value
