"""A store's JSON cells read back: what another program, a disk or a hand wrote there is refused
in one line that names the campaign and the column, before any command acts on it.

SQLAlchemy decodes a JSON column while it fetches the rows, so a cell that is no JSON would
stop the fetch with a JSONDecodeError that names neither; `JsonCell` decodes leniently instead
(a cell that is no JSON comes back `Unreadable`), and `campaign_fields`, `trial_fields`,
`run_fields` check each row's cells, with its campaign's name, as they become a Campaign, a
Trial or a Run: the JSON must decode, and hold the shape stortune writes (an object where an
object is written, text where text is, numbers for metrics, plain values for a config). What
a cell holds beyond that shape (a target's settings, a tuner's name) is checked where it is
used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from stortune import bounds
from stortune.bounds import Range
from stortune.errors import ConfigError, StoreError


class Unreadable(str):
    """A JSON cell whose text does not decode: the text, and why (`reason`)."""

    reason: str = ""


class JsonCell(sa.types.TypeDecorator):
    """SQLAlchemy's JSON column, whose cells that are no JSON come back `Unreadable` (the
    schema is the same: the column is JSON to the database)."""

    impl = sa.JSON
    cache_ok = True

    def result_processor(self, dialect: Any, coltype: Any) -> Callable[[Any], Any] | None:
        decode = self.impl_instance.result_processor(dialect, coltype)
        if decode is None:  # the driver decodes (PostgreSQL), and its JSON is always JSON
            return None

        def lenient(value: Any) -> Any:
            try:
                return decode(value)
            except (ValueError, TypeError) as exc:  # JSONDecodeError, bytes, a bare number
                if isinstance(value, int | float) and not isinstance(value, bool):
                    return value  # SQLite stores the JSON text 5 as the number 5
                text = Unreadable(value if isinstance(value, str) else repr(value))
                text.reason = (str(exc).splitlines() or [type(exc).__name__])[0]
                return text

        return lenient


Check = Callable[[Any], str | None]  # what is wrong with a cell's value, or None


def campaign_fields(row: Mapping[str, Any], url: str) -> dict[str, Any]:
    """A campaigns row's fields, each cell checked."""
    fields = dict(row)
    name = fields.get("name")
    _check_cells(fields, CAMPAIGN_CELLS, "campaigns", name if isinstance(name, str) else "?", url)
    return fields


def trial_fields(row: Mapping[str, Any], campaign: str, url: str) -> dict[str, Any]:
    """A trials row's fields (without its campaign's id), each cell checked."""
    fields = dict(row)
    fields.pop("campaign_id", None)
    _check_cells(fields, TRIAL_CELLS, "trials", campaign, url)
    return fields


def run_fields(row: Mapping[str, Any], campaign: str, url: str) -> dict[str, Any]:
    """A runs row's fields (without its campaign's id), each cell checked."""
    fields = dict(row)
    fields.pop("campaign_id", None)
    _check_cells(fields, RUN_CELLS, "runs", campaign, url)
    return fields


def check_fingerprint(value: Any, campaign: str, url: str) -> dict[str, Any]:
    """An environments row's fingerprint, checked."""
    _check_cells({"fingerprint": value}, {"fingerprint": _object}, "environments", campaign, url)
    return value


@contextmanager
def stored(campaign: str, column: str, refusals: tuple[type[Exception], ...]) -> Iterator[None]:
    """Making something of a campaign's stored cell (a target of its spec, say): a refusal of
    the kinds in `refusals` is the cell's fault, and says so, naming the campaign and the
    column."""
    try:
        yield
    except StoreError:
        raise
    except refusals as exc:
        raise StoreError(
            f"cannot read campaign {campaign!r} from the store: its column {column}: {exc}"
        ) from None


