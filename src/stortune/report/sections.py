"""The report's sections, one builder each: `Context` in, one `Section` out.

Builders only arrange what `stortune.findings` derived (and the context loaded) into sentences,
tables and figures; they compute nothing of their own. A section with nothing to show carries
the sentence saying why (`missing`) instead of failing: a campaign with no runs, with only
failed runs, without an analysis table or a verification is still worth a page.
`build_sections` also turns an unexpected error inside one builder, or inside the analysis it
shows (`Findings.errors`), into such a sentence, so one broken analysis never costs the reader
the rest of the page.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stortune.enums import CampaignKind, Direction, RunStatus, TrialStatus
from stortune.findings import Analysis, Findings, source_of
from stortune.measure.reference import is_reference
from stortune.plots import importance as importance_plots
from stortune.plots import models as model_plots
from stortune.plots import profile as profile_plots
from stortune.plots.render import to_svg
from stortune.plots.runs import runs_over_time
from stortune.plots.tuning import tuning_curves
from stortune.report.context import Context
from stortune.report.headline import advice, in_loop_text, number

MAX_TRIAL_ROWS = 200
CARVER_STOP = {
    "rsd": "the best cell's RSD fell below the threshold",
    "top-n": "the requested number of parameters was reached",
    "no-reduction": "no remaining parameter reduces the variance of any cell",
    "exhausted": "every parameter is selected",
}


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"caption": self.caption, "columns": self.columns, "rows": self.rows}


@dataclass
class Plot:
    id: str
    caption: str
    svg: str


@dataclass
class Section:
    """One part of the page: sentences, tables, plots (side by side when `columns`), a code
    block; or `missing`, the sentence saying why there is nothing to show."""

    id: str
    title: str
    text: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    code: str = ""
    missing: str = ""
    columns: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the SVG text, for --json."""
        return {
            "id": self.id,
            "title": self.title,
            "missing": self.missing or None,
            "text": self.text,
            "tables": [t.to_dict() for t in self.tables],
            "plots": [p.id for p in self.plots],
            "code": self.code or None,
            "data": self.data,
        }


