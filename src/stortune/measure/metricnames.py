"""A campaign's metric names checked before anything is measured.

An objective or guardrail named after no metric the workloads report (``total.bw_mb`` for
``total.bw_mbs``) would otherwise be found out only after the first runs, or never: a run
without the metric counts as a failure, a guardrail without one as unjudged. So the names are
checked against what each workload can report (`Workload.metric_names`) and what the target
adds (its ``sys.*`` and ``device.*`` samplers everywhere; ``ceph.*`` and the exporters' names
on Ceph), and a name that is not there stops the command with the closest ones. A target that
measures by itself, or replays what it holds, knows its names too (`Target.metric_names`: a
table's metric columns, a model's metric, fio's names when a program prints fio's report);
only a program's own JSON is unknown ahead and left unchecked. Names may be patterns
(``*.read.iops``: any job's).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from stortune.errors import StortuneError

if TYPE_CHECKING:
    from stortune.objective import Objective
    from stortune.targets.base import Target
    from stortune.workloads.base import Workload

# First parts of the names every target's own samplers may add (system and device metrics).
TARGET_PREFIXES = ("sys.", "device.")
# What a target kind's samplers add besides, as patterns (NAME.* is any name under NAME.).
TARGET_METRICS: dict[str, tuple[str, ...]] = {
    "ceph": ("ceph.*",),
    "cephfs": ("ceph.*", "mgr.*", "node.*", "fuse.*"),
}


def target_metric_names(target: Target | None) -> tuple[str, ...]:
    """The names (``NAME.*`` patterns) a target adds to every run beside ``sys.*`` and
    ``device.*``."""
    return TARGET_METRICS.get(getattr(target, "kind", ""), ())


def check_campaign_metrics(
    objective: Objective, workloads: Sequence[Workload | None], target: Target | None
) -> None:
    """`check_metric_names` for a campaign on `target`: its own names where a workload's are
    unknown, and the names its samplers add."""
    names = target.metric_names() if target is not None else None
    kind = getattr(target, "kind", "")
    check_metric_names(objective, workloads, target_metric_names(target), names, kind)


def check_metric_names(
    objective: Objective,
    workloads: Sequence[Workload | None],
    extra: Iterable[str] = (),
    target_names: Iterable[str] | None = None,
    target_kind: str = "",
) -> None:
    """Raise StortuneError (one line, the closest names) when an objective or guardrail metric
    is not among the names every workload can report, `extra` (names, or ``NAME.*``
    patterns, the target adds) or ``sys.*``/``device.*``. Where a workload's names are unknown
    (`metric_names` None), or the target measures by itself (no workload), the target's
    `target_names` stand in; when those are unknown (None) too, nothing is checked."""
    extra = list(extra)
    prefixes = TARGET_PREFIXES + tuple(e[:-1] for e in extra if e.endswith(".*"))
    plain = {e for e in extra if not e.endswith(".*")}
    wanted = [("objective metric", m) for m in objective.measured]
    wanted += [("guardrail metric", g.metric) for g in objective.guardrails]
    for workload in workloads:
        names = workload.metric_names() if workload is not None else None
        of = f"workload {workload.name}" if workload is not None else f"the {target_kind} target"
        if names is None and target_names is not None:
            names, of = frozenset(target_names), f"the {target_kind} target"
        if names is None:
            continue
        known = {n for n in names if "*" not in n} | plain
        patterns = [n for n in names if "*" in n]
        for what, metric in wanted:
            if metric in known or metric.startswith(prefixes):
                continue
            if any(fnmatchcase(metric, p) for p in patterns):
                continue
            close = difflib.get_close_matches(metric, sorted(known), n=5, cutoff=0.5)
            some = sorted(known)
            hint = (
                f"closest: {', '.join(close)}"
                if close
                else f"it reports {', '.join(some[:8])}{', ...' if len(some) > 8 else ''}"
            )
            raise StortuneError(f"{what} {metric!r} is not a metric of {of}; {hint}")
