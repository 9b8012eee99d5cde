"""Stores made by earlier releases still open: the schema version and its upgrade path, checked
on a store written by stortune 0.1.0 (tests/data/store-0.1.0, before the schema had a version)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stortune.cli import app
from stortune.errors import StoreError
from stortune.measure.verify import stored_gain
from stortune.store import SCHEMA_VERSION, Store
from stortune.workflows.recommend import recommend

OLD = Path(__file__).parent / "data" / "store-0.1.0"


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    """A copy of the old store, with its dataset where the campaigns recorded it."""
    path = tmp_path / "old.db"
    shutil.copy(OLD / "store.sqlite", path)
    return path


def test_an_old_store_is_upgraded_once_and_keeps_every_campaign(old_store: Path) -> None:
    with sqlite3.connect(old_store) as raw:
        tables = {r[0] for r in raw.execute("select name from sqlite_master where type='table'")}
        before = raw.execute("select count(*) from runs").fetchone()[0]
    assert "meta" not in tables  # made before versions
    with Store(str(old_store)) as store:
        assert store.schema_version == SCHEMA_VERSION
        kinds = {c.name: (c.kind, c.target["kind"]) for c in store.campaigns()}
        multi = store.campaign("multi")
        command = store.campaign("cmd")
        runs = sum(store.run_count(c.id) for c in store.campaigns())
    assert kinds == {
        "tuned": ("tune", "table"),
        "tuned-verify": ("verify", "table"),
        "multi": ("tune", "table"),  # was a "scalarized" wrapper around the table target
        "multi-verify": ("verify", "table"),
        "sweep": ("sweep", "table"),
        "cmd": ("tune", "command"),
        "ds": ("dataset", "table"),
    }
    assert runs == before  # nothing measured is lost
    scalarizer = multi.objective["scalarizer"]
    assert multi.objective["metric"] == "score" and len(scalarizer["objectives"]) == 2
    assert "command" in command.target and "argv" not in command.target
    with sqlite3.connect(old_store) as raw:
        assert raw.execute("select value from meta").fetchall() == [(str(SCHEMA_VERSION),)]
    with Store(str(old_store)) as store:  # opening again changes nothing
        assert store.campaign("multi").objective == multi.objective


def test_an_old_stores_campaigns_show_report_and_recommend(old_store: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    store = ["--store", str(old_store)]
    for name in ("tuned", "multi", "sweep", "cmd", "ds"):
        shown = runner.invoke(app, ["show", name, *store, "--json"])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.output)["trials"]
        exported = runner.invoke(app, ["export", name, "-o", str(tmp_path / f"{name}.csv"), *store])
        assert exported.exit_code == 0, exported.output
        reported = runner.invoke(app, ["report", name, "-o", str(tmp_path / "r"), *store])
        assert reported.exit_code == 0, reported.output
    with Store(str(old_store)) as db:
        # the multi-objective verification is scored from the stored raw metrics
        gain = stored_gain(db, db.campaign("multi"))
        assert gain is not None and gain.gain > 1
        assert recommend(db, "tuned").config == {"x": 8, "mode": "b"}
        text = recommend(db, "tuned").text
        assert "APPLY IT" in text and "5.39x" in text  # paired, over its 2 rounds


def test_a_store_from_a_newer_release_is_refused(old_store: Path) -> None:
    with Store(str(old_store)):
        pass
    with sqlite3.connect(old_store) as raw:
        raw.execute("update meta set value = ? where key = 'schema_version'", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="written by a newer stortune"):
        Store(str(old_store))
