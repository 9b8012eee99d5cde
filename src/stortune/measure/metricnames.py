"""A campaign's metric names checked before anything is measured.

An objective or guardrail named after no metric the workloads report (``total.bw_mb`` for
``total.bw_mbs``) would otherwise be found out only after the first runs, or never: a run
without the metric counts as a failure, a guardrail without one as unjudged. So the names are
checked against what each workload can report (`Workload.metric_names`) and what the target
adds (its ``sys.*`` and ``device.*`` samplers everywhere; ``ceph.*`` and the exporters' names
on Ceph), and a name that is not there stops the command with the closest ones.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from stortune.errors import StortuneError

if TYPE_CHECKING:
    from stortune.measure.objective import Objective
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


def check_metric_names(
    objective: Objective, workloads: Sequence[Workload | None], extra: Iterable[str] = ()
) -> None:
    """Raise StortuneError (one line, the closest names) when an objective or guardrail metric
    is not among the names every workload can report, `extra` (names, or ``NAME.*``
    patterns, the target adds) or ``sys.*``/``device.*``. Workloads whose names are unknown
    (`metric_names` None: a program's own output, a replayed table) are not checked."""
    extra = list(extra)
    prefixes = TARGET_PREFIXES + tuple(e[:-1] for e in extra if e.endswith(".*"))
    plain = {e for e in extra if not e.endswith(".*")}
    wanted = [("objective metric", m) for m in objective.measured]
    wanted += [("guardrail metric", g.metric) for g in objective.guardrails]
    for workload in workloads:
        if workload is None or (names := workload.metric_names()) is None:
            continue
        known = set(names) | plain
        for what, metric in wanted:
            if metric in known or metric.startswith(prefixes):
                continue
            close = difflib.get_close_matches(metric, sorted(known), n=5, cutoff=0.5)
            some = sorted(known)
            hint = (
                f"closest: {', '.join(close)}"
                if close
                else f"it reports {', '.join(some[:8])}{', ...' if len(some) > 8 else ''}"
            )
            raise StortuneError(
                f"{what} {metric!r} is not a metric of workload {workload.name}; {hint}"
            )
