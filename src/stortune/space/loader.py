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

A space file may come from anyone, so it is read within bounds (size, nesting, values after YAML
aliases are expanded) and every field is checked for its type before it is used: whatever the
file holds, loading ends in a Space or in one SpaceError line.
"""

from __future__ import annotations

import math
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from stortune.errors import SpaceError
from stortune.inputs import read_text
from stortune.space.expr import compile_expression
from stortune.space.parameter import Cost, Kind, Parameter, ensure_values
from stortune.space.space import Constraint, Space

_PARAM_FIELDS = {
    "type",
    "format",
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
    "omit",
    "risk",
    "grid",
}
MAX_BYTES = 4_000_000  # a space file (the bundled ceph.yaml has 100 kB)
MAX_DEPTH = 64  # nesting of YAML values, aliases expanded (the bundled files nest 5 deep)
MAX_NODES = 200_000  # YAML values, aliases expanded (ceph.yaml has about 8,500)
MAX_NAME = 200  # characters of a parameter's or a space's name
# Parameter names: what the bundled spaces use (Ceph options are snake_case), dataset columns
# like ``Topology.workers`` and ``read-ahead``; no spaces, quotes, shell or path characters.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_NAME_RULE = "letters, digits, '_', '.' and '-', starting with a letter or '_'"
_BIGGEST = 2**63 - 1  # numbers beyond int64 do not survive numpy, pandas and SQL
_TOP_FIELDS = {"name", "description", "compose", "parameters", "constraints", "washed"}
_CONSTRAINT_FIELDS = {"require", "forbid", "message"}


class _LineDict(dict):
    """A mapping that remembers the line of each key (and its own)."""

    line: int = 0
    lines: dict[Any, int]


class _LineList(list):
    line: int = 0
    lines: list[int]


class _LineLoader(yaml.SafeLoader):
    """A SafeLoader that refuses documents nested too deeply (the composer recurses) and, before
    anything is constructed, documents whose aliases expand beyond bounds ("billion laughs")."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                line = self.peek_event().start_mark.line + 1
                raise SpaceError(f"line {line}: values nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _check_expanded(node)
        return node


def _check_expanded(root: yaml.Node) -> None:
    """Refuse a node graph that is cyclic, or deeper or larger than the bounds once aliases are
    expanded; counted without recursion, each distinct node once."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _children(node)
        if finished:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            line = node.start_mark.line + 1
            if size[key] > MAX_NODES:
                raise SpaceError(
                    f"line {line}: more than {MAX_NODES} values once aliases are expanded"
                )
            if depth[key] > MAX_DEPTH:
                raise SpaceError(
                    f"line {line}: nested deeper than {MAX_DEPTH} levels once aliases are expanded"
                )
            continue
        if key in size:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                line = child.start_mark.line + 1
                raise SpaceError(f"line {line}: an alias refers to a value that contains it")
            if id(child) not in size:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


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
    try:
        exists = path.exists()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte
        raise SpaceError(f"{_clip(str(path))}: {getattr(exc, 'strerror', None) or exc}") from None
    if exists:
        return parse_space(_read(path), str(path))
    if path.suffix in (".yaml", ".yml") or "/" in str(name_or_path):
        raise SpaceError(f"{_clip(str(path))}: no such file")
    if str(name_or_path) in bundled_spaces():
        bundled = resources.files("stortune") / "spaces" / f"{name_or_path}.yaml"
        return parse_space(bundled.read_text(), f"{name_or_path} (bundled)")
    raise SpaceError(
        f"no space file or bundled space {_clip(str(name_or_path))!r} "
        f"(bundled: {', '.join(bundled_spaces()) or 'none'})"
    )


def _read(path: Path) -> str:
    """A space file's text: a regular file, at most MAX_BYTES, UTF-8 (not /dev/zero, a FIFO
    that never ends, a directory or a binary file)."""
    return read_text(path, "space file", MAX_BYTES, SpaceError)


def _clip(text: str, limit: int = 80) -> str:
    """A name short enough for a one-line message."""
    return text if len(text) <= limit else f"{text[:limit]}..."


def load_yaml(text: str, source: str) -> Any:
    """The document of YAML text from a user, safely: no tags that build objects, and neither
    nesting nor aliases beyond MAX_DEPTH and MAX_NODES; anything else is one SpaceError line
    naming `source`."""
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except SpaceError as exc:
        raise SpaceError(f"{source}: {exc}") from None
    except (RecursionError, MemoryError):  # a last resort: the bounds above should come first
        raise SpaceError(f"{source}: nested too deeply or too large to read") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpaceError(f"{where}: malformed YAML: {problem}") from None


def parse_space(text: str, source: str = "<space>") -> Space:
    """Parse a space from YAML text; `source` names it in error messages."""
    if not isinstance(text, str) or len(text) > MAX_BYTES:
        raise SpaceError(f"{source}: a space is YAML text of at most {MAX_BYTES:,} characters")
    doc = load_yaml(text, source)
    if not isinstance(doc, dict):
        raise SpaceError(f"{source}: a space file is a mapping with 'name' and 'parameters'")
    _no_unknown_fields(doc, _TOP_FIELDS, source, "space")
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise SpaceError(f"{source}:{doc.line}: the space needs a 'name'")
    if len(name) > MAX_NAME or not name.isprintable():
        raise SpaceError(
            f"{source}:{doc.lines['name']}: the space's name {_clip(name)!r} must be one line of "
            f"at most {MAX_NAME} printable characters"
        )
    if not isinstance(doc.get("description", ""), str):
        raise SpaceError(f"{source}:{doc.lines['description']}: 'description' must be text")
    composed = _composed(doc, source)
    params_doc = doc.get("parameters")
    if not isinstance(params_doc, dict) or not (params_doc or composed):
        where = f"{source}:{doc.lines.get('parameters', doc.line)}"
        raise SpaceError(f"{where}: 'parameters' must be a non-empty mapping of name to spec")
    taken = {p.name: s.name for s in composed for p in s.parameters}
    for pname in params_doc:
        check_name(pname, f"{source}:{params_doc.lines[pname]}")
        if pname in taken:
            raise SpaceError(
                f"{source}:{params_doc.lines[pname]}: parameter {pname!r} is also in the "
                f"composed space {taken[pname]!r}"
            )
    known = set(params_doc) | set(taken)
    parameters = [p for s in composed for p in s.parameters] + [
        _parameter(str(pname), spec, f"{source}:{params_doc.lines[pname]}", known)
        for pname, spec in params_doc.items()
    ]
    constraints = [c for s in composed for c in s.constraints]
    constraints += _constraints(doc.get("constraints") or [], source, known)
    washed = doc.get("washed") or []
    if not isinstance(washed, list) or not all(isinstance(w, dict) for w in washed):
        raise SpaceError(f"{source}: 'washed' is a list of mappings (parameter, value, reason)")
    try:
        space = Space(name, parameters, constraints, str(doc.get("description", "")), source)
        space.washed = [dict(w) for w in washed]
        return space
    except SpaceError:
        raise
    except Exception as exc:  # defensive: a space file must never produce a traceback
        raise SpaceError(f"{source}: {exc}") from None


_COMPOSING: set[str] = set()  # the spaces being composed now, to refuse a cycle


def _composed(doc: _LineDict, source: str) -> list[Space]:
    """The spaces named under ``compose`` (bundled names or files), whose parameters and
    constraints the space takes before its own: a workload space with a system space, say,
    so that one config is a point in workload x system. Names must not repeat across them."""
    names = doc.get("compose") or []
    where = f"{source}:{doc.lines.get('compose', doc.line)}"
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SpaceError(f"{where}: 'compose' is a list of space names or files")
    spaces: list[Space] = []
    seen: dict[str, str] = {}
    for name in names:
        key = str(Path(name).resolve()) if Path(name).is_file() else name
        if key in _COMPOSING:
            raise SpaceError(f"{where}: compose: {name!r} composes itself (through {source})")
        _COMPOSING.add(key)
        try:
            part = load_space(name)
        except SpaceError as exc:
            raise SpaceError(f"{where}: compose: {exc}") from None
        finally:
            _COMPOSING.discard(key)
        for p in part.parameters:
            if p.name in seen:
                raise SpaceError(
                    f"{where}: compose: parameter {p.name!r} is in both {seen[p.name]!r} "
                    f"and {part.name!r}"
                )
            seen[p.name] = part.name
        spaces.append(part)
    return spaces


def check_name(name: Any, where: str) -> None:
    """Parameter names end up in expressions, configs, commands, CSV headers and SQL: only
    plain ones (see NAME), so that none can be misread as code, an option or a path."""
    if not isinstance(name, str):
        hint = " (YAML reads null, yes, no and numbers as values: quote the name)"
        hint = hint if name is None or isinstance(name, (bool, int, float)) else ""
        raise SpaceError(f"{where}: a parameter's name is text, not {name!r:.60}{hint}")
    if len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise SpaceError(
            f"{where}: parameter name {_clip(name)!r}: use {_NAME_RULE} "
            f"(at most {MAX_NAME} characters)"
        )


def _number(value: Any) -> bool:
    """A finite number that numpy, pandas and SQL can hold (an int within int64)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return abs(value) <= _BIGGEST if isinstance(value, int) else math.isfinite(value)


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

    for key in ("unit", "layer", "description", "option", "format"):
        if key in spec and not isinstance(spec[key], str):
            raise fail(f"'{key}' must be text, not {spec[key]!r:.60}", key)
    for key in ("log", "extendable"):
        if key in spec and not isinstance(spec[key], bool):
            raise fail(f"'{key}' must be true or false, not {spec[key]!r:.60}", key)
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
        extra={k: spec[k] for k in ("option", "omit", "format") if k in spec},
    )
    if "format" in spec and (
        spec["format"].count("{}") != 1 or "{" in spec["format"].replace("{}", "")
    ):
        raise fail("'format' holds the value once as {} (\"{}MB\"), and no other braces", "format")
    if kind in (Kind.INT, Kind.FLOAT):
        low, high = spec.get("low"), spec.get("high")
        for key, value in (("low", low), ("high", high)):
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise fail(f"'{key}' must be a number for type {kind.value}", key)
            if not _number(value):
                raise fail(f"'{key}' must be a finite number within ±2**63, not {value!r}", key)
        if not math.isfinite(float(high) - float(low)):
            raise fail(f"the range [{low}, {high}] is too wide to compute with", "high")
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
                if not _number(spec[key]):
                    raise fail(f"'{key}' must be a finite number, not {spec[key]!r:.60}", key)
                fields[key] = spec[key]
        if "values" in spec:
            raise fail(f"type {kind.value} takes low/high, not values", "values")
    elif kind in (Kind.CATEGORICAL, Kind.ORDINAL):
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            raise fail(f"type {kind.value} needs a non-empty list 'values'", "values")
        for v in values:
            if not (isinstance(v, str | bool) or _number(v)):
                raise fail(
                    f"'values' holds {v!r:.60}: values are text, true/false or finite numbers",
                    "values",
                )
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
    if "risk" in spec:
        probe.extra["risk"] = _risks(probe, spec["risk"], fail)
    if "grid" in spec:
        probe.extra["grid"] = _grid(probe, spec["grid"], fail)
    return probe


