"""The store on PostgreSQL, the way several machines share one campaign: two processes write runs
to the same campaign at once, and nothing is lost. A private server is started for the test on
127.0.0.1 and removed afterwards (`postgres_url`, tests/conftest.py)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stortune.store import Store

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="starting a private PostgreSQL server here needs root (runuser)"
)


WRITER = textwrap.dedent(
    """\
    import sys, time
    from stortune.store import Store
    url, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with Store(url) as db:
        c = db.campaign("shared")
        trials = {t.seq: t.id for t in db.trials(c.id)}
        for seq in range(first, first + count):
            for rep in range(3):
                now = time.time()
                db.add_run(c.id, trials[seq], workload="w", repetition=rep, status="ok",
                           metrics={"mbs": seq + rep / 10}, started_at=now, ended_at=now)
    """
)


def test_two_writers_share_one_campaign(postgres_url: str, tmp_path: Path) -> None:
    pytest.importorskip("psycopg", reason="the postgres extra is installed by `make test`")
    with Store(postgres_url) as db:
        c = db.create_campaign(
            "shared",
            kind="sweep",
            space_name="s",
            space_yaml="name: s\n",
            target={"kind": "command"},
            workload={},
            objective={"metric": "mbs"},
        )
        for seq in range(40):
            db.add_trial(c.id, seq, {"x": seq})
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writers = [
        subprocess.Popen([sys.executable, str(script), postgres_url, str(first), "20"])
        for first in (0, 20)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    with Store(postgres_url) as db:
        trials = db.trials(db.campaign("shared").id)
        assert db.run_count(db.campaign("shared").id) == 120
    assert all(len(t.runs) == 3 for t in trials)
    assert trials[25].runs[2].metrics == {"mbs": 25.2}
    frame = Store(postgres_url).runs_frame("shared")
    assert len(frame) == 120 and "metric.mbs" in frame.columns
