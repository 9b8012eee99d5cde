"""The store on PostgreSQL, the way several machines share one campaign: two processes write runs
to the same campaign at once, and nothing is lost. A private server is started for the test on
127.0.0.1 and removed afterwards."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from stortune.store import Store

PG_BIN = Path("/usr/lib/postgresql/15/bin")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="starting a private PostgreSQL server here needs root (runuser)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres_url():
    # pytest's own temporary folders are private to root; the server runs as `postgres`
    data = Path(tempfile.mkdtemp(prefix="stortune-pg-"))
    shutil.chown(data, "postgres", "postgres")
    port = free_port()

    def as_postgres(*args: str) -> None:
        command = ["runuser", "-u", "postgres", "--", *args]
        subprocess.run(command, check=True, capture_output=True, timeout=120, cwd="/")

    as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    server = f"-h 127.0.0.1 -p {port} -k {data}"
    as_postgres(
        str(PG_BIN / "pg_ctl"),
        "-D",
        str(data),
        "-w",
        "-l",
        str(data / "log"),
        "-o",
        server,
        "start",
    )
    try:
        as_postgres(str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "stortune")
        yield f"postgresql://postgres@127.0.0.1:{port}/stortune"  # the URL a user types
    finally:
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(data),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
            capture_output=True,
            timeout=60,
            cwd="/",
        )
        shutil.rmtree(data, ignore_errors=True)


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
