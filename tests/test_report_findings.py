"""`stortune.findings`: what a report shows that is derived, computed outside the report, from
the same small campaigns test_report uses (the `table` target replaying a grid)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.report import SPACE, grid_target, tune, tuned_store

from stortune.findings import derive_findings
from stortune.measure.reference import is_reference
from stortune.measure.verify import recommended_config
from stortune.report import write_report
from stortune.store import Store

pytestmark = pytest.mark.usefixtures("quiet_fingerprint")


@pytest.fixture
def tuned(tmp_path: Path) -> Iterator[Store]:
    with tuned_store(tmp_path / "runs.db") as store:
        yield store


def test_a_tuned_campaign(tuned: Store) -> None:
    campaign = tuned.campaign("t1")
    found = derive_findings(tuned, campaign)
    assert found.errors == {}
    assert {"block", "journal"} <= set(found.top)
    assert found.importance.carver is not None and found.importance.lasso is not None
    assert set(found.accuracy.scores) == {"linear", "cart", "m5"}
    assert found.accuracy.best is not None and found.accuracy.folds == 5
    assert (found.recommended, found.recommended_why) == recommended_config(tuned, campaign)
    assert found.gain is not None and found.verification.name == "t1-verify"
    assert [c.campaign for c in found.curves] == ["t1", "t2"]
    assert found.curves[0].final == max(t.value for t in found.ok_trials)
    assert found.best is not None and found.best.value == found.curves[0].final
    assert found.default_value == found.trials[0].value


def test_an_unknown_workload_is_refused(tuned: Store) -> None:
    with pytest.raises(Exception, match="no runs of workload 'mailserver'"):
        derive_findings(tuned, tuned.campaign("t1"), "mailserver")


def test_an_imported_dataset_recommends_the_best_row_of_its_table(tmp_path: Path) -> None:
    with Store(str(tmp_path / "runs.db")) as store:
        store.import_dataset("grid-data", grid_target().dataset, SPACE, "grid")
        found = derive_findings(store, store.campaign("grid-data"))
    assert found.recommended_why == "the best measured config"
    assert found.recommended["journal"] == "writeback" and found.recommended["block"] == 4
    assert found.best is not None and found.best.value == 245  # the mean of its runs
    assert found.curves == [] and found.top == ["journal", "block"]


def test_too_few_configs_say_why(tmp_path: Path) -> None:
    with Store(str(tmp_path / "runs.db")) as store:
        tune(store, "small", budget=4)
        found = derive_findings(store, store.campaign("small"))
    assert found.importance.missing.startswith("only 4 distinct configs")
    assert "ranking needs at least 8" in found.importance.missing
    assert "a cross-validated model needs at least 8" in found.accuracy.missing
    assert found.top == [] and found.recommended is not None


def test_a_broken_analysis_costs_only_its_section(
    tuned: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stortune.findings.importance as importance

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("carver exploded")

    monkeypatch.setattr(importance, "rank_carver", broken)
    found = derive_findings(tuned, tuned.campaign("t1"))
    assert list(found.errors) == ["importance"] and found.top == []
    report = write_report(tuned, "t1", tmp_path)
    importance_section = next(s for s in report.sections if s.id == "importance")
    assert importance_section.missing == (
        "This section could not be built (RuntimeError: carver exploded)."
    )
    assert "top parameters" not in report.headline
    assert all(not s.missing for s in report.sections if s.id in ("models", "tuning"))


def test_the_best_trial_is_an_evaluation_not_the_reference(tmp_path: Path) -> None:
    import conftest

    from stortune.sampling import sample
    from stortune.space import parse_space

    space = parse_space(SPACE)
    configs = sample(space, "lhs", 12, seed=1).configs
    with Store(str(tmp_path / "sw.db")) as store:
        sweep = conftest.sweep(
            store, "sw", space, grid_target(), "thr", configs, repetitions=2, reference_every=4
        )
        sweep.run()
        found = derive_findings(store, store.campaign("sw"))
    assert any(is_reference(t) for t in found.trials)
    assert found.best is not None and not is_reference(found.best)
    assert found.recommended_why == "the best of 12 successful evaluations"