def _grid(p: Parameter, value: Any, fail: Any) -> list[Any]:
    """``grid: [v, ...]``: the values a full-factorial design takes (SPA's Table 1 levels),
    each a valid value; random and LHS designs still draw from the whole domain."""
    if not isinstance(value, list) or not value:
        raise fail("grid is a non-empty list of the parameter's values", "grid")
    out: list[Any] = []
    for raw in value:
        try:
            checked = p.check(raw)
        except Exception as exc:
            raise fail(f"grid: {raw!r}: {str(exc).split(': ', 1)[-1]}", "grid") from None
        if checked in out:
            raise fail(f"grid: {raw!r} is given twice", "grid")
        out.append(checked)
    return out


def _risks(p: Parameter, value: Any, fail: Any) -> dict[Any, str]:
    """``risk: {VALUE: what a crash or power cut can cost}``: values of the parameter, each
    with one line; the default must be safe (it is what a user has without stortune)."""
    if not isinstance(value, dict) or not value:
        raise fail("risk is a mapping from a value to what it risks, in one line", "risk")
    if not p.values:
        raise fail("risk is for values of a bool, ordinal or categorical parameter", "risk")
    out: dict[Any, str] = {}
    for raw, why in value.items():
        try:
            checked = p.check(raw)
        except Exception as exc:
            raise fail(f"risk: {raw!r} is not a value of it ({exc})", "risk") from None
        if p.values and checked not in p.values:
            raise fail(f"risk: {raw!r} is not one of its values", "risk")
        if not isinstance(why, str) or not why.strip() or "\n" in why.strip():
            raise fail(f"risk of {raw!r}: say in one line what a crash can cost", "risk")
        if checked == p.default:
            raise fail(f"risk: the default {raw!r} must be safe", "risk")
        out[checked] = " ".join(why.split())
    return out


def _condition(value: Any, known: set[str], fail: Any) -> Any:
    if isinstance(value, dict):
        parts = []
        for other, allowed in value.items():
            if not isinstance(other, str) or other not in known:
                raise fail(
                    f"active_when: {other!r:.60} is not a parameter of the space", "active_when"
                )
            allowed = allowed if isinstance(allowed, list) else [allowed]
            if not all(isinstance(a, str | bool) or _number(a) for a in allowed):
                raise fail(f"active_when: {other} takes a list of plain values", "active_when")
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
            expression = compile_expression(item[kind], known)
        except SpaceError as exc:
            raise SpaceError(f"{where}: constraint: {exc}") from None
        message = item.get("message", "")
        if not isinstance(message, str):
            raise SpaceError(f"{where}: a constraint's 'message' must be text")
        out.append(Constraint(kind, expression, message, line))
    return out
