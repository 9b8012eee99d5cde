"""A DDPG campaign stopped part-way and resumed is the campaign that was never stopped: the
replay gives the agent the state each stored run left (the target's `state_after`), so it
rebuilds the same policy instead of learning from a different state than the one it acts on."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import tune

from stortune.measure.reference import is_reference
from stortune.measure.runner import Interrupted
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.command import CommandTarget
from stortune.workflows.tune import resume_tuning
from stortune.workloads.base import Measurement

torch.set_num_threads(1)

# A system whose queue and CPU depend on the config, as a server's counters do, and one counter
# that has no value (NaN, as an exporter may give; the store keeps it as null).
PROGRAM = textwrap.dedent(
    """\
    import json, sys
    x, y = float(sys.argv[1]), int(sys.argv[2])
    print(json.dumps({
        "score": 10 - (x - 3) ** 2 - abs(y - 2),
        "state": {"queue": x * y, "cpu": 0.1 + x / 10, "spare": float("nan")},
    }))
    """
)
SPACE = parse_space(
    """
name: server
parameters:
  x: {type: float, low: 0, high: 6, default: 1}
  y: {type: int, low: 0, high: 4, default: 0}
"""
)
BUDGET = 14


def command(tmp_path: Path) -> list[str]:
    program = tmp_path / "server.py"
    program.write_text(PROGRAM)
    return [sys.executable, str(program), "{x}", "{y}"]


def stop_during_run(monkeypatch: pytest.MonkeyPatch, calls: int) -> None:
    """Ctrl-C during the command target's `calls`-th run."""
    measure = CommandTarget.measure
    left = [calls]

    def measure_or_stop(self: CommandTarget, *args: Any, **kwargs: Any) -> Measurement:
        left[0] -= 1
        if left[0] == 0:
            raise KeyboardInterrupt
        return measure(self, *args, **kwargs)

    monkeypatch.setattr(CommandTarget, "measure", measure_or_stop)


def configs(store: Store, name: str) -> list[dict[str, Any]]:
    return [t.config for t in store.trials(store.campaign(name).id) if not is_reference(t)]


def test_the_command_targets_state_is_what_its_program_prints_under_state(tmp_path: Path) -> None:
    target = CommandTarget(command=command(tmp_path))
    target.setup()
    try:
        target.apply({"x": 2.0, "y": 3})
        metrics = target.run().metrics
    finally:
        target.teardown()
    state = {k: v for k, v in target.state().items() if k != "state.spare"}
    assert state == {"state.queue": 6.0, "state.cpu": pytest.approx(0.3)}
    assert target.state_after(metrics).keys() == target.state().keys()


def test_a_resumed_ddpg_campaign_proposes_what_an_unstopped_one_does(
    store: Store, tmp_path: Path
) -> None:
    argv = command(tmp_path)
    settings = dict(budget=BUDGET, repetitions=1, baseline=True, seed=3, tuner="ddpg")
    tune(store, "straight", SPACE, CommandTarget(command=argv), "score:max", **settings)
    with pytest.MonkeyPatch.context() as patch, pytest.raises(Interrupted):
        stop_during_run(patch, 9)
        tune(store, "stopped", SPACE, CommandTarget(command=argv), "score:max", **settings)
    assert len(configs(store, "stopped")) < BUDGET
    resume_tuning(store, "stopped")
    straight = configs(store, "straight")
    assert len(straight) == BUDGET
    # the agent acts from step 5 or so on: a state it learnt differently would act differently
    assert configs(store, "stopped") == straight
