"""The one line a person remembers: what, where, the verdict, after how many evaluations, and
which parameters mattered ("fileserver on ext4: APPLY IT: the best config re-measured 1.8x
...").

The verdict is `workflows.recommend.advice_line`'s, word for word: `stortune recommend`, `tune`
and the report say one thing. Numbers are given to 3 significant digits (`number`), and a gain
always as a ratio ("1.48x"), never in the metric's unit: an in-loop gain is computed on values
relative to a reference, which are no MB/s.
"""

from __future__ import annotations

from stortune.enums import CampaignKind, Direction, RunStatus
from stortune.measure.reference import is_reference
from stortune.measure.sweeping import planned_runs
from stortune.measure.verify import Gain
from stortune.report.context import Context
from stortune.units import number

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


def ratio_text(gain: Gain) -> str:
    """``1.48x (90% CI 1.21-1.81)``: a gain as a ratio, whatever the metric's unit."""
    return gain.ratio_text()


def in_loop_text(loop: Gain, start: str = "default") -> str:
    """The best config's gain as the tuning runs measured it, over the config they started
    from (`start`: what the report calls it, `Context.start_name`)."""
    return f"in the tuning runs: {ratio_text(loop)} over the {start}"


def advice(ctx: Context) -> str:
    """The verdict, as `stortune recommend` words it."""
    from stortune.workflows.recommend import advice_line

    return advice_line(ctx.findings.checked, ctx.campaign.name)


def subject(ctx: Context) -> str:
    """'<workloads> on <file system or space>', or what the caller named it."""
    if ctx.subject:
        return ctx.subject
    names = [w.get("name") or w.get("job") for w in ctx.campaign.workload.get("workloads", [])]
    who = "+".join(n for n in names if n) or ctx.campaign.name
    # the file system of the config recommended (the default's when it is kept), else the best
    best = ctx.findings.best
    chosen = ctx.findings.recommended or (best.config if best else {})
    where = chosen.get("fs") or ctx.campaign.space_name
    return f"{who} on {where}"


def headline(ctx: Context) -> str:
    """The line for `ctx`: its subject, then the verdict (re-measured; a tuned campaign not
    re-measured is told to measure more, beside its best from the evaluations), how many
    evaluations (a sweep: how many runs) and the top parameters."""
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
        parts.append(advice(ctx))
        risky = ctx.findings.risks.get("best") or []
        if risky:
            values = ", ".join(f"{r.parameter}={_value(r.value)}" for r in risky)
            parts.append(f"RISKY: {values} (can lose data on a crash or power cut)")
        safe = ctx.findings.gains.get("best-safe")
        if safe is not None:
            parts.append(f"best safe config {ratio_text(safe)}")
        alternatives = risky_alternatives(ctx.findings.gains)
        if alternatives:
            parts.append(f"risky options, not applied: {alternatives}")
    else:
        if c.kind == CampaignKind.TUNE:
            parts.append(advice(ctx))
        best, first = ctx.findings.best, ctx.findings.default_value
        if best is not None and first and best.value:
            ratio = best.value / first if c.direction == Direction.MAX else first / best.value
            parts.append(
                f"the best evaluation {_times(ratio, word, c.direction, ctx.start_name)} "
                "in the tuning runs"
            )
        elif best is not None:
            parts.append(f"best {c.metric} {number(best.value)}")
    parts.append(f"{n} evaluations")
    parts += top_parameters(ctx)
    parts += disturbance(ctx)
    return f"{head}: " + ", ".join(parts)


def risky_alternatives(gains: dict[str, Gain]) -> str:
    """What each risky value measured beside the default would buy ("risky NAME=VALUE"
    labels of a verification), so the price of safety is on the line too."""
    return ", ".join(
        f"{label.removeprefix('risky ')} {ratio_text(g)}"
        for label, g in gains.items()
        if label.startswith("risky ") and g.known
    )


def _value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def disturbance(ctx: Context) -> list[str]:
    """How many runs other work disturbed, and the highest load seen."""
    found = ctx.findings
    if found.load_max is None and not found.disturbed:
        return []
    load = f", load up to {number(found.load_max)}" if found.load_max is not None else ""
    return [f"{found.disturbed} runs disturbed{load}"]


def top_parameters(ctx: Context) -> list[str]:
    """The first three ranked (a parameter that never varied is never ranked)."""
    top = ctx.findings.top
    return ["top parameters: " + ", ".join(top[:3])] if top else []


def sweep_progress(ctx: Context, configs: int) -> str:
    """A sweep's trials finish only with their last repetition: count its runs instead."""
    design = [t for t in ctx.trials if not is_reference(t)]
    ok = sum(r.status == RunStatus.OK for t in design for r in t.runs)
    planned = planned_runs(ctx.campaign, configs)
    return f"sweep of {configs} configs ({ctx.campaign.status}), {ok} of {planned} runs measured"


def _times(ratio: float, word: str, direction: str, start: str = "default") -> str:
    if direction == Direction.MAX:
        return f"{number(ratio)}x {word} over the {start}"
    return f"{number(ratio)}x lower {word} than the {start}"
