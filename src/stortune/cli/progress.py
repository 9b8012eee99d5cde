"""Progress on the terminal: one bar per measuring phase, fed by the runner's events.

The bar counts the plan's runs (a reference config's runs and disturbed placeholders come on
top); its status shows the best value so far, or, on a busy machine, what it waits for and how
long it may still wait. Output that is no terminal (a pipe, a log file) shows no bar while it
runs: it gets a plain line instead, at most every `PLAIN_EVERY` seconds (runs done and planned,
the best so far, the time elapsed). A phase that stops because the machine stayed busy ends with
the runner's note saying how to continue.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
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
from stortune.units import number

PLAIN_EVERY = 30.0  # seconds between plain progress lines when the output is no terminal


class ConsoleReporter:
    """A rich progress bar per phase (plain lines when the output is no terminal), notes as
    plain lines; `quiet` shows neither (`--json` output holds what the notes say). `stops`:
    print why a phase stopped early (a busy machine) when it ends; a command that prints the
    campaign's outcome itself, with that note last, turns it off. `clock` and `out` are for
    tests."""

    def __init__(
        self,
        quiet: bool = False,
        *,
        stops: bool = True,
        clock: Callable[[], float] = time.monotonic,
        out: Console | None = None,
        every: float = PLAIN_EVERY,
    ) -> None:
        self.quiet = quiet
        self.stops = stops
        self.clock = clock
        self.console = out or console
        self.every = every
        self.told: list[str] = []  # the stops' notes printed, which the outcome need not repeat

    def note(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text, highlight=False, soft_wrap=True)

    @contextmanager
    def measuring(self, label: str, measuring: Measuring) -> Iterator[Callable[[Event], None]]:
        plan = measuring.plan
        total = plan.planned_runs()
        direction = Direction(measuring.log.objective.direction)
        plain = PlainProgress(label, total, plan.done_runs(), self.clock, self.every)
        stopped: list[str] = []
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=self.console,
            disable=self.quiet,
        ) as progress:
            task = progress.add_task(label, total=total, completed=plain.done, status="")
            lines = not self.quiet and not self.console.is_terminal

            def on_event(event: Event) -> None:
                if event.kind == EventKind.RUN:
                    m = event.measurement
                    if event.counted and m is not None and m.status != RunStatus.DISTURBED:
                        progress.advance(task)
                        plain.done += 1
                elif event.kind == EventKind.TRIAL and event.value is not None:
                    if event.trial is not None and event.trial.seq < 0:
                        return  # the reference config is no evaluation
                    if plain.best is None or direction.better(event.value, plain.best):
                        plain.best = event.value
                    seq = event.trial.seq if event.trial is not None else "?"
                    status = f"#{seq}: {number(event.value)}  best {number(plain.best)}"
                    progress.update(task, status=status)
                elif event.kind == EventKind.WAIT:
                    left = f", {event.seconds_left:.0f} s left" if event.seconds_left else ""
                    plain.waiting = f"{event.message}{left}"
                    progress.update(task, status=f"[yellow]{plain.waiting}")
                elif event.kind == EventKind.STOP:
                    stopped.append(event.message)
                if event.kind != EventKind.WAIT:
                    plain.waiting = ""
                if lines:
                    line = plain.line()
                    if line:
                        self.console.print(line, highlight=False, markup=False, soft_wrap=True)

            yield on_event
        if self.stops:
            for text in stopped:
                self.note(text)
                if not self.quiet:
                    self.told.append(text)


class PlainProgress:
    """A phase's progress as a plain line, at most every `every` seconds of `clock`."""

    def __init__(
        self, label: str, total: int | None, done: int, clock: Callable[[], float], every: float
    ) -> None:
        self.label = label
        self.total = total
        self.done = done
        self.best: float | None = None
        self.waiting = ""
        self.clock = clock
        self.every = every
        self.started = self.last = clock()

    def line(self) -> str:
        """The line to print now, or "" when the last one is less than `every` seconds old."""
        now = self.clock()
        if now - self.last < self.every:
            return ""
        self.last = now
        best = f", best {number(self.best)}" if self.best is not None else ""
        waiting = f", {self.waiting}" if self.waiting else ""
        # a plan may go on past its planned runs (a verification undecided after its fewest
        # rounds): then what is left is unknown
        planned = self.total if self.total is not None and self.total >= self.done else "?"
        return (
            f"{self.label}: {self.done}/{planned} runs{best}, {clock_text(now - self.started)} "
            f"elapsed{waiting}"
        )


def clock_text(seconds: float) -> str:
    """``0:01:47``, as the bar shows elapsed time."""
    whole = int(max(seconds, 0))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"
