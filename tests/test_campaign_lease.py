"""One process measures a campaign at a time: a lease in the store with a heartbeat, on SQLite
and PostgreSQL alike. Two `stortune resume` of one campaign at once: one measures, the other
says who does in one line (exit code 2). A lease whose holder died, or whose heartbeat stopped,
is taken over."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import STORTUNE, tune

from stortune.errors import CampaignBusy, Interrupted, LeaseLost
from stortune.measure.lease import CampaignLease, pid_space
from stortune.space import parse_space
from stortune.store import SCHEMA_VERSION, Lease, Store
from stortune.targets.command import CommandTarget

# A benchmark that waits at a gate: it says it arrived (named after the stortune process that
# runs it), then waits for the test to open the gate, so a process stays in its campaign for
# as long as the test needs, without any timing.
GATED = textwrap.dedent(
    """\
    import json, os, sys, time
    from pathlib import Path
    x, gate = float(sys.argv[1]), Path(sys.argv[2])
    (gate.parent / f"arrived-{os.getppid()}").touch()
    while not gate.exists():
        time.sleep(0.02)
    print(json.dumps({"score": 10 - (x - 3) ** 2}))
    """
)
SPACE = parse_space("name: line\nparameters:\n  x: {type: float, low: 0, high: 6, default: 1}\n")
DEADLINE = 120.0  # seconds a test waits for a process before it gives up (never reached)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_url")
    return str(tmp_path / "lease.db")


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    """The gate file; its folder holds the benchmark and the arrival marks."""
    folder = tmp_path / "gate"
    folder.mkdir()
    (folder / "bench.py").write_text(GATED)
    return folder / "open"


def arrivals(gate: Path) -> set[str]:
    """The pids of the stortune processes whose benchmark reached the gate."""
    return {p.name.removeprefix("arrived-") for p in gate.parent.glob("arrived-*")}


def stored_campaign(url: str, gate: Path) -> None:
    """Campaign 'dr': two evaluations of two runs each, measured through the gate."""
    gate.touch()
    target = CommandTarget(
        command=[sys.executable, str(gate.parent / "bench.py"), "{x}", str(gate)]
    )
    with Store(url) as db:
        tune(db, "dr", SPACE, target, "score", budget=2, repetitions=2, seed=1)
    gate.unlink()
    for mark in gate.parent.glob("arrived-*"):
        mark.unlink()


def resume(url: str, machine: Path) -> subprocess.Popen:
    """`stortune resume dr` as on a machine of its own: each has its own benchmark lock (which
    keeps two campaigns on one machine apart), as two machines sharing one store would."""
    machine.mkdir(exist_ok=True)
    return subprocess.Popen(
        [*STORTUNE, "resume", "dr", "--budget", "5", "--store", url, "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "STORTUNE_LOCK_DIR": str(machine)},
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts; any still alive at its end is killed with its children."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def slots(url: str) -> list[tuple[int, str, int]]:
    with Store(url) as db:
        campaign = db.campaign("dr")
        return [(t.seq, r.workload, r.repetition) for t in db.trials(campaign.id) for r in t.runs]


def test_two_resumes_at_once_one_measures_the_other_says_who(
    store_url: str, gate: Path, tmp_path: Path, processes: list[subprocess.Popen]
) -> None:
    stored_campaign(store_url, gate)
    processes += [resume(store_url, tmp_path / "a"), resume(store_url, tmp_path / "b")]
    deadline = time.monotonic() + DEADLINE
    # until one gives up, or both measure at once (which the lease exists to prevent)
    while all(p.poll() is None for p in processes) and len(arrivals(gate)) < 2:
        assert time.monotonic() < deadline, "neither process gave up nor reached the gate"
        time.sleep(0.05)
    gate.touch()
    outputs = [p.communicate(timeout=DEADLINE) for p in processes]
    codes = [p.returncode for p in processes]
    assert sorted(codes) == [0, 2], outputs
    winner, loser = (processes[0], processes[1]) if codes[0] == 0 else (processes[1], processes[0])
    said = outputs[processes.index(loser)][1].strip().splitlines()
    host = re.escape(socket.gethostname())
    assert len(said) == 1, said
    assert re.fullmatch(
        rf"error: campaign 'dr' is being measured by pid {winner.pid} on host {host} "
        r"\(heartbeat \d+ s ago\); wait for it or stop it",
        said[0],
    ), said
    assert arrivals(gate) == {str(winner.pid)}
    stored = slots(store_url)
    assert len(stored) == len(set(stored)) == 5 * 2  # every slot once
    with Store(store_url) as db:
        campaign = db.campaign("dr")
        assert campaign.status == "finished"
        assert db.lease(campaign.id) is None  # released at the end


def test_a_killed_holders_lease_is_taken_over(
    store_url: str, gate: Path, tmp_path: Path, processes: list[subprocess.Popen]
) -> None:
    stored_campaign(store_url, gate)
    holder = resume(store_url, tmp_path / "a")
    processes.append(holder)
    deadline = time.monotonic() + DEADLINE
    while not arrivals(gate):
        assert holder.poll() is None, holder.communicate()
        assert time.monotonic() < deadline, "the holder never reached the gate"
        time.sleep(0.05)
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    with Store(store_url) as db:
        held = db.lease(db.campaign("dr").id)
    assert held is not None and held.pid == holder.pid  # a kill gives no chance to release

    gate.touch()
    again = subprocess.run(
        [*STORTUNE, "resume", "dr", "--budget", "5", "--store", store_url, "-q"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert again.returncode == 0, again.stderr
    stored = slots(store_url)
    assert len(stored) == len(set(stored)) == 5 * 2


# ---- the lease's rules, in one process ----------------------------------------------------------
@pytest.fixture
def campaign_id(store: Store) -> int:
    return store.create_campaign(
        "dr",
        kind="tune",
        space_name="line",
        space_yaml="name: line\n",
        target={"kind": "command", "command": ["true"]},
        workload={},
        objective={"metric": "score"},
    ).id


def plant(store: Store, campaign_id: int, replacing: str | None = None, **fields: Any) -> Lease:
    """A lease held by someone else (another host unless told), taken from `replacing`."""
    now = time.time()
    lease = Lease(
        **{
            "campaign_id": campaign_id,
            "token": "theirs",
            "host": "elsewhere",
            "pid": 4242,
            "pid_space": "other",
            "acquired_at": now,
            "heartbeat_at": now,
            **fields,
        }
    )
    assert store.claim_lease(lease, replacing=replacing)
    return lease


def test_a_live_holder_elsewhere_keeps_its_lease(store: Store, campaign_id: int) -> None:
    plant(store, campaign_id, heartbeat_at=time.time() - 5)
    with pytest.raises(
        CampaignBusy,
        match=r"^campaign 'dr' is being measured by pid 4242 on host elsewhere \(heartbeat \d+ s "
        r"ago\); wait for it or stop it$",
    ):
        CampaignLease(store, store.campaign("dr")).__enter__()
    assert store.lease(campaign_id).token == "theirs"


def test_a_lease_whose_heartbeat_stopped_is_taken_over(store: Store, campaign_id: int) -> None:
    plant(store, campaign_id, heartbeat_at=time.time() - 61)
    with CampaignLease(store, store.campaign("dr"), stale=60) as lease:
        held = store.lease(campaign_id)
        assert held.token == lease.token != "theirs"
        assert (held.host, held.pid) == (socket.gethostname(), os.getpid())
    assert store.lease(campaign_id) is None


def test_a_dead_holder_on_this_host_is_taken_over(store: Store, campaign_id: int) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    plant(store, campaign_id, host=socket.gethostname(), pid=gone.pid, pid_space=pid_space())
    with CampaignLease(store, store.campaign("dr")) as lease:
        assert store.lease(campaign_id).token == lease.token


def test_a_live_holder_on_this_host_keeps_its_lease(store: Store, campaign_id: int) -> None:
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        plant(store, campaign_id, host=socket.gethostname(), pid=alive.pid, pid_space=pid_space())
        with pytest.raises(CampaignBusy, match=f"by pid {alive.pid} on host"):
            CampaignLease(store, store.campaign("dr")).__enter__()
    finally:
        alive.kill()
        alive.wait()


def test_the_holder_renews_its_heartbeat_while_it_holds_the_lease(
    store: Store, campaign_id: int
) -> None:
    with CampaignLease(store, store.campaign("dr"), stale=1.0):
        first = store.lease(campaign_id).heartbeat_at
        deadline = time.monotonic() + DEADLINE
        while store.lease(campaign_id).heartbeat_at == first:
            assert time.monotonic() < deadline, "the heartbeat was never renewed"
            time.sleep(0.02)


def test_a_holder_whose_lease_was_taken_stops_and_leaves_the_campaign_alone(
    tmp_path: Path, gate: Path
) -> None:
    gate.touch()
    target = CommandTarget(
        command=[sys.executable, str(gate.parent / "bench.py"), "{x}", str(gate)]
    )
    with Store(str(tmp_path / "s.db")) as db:

        def take_over(event: Any) -> None:
            if getattr(event, "kind", "") == "run":
                campaign = db.campaign("t")
                held = db.lease(campaign.id)
                if held is not None and held.token != "thief":
                    plant(db, campaign.id, token="thief", replacing=held.token)

        with pytest.raises(LeaseLost, match="campaign 't' was taken over by pid 4242 on host"):
            tune(db, "t", SPACE, target, "score", budget=3, repetitions=2, on_event=take_over)
        campaign = db.campaign("t")
        assert db.run_count(campaign.id) == 1  # nothing stored once the lease was gone
        assert db.lease(campaign.id).token == "thief"  # the new holder's lease stays
        assert campaign.status == "running"  # its status is the new holder's to set


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_the_lease_is_released_when_measuring_stops(
    tmp_path: Path, gate: Path, stop: type[BaseException]
) -> None:
    gate.touch()
    target = CommandTarget(
        command=[sys.executable, str(gate.parent / "bench.py"), "{x}", str(gate)]
    )

    def halt(event: Any) -> None:
        if getattr(event, "kind", "") == "run":
            raise stop

    with Store(str(tmp_path / "s.db")) as db:
        with pytest.raises(Interrupted if stop is KeyboardInterrupt else stop):
            tune(db, "t", SPACE, target, "score", budget=3, repetitions=2, on_event=halt)
        campaign = db.campaign("t")
        assert db.lease(campaign.id) is None
        assert campaign.status == ("interrupted" if stop is KeyboardInterrupt else "failed")


def test_a_store_without_leases_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    with Store(str(path)):
        pass
    with sqlite3.connect(path) as raw:  # as the release before leases left it
        raw.execute("DROP TABLE leases")
        raw.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with Store(str(path)) as db:
        assert db.schema_version == SCHEMA_VERSION
        campaign = db.create_campaign(
            "c", kind="tune", space_name="s", space_yaml="name: s\n",
            target={"kind": "command"}, workload={}, objective={"metric": "m"},
        )  # fmt: skip
        with CampaignLease(db, campaign):
            assert db.lease(campaign.id) is not None