def _check_cells(
    fields: Mapping[str, Any], checks: Mapping[str, Check], table: str, campaign: str, url: str
) -> None:
    for column, check in checks.items():
        if column not in fields:
            continue
        value = fields[column]
        if isinstance(value, Unreadable):
            problem: str | None = f"is not JSON ({value.reason}): {_shown(str(value))}"
        else:
            problem = check(value)
            problem = None if problem is None else f"holds {problem}"
        if problem is not None:
            raise StoreError(
                f"cannot read campaign {campaign!r} from the store {url}: its column "
                f"{table}.{column} {problem}; stortune never writes that, so something else "
                "changed the store"
            )


# ---- the shapes stortune writes --------------------------------------------------------------
def _held(value: Any) -> str:
    return _shown(value)


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else f"{_held(value)}, not text"


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _whole(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool)
    return None if ok else f"{_held(value)}, not a whole number"


def _optional_whole(value: Any) -> str | None:
    return None if value is None else _whole(value)


def _number(value: Any) -> str | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return None if ok else f"{_held(value)}, not a number"


def _optional_number(value: Any) -> str | None:
    return None if value is None else _number(value)


def _object(value: Any) -> str | None:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return f"{_held(value)}, not a JSON object"
    return None


def _optional_object(value: Any) -> str | None:
    return None if value is None else _object(value)


def _members(value: Any, checks: Mapping[str, Check], needs: tuple[str, ...] = ()) -> str | None:
    """An object whose members named in `checks` pass them (others may be anything), with a
    member for each of `needs`."""
    problem = _object(value)
    if problem is not None:
        return problem
    missing = [key for key in needs if key not in value]
    if missing:
        return f"{_shown(value)}, without {missing[0]!r}"
    for key, check in checks.items():
        if key in value and (inner := check(value[key])) is not None:
            return f"a {key!r} of {inner}"
    return None


def _list_of(check: Check) -> Check:
    def each(value: Any) -> str | None:
        if not isinstance(value, list):
            return f"{_held(value)}, not a list"
        for item in value:
            if (problem := check(item)) is not None:
                return problem
        return None

    return each


def _optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def _direction(value: Any) -> str | None:
    return None if value in ("max", "min") else f"{_held(value)}, not max or min"


def _config(value: Any) -> str | None:
    problem = _object(value)
    if problem is not None:
        return problem
    for key, item in value.items():
        if item is not None and not isinstance(item, str | int | float | bool):
            return f"{key!r} = {_shown(item)}, not a plain value"
    return None


def _metrics(value: Any) -> str | None:
    problem = _object(value)
    if problem is not None:
        return problem
    for key, item in value.items():
        if item is not None and _number(item) is not None:
            return f"{key!r} = {_shown(item)}, not a number"
    return None


def _target(value: Any) -> str | None:
    return _members(value, {"kind": _text}, needs=("kind",))


def _workload_spec(value: Any) -> str | None:
    return _members(value, {"kind": _text, "name": _text})


def _workload(value: Any) -> str | None:
    return _members(value, {"workloads": _list_of(_workload_spec)})


def _guardrail(value: Any) -> str | None:
    checks = {"metric": _text, "direction": _direction, "tolerance": _number}
    return _members(value, checks, needs=("metric",))


def _bounds(value: Any) -> str | None:
    problem = _object(value)
    if problem is not None:
        return problem
    for key, pair in value.items():
        if not (isinstance(pair, list) and len(pair) == 2 and not any(map(_number, pair))):
            return f"bounds of {key!r} that are not two numbers"
    return None


def _scalarized(value: Any) -> str | None:
    checks = {"metric": _text, "direction": _direction, "weight": _number}
    return _members(value, checks, needs=("metric",))


def _scalarizer(value: Any) -> str | None:
    checks = {"objectives": _list_of(_scalarized), "bounds": _bounds}
    return _members(value, checks, needs=("objectives",))


def _objective(value: Any) -> str | None:
    return _members(
        value,
        {
            "metric": _text,
            "direction": _direction,
            "scalarizer": _optional(_scalarizer),
            "guardrails": _optional(_list_of(_guardrail)),
        },
    )


def _race(value: Any) -> str | None:
    return _members(value, {"verdict": _optional_text, "guardrails": _object})


