"""A figure as inline SVG text (the report) or as PNG and SVG files (the commands' --plots).

Figures are made by `figure`, on the Agg canvas: the one place a backend is chosen. pyplot is
never used, so no display is needed and the process-wide backend and figure registry are left
alone. Both renderers close the figure, so a long report or a loop over plots frees each one.

Inline SVG keeps text as text (``svg.fonttype: none``: smaller pages, selectable labels), gets
its own hash salt so that the clip-path ids of several SVGs in one page never collide, and drops
the RDF metadata and the namespace declarations (http:// identifiers, redundant inline in HTML),
so the page holds no URL at all.
"""

from __future__ import annotations

import io
import itertools
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

FORMATS = ("png", "svg")
DPI = 120
_SALT = itertools.count()
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')


def figure(width: float, height: float) -> Figure:
    """An empty figure of `width` x `height` inches, laid out by matplotlib, on Agg."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def close(fig: Figure) -> None:
    """Free the figure's artists; one that pyplot manages (made elsewhere) leaves its registry."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)
    fig.clear()


def to_svg(fig: Figure) -> str:
    """The figure as one ``<svg>`` element, safe to embed next to others in one page."""
    buffer = io.StringIO()
    try:
        with rc_context({"svg.fonttype": "none", "svg.hashsalt": f"stortune-{next(_SALT)}"}):
            fig.savefig(buffer, format="svg", bbox_inches="tight")
    finally:
        close(fig)
    text = buffer.getvalue()
    text = _METADATA.sub("", text[text.index("<svg") :])
    # Inline in HTML the parser puts <svg> and xlink:href in their namespaces itself: the
    # xmlns declarations are redundant there, and without them the page holds no URL at all.
    return _XMLNS.sub("", text).replace("<svg", '<svg role="img"', 1)


def save(fig: Figure, path_stem: str | Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write `fig` once per format beside each other (``<stem>.png``, ``<stem>.svg``).

    A suffix naming one of the formats is dropped first (``study.png`` writes ``study.png``
    and ``study.svg``); any other dot belongs to the name (a campaign ``run-1.5``)."""
    stem = Path(path_stem)
    if stem.suffix.lstrip(".").lower() in {*formats, *FORMATS}:
        stem = stem.with_suffix("")
    try:
        stem.parent.mkdir(parents=True, exist_ok=True)
        written = []
        for fmt in formats:
            out = stem.with_name(f"{stem.name}.{fmt}")
            fig.savefig(out, dpi=DPI, bbox_inches="tight")
            written.append(out)
    finally:
        close(fig)
    return written
