"""Cleaning a space on the machine itself: every value applied at least once, the ones the kernel
or the tools refuse washed out with the reason (as the Ceph space was cleaned, SAPPHIRE 3.2).

A space file says what the options are; only this kernel, these mkfs tools, this device and the
applications installed here say which values they take (ext4 refuses journal_async_commit with
data=ordered, a scheduler's tunables exist only under it, btrfs dropped options over the
years). For each parameter and each of its values, `clean_space` finds valid configs holding
the value, nearest the default first (its condition's gates switched on, constraints kept),
applies them on a target (an application's option: starts the application with it there), and
records the outcome. A value that no context applies (three tried, then the first once more,
since a busy machine can fail one mount) is washed: `cleaned_space` drops it from the domain and
the space file records it under `washed:` with the error.
"""

from __future__ import annotations

import itertools
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from stortune.errors import ConfigError, StortuneError
from stortune.space import Config, Parameter, Space
from stortune.targets.base import Target

CONTEXTS = 3  # configs tried before a value is washed


@dataclass
class Attempt:
    parameter: str
    value: Any
    changes: Config  # the config tried, as changes from the default
    error: str | None
    seconds: float


@dataclass
class CleanResult:
    space: str
    kernel: str
    attempts: list[Attempt] = field(default_factory=list)
    washed: list[dict[str, Any]] = field(default_factory=list)
    unreachable: list[dict[str, Any]] = field(default_factory=list)  # no valid config holds it

    @property
    def values(self) -> int:
        return len({(a.parameter, _key(a.value)) for a in self.attempts}) + len(self.unreachable)

    def to_dict(self) -> dict[str, Any]:
        return {
            "space": self.space,
            "kernel": self.kernel,
            "values": self.values,
            "applied": self.values - len(self.washed) - len(self.unreachable),
            "washed": self.washed,
            "unreachable": self.unreachable,
            "attempts": [asdict(a) for a in self.attempts],
        }


def _key(value: Any) -> str:
    return repr(value)


def values_of(p: Parameter) -> list[Any]:
    """Every value of a discrete parameter; a numeric range's ends and default."""
    if p.values:
        return list(p.values)
    return sorted({p.check(v) for v in (p.low, p.default, p.high)}, key=float)


def contexts(space: Space, name: str, value: Any, seed: int = 0, tries: int = 400) -> list[Config]:
    """Valid configs in which `name` is active and holds `value`, fewest changes from the
    default first (the gates of its condition switched on, constraints kept)."""
    default = space.default_config()
    found: dict[str, Config] = {}

    def keep(candidate: dict[str, Any]) -> None:
        try:
            config = space.validate(candidate)
        except ConfigError:
            return
        if name in config and config[name] == space[name].check(value):
            found.setdefault(repr(sorted(config.items())), config)

    gates = _gates(space, name)
    starts = [
        {**default, **dict(zip(gates, combo, strict=True)), name: value}
        for combo in itertools.product(*(values_of(space[g]) for g in gates))
    ]
    for start in starts:
        keep(start)
    if len(found) < CONTEXTS:  # one more change, for a value that needs a companion
        for start in starts:
            for q in space.parameters:
                if q.name != name and q.name not in gates:
                    for other in values_of(q):
                        keep({**start, q.name: other})
    if len(found) < CONTEXTS:
        rng = np.random.default_rng(seed)
        for _ in range(tries):
            try:
                config = space.decode(rng.random(len(space)))
            except ConfigError:
                continue
            keep({**config, name: value})
            if len(found) >= 4 * CONTEXTS:
                break
    changes = {k: sum(c.get(n) != default.get(n) for n in space.names) for k, c in found.items()}
    return [found[k] for k in sorted(found, key=lambda k: changes[k])][:CONTEXTS]


def _gates(space: Space, name: str) -> list[str]:
    """The parameters a parameter's condition reads, and theirs, nearest first."""
    out: list[str] = []
    pending = [name]
    while pending:
        p = space[pending.pop()]
        for gate in sorted(p.condition.names) if p.condition is not None else []:
            if gate not in out:
                out.append(gate)
                pending.append(gate)
    return out


def plan_attempts(space: Space) -> Iterator[tuple[Parameter, Any, list[Config]]]:
    """Every (parameter, value, contexts), ordered so that configs needing the same mkfs
    follow each other (fewer re-formats)."""
    items = [(p, v, contexts(space, p.name, v)) for p in space.parameters for v in values_of(p)]
    mkfs = [p.name for p in space.parameters if p.layer == "mkfs"]

    def order(item: tuple[Parameter, Any, list[Config]]) -> tuple:
        first = item[2][0] if item[2] else {}
        return tuple(str(first.get(n, "")) for n in mkfs)

    yield from sorted(items, key=order)


def clean_space(
    space: Space,
    target: Target,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> CleanResult:
    """Apply every value of `space` on `target` (see the module doc)."""
    result = CleanResult(space.name, platform.release())
    on_attempt = on_attempt or (lambda _a: None)
    default = space.default_config()
    applications = {p.application for p in space.root.parameters if p.application is not None}
    if applications:
        from stortune.workloads import check_installed

        for application in sorted(applications):
            check_installed(application)  # a missing program is not the values' fault
    with target:
        for p, value, tried in plan_attempts(space):
            if not tried:
                result.unreachable.append(
                    {"parameter": p.name, "value": value, "reason": "no valid config holds it"}
                )
                continue
            errors = []
            for config in [*tried, tried[0]]:
                started = time.monotonic()
                try:
                    target.apply(config)
                    error = _probe(space, target, p, config)
                except StortuneError as exc:
                    error = str(exc)
                changes = {k: v for k, v in config.items() if default.get(k) != v}
                attempt = Attempt(p.name, value, changes, error, time.monotonic() - started)
                result.attempts.append(attempt)
                on_attempt(attempt)
                if error is None:
                    break
                errors.append(error)
            else:
                result.washed.append({"parameter": p.name, "value": value, "reason": errors[0]})
    return result


def _probe(space: Space, target: Target, p: Parameter, config: Config) -> str | None:
    """For an application's option, start the application with the config's options of it
    on the applied target (the target alone never reads them); the reason it refused, or
    None."""
    if p.application is None:
        return None
    from stortune.workloads import application_workload

    workload = application_workload(p.application)
    own = {str(q.extra.get("option", q.name)) for q in space.root.parameters
           if q.application is p.application}  # fmt: skip
    values = space.root.workload_values(space.full_config(config))
    options = {k: v for k, v in values.items() if k in own}
    return workload.probe(target.venue(workload), options)


def cleaned_space(space: Space, result: CleanResult) -> dict[str, Any]:
    """The space as a dict (to write as YAML) without the washed values, and with a `washed`
    list saying what was refused, by what, on which kernel."""
    data = space.to_dict()
    gone: dict[str, set[str]] = {}
    for item in [*result.washed, *result.unreachable]:
        gone.setdefault(item["parameter"], set()).add(_key(item["value"]))
    for name, keys in gone.items():
        p = space[name]
        if _key(p.default) in keys:
            raise StortuneError(
                f"{space.name}: the default of {name} ({p.default!r}) does not apply on this "
                "machine; choose another default in the space file"
            )
        spec = data["parameters"][name]
        if p.values:
            spec["values"] = [v for v in p.values if _key(v) not in keys]
        for risky in list(spec.get("risk") or {}):
            if _key(p.check(risky)) in keys:
                del spec["risk"][risky]
    data["washed"] = [
        {**item, "value": item["value"], "kernel": result.kernel}
        for item in [*result.washed, *result.unreachable]
    ]
    return data
