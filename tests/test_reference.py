"""Reference runs inside the tuning loop: measured before, every k evaluations and at the end,
so a tuning campaign's runs read relative to the reference as a sweep's do."""

import conftest
import pytest
from fixtures.sweep import SPACE

from stortune.measure.campaigns import open_campaign
from stortune.measure.reference import campaign_relative, is_reference
from stortune.sources import load_source
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.command import CommandTarget


def tune(store: Store, target: CommandTarget, budget: int, every: int) -> None:
    space = parse_space(SPACE)
    conftest.tune(
        store, "t", space, target, "mbs", budget=budget, repetitions=1, reference_every=every
    )


def test_reference_is_measured_every_k_evaluations_and_cancels_drift(
    store: Store,
    drifting: CommandTarget,
) -> None:
    tune(store, drifting, budget=6, every=2)
    campaign = store.campaign("t")
    trials = store.trials(campaign.id)
    reference = [t for t in trials if is_reference(t)]
    assert len(reference) == 1 and reference[0].seq == -1
    assert reference[0].config == {"level": 1.0}  # the space's default
    assert [r.info["at_seq"] for r in reference[0].runs] == [0, 2, 4, 6]
    tuned = [t for t in trials if not is_reference(t)]
    assert [t.seq for t in tuned] == list(range(6))
    relative = campaign_relative(store, campaign)
    for trial in tuned:
        for run in trial.runs:
            assert relative[run.id] == pytest.approx(trial.config["level"], rel=0.02)
    assert load_source("t", store.url).metrics[0] == "mbs_rel"


def test_resume_continues_the_reference_schedule_and_ignores_it_in_the_replay(
    store: Store,
    drifting: CommandTarget,
) -> None:
    tune(store, drifting, budget=4, every=2)
    open_campaign(store, "t", budget=6).run()
    trials = store.trials(store.campaign("t").id)
    reference = next(t for t in trials if is_reference(t))
    assert [t.seq for t in trials if not is_reference(t)] == list(range(6))
    assert [r.info["at_seq"] for r in reference.runs] == [0, 2, 4, 6]
    assert [r.repetition for r in reference.runs] == [0, 1, 2, 3]


def test_no_reference_trial_unless_asked(store: Store, drifting: CommandTarget) -> None:
    tune(store, drifting, budget=3, every=0)
    assert not any(is_reference(t) for t in store.trials(store.campaign("t").id))
