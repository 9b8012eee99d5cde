"""`stortune.plots`: each figure function builds a Figure with the axes and lines it promises
from small inputs, `to_svg` gives one inline <svg> element, and `save` writes the files."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from stortune.importance import rank_carver, rank_lasso, subsample_study
from stortune.importance.plots import boxplot_groups
from stortune.importance.synthetic import STRONG, additive_dataset
from stortune.measure.noise import NoiseReport
from stortune.plots import importance, models, noise, profile, runs, tuning
from stortune.plots.render import save, to_svg

CURVE = [
    {"size": 4096, "ratio": {"read": 6.0, "write": 4.0}},
    {"size": 65536, "ratio": {"read": 3.0, "write": None}},
    {"size": 1 << 20, "ratio": {"read": 1.2, "write": 1.1}},
]


def lines(ax) -> list[str]:
    """The labels of an axes' lines that carry one (legend entries)."""
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


def visible_axes(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.get_visible()]


@pytest.fixture(scope="module")
def dataset():
    return additive_dataset(300, seed=3)


def test_carver_steps_one_axes_per_step_chosen_in_red(dataset) -> None:
    result = rank_carver(dataset, stop="top-n", top=2)
    fig = importance.carver_steps(result.steps, result.metric, result.direction)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    first, second = fig.axes
    assert first.get_title().startswith(f"#1: {STRONG[0]}")
    assert f"CPI(X | {STRONG[0]})" in second.get_title()
    ticks = first.get_yticklabels()
    bars = {label.get_text(): bar for bar, label in zip(first.patches, ticks, strict=True)}
    assert bars[STRONG[0]].get_facecolor() == pytest.approx((209 / 255, 73 / 255, 91 / 255, 1))
    assert fig.get_suptitle() == f"{result.metric}: greedy selection"


def test_carver_steps_without_a_step_says_why() -> None:
    fig = importance.carver_steps([], "thr", "min", stop="rsd")
    assert fig.get_suptitle() == "thr (lower is better): greedy selection"
    assert fig.axes[0].texts[0].get_text() == "nothing selected (rsd)"


def test_lasso_path_colours_the_leading_parameters(dataset) -> None:
    result = rank_lasso(dataset)
    fig = importance.lasso_path(
        result.alphas,
        result.path,
        result.column_param,
        result.ranking,
        result.alpha_cv,
        result.metric,
        label_top=2,
    )
    (ax,) = fig.axes
    assert lines(ax) == [*result.ranking[:2], "CV alpha"]
    assert len(ax.get_lines()) == len(result.column_param) + 2 + 1  # paths, legend, alpha
    assert ax.get_xscale() == "log" and ax.xaxis_inverted()


def test_boxplots_one_axes_per_parameter(dataset) -> None:
    name, groups = boxplot_groups(dataset, [*STRONG, "readahead"], bins=3)
    fig = importance.boxplots(groups, name)
    assert [ax.get_title() for ax in visible_axes(fig)] == [*STRONG, "readahead"]
    assert len(fig.axes) == 3
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == groups[STRONG[0]][0] and len(labels) <= 3


def test_fixed_sets_one_scatter_per_depth() -> None:
    sets = pd.DataFrame(
        {"n_fixed": [1, 1, 2, 2, 2], "mean": [1, 2, 3, 4, 5], "rsd": [0.1, 0.2, 0.05, 0, 0.1]}
    )
    fig = importance.fixed_sets(sets, "thr", "max")
    (ax,) = fig.axes
    assert [c.get_label() for c in ax.collections] == ["N = 1", "N = 2"]
    assert ax.get_xlabel() == "mean thr" and ax.get_ylabel() == "RSD (%)"


def test_subsample_study_a_line_per_method_and_rank(dataset) -> None:
    studies = [
        subsample_study(dataset, [0.05, 0.2], trials=5, method=m, depth=2, seed=1)
        for m in ("carver", "lasso")
    ]
    (ax,) = importance.subsample_study(studies).axes
    assert len(lines(ax)) == 4 and lines(ax)[0].startswith("carver: #1 ")


def test_tuning_curves_steps_lines_and_failures() -> None:
    values = [1.0, None, 3.0, 2.0]
    curves = {"t1 (random)": (values, [1.0, 1.0, 3.0, 3.0]), "t2 (tpe)": ([2.0], [2.0])}
    fig = tuning.tuning_curves(curves, "max", "thr", 1.0, (1.0, 2.5), failed=[1])
    (ax,) = fig.axes
    assert lines(ax) == [
        "evaluation",
        "t1 (random)",
        "t2 (tpe)",
        "default (first evaluation)",
        "default, re-measured",
        "best, re-measured",
        "failed",
    ]
    failed = ax.get_lines()[-1]
    assert list(failed.get_xdata()) == [2] and list(failed.get_ydata()) == [1.0]


