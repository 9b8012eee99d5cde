"""Tuning only the top-K parameters of a ranking (SAPPHIRE 3.3): the others are pinned.

`pin` returns a full space in which every parameter but the chosen ones has a one-value domain
(its held value). Unlike `Space.subspace`, the result is an ordinary space: it round-trips
through YAML (a stored campaign resumes with it), constraints still see every parameter, and
targets receive full configs, so a table target only matches rows with the held values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from stortune.errors import SpaceError, StortuneError
from stortune.space import Kind, Parameter, Space


def pin(
    space: Space,
    free: Sequence[str],
    held: Mapping[str, Any] | None = None,
    start: Mapping[str, Any] | None = None,
) -> Space:
    """`space` with only `free` varying; the rest pinned to `held` (default where not given).

    The free parameters keep their defaults, or take their values in `start` (the config a
    campaign's first evaluation then measures), unless that config breaks a constraint with
    the held values: then they start from `held` too.
    """
    for name in free:
        space[name]
    values = {**space.default_config(), **dict(held or {})}
    begin = dict(start or {})
    pinned = [
        _started(p, begin) if p.name in free else _pinned(p, values.get(p.name, p.default))
        for p in space.parameters
    ]
    description = f"{space.description} (tuning {', '.join(free)}; the rest pinned)".strip()
    try:
        return Space(space.name, pinned, space.constraints, description, space.source)
    except SpaceError:
        for p in pinned:
            if p.name in free and p.name in values:
                p.default = p.check(values[p.name])
        return Space(space.name, pinned, space.constraints, description, space.source)


def _started(p: Parameter, start: Mapping[str, Any]) -> Parameter:
    if p.name not in start or start[p.name] is None:
        return dataclasses.replace(p)
    return dataclasses.replace(p, default=p.check(start[p.name]))


def with_parents(space: Space, names: Sequence[str]) -> list[str]:
    """`names`, each after the parameters its condition reads (and theirs), when those can
    vary: a ranking finds bfq's tunables when what matters is the scheduler being bfq, and a
    child freed under a pinned parent is never active."""
    out: list[str] = []

    def add(name: str) -> None:
        if name in out:
            return
        condition = space[name].condition
        for parent in sorted(condition.names if condition is not None else ()):
            if parent in space and varies(space[parent]):
                add(parent)
        out.append(name)

    for name in names:
        add(name)
    return out


def _pinned(p: Parameter, value: Any) -> Parameter:
    value = p.check(value)
    if p.is_numeric:
        return dataclasses.replace(p, low=value, high=value, default=value, extendable=False)
    kind = Kind.ORDINAL if p.kind is Kind.BOOL else p.kind  # a bool always has both values
    return dataclasses.replace(p, kind=kind, values=(value,), default=value)


def varies(p: Parameter) -> bool:
    """Whether a tuner can move it: a pinned parameter, or one left with a single (safe)
    value, cannot."""
    return p.cardinality != 1 and not (p.is_numeric and p.low == p.high)


def free_indices(space: Space) -> list[int]:
    """Dimensions of the unit-cube encoding that can vary (pinned ones are constant)."""
    return [i for i, p in enumerate(space.parameters) if varies(p)]


def rankable(space: Space, names: Sequence[str]) -> list[str]:
    """The names worth ranking for tuning `space`: those it does not hold at one value. A
    one-value parameter that exists only under one file system (btrfs's barrier, with its
    risky value left out) ranks as that file system, and would take a top-K place from a
    parameter a tuner can move."""
    return [n for n in names if n not in space or varies(space[n])]


def top_k(result: Any, k: int) -> list[str]:
    """The first `k` parameters of a Carver or Lasso ranking. Carver's selection may stop
    early; it is filled up with the rest by their first-step importance (PI)."""
    if k < 1:
        raise StortuneError(f"--top-k must be at least 1, not {k}")
    ranking = getattr(result, "ranking", None)
    if ranking is None:
        ranking = list(result.selected)
        if result.steps:
            pi = result.steps[0].scores
            ranking += sorted((p for p in pi if p not in ranking), key=lambda p: -pi[p])
        ranking += [p for p in result.params if p not in ranking]
    return list(ranking[:k])
