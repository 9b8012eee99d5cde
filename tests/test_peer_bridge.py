"""The peers of bench/tuners.py (HEBO, SMAC3) behind the JSON-lines bridge: their proposals are
valid configs, they learn configs they did not propose, and they search. The peers live in
bench/peers/.venv, which the bench installs (minutes, GBs): without it the peer tests skip
rather than install it."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest

from stortune.errors import StortuneError
from stortune.space import Config, Space, parse_space

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
peer_tuners = importlib.import_module("peer_tuners")

SPACE = """\
name: peer3
parameters:
  threads: {type: int, low: 1, high: 256, default: 4}
  block: {type: ordinal, values: [4k, 8k, 16k, 32k, 64k, 128k, 256k, 512k], default: 4k}
  sched: {type: categorical, values: [none, mq-deadline, bfq, kyber], default: none}
"""
BLOCKS = ["4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k"]


def objective(config: Config) -> float:
    """Best (0) at 192 threads, 256k blocks and bfq; every step away costs."""
    return (
        -abs(config["threads"] - 192) / 64
        - abs(BLOCKS.index(config["block"]) - 6) / 2
        - 0.5 * (config["sched"] != "bfq")
    )


@pytest.fixture
def space() -> Space:
    return parse_space(SPACE)


@pytest.mark.slow
@pytest.mark.parametrize("peer", peer_tuners.PEER_NAMES)
def test_peer_asks_valid_configs_learns_told_ones_and_searches(space: Space, peer: str) -> None:
    python = peer_tuners.installed_python(peer)
    if python is None:
        pytest.skip(f"{peer} is not installed in {peer_tuners.VENV} (bench/tuners.py installs it)")
    tuner = peer_tuners.PeerTuner(space, "max", seed=0, budget=12, peer=peer, python=str(python))
    try:
        told = {"threads": 8, "block": "8k", "sched": "kyber"}  # never proposed: a replayed run
        tuner.tell(told, objective(told))
        values = []
        for i in range(12):
            config = tuner.ask()
            assert config == space.validate(config)
            if i == 5:  # measured another config instead (a pool's nearest row)
                config = dict(config, sched="none" if config["sched"] != "none" else "kyber")
            value = None if i == 3 else objective(config)  # the 4th evaluation fails
            tuner.tell(config, value)
            values.append(-math.inf if value is None else value)
    finally:
        tuner.close()
    # Better than all of its random start, by at least half a block-size step.
    assert max(values) >= max(values[:3]) + 0.25, values


def test_bridge_errors_are_stortune_errors(space: Space) -> None:
    """The bridge refuses an unknown peer before importing any: no peer venv needed."""
    with pytest.raises(StortuneError, match="usage"):
        peer_tuners.PeerTuner(space, peer="nope", python=sys.executable)


FAKE_BRIDGE = """\
import json, sys, time
sys.stdin.readline()
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    {wait}
print(json.dumps({{}}), flush=True)
sys.stdin.readline()
"""


def fake_python(tmp_path: Path, wait: str, seconds: float = 3) -> str:
    """An interpreter stand-in that runs a fake bridge answering `init` after `seconds` of
    `wait` (the bridge's path and the peer's name it is started with are ignored)."""
    program = tmp_path / "bridge.py"
    program.write_text(FAKE_BRIDGE.format(wait=wait, seconds=seconds))
    launcher = tmp_path / "python"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{program}"\n')
    launcher.chmod(0o755)
    return str(launcher)


def test_a_bridge_that_works_past_the_reply_limit_is_waited_for(space: Space, tmp_path) -> None:
    """On a busy machine a starved bridge answers late but keeps using CPU: not stuck."""
    tuner = peer_tuners.PeerTuner(
        space, peer="hebo", python=fake_python(tmp_path, "pass"), timeout=1.0
    )
    tuner.close()


def test_a_bridge_silent_and_idle_past_the_reply_limit_is_stuck(space: Space, tmp_path) -> None:
    """Idle for 30 s: on a busy machine its interpreter's start may use CPU over the first
    waits, and it must still be found idle long before it would answer."""
    idle = fake_python(tmp_path, "time.sleep(0.1)", seconds=30)
    with pytest.raises(StortuneError, match="no reply to 'init' and sat idle for 1 s"):
        peer_tuners.PeerTuner(space, peer="hebo", python=idle, timeout=1.0)


def test_a_bridge_that_works_without_end_is_stuck(space: Space, tmp_path) -> None:
    """Busy for 3 s against a limit of ten 0.2 s waits: spinning, not answering."""
    with pytest.raises(StortuneError, match="no reply to 'init' in 2 s of work"):
        peer_tuners.PeerTuner(space, peer="hebo", python=fake_python(tmp_path, "pass"), timeout=0.2)
