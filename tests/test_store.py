import multiprocessing
from pathlib import Path

import pandas as pd
import pytest

from stortune.datasets import from_frame, load_dataset
from stortune.errors import StoreError
from stortune.store import Store


def make_campaign(db: Store, name: str = "c1"):
    return db.create_campaign(
        name,
        kind="tune",
        space_name="toy",
        space_yaml="name: toy\n",
        target={"kind": "command", "argv": ["true"]},
        workload={},
        objective={"metric": "mbs", "direction": "max"},
        tuner="random",
        seed=3,
        settings={"budget": 2},
    )


def test_campaign_trial_and_runs_round_trip(store: Store) -> None:
    c = make_campaign(store)
    trial = store.add_trial(c.id, 0, {"a": 1, "b": "x"})
    for rep, value in enumerate([10.0, 12.0]):
        store.add_run(
            c.id,
            trial,
            workload="w",
            repetition=rep,
            status="ok",
            metrics={"mbs": value, "iops": float("nan")},
            started_at=1.0 + rep,
            ended_at=1.5 + rep,
            info={"load": 0.1},
        )
    store.finish_trial(trial, "ok", 11.0, {"w": {"mean": 11.0}})
    store.record_environment(c.id, {"kernel": "x"})
    [t] = store.trials(c.id)
    assert t.config == {"a": 1, "b": "x"} and t.value == 11.0 and t.status == "ok"
    assert [r.metrics["mbs"] for r in t.runs] == [10.0, 12.0]
    assert t.runs[0].metrics["iops"] is None  # NaN is stored as null, not as invalid JSON
    assert store.environments(c.id)[0]["kernel"] == "x"
    assert store.campaign("c1").seed == 3 and store.campaign("c1").metric == "mbs"


def test_same_repetition_cannot_be_stored_twice(store: Store) -> None:
    c = make_campaign(store)
    trial = store.add_trial(c.id, 0, {"a": 1})
    store.add_run(
        c.id, trial, workload="w", repetition=0, status="ok", metrics={}, started_at=0, ended_at=1
    )
    with pytest.raises(Exception):  # noqa: B017 - the database's own integrity error
        store.add_run(
            c.id,
            trial,
            workload="w",
            repetition=0,
            status="ok",
            metrics={},
            started_at=0,
            ended_at=1,
        )


def test_errors_name_the_problem(tmp_path: Path, store: Store) -> None:
    make_campaign(store)
    with pytest.raises(StoreError, match="campaign 'c1' already exists"):
        make_campaign(store)
    with pytest.raises(StoreError, match=r"no campaign 'nope' .*campaigns: c1"):
        store.campaign("nope")
    with pytest.raises(StoreError, match="folder .* does not exist"):
        Store(str(tmp_path / "missing" / "x.db"))
    with pytest.raises(StoreError, match="cannot use the store URL"):
        Store("nosuchdb://x")


def test_store_survives_reopening(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    with Store(path) as db:
        c = make_campaign(db)
        db.add_trial(c.id, 0, {"a": 1})
    with Store(path) as db:
        assert len(db.trials(db.campaign("c1").id)) == 1
    assert Store(f"sqlite:///{path}").campaign("c1").name == "c1"


def test_export_and_import_round_trip(tmp_path: Path, store: Store) -> None:
    c = make_campaign(store)
    for seq, (a, values) in enumerate([(1, [5.0, 6.0]), (2, [7.0, 8.0])]):
        trial = store.add_trial(c.id, seq, {"a": a, "b": "x"})
        for rep, v in enumerate(values):
            store.add_run(
                c.id,
                trial,
                workload="w",
                repetition=rep,
                status="ok",
                metrics={"mbs": v},
                started_at=0,
                ended_at=1,
            )
    frame = store.runs_frame("c1")
    assert list(frame.columns[-3:]) == ["a", "b", "metric.mbs"]
    path = tmp_path / "c1.csv"
    frame.to_csv(path, index=False)
    dataset = load_dataset(path)
    assert dataset.params == ["a", "b"] and dataset.metrics == ["mbs"]
    assert dataset.aggregated().frame["mbs"].tolist() == [5.5, 7.5]
    count = store.import_dataset("imported", dataset, "name: x\n", "x")
    assert count == 4
    trials = store.trials(store.campaign("imported").id)
    assert [len(t.runs) for t in trials] == [2, 2]
    assert [t.runs[1].repetition for t in trials] == [1, 1]


def test_parquet_export_reads_back(tmp_path: Path) -> None:
    frame = pd.DataFrame({"a": [1, 2], "metric.x": [0.5, 0.7], "run.trial": [0, 1]})
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    dataset = load_dataset(path)
    assert dataset.params == ["a"] and dataset.metrics == ["x"]
    assert from_frame(frame).metrics == ["x"]


def test_environment_fingerprint_names_machine_and_devices() -> None:
    from stortune.system.environment import fingerprint

    data = fingerprint()
    for key in ("kernel", "cpu", "cores", "memory_mb", "packages", "disks", "fio"):
        assert key in data
    assert data["packages"]["stortune"]
    for disk in data["disks"].values():
        assert set(disk) == {"model", "rotational", "size_gb"}


def _open_at_the_barrier(path: str, barrier, failures) -> None:
    barrier.wait()
    try:
        with Store(path):
            pass
    except StoreError as exc:
        failures.put(str(exc))


def test_processes_opening_a_new_store_at_once_all_get_it(tmp_path: Path):
    """Workers of one sweep start together on a store none has created yet."""
    context = multiprocessing.get_context("fork")
    failures = context.Queue()
    for attempt in range(15):
        barrier = context.Barrier(6)
        path = str(tmp_path / f"new{attempt}.db")
        workers = [
            context.Process(target=_open_at_the_barrier, args=(path, barrier, failures))
            for _ in range(6)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert all(worker.exitcode == 0 for worker in workers)
    assert failures.empty(), failures.get()


def test_a_postgresql_url_without_its_driver_names_the_extra(monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed
    with pytest.raises(StoreError, match=r"pip install 'stortune\[postgres\]'"):
        Store("postgresql://user@127.0.0.1:1/db")


@pytest.mark.parametrize(
    "command",
    [["campaigns"], ["show", "c"], ["export", "c", "-o", "x.csv"], ["report", "c"],
     ["recommend", "c"]],
)  # fmt: skip
def test_reading_commands_never_create_a_store(tmp_path: Path, command: list[str]) -> None:
    import subprocess

    from conftest import STORTUNE

    missing = tmp_path / "typo.db"
    result = subprocess.run(
        [*STORTUNE, *command, "--store", str(missing)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"error: no store at {missing}: a measuring command (run, tune, sweep, import) makes one"
    )
    assert not missing.exists()
