"""One tunable parameter: its kind, domain, default, and what changing it costs.

Each parameter maps to one dimension of the unit cube, which BO and DDPG work in: numeric values
linearly (or logarithmically with ``log: true``), discrete values to equal-width cells whose
centres encode them. `from_unit(to_unit(v)) == v` for every valid value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from stortune.errors import ConfigError
from stortune.space.expr import Expression
from stortune.values import plain

FEW_UNITS = 4  # positions decoded one by one, not as a numpy column


class Kind(StrEnum):
    INT = "int"
    FLOAT = "float"
    CATEGORICAL = "categorical"
    ORDINAL = "ordinal"
    BOOL = "bool"


class Cost(StrEnum):
    """What applying a new value needs, cheapest last (Magpie's static vs dynamic parameters)."""

    REFORMAT = "reformat"
    RESTART = "restart"
    REMOUNT = "remount"
    REWRITE = "rewrite"  # holds for data written after it (a CephFS layout): files made anew
    RUNTIME = "runtime"


# Parameters of this layer describe the workload, not the system: targets leave them alone and
# the runner hands their values to the workload of each run (SPA's workload x system space).
WORKLOAD_LAYER = "workload"


class Application(StrEnum):
    """Applications whose own options a space holds, in a layer named after each: the target
    leaves them alone and the runner hands them, like workload parameters, to the workload that
    runs the application (a PostgreSQL server's postgresql.conf, db_bench's flags)."""

    POSTGRES = "postgres"
    ROCKSDB = "rocksdb"


APPLICATION_LAYERS = frozenset(a.value for a in Application)


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


@dataclass
class Parameter:
    """A parameter of a space. Numeric kinds use `low`/`high`; discrete kinds use `values`."""

    name: str
    kind: Kind
    default: Any
    low: float | None = None
    high: float | None = None
    log: bool = False
    values: tuple[Any, ...] = ()
    unit: str = ""
    layer: str = ""
    cost: Cost = Cost.RUNTIME
    description: str = ""
    condition: Expression | None = None
    extendable: bool = False
    hard_low: float | None = None
    hard_high: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def describes_workload(self) -> bool:
        return self.layer == WORKLOAD_LAYER

    @property
    def application(self) -> Application | None:
        """The application whose option this is (None: a system or workload parameter)."""
        return Application(self.layer) if self.layer in APPLICATION_LAYERS else None

    def formatted(self, value: Any) -> Any:
        """`value` as the application or workload reads it: through the parameter's
        ``format`` (``"{}MB"``) when it has one; a bool stays a bool."""
        form = self.extra.get("format")
        if form is None or isinstance(value, bool):
            return value
        return str(form).format(value)

    @property
    def applied_by_workload(self) -> bool:
        """Whether the workload of a run, not the target, applies this parameter."""
        return self.describes_workload or self.application is not None

    def __post_init__(self) -> None:
        if self.kind is Kind.BOOL:
            self.values = (False, True)
        self._index = {_key(v): i for i, v in enumerate(self.values)}

    # ---- domain -------------------------------------------------------------------------
    @property
    def is_numeric(self) -> bool:
        return self.kind in (Kind.INT, Kind.FLOAT)

    @property
    def is_discrete(self) -> bool:
        return self.kind is not Kind.FLOAT

    @property
    def cardinality(self) -> float:
        """How many values the parameter can take (infinite for floats)."""
        if self.kind is Kind.FLOAT:
            return math.inf
        if self.kind is Kind.INT:
            return int(self.high) - int(self.low) + 1
        return len(self.values)

    def domain_text(self) -> str:
        if self.is_numeric:
            return f"[{_fmt(self.low)}, {_fmt(self.high)}]" + (" log" if self.log else "")
        return "{" + ", ".join(_fmt(v) for v in self.values) + "}"

    # ---- checking -------------------------------------------------------------------------
    def check(self, value: Any) -> Any:
        """Return `value` coerced to this parameter's type, or raise ConfigError saying why."""
        if self.kind is Kind.BOOL:
            return self._check_bool(value)
        if self.kind is Kind.INT:
            number = self._number(value)
            if number != int(number):
                raise ConfigError(f"parameter {self.name!r}: {value!r} is not a whole number")
            number = int(number)
            self._check_range(number, value)
            return number
        if self.kind is Kind.FLOAT:
            number = float(self._number(value))
            self._check_range(number, value)
            return number
        index = self._index.get(_key(value))
        if index is None and isinstance(value, str):
            index = self._index.get(_key(_parse_scalar(value)))
        if index is None:
            raise ConfigError(
                f"parameter {self.name!r}: {value!r} is not one of {self.domain_text()}"
            )
        return self.values[index]

    def _check_bool(self, value: Any) -> bool:
        if isinstance(value, bool | np.bool_):
            return bool(value)
        if isinstance(value, int | np.integer) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ConfigError(f"parameter {self.name!r}: {value!r} is not a boolean (true/false)")

    def _number(self, value: Any) -> float:
        if isinstance(value, bool):
            raise ConfigError(f"parameter {self.name!r}: {value!r} is not a number")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"parameter {self.name!r}: {value!r} is not a number") from None
        if not math.isfinite(number):
            raise ConfigError(f"parameter {self.name!r}: {value!r} is not a finite number")
        return number

    def _check_range(self, number: float, original: Any) -> None:
        low, high = self.valid_range()
        if number < low or number > high:
            limits = f"[{low:g}, {high:g}] (hard limits)" if self.extendable else self.domain_text()
            raise ConfigError(f"parameter {self.name!r}: {original!r} is out of range {limits}")

    def valid_range(self) -> tuple[float, float]:
        """Values a config may hold: the declared range, or for an extendable parameter
        everything up to its hard limits, so that a config found after the tuner widened a bound
        (SAPPHIRE's dynamic bounds) is valid in the user's space too. Sampling keeps low/high."""
        if not self.extendable:
            return self.low, self.high
        floor = 1 if self.kind is Kind.INT else math.ulp(0.0)
        low = self.hard_low if self.hard_low is not None else -math.inf
        if self.log:
            low = max(low, floor)  # a log scale has no zero
        high = self.hard_high if self.hard_high is not None else math.inf
        return min(low, self.low), max(high, self.high)

    # ---- unit-cube encoding ---------------------------------------------------------------
    def to_unit(self, value: Any) -> float:
        """Position of a valid value in [0, 1]."""
        if self.kind is Kind.FLOAT:
            if self.log:
                return _ratio(math.log(value), math.log(self.low), math.log(self.high))
            return _ratio(value, self.low, self.high)
        if self.kind is Kind.INT:
            if self.log:
                return _ratio(math.log(value), math.log(self.low), math.log(self.high))
            return (value - self.low + 0.5) / (self.high - self.low + 1)
        return (self._index[_key(value)] + 0.5) / len(self.values)

    def from_unit(self, u: float) -> Any:
        """The value at position `u` of [0, 1] (clipped), rounded for discrete kinds."""
        u = min(max(float(u), 0.0), 1.0)
        if self.kind is Kind.FLOAT:
            if self.log:  # exp(log(x)) is not always x: keep the result inside the range
                value = math.exp(_lerp(u, math.log(self.low), math.log(self.high)))
                return float(min(max(value, self.low), self.high))
            return float(_lerp(u, self.low, self.high))
        if self.kind is Kind.INT:
            lo, hi = int(self.low), int(self.high)
            if self.log:
                value = round(math.exp(_lerp(u, math.log(lo), math.log(hi))))
            else:
                value = lo + math.floor(u * (hi - lo + 1))
            return int(min(max(value, lo), hi))
        index = min(int(u * len(self.values)), len(self.values) - 1)
        return self.values[index]

    def from_unit_many(self, units: np.ndarray) -> list[Any]:
        """`from_unit` of each position, computed a column at a time: a design of thousands of
        configs over hundreds of parameters decodes in numpy, not one call per cell. The
        values are `from_unit`'s exactly (the same float operations; `math.exp` where a log
        scale needs it, since numpy's may differ in the last bit)."""
        u = np.clip(np.asarray(units, dtype=float), 0.0, 1.0)
        if u.size <= FEW_UNITS:  # numpy's call costs more than a few cells
            return [self.from_unit(x) for x in u.tolist()]
        if self.kind not in (Kind.FLOAT, Kind.INT):
            index = np.minimum((u * len(self.values)).astype(int), len(self.values) - 1)
            return [self.values[i] for i in index.tolist()]
        if self.kind is Kind.INT and max(abs(self.low), abs(self.high)) > 2**52:
            return [self.from_unit(x) for x in u.tolist()]  # past int64: Python's integers
        if self.kind is Kind.FLOAT:
            if not self.log:
                return (self.low + u * (self.high - self.low)).tolist()
            values = self._exp_lerp(u, self.low, self.high)
            return np.minimum(np.maximum(values, self.low), self.high).tolist()
        lo, hi = int(self.low), int(self.high)
        if self.log:
            rounded = np.round(self._exp_lerp(u, lo, hi)).astype(np.int64)  # half to even
        else:
            rounded = lo + np.floor(u * (hi - lo + 1)).astype(np.int64)
        return np.minimum(np.maximum(rounded, lo), hi).tolist()

    @staticmethod
    def _exp_lerp(u: np.ndarray, low: float, high: float) -> np.ndarray:
        log_low, log_high = math.log(low), math.log(high)
        return np.array(list(map(math.exp, (log_low + u * (log_high - log_low)).tolist())))

    def grid(self, levels: int = 3) -> list[Any]:
        """Values for a full-factorial design: the space file's own ``grid`` when it gives one,
        every value of a discrete parameter (ints with at most `levels` values included), else
        `levels` evenly spaced (log-spaced) values."""
        if levels < 1:
            raise ConfigError(f"grid levels must be at least 1, not {levels}")
        if "grid" in self.extra:
            return list(self.extra["grid"])
        if self.kind in (Kind.CATEGORICAL, Kind.ORDINAL, Kind.BOOL):
            return list(self.values)
        if self.kind is Kind.INT and self.cardinality <= levels:
            return list(range(int(self.low), int(self.high) + 1))
        points = np.linspace(0.0, 1.0, levels) if levels > 1 else np.array([0.5])
        out: list[Any] = []
        for u in points:
            if self.log:
                raw = math.exp(_lerp(u, math.log(self.low), math.log(self.high)))
            else:
                raw = _lerp(u, self.low, self.high)
            value = int(round(raw)) if self.kind is Kind.INT else float(raw)
            if value not in out:
                out.append(value)
        return out

    def numeric_value(self, value: Any) -> float:
        """A number for regression-style analyses: the value itself, or its index for
        non-numeric ordinals."""
        if self.kind is Kind.BOOL:
            return float(bool(value))
        if self.kind is Kind.ORDINAL and not all(_is_number(v) for v in self.values):
            return float(self._index[_key(value)])
        return float(value)

    def to_dict(self) -> dict[str, Any]:
        """The YAML form of this parameter (without its name)."""
        out: dict[str, Any] = {"type": self.kind.value}
        if self.is_numeric:
            out["low"], out["high"] = plain(self.low), plain(self.high)
            if self.log:
                out["log"] = True
        elif self.kind is not Kind.BOOL:
            out["values"] = [plain(v) for v in self.values]
        out["default"] = plain(self.default)
        for key in ("unit", "layer", "description"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.cost is not Cost.RUNTIME:
            out["apply"] = self.cost.value
        if self.condition is not None:
            out["active_when"] = self.condition.text
        if self.extendable:
            out["extendable"] = True
            for key in ("hard_low", "hard_high"):
                if getattr(self, key) is not None:
                    out[key] = plain(getattr(self, key))
        out.update(self.extra)
        return out


def _key(value: Any) -> Any:
    """Dictionary key under which 4096, 4096.0, np.int64(4096) and True all find their value."""
    kind = type(value)  # the common plain types first: a large table calls this millions of times
    if kind is str:
        return ("str", value)
    if kind is float:
        return ("num", value)
    if kind is int and -(2**53) <= value <= 2**53:  # exactly a float
        return ("num", float(value))
    if isinstance(value, bool | np.bool_):
        return ("bool", bool(value))
    if _is_number(value):
        try:
            return ("num", float(value))
        except OverflowError:  # an int beyond floats: equal only to itself
            return ("num", int(value))
    return ("str", str(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def _parse_scalar(text: str) -> Any:
    """A value written as text (a dataset cell, a command line): a number, a boolean (an
    ordinal of booleans, as a safe space keeps of a bool), else the text."""
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return number
    return int(number) if number == int(number) else number


def _ratio(x: float, lo: float, hi: float) -> float:
    return 0.5 if hi == lo else (x - lo) / (hi - lo)


def _lerp(u: float, lo: float, hi: float) -> float:
    return lo + u * (hi - lo)


def _fmt(value: Any) -> str:
    if isinstance(value, float) and abs(value) < 1e15 and value == int(value):  # nan, inf fail
        return str(int(value))
    return str(value)


MAX_LEVELS = 1000  # grid levels a user may ask for: more only takes memory and time


def check_levels(levels: Any) -> None:
    """Refuse grid levels from a user that make no design (0, negative) or an absurd one."""
    if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= MAX_LEVELS:
        raise ConfigError(
            f"grid levels must be a whole number from 1 to {MAX_LEVELS}, not {levels}"
        )


def ensure_values(values: Sequence[Any]) -> tuple[Any, ...]:
    """Discrete values as a tuple of plain Python scalars."""
    return tuple(plain(v) for v in values)
