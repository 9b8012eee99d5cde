"""Loading spaces from YAML, with errors that name the file, the line and the parameter.

Format::

    name: ext4
    description: ext4 mkfs and mount options
    parameters:
      block_size: {type: ordinal, values: [1024, 2048, 4096], default: 4096, unit: bytes,
                   layer: mkfs, apply: reformat}
      commit: {type: int, low: 1, high: 300, log: true, default: 5, unit: s, apply: remount}
      journal_mode: {type: categorical, values: [ordered, writeback, journal], default: ordered,
                     active_when: "fs in ('ext3', 'ext4')"}
    constraints:
      - require: inode_size <= block_size
        message: ext4 inode size must not exceed the block size

``active_when`` takes an expression or a mapping ``{param: [values]}``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from stortune.errors import SpaceError
from stortune.space.expr import compile_expression
from stortune.space.parameter import Cost, Kind, Parameter, ensure_values
from stortune.space.space import Constraint, Space

_PARAM_FIELDS = {
    "type",
    "low",
    "high",
    "log",
    "values",
    "default",
    "unit",
    "layer",
    "apply",
    "description",
    "active_when",
    "extendable",
    "hard_low",
    "hard_high",
    "option",
}
_TOP_FIELDS = {"name", "description", "parameters", "constraints"}
_CONSTRAINT_FIELDS = {"require", "forbid", "message"}


class _LineDict(dict):
    """A mapping that remembers the line of each key (and its own)."""

    line: int = 0
    lines: dict[Any, int]


class _LineList(list):
    line: int = 0
    lines: list[int]


class _LineLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _LineDict:
    loader.flatten_mapping(node)
    out = _LineDict()
    out.line = node.start_mark.line + 1
    out.lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            hash(key)
        except TypeError:
            raise SpaceError(f"line {line}: a key must be a plain value") from None
        if key in out:
            raise SpaceError(f"line {line}: {key!r} is given twice")
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = line
    return out


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> _LineList:
    out = _LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.lines = [child.start_mark.line + 1 for child in node.value]
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def bundled_spaces() -> list[str]:
    """Names of the spaces shipped in `stortune/spaces/`."""
    folder = resources.files("stortune") / "spaces"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_space(name_or_path: str | Path) -> Space:
    """A space from a YAML file, or a bundled space by name (e.g. ``ext4``)."""
    path = Path(name_or_path)
    if path.exists():
        return parse_space(path.read_text(), str(path))
    if path.suffix in (".yaml", ".yml") or "/" in str(name_or_path):
        raise SpaceError(f"{path}: no such file")
    bundled = resources.files("stortune") / "spaces" / f"{name_or_path}.yaml"
    if bundled.is_file():
        return parse_space(bundled.read_text(), f"{name_or_path} (bundled)")
    raise SpaceError(
        f"no space file or bundled space {str(name_or_path)!r} "
        f"(bundled: {', '.join(bundled_spaces()) or 'none'})"
    )


def parse_space(text: str, source: str = "<space>") -> Space:
    """Parse a space from YAML text; `source` names it in error messages."""
    try:
        doc = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except SpaceError as exc:
        raise SpaceError(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpaceError(f"{where}: malformed YAML: {problem}") from None
    if not isinstance(doc, dict):
        raise SpaceError(f"{source}: a space file is a mapping with 'name' and 'parameters'")
    _no_unknown_fields(doc, _TOP_FIELDS, source, "space")
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise SpaceError(f"{source}:{doc.line}: the space needs a 'name'")
    params_doc = doc.get("parameters")
    if not isinstance(params_doc, dict) or not params_doc:
        where = f"{source}:{doc.lines.get('parameters', doc.line)}"
        raise SpaceError(f"{where}: 'parameters' must be a non-empty mapping of name to spec")
    known = set(params_doc)
    parameters = [
        _parameter(str(pname), spec, f"{source}:{params_doc.lines[pname]}", known)
        for pname, spec in params_doc.items()
    ]
    constraints = _constraints(doc.get("constraints") or [], source, known)
    try:
        return Space(name, parameters, constraints, str(doc.get("description", "")), source)
    except SpaceError:
        raise
    except Exception as exc:  # defensive: a space file must never produce a traceback
        raise SpaceError(f"{source}: {exc}") from None


def _no_unknown_fields(spec: dict, allowed: set[str], where: str, what: str) -> None:
    for key in spec:
        if key not in allowed:
            line = spec.lines.get(key) if isinstance(spec, _LineDict) else None
            place = f"{where.rsplit(':', 1)[0]}:{line}" if line else where
            raise SpaceError(
                f"{place}: {what}: unknown field {key!r} (expected: {', '.join(sorted(allowed))})"
            )


def _parameter(name: str, spec: Any, where: str, known: set[str]) -> Parameter:
    label = f"parameter {name!r}"
    if not isinstance(spec, dict):
        raise SpaceError(f"{where}: {label}: expected a mapping with at least 'type'")
    _no_unknown_fields(spec, _PARAM_FIELDS, where, label)

    def fail(message: str, key: str | None = None) -> SpaceError:
        line = spec.lines.get(key) if key and isinstance(spec, _LineDict) else None
        place = f"{where.rsplit(':', 1)[0]}:{line}" if line else where
        return SpaceError(f"{place}: {label}: {message}")

    try:
        kind = Kind(str(spec.get("type", "")).lower())
    except ValueError:
        raise fail(
            f"type must be one of {', '.join(k.value for k in Kind)}, not {spec.get('type')!r}",
            "type",
        ) from None
    try:
        cost = Cost(str(spec.get("apply", "runtime")).lower())
    except ValueError:
        raise fail(
            f"apply must be one of {', '.join(c.value for c in Cost)}, not {spec.get('apply')!r}",
            "apply",
        ) from None
    condition = None
    if "active_when" in spec:
        condition = _condition(spec["active_when"], known, fail)
    fields: dict[str, Any] = dict(
        name=name,
        kind=kind,
        default=None,
        unit=str(spec.get("unit", "")),
        layer=str(spec.get("layer", "")),
        cost=cost,
        description=str(spec.get("description", "")).strip(),
        condition=condition,
        extendable=bool(spec.get("extendable", False)),
        extra={"option": spec["option"]} if "option" in spec else {},
    )
    if kind in (Kind.INT, Kind.FLOAT):
        low, high = spec.get("low"), spec.get("high")
        for key, value in (("low", low), ("high", high)):
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise fail(f"'{key}' must be a number for type {kind.value}", key)
        if low > high:
            raise fail(f"low {low} is greater than high {high}", "low")
        log = bool(spec.get("log", False))
        if log and low <= 0:
            raise fail("a log-scaled parameter needs low > 0", "log")
        if kind is Kind.INT and (low != int(low) or high != int(high)):
            raise fail("an int parameter needs whole-number bounds", "low")
        fields.update(low=low, high=high, log=log)
        for key in ("hard_low", "hard_high"):
            if key in spec:
                fields[key] = spec[key]
        if "values" in spec:
            raise fail(f"type {kind.value} takes low/high, not values", "values")
    elif kind in (Kind.CATEGORICAL, Kind.ORDINAL):
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            raise fail(f"type {kind.value} needs a non-empty list 'values'", "values")
        if len({repr(v) for v in values}) != len(values):
            raise fail("'values' has duplicates", "values")
        fields["values"] = ensure_values(values)
    if "default" not in spec:
        raise fail("needs a 'default'")
    probe = Parameter(**fields)
    try:
        probe.default = probe.check(spec["default"])
    except Exception as exc:
        message = str(exc).split(": ", 1)[-1]
        raise fail(f"default {spec['default']!r}: {message}", "default") from None
    return probe


def _condition(value: Any, known: set[str], fail: Any) -> Any:
    if isinstance(value, dict):
        parts = []
        for other, allowed in value.items():
            allowed = allowed if isinstance(allowed, list) else [allowed]
            parts.append(f"{other} in ({', '.join(repr(a) for a in allowed)},)")
        value = " and ".join(parts)
    if not isinstance(value, str):
        raise fail(
            "active_when must be an expression or a mapping {param: [values]}", "active_when"
        )
    try:
        return compile_expression(value, known)
    except SpaceError as exc:
        raise fail(f"active_when: {exc}", "active_when") from None


def _constraints(items: Any, source: str, known: set[str]) -> list[Constraint]:
    if not isinstance(items, list):
        raise SpaceError(f"{source}: 'constraints' must be a list")
    out = []
    for i, item in enumerate(items):
        line = items.lines[i] if isinstance(items, _LineList) else None
        where = f"{source}:{line}" if line else source
        if not isinstance(item, dict):
            raise SpaceError(f"{where}: a constraint is a mapping with 'require' or 'forbid'")
        _no_unknown_fields(item, _CONSTRAINT_FIELDS, where, "constraint")
        kinds = [k for k in ("require", "forbid") if k in item]
        if len(kinds) != 1:
            raise SpaceError(f"{where}: a constraint has exactly one of 'require' or 'forbid'")
        kind = kinds[0]
        try:
            expression = compile_expression(str(item[kind]), known)
        except SpaceError as exc:
            raise SpaceError(f"{where}: constraint: {exc}") from None
        out.append(Constraint(kind, expression, str(item.get("message", "")), line))
    return out