def test_runs_over_time_marks_rings_and_misses() -> None:
    rows = [
        {"started_at": 0.0, "status": "ok", "workload": "w", "value": 1.0, "default": True},
        {"started_at": 60.0, "status": "ok", "workload": "w", "value": 2.0, "reference": True},
        {"started_at": 120.0, "status": "timeout", "workload": "w", "value": None},
        {"started_at": 180.0, "status": "disturbed", "workload": "w", "value": None},
    ]
    (ax,) = runs.runs_over_time(rows, "thr").axes
    assert lines(ax) == [
        "runs",
        "default config",
        "reference config",
        "failed (1)",
        "disturbed (1)",
    ]
    assert ax.get_xlabel() == "time since the first run (min)"


def test_model_figures() -> None:
    y = np.array([1.0, 2.0, 3.0, 4.0])
    (ax,) = models.predicted_vs_measured(y, y * 1.1, "iops", "cart: iops").axes
    assert ax.get_title() == "cart: iops" and lines(ax) == ["y = x"]
    assert len(ax.collections) == 1
    errors = np.array([0.0, 0.05, 0.1])
    (ax,) = models.error_cdf({"a": (errors, [1 / 3, 2 / 3, 1.0])}, "errors").axes
    (line,) = ax.get_lines()
    assert line.get_label() == "a" and list(line.get_xdata()) == pytest.approx([5.0, 10.0])


def test_profile_ratios_skip_what_was_not_measured() -> None:
    (ax,) = profile.ratios(CURVE).axes
    assert lines(ax) == ["read", "write"]
    write = ax.get_lines()[1]
    assert math.isnan(write.get_ydata()[1])
    only_reads = [{"size": r["size"], "ratio": {"read": r["ratio"]["read"]}} for r in CURVE]
    assert lines(profile.ratios(only_reads).axes[0]) == ["read"]


def test_profile_access_times_and_compare() -> None:
    data = {
        "mode": "estimated",
        "target": {"path": "/scratch", "file_size": 1 << 28},
        "elapsed_s": 30.0,
        "curve": [
            {**row, "access_ms": {p: 0.1 * (i + 1) for p in ("read", "randread", "write")}}
            for i, row in enumerate(CURVE)
        ],
        "measurements": [{"pattern": "read", "size": 4096, "access_ms": 0.1}],
    }
    fig = profile.access_times(data)
    assert [ax.get_title() for ax in fig.axes] == [
        "read access time",
        "write access time",
        "sequential / random throughput",
    ]
    assert "estimated profile of /scratch (256 MiB" in fig.get_suptitle()
    assert lines(fig.axes[2]) == ["read", "write"]
    fig = profile.compare(data, {**data, "elapsed_s": 90.0})
    assert lines(fig.axes[0]) == ["full (90 s)", "estimated (30 s)"]


def test_noise_drift_raw_above_relative() -> None:
    report = NoiseReport(
        "n1", "mbs", 3, 2.0, 0.1, 0.01, 5, 2, 0.05, [(0, 1.0, 1.0), (5, 2.0, None), (9, 3, 1.01)]
    )
    top, bottom = noise.drift(report).axes
    assert top.get_title() == "n1: raw RSD 10.0%, normalised RSD 1.0%"
    assert len(top.get_lines()[0].get_xdata()) == 3
    assert list(bottom.get_lines()[0].get_xdata()) == [0, 9]


def test_to_svg_is_one_inline_element_and_closes_the_figure() -> None:
    fig = profile.ratios(CURVE)
    one, two = to_svg(fig), to_svg(profile.ratios(CURVE))
    assert one.startswith('<svg role="img"') and one.rstrip().endswith("</svg>")
    assert "http" not in one and "<metadata>" not in one
    assert one != two  # each gets its own clip-path ids
    assert fig.axes == []


def test_save_writes_each_format_and_keeps_dots_in_names(tmp_path: Path) -> None:
    fig = profile.ratios(CURVE)
    written = save(fig, tmp_path / "deep" / "study.svg")
    assert [p.name for p in written] == ["study.png", "study.svg"]
    assert written[0].read_bytes()[:4] == b"\x89PNG" and fig.axes == []
    written = save(profile.ratios(CURVE), tmp_path / "noise-1.5-drift", formats=("svg",))
    assert [p.name for p in written] == ["noise-1.5-drift.svg"]
    assert written[0].read_text().lstrip().startswith("<?xml")


def test_the_package_loads_matplotlib_only_when_a_figure_is_asked_for() -> None:
    code = (
        "import sys, stortune.plots, stortune.cli\n"
        "assert 'matplotlib' not in sys.modules\n"
        "stortune.plots.render\n"
        "assert 'matplotlib' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
