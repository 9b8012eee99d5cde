"""The report says what the campaign did: a campaign tuned after a ranking (`--rank`, `--hold
best`) starts from the sample's best with the other parameters held there, and its report calls
that start a start, its held parameters held, renders the recommendation in the whole space
with the whole space's default beside it, ranks no parameter that never varied, and gives the
in-loop gain as a ratio. Made in seconds with the `table` target replaying the report tests'
grid (`fixtures.report`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.report import SPACE, grid_target, sections_of

from stortune.measure.runner import RunRules
from stortune.measure.tuning import TuneSettings
from stortune.objective import Objective
from stortune.report import write_report
from stortune.report.context import load_context
from stortune.report.sections import recommendation_section
from stortune.space import parse_space
from stortune.store import Store
from stortune.workflows.rank import RankOptions
from stortune.workflows.recommend import advice_line
from stortune.workflows.tune import TuneJob, start_tuning

pytestmark = pytest.mark.usefixtures("quiet_fingerprint")
WHOLE_DEFAULT = {"fs": "ext4", "block": 1, "journal": "ordered", "atime": True}


def ranked_store(path: Path) -> Store:
    """`r1`: a Carver ranking of 10 sampled configs frees the top 2 parameters (block and
    journal), the other two held at the sample's best, where tuning starts; 12 evaluations,
    raced; verified in 3 rounds or more."""
    store = Store(str(path))
    space = parse_space(SPACE)
    job = TuneJob(
        space=space,
        target=grid_target(),
        workloads=[None],
        objective=Objective.of(["thr:max"]),
        settings=TuneSettings(budget=12, repetitions=2, baseline=True, intensify=True),
        rules=RunRules(),
        tuner="random",
        seed=3,
        name="r1",
        rank=RankOptions("carver", top_k=2, hold="best", budget=10),
        verify=3,
    )
    start_tuning(store, job)
    return store


@pytest.fixture(scope="module")
def ranked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with ranked_store(tmp_path_factory.mktemp("ranked") / "runs.db") as store:
        yield store


@pytest.fixture(scope="module")
def page(ranked: Store, tmp_path_factory: pytest.TempPathFactory) -> tuple[object, str]:
    report = write_report(ranked, "r1", tmp_path_factory.mktemp("report"))
    return report, report.path.read_text()


def held_of(store: Store) -> dict[str, object]:
    """The parameters the tuned campaign's own space pins to one value."""
    own = parse_space(store.campaign("r1").space_yaml)
    return {p.name: p.default for p in own.parameters if p.cardinality == 1}


def test_the_campaign_is_what_the_report_tests_need(ranked: Store) -> None:
    held = held_of(ranked)
    assert set(held) == {"fs", "atime"}  # block and journal were tuned
    first = ranked.trials(ranked.campaign("r1").id)[0]
    assert first.config != WHOLE_DEFAULT  # tuning started from the sample's best, not default
    assert ranked.campaign("r1-verify").kind == "verify"


def test_held_parameters_show_as_held_and_the_default_is_the_whole_spaces(
    ranked: Store, page: tuple[object, str]
) -> None:
    report, html = page
    space = next(s for s in report.sections if s.id == "space")  # type: ignore[attr-defined]
    [table] = space.tables
    column = table.columns.index("in this campaign")
    default = table.columns.index("default")
    rows = {row[0]: row for row in table.rows}
    for name, value in held_of(ranked).items():
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        assert rows[name][column] == f"held at {shown}"
    for name, value in WHOLE_DEFAULT.items():
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        assert rows[name][default] == shown  # the whole space's default, not the start
    assert rows["block"][column].startswith("tuned")
    # the first evaluation is the start, never "default": in the evaluations and the curve
    trials = next(s for s in report.sections if s.id == "trials")  # type: ignore[attr-defined]
    first = trials.tables[0].rows[0]
    assert first[1] == "start (held at the sample's best)" and first[5] == "(start)"
    tuning = sections_of(html)["tuning"]
    assert "start (held at the sample's best) (first evaluation)</text>" in tuning  # the legend
    assert "default (first evaluation)" not in tuning


def test_the_recommendation_renders_in_the_whole_space(
    ranked: Store, page: tuple[object, str]
) -> None:
    report, html = page
    part = sections_of(html)["recommendation"]
    assert "cannot be rendered" not in part
    section = next(s for s in report.sections if s.id == "recommendation")  # type: ignore
    config = section.data["config"]
    assert section.tables, section.text
    [table] = section.tables
    assert table.columns == ["parameter", "default", "recommended"]
    for name, default, recommended in table.rows:
        shown = WHOLE_DEFAULT[name]
        assert default == (str(shown).lower() if isinstance(shown, bool) else str(shown))
        assert recommended != default and str(config[name]).lower() == recommended.lower()
    # the verdict is `stortune recommend`'s, word for word
    ctx = load_context(ranked, "r1")
    assert section.text[0] == advice_line(ctx.findings.checked, "r1")


def test_keeping_the_default_renders_too(ranked: Store) -> None:
    """The whole space's default is outside the tuned campaign's pinned space (its held
    parameters take one value): recommended, it still renders, with nothing to change."""
    ctx = load_context(ranked, "r1")
    assert ctx.held and any(ctx.default[k] != v for k, v in ctx.held.items())
    ctx.findings = replace(ctx.findings, recommended=dict(ctx.default), recommended_why="default")
    section = recommendation_section(ctx)
    assert not any("cannot be rendered" in line for line in section.text), section.text
    assert "0 parameter(s) differ from the default" in section.text[1]
    assert "nothing to install: every value is the default" in section.code


def test_a_parameter_that_never_varied_is_not_ranked(
    ranked: Store, page: tuple[object, str]
) -> None:
    report, html = page
    importance = next(s for s in report.sections if s.id == "importance")  # type: ignore
    assert not importance.missing, importance.missing
    ranked_names = set(importance.data.get("carver", [])) | set(importance.data.get("lasso", []))
    assert ranked_names and not ranked_names & {"fs", "atime"}
    assert set(importance.data["constant"]) == {"fs", "atime"}
    assert "2 parameters did not vary" in sections_of(html)["importance"]
    top = report.headline.split("top parameters: ")[1]  # type: ignore[attr-defined]
    assert "fs" not in top.split(", ") and "atime" not in top.split(", ")


def test_the_in_loop_gain_is_a_ratio(ranked: Store, page: tuple[object, str]) -> None:
    report, html = page
    part = sections_of(html)["verification"]
    assert re.search(
        r"In the tuning runs: \d+(\.\d+)?x \(90% CI [\d.]+-[\d.]+\) over the start \(held at "
        r"the sample&#39;s best\)",
        part,
    ), part
    verification = next(s for s in report.sections if s.id == "verification")  # type: ignore
    loop = next(line for line in verification.text if line.startswith("In the tuning runs"))
    assert "thr" not in loop and "mean" not in loop  # no value in the metric's unit