# ---- helpers ------------------------------------------------------------------------------
def fmt(value: Any) -> str:
    """A cell: numbers to 3 significant digits (whole numbers from 100 up), None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float | np.floating):
        return number(float(value))
    return str(value)


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def changes(config: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """The parameters of `config` that differ from the default config."""
    return {k: v for k, v in config.items() if k in default and default[k] != v}


def _interval(gain: Any) -> str:
    """``1.24x (0.69-2.23)``: a ratio and its interval, 3 significant digits."""
    if not gain.known:
        return "-"
    return f"{number(gain.ratio)}x ({number(gain.ratio_low)}-{number(gain.ratio_high)})"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _default_config(ctx: Context) -> dict[str, Any]:
    """The whole space's default (a ranked campaign's own space starts elsewhere)."""
    return ctx.default


def _every_default(ctx: Context) -> dict[str, Any]:
    """Every parameter's default in the whole space, those the default config leaves inactive
    too (xfs's block size beside ext4): what a config that activates them changes."""
    space = ctx.whole or ctx.space
    if space is None:
        return {}
    return {**{p.name: p.default for p in space.parameters}, **space.default_config()}


def _part(ctx: Context, part: str) -> Findings:
    """The findings, once it is sure the analysis behind `part` did not break; if it did, its
    error is raised here for `build_sections` to show as that section's reason."""
    error = ctx.findings.errors.get(part)
    if error is not None:
        raise error
    return ctx.findings


def _better(direction: str) -> str:
    return "higher" if direction == Direction.MAX else "lower"


# ---- sections -----------------------------------------------------------------------------
def environment_section(ctx: Context) -> Section:
    """What ran, on which target and workload, and on what machine."""
    c = ctx.campaign
    section = Section("measured", "What was measured, and where")
    runs = ctx.runs
    counts = {s: sum(r.status == s for r in runs) for s in sorted({r.status for r in runs})}
    workloads = [w.get("name") or w.get("job") or w.get("kind", "?") for w in _workloads(ctx)]
    rows = [
        ["campaign", f"{c.name} (kind {c.kind}, {c.status})"],
        ["target", _target_text(c.target)],
        ["workloads", ", ".join(workloads) or "the target's own (no separate workload)"],
        ["objective", f"{c.metric} ({_better(c.direction)} is better)"],
        ["tuner", f"{c.tuner} (seed {c.seed})" if c.tuner else "-"],
        ["space", c.space_name],
        ["evaluations", str(len(ctx.trials))],
        ["runs", ", ".join(f"{n} {s}" for s, n in counts.items()) or "none"],
        ["started", _when(c.created_at)],
        ["last update", _when(c.updated_at)],
    ]
    analysis = ctx.findings.analysis
    if analysis is not None:
        from stortune.sources import describe_metric, is_relative

        scope = (
            " (importance and model accuracy; the runs and the tuning curve are plotted in "
            "absolute values)"
            if is_relative(analysis.metric)
            else ""
        )
        rows.append(["analysed", f"{describe_metric(analysis.metric)}{scope}"])
    section.tables.append(Table(["", ""], rows, "campaign"))
    envs = ctx.store.environments(c.id)
    if envs:
        env = envs[-1]
        keys = ("hostname", "kernel", "os", "cpu", "cores", "memory_mb", "python", "fio", "root")
        machine = [[k, fmt(env[k])] for k in keys if env.get(k) not in (None, "")]
        disks = env.get("disks") or {}
        if disks:
            machine.append(["disks", "; ".join(_disk_text(n, d) for n, d in disks.items())])
        if env.get("loadavg") is not None:
            machine.append(["load average at start", fmt(env["loadavg"])])
        section.tables.append(Table(["", ""], machine, "machine"))
        hosts = {(e.get("hostname"), e.get("kernel")) for e in envs}
        if len(hosts) > 1:
            section.text.append(
                f"The campaign ran in {len(envs)} sessions on {len(hosts)} different machines "
                "or kernels; the latest is shown."
            )
    else:
        section.text.append("No machine fingerprint was recorded (an imported dataset).")
    section.data = {"runs": counts, "workloads": workloads}
    return section


def _workloads(ctx: Context) -> list[dict[str, Any]]:
    return list(ctx.campaign.workload.get("workloads", []) or [])


def _target_text(target: dict[str, Any]) -> str:
    parts = [str(target.get("kind", "?"))]
    for key, value in target.items():
        scalar = isinstance(value, str | int | float | bool) and value != ""
        if key != "kind" and scalar:
            parts.append(f"{key}={value}")
        elif key in ("argv", "command") and isinstance(value, list):
            parts.append(f"{key}={' '.join(map(str, value))}")
    return ", ".join(parts)


def _disk_text(name: str, disk: dict[str, Any]) -> str:
    kind = "HDD" if disk.get("rotational") else "SSD/virtual"
    return f"{name}: {disk.get('model') or '?'}, {kind}, {fmt(disk.get('size_gb'))} GB"


def space_section(ctx: Context) -> Section:
    """The parameters, their domains and defaults (the whole space's), and the constraints; for
    a campaign tuned after a ranking, which parameters it tuned, from where, and which it held
    (at what value)."""
    if ctx.space is None:
        return Section("space", "The space", missing=ctx.space_note)
    space = ctx.whole or ctx.space
    best = ctx.findings.best
    section = Section("space", f"The space: {space.name}")
    columns = ["parameter", "type", "domain", "default", "unit", "layer", "a change needs", "best"]
    cut = bool(ctx.held) or not ctx.started_at_default
    if cut:
        columns.insert(4, "in this campaign")
    start, held = ctx.start, ctx.held
    rows = []
    for p in space.parameters:
        row = [
            p.name,
            p.kind.value,
            p.domain_text(),
            fmt(p.default),
            p.unit or "",
            p.layer or "",
            p.cost.value,
            fmt(best.config.get(p.name)) if best else "-",
        ]
        if cut:
            row.insert(4, _role(p.name, p.default, start, held, ctx.space))
        rows.append(row)
    section.tables.append(Table(columns, rows))
    if cut:
        free = [p.name for p in ctx.space.parameters if p.name not in held]
        section.text.append(
            f"This campaign tuned {len(free)} of the {len(space.parameters)} parameters, "
            f"starting from {ctx.start_words}; {len(held)} were held at one value (the "
            '"in this campaign" column). "default" is always the space\'s own default.'
        )
    section.text += [f"Constraint: {c.describe()}" for c in space.constraints]
    section.data = {
        "parameters": len(space.parameters),
        "constraints": len(space.constraints),
        "held": dict(held),
    }
    return section


def _role(name: str, default: Any, start: dict[str, Any], held: dict[str, Any], own: Any) -> str:
    """What a campaign cut from the whole space did with one parameter: held at a value,
    tuned (from where it started, when that is not the default), or not in its space."""
    if name in held:
        return f"held at {fmt(held[name])}"
    if own is None or name not in own:
        return "not in the campaign's space"
    if name in start and start[name] != default:
        return f"tuned, from {fmt(start[name])}"
    return "tuned"


def runs_section(ctx: Context) -> Section:
    """Every run in the order it ran: drift, failures and disturbed runs show up here."""
    section = Section("runs", "Runs over time")
    metric = ctx.campaign.metric
    runs = [
        {
            "started_at": r.started_at,
            "status": r.status,
            "workload": r.workload,
            "value": r.metrics.get(metric),
            "reference": is_reference(t),
            # the first config is the default only when tuning started there
            "default": source_of(t) == "default" and ctx.started_at_default,
        }
        for t in ctx.trials
        for r in t.runs
    ]
    if not runs:
        section.missing = "The campaign has no runs yet: nothing was measured."
        return section
    ok = sum(r["status"] == RunStatus.OK for r in runs)
    disturbed = sum(r["status"] == RunStatus.DISTURBED for r in runs)
    failed = len(runs) - ok - disturbed
    section.text.append(
        f"{len(runs)} runs: {ok} ok, {failed} failed, {disturbed} disturbed (redone and still "
        "disturbed). Failed and disturbed runs have no value; they are marked along the bottom."
    )
    if not ok:
        section.text.append(
            "No run succeeded, so no analysis below has data; the errors are listed here."
        )
    if len({r["started_at"] for r in runs}) > 1:
        svg = to_svg(runs_over_time(runs, metric))
        section.plots.append(Plot("plot-runs", f"{metric} of each run against time", svg))
    else:
        section.text.append("The runs carry no measurement times (an imported dataset): no plot.")
    errors: dict[str, int] = {}
    for t in ctx.trials:
        for r in t.runs:
            if r.status != RunStatus.OK:
                text = (r.error or r.status).strip().splitlines()
                key = (text[-1] if text else r.status)[:160]
                errors[key] = errors.get(key, 0) + 1
        if t.status != TrialStatus.OK and not t.runs and t.error:
            errors[t.error[:160]] = errors.get(t.error[:160], 0) + 1
    if errors:
        top = sorted(errors.items(), key=lambda kv: -kv[1])[:8]
        section.tables.append(
            Table(["error", "runs"], [[e, str(n)] for e, n in top], "why runs failed")
        )
    section.data = {"ok": ok, "failed": failed, "disturbed": disturbed}
    return section


def importance_section(ctx: Context) -> Section:
    """Carver's greedy steps beside the Lasso path, from the campaign's own runs."""
    found, analysis = _part(ctx, "importance").importance, ctx.findings.analysis
    section = Section("importance", "Which parameters matter", columns=True)
    if found.missing or analysis is None:
        section.missing = f"No importance analysis: {found.missing}"
        return section
    section.text.append(
        f"{analysis.n_configs} distinct configs of workload {analysis.workload or '-'}, metric "
        f"{analysis.metric} (repetitions averaged)." + _other_workloads(analysis)
    )
    if found.constant:
        held = " (held by the ranking before tuning, or fixed by the space)" if ctx.held else ""
        section.text.append(f"{found.constant_note}{held}.")
        section.data["constant"] = list(found.constant)
    direction = ctx.campaign.direction
    carver, lasso = found.carver, found.lasso
    if carver is None:
        section.text.append(f"Carver could not rank these runs: {found.carver_error}")
    else:
        rows = [
            [
                str(i),
                s.param,
                f"{s.kind} {s.score:.3g}",
                fmt(s.best_values.get(s.param)),
                fmt(s.best_mean),
                "-" if not np.isfinite(s.best_rsd) else f"{s.best_rsd:.1%}",
                str(s.best_size),
            ]
            for i, s in enumerate(carver.steps, start=1)
        ]
        columns = ["#", "parameter", "score", "best value", "cell mean", "cell RSD", "configs"]
        section.tables.append(Table(columns, rows, "Carver: greedy selection"))
        stop = CARVER_STOP.get(carver.stop, carver.stop)
        if not carver.steps:
            stop = "the metric's RSD is already below the threshold: no parameter stands out"
        section.text.append(f"Carver stopped after {len(carver.steps)} step(s): {stop}.")
        if carver.steps:
            fig = importance_plots.carver_steps(carver.steps, analysis.metric, direction)
            section.plots.append(Plot("plot-carver", "Carver: PI/CPI at each step", to_svg(fig)))
        section.data["carver"] = carver.selected
    if lasso is None:
        section.text.append(f"Lasso could not rank these runs: {found.lasso_error}")
    else:
        rows = [
            [
                str(i),
                p,
                "never" if lasso.entry_alpha[p] is None else f"{lasso.entry_alpha[p]:.3g}",
                f"{abs(lasso.coef[p]):.3g}",
            ]
            for i, p in enumerate(lasso.ranking[:10], start=1)
        ]
        columns = ["#", "parameter", "enters at alpha", "|coef| at CV alpha"]
        section.tables.append(Table(columns, rows, "Lasso: order of entry"))
        fig = importance_plots.lasso_path(
            lasso.alphas,
            lasso.path,
            lasso.column_param,
            lasso.ranking,
            lasso.alpha_cv,
            analysis.metric,
        )
        section.plots.append(Plot("plot-lasso", "Lasso coefficient paths", to_svg(fig)))
        section.data["lasso"] = lasso.ranking[:10]
    return section


def _other_workloads(analysis: Analysis) -> str:
    others = analysis.other_workloads
    if not others:
        return ""
    return f" The campaign also ran {', '.join(others)}: choose with `--workload`."


def tuning_section(ctx: Context) -> Section:
    """Best so far against evaluations, for this campaign and any tuner compared with it."""
    c = ctx.campaign
    section = Section("tuning", "Tuning curve")
    if not ctx.trials:
        section.missing = "No evaluations yet: there is no curve to draw."
        return section
    if not ctx.ok_trials:
        section.missing = (
            f"None of the {len(ctx.trials)} evaluations succeeded: there is no curve to draw."
        )
        return section
    if c.kind == CampaignKind.DATASET:
        section.missing = (
            "An imported dataset was not tuned: its configs have no order of evaluation, so "
            "there is no tuning curve."
        )
        return section
    found = _part(ctx, "tuning")
    curves, gain = found.curves, found.gain
    remeasured = (gain.default_mean, gain.best_mean) if gain else None
    fig = tuning_curves(
        {f"{cv.campaign} ({cv.tuner})": (cv.values, cv.best) for cv in curves},
        c.direction,
        c.metric,
        found.default_value,
        remeasured,
        curves[0].failed,
        first_label=f"{ctx.start_name} (first evaluation)",
    )
    section.plots.append(Plot("plot-tuning", "best so far against evaluations", to_svg(fig)))
    rows = [
        [cv.campaign, cv.tuner, str(len(cv.values)), fmt(cv.final), fmt(cv.reached)]
        for cv in curves
    ]
    columns = ["campaign", "tuner", "evaluations", "best", "first reached at"]
    section.tables.append(Table(columns, rows))
    if len(curves) > 1:
        section.text.append(
            "Other campaigns of the store that tuned the same space, workload and objective are "
            "drawn for comparison."
        )
    if not ctx.started_at_default:
        section.text.append(
            f"The first evaluation measured {ctx.start_words}, not the default: the dotted "
            "line is that config as the tuning runs measured it"
            + (
                ", the dashed ones the default and the best re-measured side by side."
                if gain
                else "."
            )
        )
    if gain is not None:
        section.text.append(f"Re-measured side by side: {gain.text()}")
    else:
        section.text.append(
            "The best value is the maximum of noisy measurements and overstates the gain until "
            "default and best are re-measured side by side (see below)."
        )
    compared = [f"{cv.campaign} ({cv.tuner})" for cv in curves]
    section.data = {"evaluations": len(curves[0].values), "compared": compared}
    return section


def verification_section(ctx: Context) -> Section:
    """Default and best measured again, interleaved: the gain with its confidence interval."""
    section = Section("verification", "Default and best, re-measured")
    gain, verification = ctx.findings.gain, ctx.findings.verification
    if gain is None:
        if verification is not None:
            section.missing = (
                f"The verification campaign {verification.name} has no successful "
                "re-measurement of both the default and the best config, so there is no gain."
            )
        else:
            section.missing = (
                "Not re-measured: the gain over the default is unknown (tune with --verify N, "
                "as `stortune demo` does, to measure it with a confidence interval)."
            )
        return section
    found = ctx.findings
    checked = found.checked
    results = checked.results if checked else {}
    reached = checked.reached if checked else {}
    rows = [
        ["default", str(gain.n_default), fmt(gain.default_mean), "-", "", "",
         _reached(reached.get("default")), ""]
    ]  # fmt: skip
    for label, g in found.gains.items():
        risky = "; ".join(r.text() for r in found.risks.get(label, []))
        result = results.get(label)
        judgement = str(result.judgement) if result else ""
        guards = "; ".join(c.text() for c in result.guardrails) if result else ""
        rows.append(
            [label, str(g.n_best), fmt(g.best_mean), _interval(g), judgement, guards,
             _reached(reached.get(label)), risky]
        )  # fmt: skip
    level = f"{gain.confidence:.0%} CI"
    columns = [
        "config", "rounds", f"mean {gain.metric}", f"ratio to default ({level})", "verdict",
        "guardrails", "reached the device", "risks",
    ]  # fmt: skip
    section.tables.append(Table(columns, rows))
    section.text.append(advice(ctx))
    section.text.append(
        "Each round measured every config once, side by side; the ratios are the geometric "
        "mean of the rounds' ratios to the default, with a paired interval, so drift between "
        "rounds cancels. A config is measured until its verdict is decided or the rounds allowed "
        "run out."
    )
    served = [k for k, v in reached.items() if v is False]
    if served:
        section.text.append(
            f"WARNING: the runs of {', '.join(served)} were served largely from memory, not the "
            "device (few of the bytes the workload moved reached it, or the result exceeded "
            "the device's raw bandwidth): a gain there may be a caching one."
        )
    loop = found.in_loop
    if loop is not None and not ctx.started_at_default:
        section.text.append(
            f"{_sentence(in_loop_text(loop, ctx.start_name))}, the config tuning started "
            "from; the ratios above are over the default."
        )
    elif loop is not None:
        inside = loop.ratio_low <= gain.ratio <= loop.ratio_high
        section.text.append(
            f"{_sentence(in_loop_text(loop, ctx.start_name))}; the re-measured ratio lies "
            + ("inside that interval." if inside else "outside it.")
        )
    section.data = {**gain.to_dict(), "gains": {k: g.to_dict() for k, g in found.gains.items()}}
    return section


def _reached(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "NO: memory"


def models_section(ctx: Context) -> Section:
    """How well a few fast regression techniques predict the metric (cross-validated)."""
    accuracy, analysis = _part(ctx, "models").accuracy, ctx.findings.analysis
    section = Section("models", "Model accuracy")
    if accuracy.missing or analysis is None:
        section.missing = f"No models: {accuracy.missing}"
        return section
    scores = accuracy.scores
    rows = [
        [
            name,
            "-" if not np.isfinite(r.r2) else f"{r.r2:.3f}",
            "-" if not np.isfinite(r.mre) else f"{r.mre:.1%}",
            f"{r.seconds:.2f}",
        ]
        for name, r in scores.items()
    ]
    section.tables.append(Table(["technique", "CV R²", "CV mean relative error", "seconds"], rows))
    section.text.append(
        f"{accuracy.folds}-fold cross-validation over {accuracy.n_configs} distinct configs of "
        f"workload {analysis.workload or '-'}, hyperparameters at their defaults; "
        "`stortune model` tunes and evaluates them fully." + _other_workloads(analysis)
    )
    for name, r in scores.items():
        if r.error:
            section.text.append(f"{name} could not be fitted: {r.error}")
    best = accuracy.best
    if best is not None:
        r, metric = scores[best], analysis.metric
        fig = model_plots.predicted_vs_measured(
            r.measured, r.predicted, metric, f"{best}: {metric}"
        )
        caption = f"{best}: out-of-fold predictions against measurements"
        section.plots.append(Plot("plot-models", caption, to_svg(fig)))
    section.data = {k: {"r2": r.r2, "mre": r.mre} for k, r in scores.items()}
    return section


def profile_section(ctx: Context) -> Section:
    """The device's sequential-to-random throughput ratios (SeRRa), when a profile exists."""
    section = Section("profile", "Device profile")
    profile = ctx.profile
    if not profile:
        section.missing = (
            "No device profile: the store holds no profile campaign (run `stortune profile DIR` "
            "and pass its JSON with `stortune report --profile FILE`)."
        )
        return section
    target = profile.get("target", {})
    section.text.append(
        f"{profile.get('mode', '?')} profile of {target.get('path', '?')} "
        f"({fmt(profile.get('runs'))} runs, {fmt(profile.get('elapsed_s'))} s; "
        f"from {ctx.profile_source or 'a file'}). A ratio of 3 means sequential access of that "
        "request size is 3 times as fast as random access."
    )
    rows = []
    for op, s in (profile.get("summary") or {}).items():
        if s:
            ci = s.get("mean_ci")
            rows.append(
                [
                    op,
                    fmt(s.get("mean")),
                    f"{fmt(ci[0])}-{fmt(ci[1])}" if ci else "-",
                    f"{fmt(s.get('min'))} at {_size(s.get('min_size'))}",
                    f"{fmt(s.get('max'))} at {_size(s.get('max_size'))}",
                ]
            )
            if s.get("verdict"):
                section.text.append(f"Verdict, {s['verdict']}.")
    level = f"{profile.get('confidence', 0.9):.0%} CI"
    columns = ["operation", "mean ratio", level, "lowest", "highest"]
    section.tables.append(Table(columns, rows))
    curve = profile.get("curve") or []
    if curve:
        fig = profile_plots.ratios(curve)
        section.plots.append(Plot("plot-profile", "sequential/random ratio per size", to_svg(fig)))
    section.data = {"summary": profile.get("summary"), "source": ctx.profile_source}
    return section


def _size(size: Any) -> str:
    from stortune.units import human_size

    return human_size(int(size)) if isinstance(size, int | float) else "-"


def recommendation_section(ctx: Context) -> Section:
    """The config to use, in the form the target takes it (mkfs/mount/sysctl, ceph.conf, ...)."""
    from stortune.targets.install import install_files_for, render_files

    found = _part(ctx, "recommendation")
    section = Section("recommendation", "Recommended config")
    config, why, gain = found.recommended, found.recommended_why, found.gain
    if config is None:
        section.missing = "No recommendation: no evaluation succeeded."
        return section
    verdict = advice(ctx) if ctx.campaign.kind == CampaignKind.TUNE or gain else ""
    header = f"stortune recommendation from campaign {ctx.campaign.name} ({why})\n"
    header += f"{verdict}\n" if verdict else ""
    header += gain.text() if gain else f"{ctx.campaign.metric}: not re-measured"
    space = ctx.whole or ctx.space  # a ranked campaign's own space pins what it did not tune
    if space is not None:
        try:
            kind = str(ctx.campaign.target.get("kind", ""))
            section.code = render_files(install_files_for(kind, config, space), header)
        except Exception as exc:  # noqa: BLE001 - a config the space no longer takes
            section.text.append(f"The config cannot be rendered in the target's form: {exc}")
    if not section.code:
        lines = [f"# {line}" for line in header.splitlines()]
        section.code = "\n".join([*lines, *(f"{k} = {v}" for k, v in config.items())]) + "\n"
    default = _every_default(ctx)
    changed = changes(config, default)
    section.text.insert(0, f"From {why}; {len(changed)} parameter(s) differ from the default.")
    if verdict:
        section.text.insert(0, verdict)
    if space is not None:
        from stortune.space.risk import risks_of

        for risk in risks_of(space, config):
            section.text.append(f"RISK: {risk.text()}")
    if changed:
        rows = [[k, fmt(default.get(k)), fmt(v)] for k, v in changed.items()]
        section.tables.append(Table(["parameter", "default", "recommended"], rows))
    section.data = {"config": config, "changed": changed}
    return section


def evaluations_section(ctx: Context) -> Section:
    """Every evaluation: its config (as changes from the default, or from where tuning started
    when that was not the default), status and value."""
    section = Section("trials", "Evaluations")
    if not ctx.trials:
        section.missing = "This campaign has no evaluations yet."
        return section
    at_default = ctx.started_at_default
    base = _default_config(ctx) if at_default else ctx.start
    name = "default" if at_default else "start"
    rows = []
    for t in ctx.trials[:MAX_TRIAL_ROWS]:
        ok = sum(r.status == RunStatus.OK for r in t.runs)
        changed = changes(t.config, base) if base else t.config
        source = source_of(t)
        rows.append(
            [
                str(t.seq),
                ctx.start_name if source == "default" else source,
                t.status,
                fmt(t.value),
                f"{ok}/{len(t.runs)}",
                ", ".join(f"{k}={fmt(v)}" for k, v in changed.items()) or f"({name})",
                (t.error or "")[:120],
            ]
        )
    columns = ["#", "from", "status", ctx.campaign.metric, "runs ok", f"changes from the {name}"]
    section.tables.append(Table([*columns, "error"], rows))
    if not at_default:
        differ = changes(ctx.start, _every_default(ctx))
        section.text.append(
            f"Tuning started from {ctx.start_words}, not the default: changes are from that "
            f"start, which differs from the default in {len(differ)} parameter(s): "
            + (", ".join(f"{k}={fmt(v)}" for k, v in differ.items()) or "none")
            + "."
        )
    if len(ctx.trials) > MAX_TRIAL_ROWS:
        section.text.append(
            f"The first {MAX_TRIAL_ROWS} of {len(ctx.trials)} evaluations; "
            f"`stortune export {ctx.campaign.name}` has them all."
        )
    return section


BUILDERS: tuple[tuple[str, str, Callable[[Context], Section]], ...] = (
    ("measured", "What was measured, and where", environment_section),
    ("space", "The space", space_section),
    ("runs", "Runs over time", runs_section),
    ("importance", "Which parameters matter", importance_section),
    ("tuning", "Tuning curve", tuning_section),
    ("verification", "Default and best, re-measured", verification_section),
    ("models", "Model accuracy", models_section),
    ("profile", "Device profile", profile_section),
    ("recommendation", "Recommended config", recommendation_section),
    ("trials", "Evaluations", evaluations_section),
)


def build_sections(ctx: Context) -> list[Section]:
    """Every section in page order; a builder that fails yields its section saying why."""
    out = []
    for section_id, title, builder in BUILDERS:
        try:
            out.append(builder(ctx))
        except Exception as exc:  # noqa: BLE001 - the rest of the page must still be written
            error = f"{type(exc).__name__}: {exc}"
            out.append(
                Section(
                    section_id,
                    title,
                    missing=f"This section could not be built ({error}).",
                    data={"error": error},
                )
            )
    return out
