"""Several trials in flight (`measure.parallel`), driven here without a cluster: a seeded
campaign proposes the same configs whatever order its trials end in, and the configs in flight
at once are never the same."""

from __future__ import annotations

import random

import pytest

from stortune.enums import CampaignKind
from stortune.measure.campaigns import new_campaign, open_campaign
from stortune.measure.parallel import Job, ParallelTunePlan
from stortune.measure.runner import Runner, RunRules
from stortune.measure.tuning import TuneSettings
from stortune.objective import Objective
from stortune.sampling import config_key
from stortune.space import load_space
from stortune.store import Store
from stortune.targets.toy import ToyTarget


class Nodes:
    """What open_campaign asks of a cluster: how many nodes it has."""

    def __init__(self, n: int) -> None:
        self.n = n

    def nodes(self) -> dict[str, str]:
        return {f"n{i}": f"tcp://127.0.0.1:{i}" for i in range(self.n)}


def run_in_order(tmp_path, tuner: str, lag: int, shuffle_seed: int, intensify: bool = False):
    """A campaign of 12 evaluations with `lag` in flight, its visits finished in an order
    drawn by `shuffle_seed`; returns seq -> config key and the keys in flight at each ask."""
    space = load_space("toy")
    target = ToyTarget(space, toy_noise=0.0)
    settings = TuneSettings(budget=12, repetitions=1, intensify=intensify, baseline=intensify)
    with Store(str(tmp_path / f"{tuner}-{lag}-{shuffle_seed}.db")) as store:
        new_campaign(
            store, "c", CampaignKind.TUNE, space, target, [None], Objective.parse("bw_mbs:max"),
            {**settings.to_dict(), **RunRules().to_dict()}, tuner=tuner, seed=5,
        )  # fmt: skip
        nodes = Nodes(lag - 1)  # one more in flight than nodes: the proposal made ahead
        measuring = open_campaign(store, "c", target=target, cluster=nodes)  # type: ignore[arg-type]
        plan = measuring.plan
        assert isinstance(plan, ParallelTunePlan) and plan.lag == lag
        runner = Runner(measuring.log, target, RunRules())
        order = random.Random(shuffle_seed)
        flying: list[Job] = []
        overlaps: list[list[str]] = []
        with target:
            while True:
                while len(flying) < lag and (job := plan.next_job()) is not None:
                    plan.current = job.seq
                    job.visit = next(job.visits, None)
                    if job.visit is None:
                        plan.ended(job.seq)
                        continue
                    flying.append(job)
                    mine = [j for j in flying if not j.reference]
                    overlaps.append([config_key(j.visit.trial.config) for j in mine if j.visit])
                if not flying:
                    break
                job = flying.pop(order.randrange(len(flying)))
                result = runner.visit(job.visit)
                plan.current = job.seq
                try:
                    job.visit = job.visits.send(result)
                    flying.append(job)
                except StopIteration:
                    plan.ended(job.seq)
        assert plan.exhausted() and plan.settled()
        configs = {t.seq: config_key(t.config) for t in measuring.log.trials()}
    return configs, overlaps


@pytest.mark.parametrize("tuner", ["bo", "random", "tpe"])
def test_the_configs_do_not_depend_on_the_order_trials_end_in(tmp_path, tuner):
    first, in_flight = run_in_order(tmp_path, tuner, 4, shuffle_seed=1)
    second, _ = run_in_order(tmp_path, tuner, 4, shuffle_seed=2)
    assert len(first) == 12
    assert first == second
    assert all(len(set(keys)) == len(keys) for keys in in_flight)  # none twice at once


def test_races_in_flight_end_alike_in_any_order(tmp_path):
    first, _ = run_in_order(tmp_path, "bo", 3, shuffle_seed=1, intensify=True)
    second, _ = run_in_order(tmp_path, "bo", 3, shuffle_seed=7, intensify=True)
    assert first == second
