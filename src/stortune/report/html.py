"""`write_report`: one self-contained HTML page for a campaign (template, inline SVG plots)."""

from __future__ import annotations

from pathlib import Path

import jinja2

from stortune import __version__
from stortune.report.plots import tuning_curve
from stortune.space import parse_space
from stortune.store import Store
from stortune.verify import Gain

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("stortune.report", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
)
_ENV_KEYS = ("hostname", "kernel", "os", "cpu", "cores", "memory_mb", "fio")


def write_report(
    store: Store,
    campaign_name: str,
    out_dir: Path,
    gain: Gain | None = None,
    headline: str = "",
) -> Path:
    """Write `<out_dir>/<campaign>.html` and return its path."""
    c = store.campaign(campaign_name)
    trials = store.trials(c.id)
    space = parse_space(c.space_yaml, f"campaign {c.name!r}")
    values = [t.value for t in trials]
    default = next((t.value for t in trials if (t.info or {}).get("source") == "default"), None)
    ok = [t for t in trials if t.value is not None]
    pick = max if c.direction == "max" else min
    best = pick(ok, key=lambda t: t.value) if ok else None
    envs = store.environments(c.id)
    env = {k: envs[-1].get(k) for k in _ENV_KEYS if envs and envs[-1].get(k) is not None}
    workloads = ", ".join(w.get("job", w.get("name", "?")) for w in c.workload.get("workloads", []))
    html = _ENV.get_template("campaign.html.j2").render(
        c=c,
        trials=trials,
        space=space,
        env=env,
        workloads=workloads,
        gain=gain,
        best_config=best.config if best else None,
        headline=headline or _headline(c.name, len(trials), best, c.metric),
        curve=tuning_curve(
            values, c.direction, c.metric, default, [t.seq for t in trials if t.value is None]
        )
        if ok
        else "",
        runs_ok=sum(r.status == "ok" for t in trials for r in t.runs),
        runs_failed=sum(r.status != "ok" for t in trials for r in t.runs),
        version=__version__,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{c.name}.html"
    path.write_text(html)
    return path


def _headline(name: str, evaluations: int, best: object, metric: str) -> str:
    if best is None:
        return f"{name}: {evaluations} evaluations, none successful"
    return f"{name}: best {metric} {best.value:.4g} after {evaluations} evaluations"
