"""Values that can lose or corrupt data on a crash or power cut, and the space without them.

A parameter value carries a `risk` in its space file (``barrier: {risk: {false: ...}}``): one
line saying what is at stake. No peer of stortune's knows this: the largest gain on an
fsync-heavy workload here is ``barrier=0`` (2.9x, MEASURING.md), and applying it silently loses
a user's data on the next power cut. So tuning searches `safe_space` unless the user allows
risk, and every recommendation lists a config's `risks_of`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stortune.errors import ConfigError, SpaceError
from stortune.space.parameter import Kind, Parameter
from stortune.space.space import Space


@dataclass(frozen=True)
class Risk:
    parameter: str
    value: Any
    why: str

    def text(self) -> str:
        return f"{self.parameter}={_text(self.value)}: {self.why}"

    def to_dict(self) -> dict[str, Any]:
        return {"parameter": self.parameter, "value": self.value, "why": self.why}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def risky_values(p: Parameter) -> dict[Any, str]:
    return dict(p.extra.get("risk") or {})


def has_risks(space: Space) -> bool:
    return any(risky_values(p) for p in space.parameters)


def risks_of(space: Space, config: Mapping[str, Any]) -> list[Risk]:
    """The risky values a config holds (inactive parameters hold none)."""
    parent = space.root
    values = space.full_config(config) if parent is not space else config
    out = []
    for p in parent.parameters:
        if p.name in values:
            for value, why in risky_values(p).items():
                if values[p.name] == value:
                    out.append(Risk(p.name, value, why))
    return out


def risky_variants(
    space: Space, base: Mapping[str, Any], application_only: bool = False
) -> dict[str, dict[str, Any]]:
    """`base` with one risky value each (of the parameters active in it; only application
    options with `application_only`), labelled ``risky NAME=VALUE``: what each risk would buy
    on top of `base`, to be measured, never recommended. A parameter's first risky value that
    is valid there says enough; each costs a verification's runs."""
    out = {}
    for p in space.parameters:
        if p.name not in base or (application_only and p.application is None):
            continue
        for value in risky_values(p):
            if base[p.name] == value:
                break  # `base` takes this risk already
            try:
                config = space.validate({**base, p.name: value})
            except ConfigError:
                continue  # a risky value that needs another setting too
            out[f"risky {p.name}={_text(value)}"] = config
            break
    return out


def safe_space(space: Space) -> Space:
    """The space without its risky values (a parameter whose only other value is risky keeps
    its default alone); the same space when nothing in it is risky."""
    if not has_risks(space):
        return space
    parameters = [_safe(p) for p in space.parameters]
    safe = Space(
        space.name,
        parameters,
        space.constraints,
        f"{space.description} (risky values left out)".strip(),
        space.source,
    )
    safe.washed = list(space.washed)
    return safe


def _safe(p: Parameter) -> Parameter:
    risky = risky_values(p)
    if not risky:
        return p
    kept = tuple(v for v in p.values if v not in risky)
    if not kept:
        raise SpaceError(f"parameter {p.name!r}: every value is risky")
    extra = {k: v for k, v in p.extra.items() if k != "risk"}
    kind = Kind.ORDINAL if p.kind is Kind.BOOL else p.kind  # a bool that keeps one value
    return dataclasses.replace(p, kind=kind, values=kept, extra=extra)
