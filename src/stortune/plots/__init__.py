"""Every figure stortune draws, each by one function that builds a matplotlib `Figure` from
plain data: `importance` (Carver's steps, boxplots, fixed sets, subsample study; the Lasso
path), `tuning` (best so far), `runs` (runs over time), `models` (predicted against measured,
error CDF), `profile` (access times, ratios, estimate against full), `noise` (drift).

`render` turns a figure into what a reader gets: inline SVG for the HTML report (`to_svg`), PNG
and SVG files for the commands' --plots (`save`). A figure is drawn once and rendered either way,
so the page and the files always show the same picture.

Submodules are imported on first use (PEP 562): the CLI imports command modules at start-up,
and matplotlib should load only when a figure is drawn.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_MODULES = ("importance", "models", "noise", "profile", "render", "runs", "style", "tuning")

__all__ = list(_MODULES)


def __getattr__(name: str) -> ModuleType:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")