def _trial_info(value: Any) -> str | None:
    return _members(
        value, {"source": _optional_text, "label": _optional_text, "race": _optional(_race)}
    )


def _run_info(value: Any) -> str | None:
    return _members(
        value,
        {
            "race": _optional_whole,
            "step": _optional_whole,
            "at_seq": _optional_whole,
            "disturbed_attempts": _optional(_list_of(lambda _item: None)),
        },
    )


def _within(limits: Range) -> Check:
    def check(value: Any) -> str | None:
        try:
            limits.check(value)
        except ConfigError:
            return f"{_shown(value)}, out of range ({limits.text()})"
        return None

    return check


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"{_shown(value)}, not true or false"


def _closed(checks: Mapping[str, Check]) -> Check:
    """An object holding no member but those named in `checks`, each passing its check."""

    def check(value: Any) -> str | None:
        problem = _members(value, checks)
        unknown = sorted(set(value) - set(checks)) if problem is None else []
        return problem or (f"an unknown {unknown[0]!r}" if unknown else None)

    return check


WHOLE = Range(0, 10**9, whole=True)
POSITIVE = Range(1, 10**9, whole=True)
SHARE = Range(0, 1)
LEVEL = Range(0, 1, above=True)  # a confidence level
VERIFY_SETTINGS: dict[str, Check] = {  # a verification's rounds (`VerifyRules` but its fewest)
    "max_rounds": _within(POSITIVE),
    "equivalence": _within(SHARE),
    "precision": _within(SHARE),
    "confidence": _within(LEVEL),
    "sequential": _list_of(_text),
    "max_seconds": _optional(_within(bounds.SECONDS)),
}
# What the settings the engine reads back hold (`RunRules`, `TuneSettings`, `SweepSettings`,
# `VerifyRules` and a verification's own; a test keeps this list in step with them): a
# setting of the wrong type or out of range would fail deep inside a resumed plan.
SETTINGS: dict[str, Check] = {
    "timeout": _optional(_within(bounds.TIMEOUT)),
    "check_disturbance": _flag,
    "settle_seconds": _within(bounds.WAIT),
    "max_other_cpu": _within(Range(0, 10**6)),
    "busy_wait": _within(bounds.WAIT),
    "budget": _optional(_within(WHOLE)),
    "seconds": _optional(_within(bounds.SECONDS)),
    "repetitions": _within(POSITIVE),
    "confidence": _within(LEVEL),
    "baseline": _flag,
    "target_ci": _optional(_within(bounds.FRACTION)),
    "min_repetitions": _within(POSITIVE),
    "reference_every": _within(WHOLE),
    "intensify": _flag,
    "seed": _within(Range(0, 2**63 - 1, whole=True)),
    "verify": _closed(VERIFY_SETTINGS),
    "of": _text,
    "profile": _object,
}
CAMPAIGN_CELLS: dict[str, Check] = {
    "name": _text,
    "kind": _text,
    "space_name": _text,
    "space_yaml": _text,
    "target": _target,
    "workload": _workload,
    "objective": _objective,
    "tuner": _text,
    "seed": _whole,
    "settings": lambda value: _members(value, SETTINGS),
    "status": _text,
    "created_at": _number,
    "updated_at": _number,
}
TRIAL_CELLS: dict[str, Check] = {
    "seq": _whole,
    "config": _config,
    "status": _text,
    "value": _optional_number,
    "summary": _optional_object,
    "error": _optional_text,
    "info": _optional(_trial_info),
    "created_at": _number,
    "finished_at": _optional_number,
}
RUN_CELLS: dict[str, Check] = {
    "trial_id": _whole,
    "workload": _text,
    "repetition": _whole,
    "status": _text,
    "metrics": _metrics,
    "error": _optional_text,
    "info": _optional(_run_info),
    "started_at": _number,
    "ended_at": _number,
}


def _shown(value: Any, most: int = 60) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    try:
        text = repr(value)
    except ValueError:  # an integer of more digits than Python prints
        text = f"a number of {value.bit_length()} bits"
    return text if len(text) <= most else f"{text[: most - 3]}..."
