"""`stortune report` on campaigns made in seconds without root or fio: the `table` target
replaying a small grid (a tuned campaign, a second tuner, a verification), the `command` target
running a program that always fails, a campaign with no runs, and one too small to analyse."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import conftest
import pytest
import typer
from fixtures.report import PROFILE, SECTIONS, SPACE, grid_target, sections_of, tune, tuned_store
from markupsafe import escape
from typer.testing import CliRunner

from stortune.cli import report as report_cli
from stortune.measure.verify import Verification
from stortune.report import write_report
from stortune.report.headline import advice, metric_word
from stortune.space import parse_space
from stortune.store import Store
from stortune.targets.command import CommandTarget
from stortune.workflows.recommend import advice_line

# a fixed machine fingerprint: no `fio --version` or /sys reads while the tests run
pytestmark = pytest.mark.usefixtures("quiet_fingerprint")


@pytest.fixture
def tuned(tmp_path: Path) -> Iterator[Store]:
    with tuned_store(tmp_path / "runs.db") as store:
        yield store


def state(html: str, section: str) -> str:
    match = re.search(rf'<section id="{section}" data-state="(\w+)"', html)
    assert match, section
    return match.group(1)


def test_tuned_campaign_has_every_section(tuned: Store, tmp_path: Path) -> None:
    report = write_report(tuned, "t1", tmp_path / "out", profile=PROFILE, profile_source="p.json")
    html = report.path.read_text()
    assert report.path == tmp_path / "out" / "t1.html"
    parts = sections_of(html)
    assert list(parts) == list(SECTIONS)
    assert all(state(html, s) == "ok" for s in SECTIONS), [
        (s.id, s.missing) for s in report.sections if s.missing
    ]
    # every plot is an inline SVG, and each has its own figure
    ids = re.findall(r'<figure class="plot" id="([a-z-]+)"><svg', html)
    assert ids == ["plot-runs", "plot-carver", "plot-lasso", "plot-tuning", "plot-models"] + [
        "plot-profile"
    ]
    assert html.count("<svg") == len(ids)
    # self-contained: no URL to fetch, no script, no stylesheet link
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html)
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html and "<link" not in html
    # the headline: subject, the verdict as `stortune recommend` words it, evaluations, top
    # parameters
    assert escape(report.headline) in html
    verdict = advice_line(Verification.of(tuned, tuned.campaign("t1")), "t1")
    assert verdict.startswith("APPLY IT: ") and re.search(r" 1\.\d+x \(90% CI ", verdict)
    assert re.match(
        rf"t1 on (ext4|xfs): {re.escape(verdict)}, 16 evaluations, top parameters: ",
        report.headline,
    ), report.headline
    assert "block" in report.headline.split("top parameters:")[1]
    # importance: Carver and Lasso side by side, both find block and journal
    importance = next(s for s in report.sections if s.id == "importance")
    assert importance.columns and {"block", "journal"} <= set(importance.data["carver"])
    assert set(importance.data["lasso"][:2]) == {"block", "journal"}
    # tuning: the other tuner's curve is drawn too; the gain is re-measured
    tuning = next(s for s in report.sections if s.id == "tuning")
    assert len(tuning.data["compared"]) == 2 and "Re-measured side by side" in parts["tuning"]
    verification = next(s for s in report.sections if s.id == "verification")
    assert verification.data["n_default"] == 3 and verification.data["gain"] > 0.3
    # models: a cross-validated table of the fast techniques
    models = next(s for s in report.sections if s.id == "models")
    assert set(models.data) == {"linear", "cart", "m5"}
    assert models.data["linear"]["r2"] > 0.5
    # the recommendation in the target's form (name = value for a table target)
    assert "journal = writeback" in parts["recommendation"]
    assert "verified in t1-verify" in parts["recommendation"]
    # the profile given as a file
    assert "estimated profile of /scratch" in parts["profile"]


def test_verify_campaign_reports_the_tuned_one(tuned: Store, tmp_path: Path) -> None:
    report = write_report(tuned, "t1-verify", tmp_path)
    assert report.campaign == "t1" and report.path.name == "t1.html"
    profile = next(s for s in report.sections if s.id == "profile")
    assert "No device profile" in profile.missing


def test_profile_campaign_in_the_store_is_used(tuned: Store, tmp_path: Path) -> None:
    tuned.create_campaign(
        "disk-profile",
        kind="profile",
        space_name="",
        space_yaml="",
        target={"kind": "directory"},
        workload={},
        objective={},
        settings={"profile": PROFILE},
    )
    report = write_report(tuned, "t2", tmp_path)
    profile = next(s for s in report.sections if s.id == "profile")
    assert not profile.missing and profile.data["source"] == "campaign disk-profile"
    assert not next(s for s in report.sections if s.id == "verification").data
    assert "not re-measured" in report.headline


def test_campaign_without_runs_says_so_everywhere(tmp_path: Path) -> None:
    with Store(str(tmp_path / "runs.db")) as store:
        store.create_campaign(
            "empty",
            kind="tune",
            space_name="grid",
            space_yaml=SPACE,
            target={"kind": "table", "dataset": "grid.csv"},
            workload={"workloads": []},
            objective={"metric": "thr", "direction": "max"},
            tuner="random",
        )
        report = write_report(store, "empty", tmp_path)
    html = report.path.read_text()
    assert report.headline == "empty on grid: no evaluations yet"
    assert list(sections_of(html)) == list(SECTIONS)
    missing = {s.id: s.missing for s in report.sections if s.missing}
    assert set(missing) == {
        "runs",
        "importance",
        "tuning",
        "verification",
        "models",
        "profile",
        "recommendation",
        "trials",
    }
    assert "no runs yet" in missing["runs"]
    assert "no evaluations yet" in missing["importance"]
    assert "could not be built" not in html
    assert "<svg" not in html


FAIL = "import sys; sys.exit('benchmark crashed: out of cheese')"


def test_campaign_with_only_failed_runs(tmp_path: Path) -> None:
    space = parse_space(SPACE)
    with Store(str(tmp_path / "runs.db")) as store:
        conftest.tune(
            store,
            "broken",
            space,
            CommandTarget(command=[sys.executable, "-c", FAIL, "{block}"]),
            "thr:max",
            budget=2,
            repetitions=1,
        )
        report = write_report(store, "broken", tmp_path)
    html = report.path.read_text()
    assert report.headline == "broken on grid: none of 2 evaluations succeeded"
    parts = sections_of(html)
    assert state(html, "runs") == "ok"  # the failures themselves are worth a plot
    assert "out of cheese" in parts["runs"] and 'id="plot-runs"' in parts["runs"]
    assert "No run succeeded" in parts["runs"]
    for section in ("importance", "models"):
        assert "No run of this campaign succeeded" in parts[section]
    assert "None of the 2 evaluations succeeded" in parts["tuning"]
    assert "no evaluation succeeded" in parts["recommendation"]
    assert "could not be built" not in html


def test_too_few_configs_for_an_analysis(tmp_path: Path) -> None:
    with Store(str(tmp_path / "runs.db")) as store:
        tune(store, "small", budget=4)
        report = write_report(store, "small", tmp_path)
    html = report.path.read_text()
    parts = sections_of(html)
    for section in ("importance", "models"):
        assert state(html, section) == "missing"
        assert re.search(r"only \d distinct configs", parts[section]), parts[section]
    assert state(html, "tuning") == "ok" and state(html, "recommendation") == "ok"
    assert ": MEASURE MORE: not re-measured" in report.headline
    assert re.search(
        r"the best evaluation [\d.]+x throughput over the default in the tuning runs",
        report.headline,
    ), report.headline
    assert "top parameters" not in report.headline


def test_imported_dataset(tmp_path: Path) -> None:
    with Store(str(tmp_path / "runs.db")) as store:
        store.import_dataset("grid-data", grid_target().dataset, SPACE, "grid")
        report = write_report(store, "grid-data", tmp_path)
    html = report.path.read_text()
    missing = {s.id: s.missing for s in report.sections if s.missing}
    assert set(missing) == {"tuning", "verification", "profile"}, missing
    assert "imported dataset was not tuned" in missing["tuning"]
    assert report.headline == (
        "grid-data on xfs: best thr 245, 48 evaluations, top parameters: journal, block"
    )
    assert "journal = writeback" in sections_of(html)["recommendation"]


def test_localfs_recommendation_when_lower_is_better(tmp_path: Path) -> None:
    """Stored by hand (no root needed): mkfs/mount lines, and a latency headline."""
    from conftest import stored_localfs_campaign

    best = {"fs": "xfs", "atime": "noatime", "scheduler": "mq-deadline"}
    with Store(str(tmp_path / "runs.db")) as store:
        stored_localfs_campaign(store, "lat", best, ("read.lat_mean_ms", "min"), (4.0, 2.0))
        report = write_report(store, "lat", tmp_path)
    html = report.path.read_text()
    assert report.headline == (
        f"dbserver on xfs: {advice_line(None, 'lat')}, the best evaluation 2x lower latency "
        "than the default in the tuning runs, 2 evaluations"
    )
    code = sections_of(html)["recommendation"]
    assert (
        "mkfs.xfs /dev/DEVICE" in code
        and "UUID=YOUR-FILESYSTEM-UUID  /srv/data  xfs  noatime" in code
    )
    assert "w /sys/block/DISK/queue/scheduler - - - - mq-deadline" in code


def test_a_failing_section_does_not_lose_the_page(
    tuned: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stortune.report import sections

    def broken(ctx: Any) -> Any:
        raise RuntimeError("plot exploded")

    builders = tuple((i, t, broken if i == "models" else f) for i, t, f in sections.BUILDERS)
    monkeypatch.setattr(sections, "BUILDERS", builders)
    report = write_report(tuned, "t1", tmp_path)
    html = report.path.read_text()
    assert state(html, "models") == "missing"
    assert "could not be built (RuntimeError: plot exploded)" in html
    assert state(html, "importance") == "ok"


def test_cli_prints_path_and_headline(tuned: Store, tmp_path: Path) -> None:
    app = typer.Typer()
    app.callback()(lambda: None)  # a group, as in `stortune`: the command is named
    report_cli.register(app)
    (tmp_path / "profile.json").write_text(json.dumps(PROFILE))
    store = tuned.url
    args = ["report", "t1", "--store", store, "-o", str(tmp_path / "r")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("t1 on ") and "top parameters" in lines[0]
    assert lines[1] == f"report: {(tmp_path / 'r' / 't1.html').resolve()}"

    args += ["--json", "--profile", str(tmp_path / "profile.json")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [s["id"] for s in data["sections"]] == list(SECTIONS)
    assert all(s["missing"] is None for s in data["sections"])
    assert data["headline"] == lines[0]

    result = CliRunner().invoke(app, ["report", "nope", "--store", store])
    assert result.exit_code != 0 and "no campaign 'nope'" in str(result.exception)
    result = CliRunner().invoke(app, ["report", "t1", "--store", store, "-w", "mailserver"])
    assert "no runs of workload 'mailserver' (have: default)" in str(result.exception)


def test_many_runs_are_drawn_as_an_image_inside_the_svg() -> None:
    from stortune.plots import runs as plots
    from stortune.plots.render import to_svg

    runs = [
        {"started_at": float(i), "status": "ok", "workload": "w", "value": i % 7}
        for i in range(plots.RASTER_POINTS + 10)
    ]
    runs[5]["status"], runs[5]["value"] = "disturbed", None
    svg = to_svg(plots.runs_over_time(runs, "thr"))
    assert svg.startswith("<svg") and re.search(r"data:image/png;base64,\s*iVBOR", svg)
    assert "http" not in svg and "disturbed (1)" in svg
    assert "time since the first run (min)" in svg


def test_metric_words() -> None:
    assert metric_word("total.bw_mbs") == "throughput"
    assert metric_word("read.iops") == "IOPS"
    assert metric_word("write.lat_p99_us") == "latency"
    assert metric_word("score") == "score"


def test_sweep_headline_counts_runs_not_finished_configs(tmp_path: Path) -> None:
    """A sweep's configs finish only with their last repetition: its headline counts runs."""
    from stortune.sampling import sample

    space = parse_space(SPACE)
    configs = sample(space, "lhs", 12, seed=1).configs
    with Store(str(tmp_path / "sw.db")) as store:
        conftest.sweep(
            store, "sw", space, grid_target(), "thr", configs, repetitions=2, reference_every=4
        ).run()
        report = write_report(store, "sw", tmp_path)
    assert "sweep of 12 configs (finished), 24 of 24 runs measured" in report.headline


