"""Sizes as people write them (``256m``, ``4g``) and as tables show them (``8K``, ``4M``)."""

from __future__ import annotations

import re

from stortune.errors import ConfigError

KIB = 1024
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value: str | int | float) -> int:
    """Bytes from ``268435456``, ``256m``, ``1g``, ``512KiB`` (binary units)."""
    if isinstance(value, bool):
        raise ConfigError(f"size {value!r} is not a size")
    if isinstance(value, int | float):
        number, unit = float(value), ""
        if number != number or number in (float("inf"), float("-inf")):
            raise ConfigError(f"size {value!r} is not a size")
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ConfigError(f"size {value!r}: write bytes or a number with k, m, g or t")
        number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * KIB ** " kmgt".index(unit or " "))
    if size <= 0:
        raise ConfigError(f"size {value!r} must be positive")
    return size


def human_size(size: int) -> str:
    """8192 -> ``8K``, 4194304 -> ``4M``: how sizes are shown in tables and plots."""
    if size % (KIB * KIB) == 0:
        return f"{size // (KIB * KIB)}M"
    if size % KIB == 0:
        return f"{size // KIB}K"
    return str(size)
