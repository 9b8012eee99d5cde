"""Sizes as people write them (``256m``, ``4g``) and as tables show them (``8K``, ``4M``); measured
values as text shows them (`number`)."""

from __future__ import annotations

import math
import re

from stortune.errors import ConfigError

KIB = 1024
MAX_SIZE = KIB**5  # 1 PiB: more than any image, cache or file stortune makes
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value: str | int | float) -> int:
    """Bytes from ``268435456``, ``256m``, ``1g``, ``512KiB`` (binary units)."""
    if isinstance(value, bool):
        raise ConfigError(f"size {value!r} is not a size")
    if isinstance(value, int) and abs(value) > MAX_SIZE:
        raise ConfigError(f"size {_clip(value)} is more than 1024t (1 PiB)")
    if isinstance(value, int | float):
        number, unit = float(value), ""
        if number != number or number in (float("inf"), float("-inf")):
            raise ConfigError(f"size {value!r} is not a size")
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ConfigError(f"size {value!r}: write bytes or a number with k, m, g or t")
        number, unit = float(match.group(1)), match.group(2).lower()
    if number * KIB ** " kmgt".index(unit or " ") > MAX_SIZE:
        raise ConfigError(f"size {_clip(value)} is more than 1024t (1 PiB)")
    size = int(number * KIB ** " kmgt".index(unit or " "))
    if size <= 0:
        raise ConfigError(f"size {value!r} must be positive")
    return size


def _clip(value: str | int | float) -> str:
    if isinstance(value, int) and value.bit_length() > 256:
        return f"of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def human_size(size: int) -> str:
    """8192 -> ``8K``, 4194304 -> ``4M``: how sizes are shown in tables and plots."""
    if size % (KIB * KIB) == 0:
        return f"{size // (KIB * KIB)}M"
    if size % KIB == 0:
        return f"{size // KIB}K"
    return str(size)


def number(value: float) -> str:
    """A measured value as people read it: 3 significant digits, whole numbers from 100 up
    (131, 61.6, 1.5, 0.0123), a dash when not finite. Every text a person reads (progress,
    summaries, tables, the report) uses this one; --json keeps full precision."""
    if not math.isfinite(value):
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
