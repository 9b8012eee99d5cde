"""How a workflow tells its caller what is going on: a progress display per measuring phase
and one-line notes. The CLI shows bars; tests and `--json` use `Silent`."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

from stortune.measure.campaigns import Measuring
from stortune.measure.runner import Event, Outcome


class Reporter(Protocol):
    def measuring(
        self, label: str, measuring: Measuring
    ) -> AbstractContextManager[Callable[[Event], None]]:
        """A context for one measuring phase, yielding the handler of its events."""

    def note(self, text: str) -> None:
        """One line worth telling the user now."""


class Silent:
    """Tells nothing."""

    def measuring(
        self, label: str, measuring: Measuring
    ) -> AbstractContextManager[Callable[[Event], None]]:
        return nullcontext(lambda _event: None)

    def note(self, text: str) -> None:
        pass


def run_measuring(measuring: Measuring, reporter: Reporter, label: str = "") -> Outcome:
    """Run a campaign's plan under the reporter's display (shown once the campaign's lease is
    held: a process refused says so alone)."""
    with measuring.lease(), reporter.measuring(label or measuring.campaign.name, measuring) as on:
        return measuring.run(on)
