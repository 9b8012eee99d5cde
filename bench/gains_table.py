"""The gains benchmarks' output: JSON for numpy values, and the Markdown table of verified
gains with its cells (stack_gains.py and app_gains.py print it, magpie.py its own).

A helper module, not a benchmark: running it does nothing.
"""

from __future__ import annotations

import math
from typing import Any

from gains import METRIC

from stortune.values import plain


def json_plain(value: Any) -> Any:
    """`json.dumps`'s default: numpy values and paths made plain (`stortune.values.plain`),
    anything else as its text."""
    out = plain(value)
    return str(value) if out is value else out


def risky_values(row: dict[str, Any]) -> str:
    """The risky name=value pairs of a row (what each risks is in the JSON's `risks`)."""
    return ", ".join(risk.split(":", 1)[0] for risk in row.get("risks") or [])


def number(value: Any) -> str:
    """A table cell: two decimals, or - for none."""
    return f"{value:.2f}" if isinstance(value, int | float) and math.isfinite(value) else "-"


def gain_cell(row: dict[str, Any]) -> str:
    """A verified gain with its 90% CI, as the tables print it, or why there is none."""
    if row.get("failed"):
        return f"failed: {row['failed']}"
    return f"{number(row.get('gain'))}x ({number(row.get('ci_low'))}-{number(row.get('ci_high'))})"


def minutes_cell(row: dict[str, Any]) -> str:
    return f"{row['seconds'] / 60:.0f}" if row.get("seconds") else "-"


def risk_cell(row: dict[str, Any]) -> str:
    """`allowed` when the tuning could pick risky values; a config given, not tuned (the
    expert's), is `risky` when it holds one, so no risky config reads as safe."""
    if row["risk_allowed"]:
        return "allowed"
    return "risky" if row.get("risks") else "safe"


def guardrail_cell(row: dict[str, Any]) -> str:
    """Each guardrail's verified ratio and whether it held (`!` broken, `?` unclear)."""
    marks = {"held": "", "broken": " !", "unclear": " ?", "unknown": " -"}
    return ", ".join(
        f"{c['guardrail']['metric']} {number((c.get('ratio') or {}).get('ratio'))}x"
        f"{marks.get(c['status'], '')}"
        for c in row.get("guardrail_checks") or []
    )


def device_cell(row: dict[str, Any]) -> str:
    reached = row.get("device_reached")
    return "-" if reached is None else "yes" if reached else "NO: memory"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | objective | tuner | risk | evals | minutes | default | gain (90% CI) "
        "| verdict | guardrails | device | in loop | re-measured | risky values |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = gain_cell(r)
        loop = (
            f"{number(r['in_loop'])}x ({number(r['in_loop_low'])}-{number(r['in_loop_high'])})"
            if "in_loop" in r
            else ""
        )
        again = f"{number(r['verified_over_start'])}x" if r.get("verified_over_start") else ""
        if "best_over_wide" in r:
            again = (
                f"stortune's {number(r['best_over_wide'])}x "
                f"({number(r['best_over_wide_low'])}-{number(r['best_over_wide_high'])}) of it"
            )
        verdict = r.get("judgement") or "-"
        if r.get("rounds"):
            verdict += f" ({r['rounds']} rounds)"
        lines.append(
            f"| {r['workload']} | {r.get('objective', METRIC)} | {r['tuner']} | {risk_cell(r)} "
            f"| {r.get('evaluations') or '-'} | {minutes_cell(r)} | "
            f"{number(r.get('default_mean'))} | {ci} | {verdict} | {guardrail_cell(r)} | "
            f"{device_cell(r)} | {loop} | {again} | {risky_values(r)} |"
        )
    return "\n".join(lines)
