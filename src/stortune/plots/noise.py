"""The drift a noise study measured: raw values and values relative to the reference."""

from __future__ import annotations

from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from stortune.plots.render import figure
from stortune.plots.style import color

if TYPE_CHECKING:
    from stortune.measure.noise import NoiseReport


def drift(report: NoiseReport) -> Figure:
    """The studied config's raw values over time above its values relative to the reference
    interpolated at each run's start: what drift correction removes shows between the two."""
    fig = figure(7.0, 5.0)
    top, bottom = fig.subplots(2, 1, sharex=True)
    times = [t for t, _, _ in report.drift]
    top.plot(times, [v for _, v, _ in report.drift], "o-", color=color(0))
    top.set_ylabel(f"{report.metric} (raw)")
    top.set_title(
        f"{report.campaign}: raw RSD {report.raw_rsd:.1%}, "
        f"normalised RSD {report.normalised_rsd:.1%}",
        fontsize=10,
    )
    relative = [(t, n) for t, _, n in report.drift if n is not None]
    bottom.plot([t for t, _ in relative], [n for _, n in relative], "o-", color=color(3))
    bottom.set_ylabel("relative to reference")
    bottom.set_xlabel("seconds since the first run")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    return fig
