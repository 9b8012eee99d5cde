"""Plots for the report, rendered to inline SVG text (no files, no network)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first


def _svg(fig: plt.Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def tuning_curve(
    values: Sequence[float | None],
    direction: str,
    metric: str,
    default: float | None = None,
    failed: Sequence[int] = (),
) -> str:
    """Each evaluation's value and the best so far, failures marked on the axis."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    xs = [i for i, v in enumerate(values) if v is not None]
    ys = [v for v in values if v is not None]
    best, curve = None, []
    for v in values:
        if v is not None and (best is None or (v > best if direction == "max" else v < best)):
            best = v
        curve.append(best if best is not None else math.nan)
    ax.plot(xs, ys, "o", color="#9bb", label="evaluation")
    ax.step(range(len(values)), curve, where="post", color="#036", label="best so far")
    if default is not None:
        ax.axhline(default, color="#c60", linestyle="--", label="default")
    if failed:
        ax.plot(list(failed), [min(ys, default=0)] * len(failed), "x", color="#c00", label="failed")
    ax.set_xlabel("evaluation")
    ax.set_ylabel(metric)
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    return _svg(fig)
