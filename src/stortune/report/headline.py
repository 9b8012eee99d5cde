"""The one line a person remembers: what, where, how much better, after how many evaluations,
and which parameters mattered ("fileserver on ext4: 1.80x throughput over default, ...")."""

from __future__ import annotations

import math

from stortune.enums import CampaignKind, Direction, RunStatus
from stortune.measure.reference import is_reference
from stortune.measure.sweeping import planned_runs
from stortune.measure.verify import Gain
from stortune.report.context import Context

WORDS = (
    (("bw", "mbs", "thr", "bandwidth"), "throughput"),
    (("iops",), "IOPS"),
    (("lat", "_ms", "_us"), "latency"),
)


def metric_word(metric: str) -> str:
    """What a reader calls the metric (total.bw_mbs is throughput)."""
    low = metric.lower()
    for keys, word in WORDS:
        if any(k in low for k in keys):
            return word
    return metric


def subject(ctx: Context) -> str:
    """'<workloads> on <file system or space>', or what the caller named it."""
    if ctx.subject:
        return ctx.subject
    names = [w.get("name") or w.get("job") for w in ctx.campaign.workload.get("workloads", [])]
    who = "+".join(n for n in names if n) or ctx.campaign.name
    best = ctx.findings.best
    where = (best.config.get("fs") if best else None) or ctx.campaign.space_name
    return f"{who} on {where}"


def headline(ctx: Context) -> str:
    """The line for `ctx`: its subject, then the gain (re-measured, else from the evaluations),
    how many evaluations (a sweep: how many runs) and the top parameters."""
    c = ctx.campaign
    n = sum(not is_reference(t) for t in ctx.trials)
    head = subject(ctx)
    if not ctx.trials:
        return f"{head}: no evaluations yet"
    if c.kind == CampaignKind.SWEEP:
        return f"{head}: " + ", ".join([sweep_progress(ctx, n), *top_parameters(ctx)])
    if not ctx.ok_trials:
        return f"{head}: none of {n} evaluations succeeded"
    word = metric_word(c.metric)
    parts = []
    gain = ctx.findings.gain
    if gain is not None:
        risky = ctx.findings.risks.get("best") or []
        parts.append(
            verdict(gain, word, "best config found" if risky else "best safe config found")
        )
        for label in ("best-safe",):
            other = ctx.findings.gains.get(label)
            if other is not None:
                parts.append(f"best safe config {_ratio(other)}")
        if risky:
            values = ", ".join(f"{r.parameter}={_value(r.value)}" for r in risky)
            parts.append(f"RISKY: {values} (can lose data on a crash or power cut)")
        alternatives = risky_alternatives(ctx.findings.gains)
        if alternatives:
            parts.append(f"risky options, not applied: {alternatives}")
    else:
        best, default = ctx.findings.best, ctx.findings.default_value
        if best is not None and default and best.value:
            ratio = best.value / default if c.direction == Direction.MAX else default / best.value
            parts.append(
                _times(ratio, word, c.direction) + " (not re-measured: measure more before "
                "applying it)"
            )
        elif best is not None:
            parts.append(f"best {c.metric} {best.value:.4g}")
    parts.append(f"{n} evaluations")
    parts += top_parameters(ctx)
    parts += disturbance(ctx)
    return f"{head}: " + ", ".join(parts)


def verdict(gain: Gain, word: str, what: str = "best config found") -> str:
    """What the re-measured gain says: a gain, a loss, or within noise (keep the default, and
    by how much at most the `what` config could beat it, verified)."""
    if not gain.known:
        return "gain unknown: a run measured 0 or less, and a ratio needs every run above 0"
    if gain.significant and gain.gain > 0:
        return f"{_times(1 + gain.gain, word, gain.direction)} {_ci(gain)}".strip() + ": apply it"
    if gain.significant:
        return f"keep the default: the {what} re-measured {_ratio(gain)}"
    within = max(gain.ci_high, 0.0)
    bound = f"the default is within {within:.0%} of " if math.isfinite(within) else ""
    return (
        f"within noise of the default, keep it: {bound}the {what}, which re-measured {_ratio(gain)}"
    )


def risky_alternatives(gains: dict[str, Gain]) -> str:
    """What each risky value measured beside the default would buy ("risky NAME=VALUE"
    labels of a verification), so the price of safety is on the line too."""
    return ", ".join(
        f"{label.removeprefix('risky ')} {_ratio(g)}"
        for label, g in gains.items()
        if label.startswith("risky ") and g.known
    )


def _ratio(gain: Gain) -> str:
    return f"{1 + gain.gain:.2f}x {_ci(gain)}".strip()


def _ci(gain: Gain) -> str:
    low, high = 1 + gain.ci_low, 1 + gain.ci_high
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    return f"({gain.confidence:.0%} CI {low:.2f}-{high:.2f})"


def _value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def disturbance(ctx: Context) -> list[str]:
    """How many runs other work disturbed, and the highest load seen."""
    found = ctx.findings
    if found.load_max is None and not found.disturbed:
        return []
    load = f", load up to {found.load_max:.1f}" if found.load_max is not None else ""
    return [f"{found.disturbed} runs disturbed{load}"]


def top_parameters(ctx: Context) -> list[str]:
    top = ctx.findings.top
    return ["top parameters: " + ", ".join(top[:3])] if top else []


def sweep_progress(ctx: Context, configs: int) -> str:
    """A sweep's trials finish only with their last repetition: count its runs instead."""
    design = [t for t in ctx.trials if not is_reference(t)]
    ok = sum(r.status == RunStatus.OK for t in design for r in t.runs)
    planned = planned_runs(ctx.campaign, configs)
    return f"sweep of {configs} configs ({ctx.campaign.status}), {ok} of {planned} runs measured"


def _times(ratio: float, word: str, direction: str) -> str:
    if direction == Direction.MAX:
        return f"{ratio:.2f}x {word} over default"
    return f"{ratio:.2f}x lower {word} than default"
