"""A tuning resumed with a verification measures the best's risky variants as a start does."""

from __future__ import annotations

from stortune.enums import RiskScope
from stortune.measure.tuning import TuneSettings
from stortune.objective import Objective
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.toy import ToyTarget
from stortune.workflows.tune import TuneJob, resume_tuning, start_tuning

RISKY_TOY = """
name: risky-toy
compose: [toy]
parameters:
  write_cache:
    type: bool
    default: false
    layer: block
    risk: {true: "a volatile write cache: a power cut loses what it held"}
"""


def test_resume_with_verify_measures_the_risky_variants(store: Store) -> None:
    space = parse_space(RISKY_TOY)
    job = TuneJob(
        space=space, target=ToyTarget(space, toy_noise=0.0), workloads=[None],
        objective=Objective("bw_mbs"), settings=TuneSettings(budget=4, repetitions=1), name="r",
    )  # fmt: skip
    start_tuning(store, job)
    # the campaign stored the safe space it searched: the whole one is given, as `tune
    # --resume r --space FILE` does (a bundled space is found by its name)
    result = resume_tuning(
        store, "r", space=space, verify_repetitions=2, verify_max=2, measure_risks=RiskScope.ALL
    )
    assert result.verification is not None
    assert "risky write_cache=true" in result.verification.configs
    assert result.risks == []  # searched without risk: the best is safe, the variant measured
    plain = resume_tuning(store, "r", space=space, verify_repetitions=2, verify_max=2)
    assert plain.verification is not None
    assert not any(label.startswith("risky ") for label in plain.verification.configs)
