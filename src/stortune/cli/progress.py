"""Progress on the terminal: one bar per measuring phase, fed by the runner's events.

The bar counts the plan's runs (a reference config's runs and disturbed placeholders come on
top); its status shows the best value so far, or, on a busy machine, what it waits for and how
long it may still wait.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from stortune.cli.common import console
from stortune.enums import Direction, RunStatus
from stortune.measure.campaigns import Measuring
from stortune.measure.runner import Event, EventKind


class ConsoleReporter:
    """A rich progress bar per phase, notes as plain lines; `quiet` shows neither (`--json`
    output holds what the notes say)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet

    def note(self, text: str) -> None:
        if not self.quiet:
            console.print(text, highlight=False, soft_wrap=True)

    @contextmanager
    def measuring(self, label: str, measuring: Measuring) -> Iterator[Callable[[Event], None]]:
        plan = measuring.plan
        total = plan.planned_runs()
        done = plan.done_runs()
        direction = Direction(measuring.log.objective.direction)
        best: list[float] = []
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            disable=self.quiet,
        ) as progress:
            task = progress.add_task(label, total=total, completed=done, status="")

            def on_event(event: Event) -> None:
                if event.kind == EventKind.RUN:
                    m = event.measurement
                    if event.counted and m is not None and m.status != RunStatus.DISTURBED:
                        progress.advance(task)
                elif event.kind == EventKind.TRIAL and event.value is not None:
                    if event.trial is not None and event.trial.seq < 0:
                        return  # the reference config is no evaluation
                    if not best or direction.better(event.value, best[0]):
                        best[:] = [event.value]
                    seq = event.trial.seq if event.trial is not None else "?"
                    status = f"#{seq}: {event.value:.4g}  best {best[0]:.4g}"
                    progress.update(task, status=status)
                elif event.kind == EventKind.WAIT:
                    left = f", {event.seconds_left:.0f} s left" if event.seconds_left else ""
                    progress.update(task, status=f"[yellow]{event.message}{left}")

            yield on_event
