"""What a job file declares about itself: the metric it exists for, its guardrails, its start.

A fio job (bundled or a user's) says in comment lines, which fio ignores::

    # stortune objective: dblog.write.iops:max
    # stortune guardrail: dbdata.total.iops:max:10%
    # stortune guardrail: dblog.sync.lat_p99_ms:min:50%
    # stortune start: cold

``objective`` (at most one) is ``METRIC[:max|min]``: what the workload is judged on when a
campaign names no ``--objective``. ``guardrail`` (any number) is ``METRIC:max|min[:SHARE]``:
a metric that must not get worse than SHARE (default 10%) while the objective improves; a total
over jobs can hide the job that matters, so a workload is judged on that job and the others
guard it. ``start`` is ``cold`` (the default: files laid out before the timed part, the page
cache dropped) or ``warm`` (the job measures from memory on purpose; the cache is kept). A line
``# stortune WORD: ...`` with another WORD, or a value that does not parse, is refused with the
file and line.

`objective_for` turns declarations and a command's options into a campaign's objective, the
same way for every command (and the demo).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stortune.enums import StartState
from stortune.errors import ConfigError, StortuneError

if TYPE_CHECKING:
    from stortune.objective import Guardrail, Objective, ObjectiveSpec
    from stortune.workloads.base import Workload

KEYS = ("objective", "guardrail", "start")
_LINE = re.compile(r"^\s*[#;]+\s*stortune\s+([A-Za-z_-]+)\s*:(.*)$")


@dataclass(frozen=True)
class Declarations:
    """A workload's declared primary objective, guardrails and start state."""

    objective: ObjectiveSpec | None = None
    guardrails: tuple[Guardrail, ...] = ()
    start: StartState = StartState.COLD

    @property
    def empty(self) -> bool:
        return self.objective is None and not self.guardrails and self.start is StartState.COLD

    def lines(self) -> list[str]:
        """The declarations as a job file writes them (what `workload check` prints)."""
        out = []
        if self.objective is not None:
            out.append(f"objective: {self.objective.metric}:{self.objective.direction}")
        out += [f"guardrail: {g.text()}" for g in self.guardrails]
        out.append(f"start: {self.start}")
        return out

    def to_dict(self) -> dict[str, object]:
        return {
            "objective": (
                f"{self.objective.metric}:{self.objective.direction}" if self.objective else None
            ),
            "guardrails": [g.text() for g in self.guardrails],
            "start": str(self.start),
        }


def parse_declarations(text: str, source: str) -> Declarations:
    """The declarations in a job text; `source` (the file) names where a bad one is."""
    objective: ObjectiveSpec | None = None
    guardrails: list[Guardrail] = []
    start: StartState | None = None
    for number, line in enumerate(text.splitlines(), 1):
        match = _LINE.match(line)
        if match is None:
            continue
        from stortune.objective import Guardrail, ObjectiveSpec  # numpy: only if needed

        key, value = match.group(1).lower(), match.group(2).strip()
        where = f"{source}, line {number}"
        if key not in KEYS:
            raise ConfigError(
                f"{where}: unknown declaration 'stortune {key}' (declare {', '.join(KEYS)})"
            )
        try:
            if key == "objective":
                if objective is not None:
                    raise StortuneError("a second objective: declare one, the others guardrails")
                spec = ObjectiveSpec.parse(value)
                if spec.weight != 1.0 or value.count(":") > 1:
                    raise StortuneError(f"objective {value!r}: write METRIC:max|min")
                objective = spec
            elif key == "guardrail":
                guardrails.append(Guardrail.parse(value))
            else:
                if start is not None:
                    raise StortuneError("a second start: declare cold or warm once")
                try:
                    start = StartState(value.lower())
                except ValueError:
                    raise StortuneError(f"start {value!r}: write cold or warm") from None
        except StortuneError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return Declarations(objective, tuple(guardrails), start or StartState.COLD)


def objective_for(
    workloads: Sequence[Workload | None],
    given: Objective | None,
    guardrails: Sequence[Guardrail] | None = None,
    *,
    fallback: Objective | None = None,
    say: Callable[[str], None] | None = None,
) -> Objective:
    """A new campaign's objective: `given` (``--objective``), else the primary objective every
    workload declares alike, else `fallback`; with `guardrails` (``--guardrail``, an empty
    list for none), else the ones the workloads declare. A declared guardrail on a metric
    another workload of the campaign lacks is left out (and said); a declared guardrail that is
    the objective turns round: the declared objective guards it. `say` hears one line per
    choice made from declarations."""
    from stortune.objective import Guardrail, Objective

    say = say or (lambda _line: None)
    present = [w for w in workloads if w is not None]
    objective = given
    if objective is None:
        declared = {w.name: w.declared.objective for w in present}
        specs = set(declared.values())
        if present and len(specs) == 1 and None not in specs:
            spec = next(iter(specs))
            assert spec is not None
            objective = Objective(spec.metric, spec.direction)
            say(f"objective: {objective.text()} (declared by {', '.join(declared)})")
        elif fallback is not None:
            objective = fallback
            if any(declared.values()):
                say(f"objective: {objective.text()} (the default: {_declared_text(declared)})")
        else:
            raise StortuneError(
                "a new campaign needs --space and --objective, or workloads that declare the "
                f"same one ({_declared_text(declared) if present else 'the target has none'})"
            )
    if guardrails is not None:
        return objective.with_guardrails(guardrails)
    chosen: list[Guardrail] = []
    owners: dict[Guardrail, list[str]] = {}
    left_out: list[str] = []
    for workload in present:
        primary = workload.declared.objective
        for guard in workload.declared.guardrails:
            if guard.metric in objective.measured:
                # judged on what the workload guards: the reverse, the metric it exists for
                # guards it, allowed the same share (pgbench on p99 latency: tps may fall 20%)
                if primary is None or primary.metric in objective.measured:
                    continue
                guard = Guardrail(primary.metric, primary.direction, guard.tolerance)
            if any(
                (names := w.metric_names()) is not None and guard.metric not in names
                for w in present
            ):
                left_out.append(f"{guard.text()} ({workload.name})")
                continue
            if guard not in owners:
                chosen.append(guard)
            owners.setdefault(guard, []).append(workload.name)
    if chosen:
        names = sorted({n for g in chosen for n in owners[g]})
        say(f"guardrails: {', '.join(g.text() for g in chosen)} (declared by {', '.join(names)})")
    if left_out:
        say(
            "declared guardrails left out, on metrics another workload of the campaign lacks: "
            + ", ".join(left_out)
        )
    return objective.with_guardrails(chosen)


def _declared_text(declared: dict[str, ObjectiveSpec | None]) -> str:
    return "; ".join(
        f"{name} declares {f'{s.metric}:{s.direction}' if s else 'none'}"
        for name, s in declared.items()
    )
