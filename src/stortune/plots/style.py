"""What every figure shares: one palette and the note on a metric where lower is better."""

from __future__ import annotations

from stortune.enums import Direction

COLORS = ("#1f5f8b", "#d1495b", "#66a182", "#edae49", "#8e6c8a", "#00798c", "#7a7a7a")
MUTED = "#bbbbbb"
FAILED = "#c00000"
DISTURBED = "#e08000"


def color(i: int) -> str:
    """The i-th colour of the palette, cycling."""
    return COLORS[i % len(COLORS)]


def lower_is_better(direction: str) -> str:
    """' (lower is better)' for a minimised metric, else nothing: axis labels say which way."""
    return " (lower is better)" if direction == Direction.MIN else ""