def test_the_headline_says_the_verdict_recommend_says_and_what_risks_would_buy() -> None:
    from types import SimpleNamespace

    from stortune.measure.verify import Gain, Judgement, LabelResult, Verification, VerifyRules
    from stortune.objective import Objective
    from stortune.report.headline import risky_alternatives

    def measured(gain: float, low: float, high: float, label: str) -> Gain:
        return Gain(
            "total.bw_mbs", "max", 100, 100 * (1 + gain), 8, 8, gain, low, high, 0.9, label,
            rounds=8,
        )  # fmt: skip

    noise = measured(0.01, -0.02, 0.04, "best")
    checked = Verification(
        SimpleNamespace(name="c-verify"),  # type: ignore[arg-type]
        SimpleNamespace(name="c"),  # type: ignore[arg-type]
        Objective("total.bw_mbs"),
        VerifyRules.of(5),
        {"default": {}, "best": {}},
        {"best": LabelResult("best", noise, (), Judgement.EQUIVALENT, "")},
        rounds=8,
    )
    ctx = SimpleNamespace(findings=SimpleNamespace(checked=checked), campaign=checked.tuned)
    assert advice(ctx) == advice_line(checked, "c")  # one wording: `stortune recommend`'s
    assert advice(ctx).startswith("KEEP THE DEFAULT: ") and "0.980x-1.04x" in advice(ctx)
    gains = {
        "best": noise,
        "risky ext4_barrier=false": measured(1.9, 1.5, 2.3, "risky ext4_barrier=false"),
        "sample": measured(0.1, 0.0, 0.2, "sample"),
    }
    assert risky_alternatives(gains) == "ext4_barrier=false 2.90x (90% CI 2.50-3.30)"
