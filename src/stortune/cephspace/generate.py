"""From Ceph's option metadata to a clean space, with a count of what went and why."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from stortune.cephspace import constraints as rules_of_values
from stortune.cephspace.params import build, typed
from stortune.cephspace.risks import risks
from stortune.cephspace.rules import MEDIA, Context, Option, classify
from stortune.errors import SpaceError
from stortune.space import Cost, Kind, Parameter, Space, parse_space


def pg_per_osd() -> Parameter:
    """The bench pool's placement groups per OSD (SAPPHIRE's "pg per osd"; Ceph's default pool
    has 32 PGs, 32 per OSD on one OSD). Powers of two: Ceph warns about other pg_num values."""
    return Parameter(
        name="pg_per_osd",
        kind=Kind.ORDINAL,
        values=(16, 32, 64, 128),
        default=32,
        layer="pool",
        cost=Cost.RESTART,
        description="Placement groups of the bench pool per OSD (pg_num = this x OSDs / size).",
    )


@dataclass
class Cleaning:
    """What happened to every option: washed or pruned (by reason) or kept."""

    total: int = 0
    washed: Counter[str] = field(default_factory=Counter)
    pruned: Counter[str] = field(default_factory=Counter)
    kept: int = 0
    added: list[str] = field(default_factory=list)
    costs: Counter[str] = field(default_factory=Counter)
    layers: Counter[str] = field(default_factory=Counter)
    extendable: int = 0
    conditions: int = 0
    constraints: int = 0
    probed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "washed": sum(self.washed.values()),
            "pruned": sum(self.pruned.values()),
            "left": self.kept,
            "added": self.added,
            "washed_by_reason": dict(self.washed.most_common()),
            "pruned_by_reason": dict(self.pruned.most_common()),
            "apply": dict(self.costs.most_common()),
            "layers": dict(self.layers.most_common()),
            "extendable_bounds": self.extendable,
            "conditions": self.conditions,
            "constraints": self.constraints,
            "probed_options": self.probed,
        }

    def text(self) -> str:
        d = self.to_dict()
        lines = [
            f"options: {d['total']} total, {d['washed']} washed, {d['pruned']} pruned, "
            f"{d['left']} left" + (f" (+ {', '.join(self.added)})" if self.added else "")
        ]
        for title, counts in (("washed", self.washed), ("pruned", self.pruned)):
            lines.append(f"{title}:")
            lines += [f"  {count:5d}  {reason}" for reason, count in counts.most_common()]
        costs = ", ".join(f"{k} {v}" for k, v in d["apply"].items())
        layers = ", ".join(f"{k} {v}" for k, v in d["layers"].items())
        lines.append(f"left by apply cost: {costs}; by daemon: {layers}")
        lines.append(
            f"{self.extendable} default-relative (extendable) bounds, {self.conditions} "
            f"conditions, {self.constraints} constraints; {self.probed} options probed on "
            "live daemons"
        )
        return "\n".join(lines)


def effective_default(
    option: Option, by_name: Mapping[str, Option], overrides: Mapping[str, str], rotational: bool
) -> Any:
    """The value the option has on this deployment: the target's setting, else for a generic
    option whose 0 means "use the media default" its _hdd (or _ssd) variant's default, else
    Ceph's default."""
    name = option["name"]
    if name in overrides:
        return typed(option, overrides[name])
    value = typed(option, option.get("default"))
    media = by_name.get(name + ("_hdd" if rotational else "_ssd"))
    if not value and media is not None and option["type"] != "bool":
        return typed(option, media.get("default"))
    return value


def generate_space(
    options: Sequence[Option],
    *,
    pinned: Collection[str] = (),
    overrides: Mapping[str, str] | None = None,
    observed: Mapping[str, bool] | None = None,
    rotational: bool = True,
    objectstore: str = "bluestore",
    version: str = "",
) -> tuple[Space, Cleaning]:
    """Wash, prune, bound and constrain `options` (``config help`` answers) into a space.
    `overrides` are the deployment's own settings (the defaults it runs with), `observed` the
    probe's answers (`metadata.probe_observed`)."""
    overrides = dict(overrides or {})
    by_name = {o["name"]: o for o in options}
    context = Context(objectstore, frozenset(pinned), frozenset(by_name), rotational)
    cleaning = Cleaning(total=len(options), probed=len(observed or {}))
    params = {}
    for option in options:
        verdict = classify(option, context)
        if verdict is not None:
            getattr(cleaning, verdict[0])[verdict[1]] += 1
            continue
        default = effective_default(option, by_name, overrides, rotational)
        parameter = build(option, default, observed)
        if parameter is None:
            cleaning.pruned["a single usable value"] += 1
            continue
        params[parameter.name] = parameter
    cleaning.kept = len(params)
    params["pg_per_osd"] = pg_per_osd()
    cleaning.added.append("pg_per_osd")
    doc_params: dict[str, Any] = {name: p.to_dict() for name, p in params.items()}
    for name, condition in rules_of_values.conditions(params).items():
        doc_params[name]["active_when"] = condition
    for name, by_value in risks(params).items():
        doc_params[name]["risk"] = by_value
    doc = {
        "name": "ceph",
        "description": _description(version, rotational, objectstore, observed is not None),
        "parameters": doc_params,
        "constraints": [],
    }
    for expression, message in rules_of_values.constraints(params):
        doc["constraints"].append({"require": expression, "message": message})
    space = _checked(doc)
    cleaning.conditions = sum(1 for p in space.parameters if p.condition is not None)
    cleaning.constraints = len(space.constraints)
    cleaning.extendable = sum(1 for p in space.parameters if p.extendable)
    cleaning.costs.update(p.cost.value for p in space.parameters)
    cleaning.layers.update(p.layer for p in space.parameters)
    return space, cleaning


def _checked(doc: dict[str, Any]) -> Space:
    """Parse the document; drop a constraint that the defaults break (a rule written for
    another release) rather than produce a space whose default config is invalid."""
    while True:
        try:
            return parse_space(yaml.safe_dump(doc, sort_keys=False), "generated ceph space")
        except SpaceError as exc:
            broken = [c for c in doc["constraints"] if c["require"] in str(exc)]
            if not broken:
                raise
            doc["constraints"].remove(broken[0])


def _description(version: str, rotational: bool, objectstore: str, probed: bool) -> str:
    media = "rotational (_hdd defaults)" if rotational else "non-rotational (_ssd defaults)"
    apply = (
        "apply costs from Ceph's flags and a probe of live daemons"
        if probed
        else "apply costs from Ceph's flags only (restart unless flagged runtime)"
    )
    return (
        f"Ceph {version or '(unknown version)'} options for RADOS with {objectstore} on "
        f"{media} devices, washed, pruned and bounded by `stortune ceph space` from `ceph "
        f"config ls` and `ceph config help` (SAPPHIRE section 3.2); {apply}. Media "
        f"variants ({', '.join(MEDIA)}) are tuned through their generic option."
    )
