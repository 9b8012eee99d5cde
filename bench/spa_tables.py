"""The tables of bench/spa.py: the paper's numbers (Noorshams et al., ICPE 2013, Table 3 and
Figures 9-12) and the Markdown printed beside ours from the rows of bench/results/spa.json.

A helper module, not a benchmark: running it does nothing.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from stortune.models.spa_scenarios import ACCESSES, PAPER_SCHEDULERS

METRICS = {  # the paper's names -> fio's metrics
    "RT_r": "read.lat_mean_ms",
    "RT_w": "write.lat_mean_ms",
    "TP_r": "read.bw_mbs",
    "TP_w": "write.bw_mbs",
}


PAPER_INTERPOLATION = {  # Figure 9, mean relative error (%)
    "linear-int": {"RT_r": 14.73, "RT_w": 8.72, "TP_r": 15.05, "TP_w": 13.74},
    "mars-int": {"RT_r": 7.80, "RT_w": 4.90, "TP_r": 9.52, "TP_w": 5.39},
    "cart": {"RT_r": 10.47, "RT_w": 7.98, "TP_r": 12.41, "TP_w": 10.26},
    "cubist": {"RT_r": 8.63, "RT_w": 7.23, "TP_r": 7.75, "TP_w": 6.44},
}
PAPER_EXTRAPOLATION = {  # Figure 10
    "small requests": {
        "linear-int": {"RT_r": 22.36, "RT_w": 33.65, "TP_r": 393.19, "TP_w": 315.81},
        "mars-int": {"RT_r": 21.79, "RT_w": 17.54, "TP_r": 395.66, "TP_w": 168.26},
        "cart": {"RT_r": 22.18, "RT_w": 22.59, "TP_r": 211.69, "TP_w": 204.60},
        "cubist": {"RT_r": 14.47, "RT_w": 14.96, "TP_r": 130.76, "TP_w": 108.38},
    },
    "large requests": {
        "linear-int": {"RT_r": 19.90, "RT_w": 18.34, "TP_r": 29.77, "TP_w": 42.47},
        "mars-int": {"RT_r": 11.66, "RT_w": 10.00, "TP_r": 24.86, "TP_w": 17.98},
        "cart": {"RT_r": 18.10, "RT_w": 9.96, "TP_r": 28.85, "TP_w": 24.25},
        "cubist": {"RT_r": 8.70, "RT_w": 8.52, "TP_r": 14.12, "TP_w": 15.74},
    },
}
PAPER_R2 = {
    "linear-int": {"RT_r": 0.9720, "RT_w": 0.9703, "TP_r": 0.9699, "TP_w": 0.9546},
    "mars-int": {"RT_r": 0.9955, "RT_w": 0.9991, "TP_r": 0.9951, "TP_w": 0.9973},
    "cart": {"RT_r": 0.9983, "RT_w": 1.0, "TP_r": 1.0, "TP_w": 1.0},
    "cubist": {"RT_r": 0.9990, "RT_w": 0.9994, "TP_r": 0.9995, "TP_w": 1.0},
}
# Figures 11 and 12, the 1/4-sum column per scheduler and access (CFQ -> bfq, NOOP -> none).
PAPER_CONSOLIDATION = {
    2: {("bfq", "random"): {"linear-int": 17.60, "mars-int": 16.35, "cart": 20.15, "cubist": 17.73},
        ("bfq", "sequential"): {"linear-int": 64.64, "mars-int": 62.43, "cart": 62.02,
                                "cubist": 68.61},
        ("none", "random"): {"linear-int": 24.76, "mars-int": 16.90, "cart": 24.28,
                             "cubist": 18.73},
        ("none", "sequential"): {"linear-int": 10.36, "mars-int": 7.69, "cart": 10.65,
                                 "cubist": 8.33}},
    3: {("bfq", "random"): {"linear-int": 22.79, "mars-int": 15.82, "cart": 19.08, "cubist": 18.12},
        ("bfq", "sequential"): {"linear-int": 103.09, "mars-int": 105.29, "cart": 105.29,
                                "cubist": 108.58},
        ("none", "random"): {"linear-int": 84.23, "mars-int": 69.71, "cart": 77.17,
                             "cubist": 72.05},
        ("none", "sequential"): {"linear-int": 13.09, "mars-int": 11.52, "cart": 14.26,
                                 "cubist": 11.81}},
}  # fmt: skip


def _cell(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def tables(rows: list[dict[str, Any]], techniques: list[str]) -> str:
    """Markdown shaped like the paper's Table 3 and Figures 9-12, the paper beside ours."""

    def find(scenario: str, name: str, short: str, group: str | None = None) -> dict[str, Any]:
        return next(r for r in rows if r["scenario"] == scenario and r["technique"] == name
                    and r["metric"] == short and r.get("group") == group)  # fmt: skip

    out = []
    head = "| technique | " + " | ".join(f"{m} (paper)" for m in METRICS) + " |"
    rule = "|---|" + "---|" * len(METRICS)

    def block(title: str, scenario: str, group: str | None, key: str, paper: str,
              digits: int) -> None:  # fmt: skip
        out.extend(["", f"**{title}**", "", head, rule])
        for name in techniques:
            cells = []
            for short in METRICS:
                r = find(scenario, name, short, group)
                cells.append(f"{_cell(r[key], digits)} ({_cell(r.get(paper), digits)})")
            out.append(f"| {name} | " + " | ".join(cells) + " |")

    block("Goodness of fit, R² (Table 3)", "fit", None, "r2", "paper_r2", 4)
    block(
        "Interpolation, mean relative error % (Figure 9)",
        "interpolation",
        None,
        "mre",
        "paper_mre",
        1,
    )
    for group in ("page-aligned", "unaligned"):
        block(f"Interpolation, {group} request sizes, MRE %", "interpolation", group, "mre",
              "paper_mre", 1)  # fmt: skip
    block("Interpolation, 100 more random configs, request sizes rounded to 4 KiB, MRE %",
          "interpolation", "page-aligned draw", "mre", "paper_mre", 1)  # fmt: skip
    for group in ("small requests", "large requests", "small file sets", "large file sets"):
        block(
            f"Extrapolation, {group}, MRE % (Figure 10)",
            "extrapolation",
            group,
            "mre",
            "paper_mre",
            1,
        )
    for instances in (2, 3):
        out.extend(["", f"**Consolidation, {instances} instances, MRE % (Figure "
                    f"{10 + instances - 1}); paper: its 1/4-sum**", "",
                    "| scheduler, access | technique | " + " | ".join(METRICS)
                    + " | 1/4 sum (paper) |",
                    "|---|---|" + "---|" * (len(METRICS) + 1)])  # fmt: skip
        for scheduler, access in itertools.product(PAPER_SCHEDULERS, ACCESSES):
            group = f"{scheduler}, {access}"
            for name in techniques:
                found = [find(f"consolidation-{instances}", name, s, group) for s in METRICS]
                values = [r["mre"] for r in found]
                quarter = float(np.nanmean(values)) if np.isfinite(values).any() else None
                paper = found[0].get("paper_mre_quarter_sum")
                out.append(f"| {group} | {name} | " + " | ".join(_cell(v) for v in values)
                           + f" | {_cell(quarter)} ({_cell(paper)}) |")  # fmt: skip
    return "\n".join(out)


def probe_table(probe: list[dict[str, Any]]) -> str:
    lines = ["| file set | 4 KiB O_DIRECT random reads, IOPS | latency ms |", "|---|---|---|"]
    for row in probe:
        lines.append(f"| {row['file_set_mib']} MiB | {row['read_iops']:.0f} | "
                     f"{row['read_lat_ms']:.3f} |")  # fmt: skip
    return "\n".join(lines)
