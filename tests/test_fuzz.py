"""Bad input never escapes as a traceback: property-based fuzzing of space files, expressions,
fio job files, command-line values, output paths and stores.

Whatever a user hands stortune (a space or job file someone else wrote, a value typed wrong, an
output path that cannot be written, a store a disk corrupted or a hand edited), a command either
works (exit 0) or refuses in one line on stderr (exit 2), runs no code it was given, and neither
hangs nor exhausts memory: each command in this process is held to TIME_LIMIT seconds and to
MEMORY_LIMIT bytes more than the process had, and the commands that must be watched from outside
(files that never end, FIFOs) run in a child process with the same limits. Space files and
expressions are fuzzed both through `parse_space` (fast, so most inputs go there) and through
the command line; everything else through the command line.

Inputs per run: ``STORTUNE_FUZZ_EXAMPLES`` (default 2,000) split among the tests by SHARES;
`test_the_fuzz_ran_every_input` checks that they all ran. Runs are derandomized and keep no
example database, so CI sees the same inputs every time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from stortune.cli import main
from stortune.errors import StortuneError
from stortune.space import parse_space
from stortune.space.loader import MAX_NAME, NAME
from stortune.space.parameter import Kind

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "data" / "localfs.csv"
TINY_CSV = REPO / "tests" / "data" / "store-0.1.0" / "tiny.csv"

TOTAL = int(os.environ.get("STORTUNE_FUZZ_EXAMPLES", "2000"))
SHARES = {  # of TOTAL, by the inputs each family gets at the default
    "space_text": 720 / 3200,
    "expressions": 480 / 3200,
    "cli_space": 240 / 3200,
    "cli_sample": 120 / 3200,
    "cli_run": 120 / 3200,
    "cli_store_file": 200 / 3200,
    "cli_store_url": 120 / 3200,
    "job_file": 300 / 3200,
    "numeric": 400 / 3200,
    "output_path": 250 / 3200,
    "tampered_store": 250 / 3200,
}
RAN: Counter[str] = Counter()
OUTCOMES: Counter[str] = Counter()  # how inputs ended, printed at the end: a fuzz that only
# ever hits the first check proves little
TIME_LIMIT = 20  # seconds for one input: a hang is a failure, not a slow test
MEMORY_LIMIT = 1 << 30  # bytes one command may allocate, beyond what the process holds
# Arrow's own allocators reserve arenas far beyond what they hand out, which RLIMIT_DATA counts;
# the system allocator asks for what is used, so a limited command fails only for its own reads
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

SMALL_SPACES = ["block", "btrfs", "ext4", "fio-client", "localfs", "vm", "xfs"]


def fuzz_settings(share: str) -> settings:
    return settings(
        max_examples=max(1, round(TOTAL * SHARES[share])),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# ---- running the command line in-process ---------------------------------------------------
class Hang(BaseException):
    """An input took longer than TIME_LIMIT (a BaseException, so no `except Exception` eats it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(_signum: int, _frame: Any) -> None:
        raise Hang(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def memory_limit(extra: int) -> Iterator[None]:
    """This process may allocate `extra` bytes more than it holds (its data segment, as
    RLIMIT_DATA counts it); a command that reads without bound meets a MemoryError. Arrow's
    memory pool (pandas' strings) reserves its arenas on first use: it is started here, outside
    the limit, so which test first builds a string column does not decide the outcome."""
    pyarrow.array(["arrow's pool, started"])
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    with open("/proc/self/status") as status:
        held = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData:"))
    limit = held + extra if hard == resource.RLIM_INFINITY else min(held + extra, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `stortune ARGV`, run in this process: the rich consoles
    write to whatever sys.stdout/sys.stderr are when they print."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with (
            time_limit(TIME_LIMIT),
            memory_limit(MEMORY_LIMIT),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Hang as exc:  # an AssertionError, so that hypothesis reports the input
        raise AssertionError(f"stortune {[a[:60] for a in argv]} {exc}") from None
    return code, out.getvalue(), err.getvalue()


def assert_handled(
    argv: list[str], codes: tuple[int, ...] = (0, 2), alone: bool = True
) -> tuple[int, str]:
    """The command works, or refuses in one line without a traceback: on exit 2 all it prints
    is that line (unless not `alone`: a command that found out late may have said what it did
    on stdout first); on exit 1 (a campaign that ran and achieved nothing) stdout has its
    summary and stderr the one line. Returns the exit code and everything printed."""
    code, out, err = run_cli(argv)
    output = out + err
    shown = [a[:60] for a in argv]
    assert "Traceback" not in output, (shown, output[-2000:])
    assert code in codes, (shown, code, output[-2000:])
    if code != 0:
        told = output if code == 2 and alone else err
        lines = [line for line in told.splitlines() if line.strip()]
        assert 1 <= len(lines) <= 3, (shown, output[-2000:])
        assert lines[0].startswith("error: "), (shown, output[-2000:])
    OUTCOMES[f"cli exit {code}"] += 1
    return code, output


def assert_nothing_ran(marker: Path) -> None:
    assert not marker.exists(), "an input executed code"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def marker(work: Path) -> Path:
    """The file injected code would create (`touch MARKER`, `open(MARKER, 'w')`)."""
    return work / "MARKER"


# ---- space documents and their mutations ---------------------------------------------------
def bundled_text(name: str) -> str:
    return (resources.files("stortune") / "spaces" / f"{name}.yaml").read_text()


BUNDLED = {name: yaml.safe_load(bundled_text(name)) for name in SMALL_SPACES}
CEPH = yaml.safe_load(bundled_text("ceph"))
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@st.composite
def base_documents(draw: st.DrawFn) -> dict:
    """A bundled space as plain data, or a sample of ceph.yaml's parameters (all of it is too
    big to fuzz quickly) with the constraints that only name those."""
    name = draw(st.sampled_from([*SMALL_SPACES, "ceph"]))
    if name != "ceph":
        return json.loads(json.dumps(BUNDLED[name]))
    names = draw(st.lists(st.sampled_from(sorted(CEPH["parameters"])), min_size=1, max_size=8))
    params = {n: CEPH["parameters"][n] for n in names}
    constraints = [
        c
        for c in CEPH.get("constraints", [])
        if set(IDENTIFIER.findall(c.get("require", c.get("forbid", "")))) <= set(params) | {"and"}
    ]
    doc = {"name": "ceph-sample", "parameters": params, "constraints": constraints}
    return json.loads(json.dumps(doc))


@dataclasses.dataclass(frozen=True)
class Raw:
    """YAML text put into the dumped document as it is (anchors, tags, deep nesting)."""

    text: str


def flow_nesting(depth: int, mapping: bool) -> Raw:
    return Raw("{a: " * depth + "1" + "}" * depth if mapping else "[" * depth + "]" * depth)


def alias_bomb(levels: int, fan: int) -> Raw:
    """A "billion laughs" value: each level lists the previous one `fan` times."""
    parts = [f"&l0 [{', '.join(['lol'] * fan)}]"]
    for i in range(1, levels):
        parts.append(f"&l{i} [{', '.join([f'*l{i - 1}'] * fan)}]")
    return Raw("[" + ", ".join(parts) + "]")


RAW_VALUES = [
    ".inf",
    "-.inf",
    ".nan",
    ".NaN",
    "1.0e+308",
    "-1.0e+308",
    "1.0e+309",
    "5.0e-324",
    "1e308",
    "9" * 400,
    "-" + "9" * 400,
    "0x7fffffffffffffffffff",
    "0o777",
    "1_000",
    "~",
    "null",
    "yes",
    "off",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!omap [a: 1, b: 2]",
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/name:os.system",
    "!!str 5",
    "!!int '7'",
    "!!float .nan",
    "&r [*r]",
    "&m {a: *m}",
    "*undefined",
    "'\\x00'",
    '"\\0\\a\\b"',
    '"\\u202e\\u0000"',
    "|\n  multi\n  line",
]
NASTY_NAMES = [
    "fs; rm -rf /",
    "a b",
    "$(touch x)",
    "`id`",
    "..",
    "../../etc/passwd",
    "",
    " ",
    "-o",
    "--store",
    "1abc",
    "a'b",
    'a"b',
    "a\nb",
    "a\x00b",
    "名前",
    "é",
    "\u202eabc",
    "x" * 10_000,
    "__import__",
    "True",
    "ok_name",
    "ok.name",
    "ok-name",
]


@functools.cache
def nasty_scalars(marker: Path) -> st.SearchStrategy:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(10**400), max_value=10**400),
        st.floats(),  # inf, -inf, nan, 1e308
        st.sampled_from([float("inf"), float("-inf"), float("nan"), 1e308, -1e308, 5e-324]),
        st.text(max_size=30),
        st.sampled_from(NASTY_NAMES),
        st.sampled_from(RAW_VALUES).map(lambda t: Raw(t.replace("{marker}", str(marker)))),
    )


@functools.cache  # a strategy built once: hypothesis validates each new one, slowly
def nasty_values(marker: Path) -> st.SearchStrategy:
    scalars = nasty_scalars(marker)
    structured = st.one_of(
        st.builds(flow_nesting, st.sampled_from([2, 63, 64, 65, 100, 1000, 5000]), st.booleans()),
        st.builds(alias_bomb, st.integers(2, 9), st.integers(2, 12)),
        st.just("x" * 10_000),
    )
    nested = st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=8,
    )
    return st.one_of(nested, structured)


# Numbers at and beyond the edges: the first ones are valid and must work, the rest be refused.
EXTREME_NUMBERS = [
    2**62,
    -(2**62),
    2**63 - 1,
    -(2**63) + 1,
    1e300,
    -1e300,
    1e-300,
    5e-324,
    0,
    -1,
    0.5,
    1,
    float("inf"),
    float("-inf"),
    float("nan"),
    1e308,
    -1e308,
    2**63,
    10**30,
    -(10**30),
]
# Names that follow the rule (and must work) but are odd: long, dotted, dashed, underscored.
ODD_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,199}", fullmatch=True)

FIELDS = [
    "name",
    "description",
    "parameters",
    "constraints",
    "type",
    "low",
    "high",
    "log",
    "values",
    "default",
    "unit",
    "layer",
    "apply",
    "active_when",
    "extendable",
    "hard_low",
    "hard_high",
    "option",
    "require",
    "forbid",
    "message",
]


def paths(doc: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every place in a document a mutation can replace."""
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from paths(value, (*prefix, i))


def replace(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    doc[path[0]] = replace(doc[path[0]], path[1:], value)
    return doc


@st.composite
def mutated_spaces(draw: st.DrawFn, marker: Path) -> str:
    """A bundled space with 1-4 mutations: a value replaced by a nasty one, a parameter renamed,
    a field added, a constraint or condition swapped for a nasty expression, a number made
    non-finite or huge; dumped to YAML with raw snippets (anchors, tags, nesting) spliced in."""
    doc = draw(base_documents())
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3, 4]))):  # one mutation, mostly
        how = draw(
            st.sampled_from(["replace", "rename", "add", "expression", "number", "alias", "raw"])
        )
        params = doc.get("parameters") if isinstance(doc, dict) else None
        if how == "replace":
            where = draw(st.sampled_from(list(paths(doc))))
            doc = replace(doc, where, draw(nasty_values(marker)))
        elif how == "rename" and isinstance(params, dict) and params:
            old = draw(st.sampled_from(sorted(params, key=str)))
            new = draw(st.one_of(st.sampled_from(NASTY_NAMES), st.text(max_size=20), ODD_NAMES))
            params[new] = params.pop(old)
        elif how == "add":
            where = draw(st.sampled_from([p for p in paths(doc) if _is_mapping(doc, p)] or [()]))
            target = _at(doc, where)
            if isinstance(target, dict):
                key = draw(st.one_of(st.sampled_from(FIELDS), st.text(max_size=10)))
                target[key] = draw(nasty_values(marker))
        elif how == "expression":
            text = draw(expressions(["N0", "N1", "N2"], marker))  # one strategy for all
            names = _names(doc)
            for slot in ("N0", "N1", "N2"):
                name = draw(st.sampled_from(names))
                text = re.sub(rf"\b{slot}\b", lambda _match, name=name: name, text)
            if isinstance(params, dict) and params and draw(st.booleans()):
                pname = draw(st.sampled_from(sorted(params, key=str)))
                if isinstance(params[pname], dict):
                    params[pname]["active_when"] = text
            elif isinstance(doc, dict):
                kind = draw(st.sampled_from(["require", "forbid"]))
                constraints = doc.get("constraints")
                if not isinstance(constraints, list):
                    constraints = doc["constraints"] = []
                constraints.append({kind: text})
        elif how == "number":
            numeric = [p for p in paths(doc) if isinstance(_at(doc, p), int | float) and p]
            if numeric:
                where = draw(st.sampled_from(numeric))
                doc = replace(
                    doc,
                    where,
                    draw(st.sampled_from(EXTREME_NUMBERS)),
                )
        elif how == "alias" and isinstance(params, dict) and len(params) >= 2:
            first, second = draw(st.permutations(sorted(params, key=str)))[:2]
            with contextlib.suppress(yaml.YAMLError):  # a spec holding Raw text stays as it is
                params[first] = Raw("&spec " + _flow(params[first]))
                params[second] = Raw("*spec")
        elif how == "raw":
            where = draw(st.sampled_from(list(paths(doc))))
            doc = replace(doc, where, draw(st.sampled_from(RAW_VALUES).map(Raw)))
    return dump(doc, marker)


def _is_mapping(doc: Any, path: tuple) -> bool:
    return isinstance(_at(doc, path), dict)


def _at(doc: Any, path: tuple) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _names(doc: Any) -> list[str]:
    params = doc.get("parameters") if isinstance(doc, dict) else None
    names = [n for n in params if isinstance(n, str)] if isinstance(params, dict) else []
    return names or ["a"]


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**9).strip()


def dump(doc: Any, marker: Path) -> str:
    """YAML text of a document; Raw values are spliced in as written."""
    raws: list[str] = []

    def stash(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text.replace("{marker}", str(marker)))
            return f"RAW{len(raws) - 1}RAW"
        if isinstance(value, dict):
            return {stash(k) if isinstance(k, Raw) else k: stash(v) for k, v in value.items()}
        if isinstance(value, list):
            return [stash(v) for v in value]
        return value

    text = yaml.safe_dump(stash(doc), sort_keys=False, allow_unicode=True, width=10**9)
    for i, raw in enumerate(raws):
        text = text.replace(f"RAW{i}RAW", raw.replace("\n", "\n  "))
    return text


# ---- expressions ----------------------------------------------------------------------------
BINARY = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "@", "and", "or"]
COMPARE = ["<", "<=", "==", "!=", ">", ">=", "in", "not in", "is", "is not"]
FUNCTIONS = ["min", "max", "abs", "log2", "log10", "__import__", "open", "eval", "exec"]
FUNCTIONS += ["getattr", "print", "len", "type", "globals", "breakpoint", "compile"]


def expression_templates(marker: Path) -> list[str]:
    touch = f"__import__('os').system('touch {marker}')"
    return [
        touch,
        f"open('{marker}', 'w')",
        f"exec(\"open('{marker}', 'w')\")",
        f"[c for c in ().__class__.__base__.__subclasses__()] and {touch}",
        "a.__class__",
        "a.__class__.__mro__[1].__subclasses__()",
        "().__class__.__bases__[0]",
        "(1, 2)[a]",
        "'abc'[0]",
        "(lambda: 1)()",
        "[x for x in (1, 2)]",
        "{x: 1 for x in (1, 2)}",
        "f'{a}'",
        "(b := 1)",
        "min(*a)",
        "max(a, key=print)",
        "9**9**9",
        "(10**64)**64**64",
        "2**64**2",
        "((10**64)**64)**64",
        "'x' * 10**9",
        "(1,) * 10**9",
        "'%0999999999d' % 1",
        "'{0:>999999999}'.format(1)",
        "1e308 * 10 > a",
        "1 / 0",
        "log2(-1)",
        "log10(0)",
        "not " * 10_000 + "True",
        "not " * 200 + "True",
        "(" * 10_000 + "a" + ")" * 10_000,
        "(" * 150 + "a" + ")" * 150,
        "-" * 10_000 + "a",
        "-" * 150 + "a",
        " + ".join(["a"] * 1_000),
        " + ".join(["a"] * 150),
        " and ".join(["a > 0"] * 1_000),
        "a" * 2_000,
        "1" * 5_000,
        "a if a else b",
        "yield a",
        "await a",
        "a; b",
        "import os",
        "\x00",
        "",
        "   ",
        "a == 'unterminated",
    ]


def expressions(names: list[str], marker: Path) -> st.SearchStrategy[str]:
    return _expressions(tuple(names), marker)


@functools.cache
def _expressions(names: tuple[str, ...], marker: Path) -> st.SearchStrategy[str]:
    atoms = st.one_of(
        st.sampled_from(names),
        st.integers(min_value=-(10**30), max_value=10**30).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.sampled_from(["True", "false", "None", "'ext4'", "1e999", "-1e999", "()", "[]", "{}"]),
    )

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(BINARY), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.tuples(inner, st.sampled_from(COMPARE), inner).map(
                lambda t: f"{t[0]} {t[1]} {t[2]}"
            ),
            st.tuples(st.sampled_from(["not ", "-", "+", "~"]), inner).map("".join),
            st.tuples(st.sampled_from(FUNCTIONS), st.lists(inner, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"
            ),
            st.tuples(inner, st.sampled_from(["__class__", "real", "__dict__"])).map(".".join),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
            inner.map(lambda x: f"(lambda: {x})()"),
            inner.map(lambda x: f"[v for v in ({x},)]"),
            inner.map(lambda x: f"f'{{{x}}}'"),
            inner.map(lambda x: f"(w := {x})"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
            st.lists(inner, max_size=4).map(lambda xs: f"({', '.join(xs)},)"),
        )

    plain = st.one_of(
        st.sampled_from(names),
        st.integers(min_value=-1000, max_value=1000).map(str),
        st.sampled_from(["0.5", "1e3", "True", "'ext4'", "('ext4', 'xfs')"]),
    )

    def grow_plain(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        """What the language allows, so that most of these compile and get evaluated."""
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//", "%", "**"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.tuples(inner, st.sampled_from(["<", "<=", "==", "!=", "in", "not in"]), inner).map(
                " ".join
            ),
            st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(" ".join),
            inner.map(lambda x: f"not {x}"),
            st.tuples(st.sampled_from(["min", "max", "abs", "log2", "log10"]), inner).map(
                lambda t: f"{t[0]}({t[1]})"
            ),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        )

    return st.one_of(
        st.recursive(plain, grow_plain, max_leaves=10),
        st.recursive(plain, grow_plain, max_leaves=10),
        st.recursive(atoms, grow, max_leaves=12),
        st.sampled_from(expression_templates(marker)),
        st.text(max_size=60),
    )


def space_with_expression(expression: str, as_condition: bool) -> str:
    doc: dict[str, Any] = {
        "name": "fuzz",
        "parameters": {
            "a": {"type": "int", "low": 0, "high": 8, "default": 2},
            "b": {"type": "float", "low": 0.5, "high": 4.0, "default": 1.0},
            "fs": {"type": "categorical", "values": ["ext4", "xfs"], "default": "ext4"},
        },
    }
    if as_condition:
        doc["parameters"]["c"] = {"type": "bool", "default": True, "active_when": expression}
    else:
        doc["constraints"] = [{"forbid": expression}]
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10**9)


# ---- the library-level contract --------------------------------------------------------------
def assert_parses_or_refuses(text: str) -> None:
    """`parse_space` gives a Space that works, or one StortuneError line; nothing else."""
    try:
        with time_limit(TIME_LIMIT):
            space = parse_space(text, "fuzz.yaml")
    except Hang as exc:
        raise AssertionError(f"parse_space {exc}: {text[:300]!r}") from None
    except StortuneError as exc:
        message = str(exc)
        assert message.strip() and len(message.strip().splitlines()) == 1, message[:2000]
        assert message.startswith("fuzz.yaml"), message[:2000]
        OUTCOMES["parse_space refused"] += 1
        return
    OUTCOMES["parse_space accepted"] += 1
    for p in space.parameters:  # what got in obeys the rules the refusals enforce
        assert NAME.fullmatch(p.name) and len(p.name) <= MAX_NAME, p.name
        if p.kind in (Kind.INT, Kind.FLOAT):
            assert float("-inf") < p.low <= p.high < float("inf"), (p.name, p.low, p.high)
    with time_limit(TIME_LIMIT):
        try:
            space.default_config()
            space.raw_grid_size(3)
            for p in space.parameters:
                p.domain_text()
                p.from_unit(0.5)
        except StortuneError as exc:
            assert len(str(exc).strip().splitlines()) == 1


@fuzz_settings("space_text")
@given(data=st.data())
def test_mutated_space_files_parse_or_refuse_in_one_line(data: st.DataObject, marker: Path) -> None:
    RAN["space_text"] += 1
    assert_parses_or_refuses(data.draw(mutated_spaces(marker)))
    assert_nothing_ran(marker)


@fuzz_settings("expressions")
@given(data=st.data(), as_condition=st.booleans())
def test_expressions_compile_or_refuse_and_never_run_code(
    data: st.DataObject, as_condition: bool, marker: Path
) -> None:
    RAN["expressions"] += 1
    expression = data.draw(expressions(["a", "b", "fs"], marker))
    assert_parses_or_refuses(space_with_expression(expression, as_condition))
    assert_nothing_ran(marker)


# ---- the command line: space files ----------------------------------------------------------
def odd_paths(work: Path) -> list[str]:
    folder = work / "a-folder.yaml"
    folder.mkdir(exist_ok=True)
    binary = work / "binary.yaml"
    binary.write_bytes(bytes(range(256)) * 8)
    latin = work / "latin1.yaml"
    latin.write_bytes("name: caf\xe9\nparameters: {}\n".encode("latin-1"))
    return [
        str(folder),
        str(binary),
        str(latin),
        "/dev/null",
        "/dev/zero",
        str(work / "missing.yaml"),
        str(work / "no" / "such" / "folder.yaml"),
        "x" * 5_000,
        "x" * 5_000 + ".yaml",
        "ceph; touch MARKER",
        "../../../../etc/passwd",
        "",
        "\x00",
        "é名",
    ]


@fuzz_settings("cli_space")
@given(
    data=st.data(),
    command=st.sampled_from(["check", "check-json", "show", "show-json", "sample"]),
)
def test_space_commands_work_or_refuse_in_one_line(
    data: st.DataObject, command: str, work: Path, marker: Path
) -> None:
    RAN["cli_space"] += 1
    if data.draw(st.integers(0, 9)) == 0:
        target = data.draw(st.sampled_from(odd_paths(work)))
    else:
        path = work / "space.yaml"
        source = data.draw(
            st.one_of(
                mutated_spaces(marker),
                st.builds(space_with_expression, expressions(["a", "b"], marker), st.booleans()),
            )
        )
        path.write_text(source, encoding="utf-8", errors="surrogatepass")
        target = str(path)
    argv = {
        "check": ["space", "check", target],
        "check-json": ["space", "check", target, "--json"],
        "show": ["space", "show", target],
        "show-json": ["space", "show", target, "--json"],
        "sample": ["sample", target, "-n", "3"],
    }[command]
    assert_handled(argv)
    assert_nothing_ran(marker)


# ---- the command line: values ---------------------------------------------------------------
NUMBER_TEXT = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats().map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e308", "-0", "0x10", "1_0", "", " ", "１", "3.0"]),
    st.text(max_size=12),
)


def mostly(usual: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Usual values three times in four, so that most inputs get past the first check and
    the other values are fuzzed deeper in; NUMBER_TEXT the fourth time."""
    return st.one_of(usual, usual, usual, NUMBER_TEXT)


@fuzz_settings("cli_sample")
@given(
    space=st.sampled_from(SMALL_SPACES),
    method=st.sampled_from(["lhs", "random", "montecarlo", "factorial", "", "LHS", "x; id"]),
    n=mostly(st.integers(-2, 12).map(str)),
    seed=mostly(st.integers(-(2**70), 2**70).map(str)),
    levels=mostly(st.integers(-1, 5).map(str)),
    csv=st.sampled_from(["", "out.csv", "no/such/folder/out.csv", ".", "a\x00b.csv"]),
)
def test_sample_values_work_or_refuse_in_one_line(
    space: str, method: str, n: str, seed: str, levels: str, csv: str, work: Path
) -> None:
    RAN["cli_sample"] += 1
    if not _small(n, 50):
        n = "50"  # a valid large -n only takes time (3 ms a config)
    argv = ["sample", space, "--method", method, "-n", n, "--seed", seed, "--levels", levels]
    if csv:
        argv += ["--csv", str(work / csv) if csv != "." else str(work)]
    assert_handled(argv)


def run_values() -> st.SearchStrategy[str]:
    return mostly(
        st.one_of(
            st.integers(-1, 3).map(str),
            st.sampled_from(["0", "-1", "nan", "inf", "-inf", "1e308", "1e-300", "10" + "0" * 30]),
        )
    )


RAN_RUNS = [0]


@fuzz_settings("cli_run")
@given(
    budget=run_values(),
    repetitions=run_values(),
    runtime=run_values(),
    timeout=run_values(),
    store=st.sampled_from(["new", "folder", "missing-folder", "sqlite-url", "memory", "garbage"]),
)
def test_run_values_work_or_refuse_in_one_line(
    budget: str, repetitions: str, runtime: str, timeout: str, store: str, work: Path
) -> None:
    RAN["cli_run"] += 1
    RAN_RUNS[0] += 1
    stores = {
        "new": str(work / f"run-{RAN_RUNS[0]}.db"),
        "folder": str(work),
        "missing-folder": str(work / "missing" / "x.db"),
        "sqlite-url": f"sqlite:///{work}/run-url-{RAN_RUNS[0]}.db",
        "memory": "sqlite://",
        "garbage": "::not a url::",
    }
    argv = [
        "run",
        "--space",
        "localfs",
        "--target",
        "table",
        "--dataset",
        str(DATASET),
        "--nearest",
        "-o",
        "total.bw_mbs:max",
        "--no-check-disturbance",
        "-q",
        "--budget",
        budget,
        "--repetitions",
        repetitions,
        "--runtime",
        runtime,
        "--timeout",
        timeout,
        "--store",
        stores[store],
    ]
    if not (_small(budget, 3) and _small(repetitions, 2)):
        argv += ["--seconds", "0.3"]  # a valid huge budget would measure for ever
    # exit 1: the campaign ran and achieved nothing (every run failed), said in one line
    with contextlib.chdir(work):
        assert_handled(argv, codes=(0, 1, 2))


def _small(text: str, most: int) -> bool:
    """Whether a value, if the command line takes it as a number ("3.0" and "1_0" it does),
    is at most `most`; text it refuses counts as small, since nothing runs then."""
    try:
        return not float(text) > most
    except ValueError:
        return True


# ---- the command line: stores ---------------------------------------------------------------
@pytest.fixture(scope="module")
def real_store(work: Path) -> Path:
    """A small store that stortune wrote: tests/data's tiny table imported as campaign 'tiny'."""
    path = work / "real.db"
    code, out, err = run_cli(["import", str(TINY_CSV), "--name", "tiny", "--store", str(path)])
    assert code == 0, out + err
    return path


STORE_COMMANDS = {
    "campaigns": ["campaigns"],
    "campaigns-json": ["campaigns", "--json"],
    "show": ["show", "tiny"],
    "show-json": ["show", "tiny", "--json"],
    "show-missing": ["show", "no-such-campaign"],
    "export": ["export", "tiny", "-o", "{work}/export.csv"],
}
CORRUPTIONS = [
    "random-bytes",
    "truncated",
    "bit-flips",
    "header-and-garbage",
    "foreign-tables",
    "campaigns-other-shape",
    "cell",
    "schema-version",
    "empty",
    "text",
    "directory",
]
SQL_INTEGERS = st.integers(min_value=-(2**63), max_value=2**63 - 1)  # what sqlite3 can store
MUST_NOT_OPEN = {"random-bytes", "foreign-tables", "campaigns-other-shape", "text", "directory"}


def corrupt(kind: str, path: Path, real: Path, data: st.DataObject) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        for extra in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            extra.unlink(missing_ok=True)
    raw = real.read_bytes()
    if kind == "random-bytes":
        path.write_bytes(data.draw(st.binary(min_size=1, max_size=9000)))
        assume(not path.read_bytes().startswith(b"SQLite format 3"))
    elif kind == "truncated":
        path.write_bytes(raw[: data.draw(st.integers(1, len(raw) - 1))])
    elif kind == "bit-flips":
        flipped = bytearray(raw)
        for at in data.draw(st.lists(st.integers(0, len(raw) - 1), min_size=1, max_size=40)):
            flipped[at] ^= data.draw(st.integers(1, 255))
        path.write_bytes(bytes(flipped))
    elif kind == "header-and-garbage":
        path.write_bytes(raw[:100] + data.draw(st.binary(max_size=5000)))
    elif kind in ("foreign-tables", "campaigns-other-shape"):
        columns = data.draw(
            st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=4)
        )
        columns = list(dict.fromkeys(c for c in columns if c not in ("target", "name")))
        assume(columns)
        table = "campaigns" if kind == "campaigns-other-shape" else "things"
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute(f"CREATE TABLE {table} ({', '.join(f'{c!r}' for c in columns)})")
            db.execute(
                f"INSERT INTO {table} VALUES ({', '.join('?' * len(columns))})",
                [data.draw(st.one_of(SQL_INTEGERS, st.text(max_size=5))) for _ in columns],
            )
            db.commit()
    elif kind in ("cell", "schema-version"):
        shutil.copyfile(real, path)
        if kind == "cell":
            table, column = data.draw(
                st.sampled_from(
                    [
                        ("campaigns", "target"),
                        ("campaigns", "objective"),
                        ("campaigns", "settings"),
                        ("campaigns", "created_at"),
                        ("campaigns", "space_yaml"),
                        ("trials", "config"),
                        ("trials", "summary"),
                        ("trials", "value"),
                        ("runs", "metrics"),
                        ("runs", "repetition"),
                    ]
                )
            )
        else:
            table, column = "meta", "value"
        value = data.draw(
            st.one_of(
                st.text(max_size=20),
                st.binary(max_size=20),
                SQL_INTEGERS,
                st.floats(allow_nan=False),
                st.sampled_from(["{", "[1,", "null", "1e999", '{"kind": 5}', "[]", '"x"']),
            )
        )
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute(f"UPDATE {table} SET {column} = ?", [value])
            db.commit()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("not a database\n" + data.draw(st.text(max_size=200)), errors="replace")
    elif kind == "directory":
        path.mkdir()


@fuzz_settings("cli_store_file")
@given(
    data=st.data(), kind=st.sampled_from(CORRUPTIONS), command=st.sampled_from(list(STORE_COMMANDS))
)
def test_corrupt_or_foreign_stores_are_refused_in_one_line(
    data: st.DataObject, kind: str, command: str, work: Path, real_store: Path
) -> None:
    RAN["cli_store_file"] += 1
    path = work / "store.db"
    corrupt(kind, path, real_store, data)
    argv = [a.replace("{work}", str(work)) for a in STORE_COMMANDS[command]]
    code, output = assert_handled([*argv, "--store", str(path)])
    if kind in MUST_NOT_OPEN:
        assert code == 2 and "error: cannot open the store" in output, output[-2000:]


FIXED_STORES = ["/dev/null", "\x00", "x" * 5_000, "é名.db", "~nobody-such-user/x.db"]


@fuzz_settings("cli_store_url")
@given(
    store=st.one_of(
        st.sampled_from(
            [
                *FIXED_STORES,
                "sqlite:///",
                "sqlite://",
                "sqlite:///:memory:",
                "postgresql://nohost:1/x",
                "postgresql://host:abc/x",
                "mysql://u@h/x",
                "foo://",
                "://",
                "a://b://c",
                "http://example.com/x.db",
                "sqlite:///x.db?timeout=soon",
                "sqlite:///x.db?check_same_thread=maybe",
                "{work}/no/such/folder/x.db",
                "{work}",
            ]
        ),
        st.text(max_size=40).filter(lambda s: not s.startswith("-")),
        st.text(max_size=20).map(lambda s: f"sqlite:///{s}"),
        st.text(max_size=20).map(lambda s: f"{s}://{s}"),
    ),
    command=st.sampled_from(["campaigns", "show", "show-missing"]),
)
def test_store_paths_and_urls_work_or_refuse_in_one_line(
    store: str, command: str, work: Path
) -> None:
    RAN["cli_store_url"] += 1
    store = store.replace("{work}", str(work))
    if "://" not in store and store not in FIXED_STORES:
        (work / "rel").mkdir(exist_ok=True)
        store = str(work / "rel" / store.lstrip("/"))  # new files only in the work folder
    argv = [*STORE_COMMANDS[command], "--store", store]
    with contextlib.chdir(work):
        assert_handled(argv)


# ---- what the commands below share: targets, files, stores, child processes -----------------
TABLE = ["--target", "table", "--dataset", str(DATASET), "-w", "fileserver", "--nearest"]
SMALL_RUN = ["--budget", "1", "-r", "1", "-q"]
BW = ["-o", "total.bw_mbs:max"]


@pytest.fixture(scope="module")
def toy(work: Path) -> dict[str, str]:
    """A one-parameter space, a program that measures it (prints JSON), and a FIFO."""
    space = work / "toy.yaml"
    space.write_text("name: toy\nparameters:\n  a: {type: int, low: 0, high: 3, default: 1}\n")
    program = work / "bench.py"
    program.write_text('import json, sys\nprint(json.dumps({"v": float(sys.argv[1])}))\n')
    fifo = work / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    return {
        "space": str(space),
        "command": f"{sys.executable} {program} {{a}}",
        "fifo": str(fifo),
        "work": str(work),
    }


def filled(argv: list[str], values: dict[str, str]) -> list[str]:
    return [a.format_map(values) for a in argv]


@pytest.fixture(scope="module")
def model(work: Path) -> dict[str, str]:
    """A surrogate model of `perf` over x, y and c, and its space."""
    import pandas as pd

    from stortune.models import technique
    from stortune.models.surrogate import SurrogateModel

    rows = [(x, y, c) for x in range(5) for y in range(5) for c in "ab"]
    frame = pd.DataFrame(rows, columns=["x", "y", "c"])
    perf = [100.0 + x - y + (5 if c == "b" else 0) for x, y, c in rows]
    estimator = technique("cart").make(minsplit=4, cp=0.0)
    fitted = SurrogateModel.from_fit(estimator.fit(frame, perf), frame, "perf", "cart")
    space = work / "model-space.yaml"
    space.write_text(
        "name: grid\nparameters:\n  x: {type: int, low: 0, high: 4, default: 2}\n"
        "  y: {type: int, low: 0, high: 4, default: 2}\n"
        "  c: {type: categorical, values: [a, b], default: a}\n"
    )
    configs = work / "configs.csv"
    configs.write_text("x,y,c\n1,1,a\n2,3,b\n")
    return {
        "model": str(fitted.save(work / "cart.joblib")),
        "model_space": str(space),
        "configs": str(configs),
    }


# Every option that writes a file, and what it writes: a file in a folder that exists, a file
# whose missing folders the command makes, a folder (made with its parents), or a prefix
# (PREFIX.png and PREFIX.svg, their folders made).
OUTPUTS = {
    "sample --csv": (["sample", "ext4", "-n", "2", "--csv", "{out}"], "file"),
    "export -o": (["export", "tiny", "-o", "{out}", "--store", "{real_store}"], "file"),
    "recommend --out": (["recommend", "t1", "--out", "{out}", "--store", "{tuned}"], "file"),
    "recommend --out-dir": (["recommend", "t1", "--out-dir", "{out}", "--store", "{tuned}"],
                            "folder"),
    "report -o": (["report", "t1", "-o", "{out}", "--store", "{tuned}"], "folder"),
    "rank --plots": (["rank", "--from", str(DATASET), "-w", "fileserver", "--plots", "{out}"],
                     "folder"),
    "rank-study --plot": (["rank-study", str(DATASET), "-w", "fileserver", "--plot", "{out}"],
                          "prefix"),
    "noise --plots": (["noise", "--space", "localfs", *TABLE, "--seconds", "1", "--plots",
                       "{out}"], "folder"),
    "model fit -o": (["model", "fit", "--from", str(DATASET), "-w", "fileserver", "-m",
                      "total.bw_mbs", "-o", "{out}"], "folder"),
    "model predict -o": (["model", "predict", "{model}", "--from", "{configs}", "-o", "{out}"],
                         "made"),
    "model evaluate --plots": (["model", "evaluate", "--from", str(DATASET), "-w", "fileserver",
                                "-m", "total.bw_mbs", "--plots", "{out}"], "folder"),
    "profile-compare --plot": (["profile-compare", "{work}/a.json", "{work}/b.json", "--plot",
                                "{out}"], "prefix"),
    "profile --out": (["profile", "{work}", "--out", "{out}"], "made"),
    "space clean --out": (["space", "clean", "ext4", "--out", "{out}"], "file"),
    "ceph space --out": (["ceph", "space", "--out", "{out}"], "file"),
    "tune --agent": (["tune", *TABLE, "--tuner", "ddpg", "--agent", "{out}", *SMALL_RUN],
                     "file"),
    "demo --out": (["demo", "--out", "{out}"], "folder"),
}  # fmt: skip


@pytest.fixture
def nothing_measures_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands that would format, mount, tune or profile this machine (demo, space clean,
    profile, ceph space) fail the test if they get past their options, instead of running."""
    import stortune.cli.ceph
    import stortune.cli.demo
    import stortune.cli.profile
    import stortune.workflows.clean

    def ran(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a command with a bad output path started its work")

    monkeypatch.setattr(stortune.cli.demo, "run_demo", ran)
    monkeypatch.setattr(stortune.cli.profile, "run_profile", ran)
    monkeypatch.setattr(stortune.workflows.clean, "clean_space", ran)
    monkeypatch.setattr(stortune.cli.ceph, "CephClient", ran)
    import stortune.cephspace.live

    monkeypatch.setattr(stortune.cephspace.live, "space_from_local_cluster", ran)


def bad_outputs(work: Path, kind: str) -> dict[str, str]:
    """Paths an output of this kind may not go to, by what is wrong with them (named .csv, so
    that a command choosing its format by the suffix takes them)."""
    a_file = work / "a-file.csv"
    a_file.write_text("x")
    a_folder = work / "a-folder.csv"
    a_folder.mkdir(exist_ok=True)
    for fifo in (work / "output-fifo.csv", work / "output-fifo.csv.png"):
        if not fifo.exists():
            os.mkfifo(fifo)
    out = {
        "under a file": str(a_file / "out.csv"),
        "/proc": "/proc/stortune-out.csv",
        "/proc/self": "/proc/self/out.csv",
        "/sys": "/sys/kernel/stortune-out.csv",
        "NUL": str(work / "a\x00b.csv"),
        "name too long": str(work / ("x" * 300 + ".csv")),
        "a FIFO no one reads": str(work / "output-fifo.csv"),  # PREFIX.png too
    }
    if kind == "file":
        out["missing folder"] = str(work / "no" / "such" / "out.csv")  # the others make it
    if kind in ("file", "made"):
        out["a directory"] = str(a_folder)
        out["empty"] = ""  # the current folder
    if kind == "folder":
        out["a file"] = str(a_file)
    return out


@pytest.fixture(scope="module")
def tuned(work: Path) -> Path:
    """A store with a tuned campaign 't1' (a table replayed) and its verification."""
    path = work / "tuned.db"
    argv = ["tune", *TABLE, "-o", "total.bw_mbs:max", "--budget", "3", "-r", "2", "-q"]
    argv += ["--verify", "2", "--verify-max", "2", "--name", "t1", "--store", str(path)]
    code, out, err = run_cli(argv)
    assert code == 0, out + err
    return path


JSON_COLUMNS = [
    ("campaigns", "target"),
    ("campaigns", "workload"),
    ("campaigns", "objective"),
    ("campaigns", "settings"),
    ("trials", "config"),
    ("trials", "summary"),
    ("trials", "info"),
    ("runs", "metrics"),
    ("runs", "info"),
]
READERS = {  # a resumed campaign measures for 3 s at most, whatever its stored budget says
    "resume": ["resume", "t1", "--seconds", "3"],
    "recommend": ["recommend", "t1"],
    "report": ["report", "t1", "-o", "{out}"],
    "tune --resume": ["tune", "--resume", "t1", "-q", "--seconds", "3"],
    "rank --from": ["rank", "--from", "t1", "-w", "fileserver"],
}


def tamper(source: Path, path: Path, table: str, column: str, value: Any) -> None:
    shutil.copyfile(source, path)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute(f"UPDATE {table} SET {column} = ?", [value])
        db.commit()


# ---- commands in a child process, held to a time and a memory limit --------------------------
LIMIT_SECONDS = 30  # one command; one that blocks (a FIFO read) meets it
LIMIT_BYTES = 1 << 30  # what one command may allocate: RLIMIT_DATA, not the address space,
# which torch and BLAS reserve by the gigabyte without using it
STORTUNE = [sys.executable, "-m", "stortune"]


@dataclasses.dataclass(frozen=True)
class Finished:
    code: int
    out: str
    err: str
    peak_bytes: int  # the most memory it held, as last seen (every 20 ms)


def run_limited(
    argv: list[str], cwd: Path | None = None, file_bytes: int | None = None
) -> Finished:
    """`stortune ARGV` in a child process whose data may not grow past LIMIT_BYTES, killed
    (with whatever it started) after LIMIT_SECONDS; `file_bytes` caps every file it writes (a
    device that fills up)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (LIMIT_BYTES, LIMIT_BYTES))
        if file_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [*STORTUNE, *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            preexec_fn=limit,
            start_new_session=True,
        )
        deadline = time.monotonic() + LIMIT_SECONDS
        peak = 0
        while not (waited := os.wait4(proc.pid, os.WNOHANG))[0]:
            peak = max(peak, resident_peak(proc.pid))
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                proc.returncode = -signal.SIGKILL
                raise AssertionError(f"stortune {[a[:60] for a in argv]} ran {LIMIT_SECONDS} s")
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(waited[1])
        out.seek(0)
        err.seek(0)
        return Finished(
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            peak,
        )


def resident_peak(pid: int) -> int:
    """The most memory process `pid` has held since it started its program (VmHWM; the
    child's rusage would count the copy of this process it began as)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            line = next((x for x in status if x.startswith("VmHWM:")), "VmHWM: 0 kB")
    except OSError:  # it is exiting
        return 0
    return int(line.split()[1]) * 1024


def assert_refused_within_limits(
    argv: list[str], says: str = "", alone: bool = True, **kwargs: Any
) -> str:
    """The child refused ARGV with exit 2 and one line on stderr, within the limits; `alone`:
    and printed nothing else (it was refused before it did anything)."""
    done = run_limited(argv, **kwargs)
    output = done.out + done.err
    shown = [a[:60] for a in argv]
    assert "Traceback" not in output, (shown, output[-2000:])
    assert done.code == 2, (shown, done.code, output[-2000:])
    lines = [line for line in (output if alone else done.err).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), (shown, output[-2000:])
    assert says in output, (shown, output[-2000:])
    # a command that refuses stays far below the limit: one near it read without bound, and
    # only the limit stopped it
    assert done.peak_bytes < LIMIT_BYTES // 2, (shown, done.peak_bytes)
    return output


# ---- the command line: fio job files --------------------------------------------------------
JOB_TEMPLATES = ["randread", "dbfsync", "fileserver", "metadata", "videoserver"]
# Lines no job file may hold: each runs a program, loads code, reaches beyond the target, or
# names a file outside its directory. {canary} is where it would leave its mark, {outside} a
# folder beside it that must stay empty.
DANGEROUS = [
    "exec_prerun=touch {canary}",
    "exec_postrun=touch {canary}",
    "ioengine=exec\nprogram=/usr/bin/touch\narguments={canary}",
    "ioengine=external:{canary}.so",
    "ioengine={canary}.so",
    "ioengine=net",
    "ioengine=http",
    "ioengine=rbd",
    "ioengine=sg",
    "ioengine=nbd",
    "write_iolog={canary}",
    "read_iolog={canary}",
    "replay_redirect={canary}",
    "filename={canary}",
    "filename=${{DIR}}/a:{canary}",
    "filename=../../{canary_name}",
    "filename=${{DIR}}/../{canary_name}",
    "directory={outside}",
    "directory=${{DIR}}:{outside}",
    "filename_format={canary}",
    "opendir={outside}",
    "write_bw_log={canary}",
    "write_lat_log={canary}",
    "write_iops_log={canary}",
    "write_hist_log={canary}",
    "merge_blktrace_file={canary}",
    "mem=mmapshared:{canary}",
    "iomem=mmap:{canary}",
    "include {canary}",
    "cgroup=stortune-fuzz",
    "uid=65534",
    "gid=65534",
    "ioscheduler=none",
]
# How a line may be written: fio reads each of these as the line (or ignores it); the check
# must read it the same way.
WRITTEN = [
    "{line}",
    "  {line}",
    "\t{line}",
    "{line}  ; a comment",
    "{line}\r",
    "{key} = {value}",
    "{key}\t=\t{value}",
    "[evil]\n{line}",
    "[global]\n{line}",
    "\ufeff{line}",
    "\u00a0{line}",
    "# {line}",
    "; {line}",
    "{upper}",
]
NUMBER_OPTIONS = ["size", "bs", "iodepth", "runtime", "rate", "thinktime", "nrfiles", "offset"]
NUMBER_OPTIONS += ["io_size", "loops", "ramp_time", "rwmixread", "filesize", "startdelay"]
ODD_VALUES = ["0", "-1", "99999999999t", "1e308", "nan", "inf", "abc", "", "${SIZE}"]
ODD_VALUES += ["${SIZE/0}", "${SIZE/-1}", "${RUNTIME/0}", "${NOPE}", "{SIZE}", "$SIZE", "9" * 400]
ODD_VALUES += ["${DIR}", "${DIR/2}", "${", "}", "$$", "%s%n", "\x00", "é名"]
DECLARATIONS = [
    "# stortune objective: nope:max",
    "# stortune objective: total.iops:sideways",
    "# stortune objective: total.iops:max\n# stortune objective: total.bw_mbs:max",
    "# stortune guardrail: x",
    "# stortune guardrail: total.iops:max:200%",
    "# stortune guardrail: total.iops:max:nan",
    "# stortune start: hot",
    "# stortune: junk",
    "# stortune objective:",
    "# stortune objective: " + "x" * 5000,
]
SECTIONS = ["[]", "[", "[global", "[" + "x" * 300 + "]", "[job.with.dots]", "[read]"]
SECTIONS += ["[group1]", "[job]\n[job]", "[global]\n[global]", "[ a b ]", "[\x00]"]
REAL_RUNS = Counter()  # accepted files the fuzz doubted and ran with fio for real (at most 20)


def job_line(template: str, canary: Path, outside: Path) -> str:
    return template.format(canary=canary, canary_name=canary.name, outside=outside)


@st.composite
def job_files(draw: st.DrawFn, canary: Path, outside: Path) -> bytes:
    """A bundled job file with 1-3 mutations: a dangerous line written some way, an option
    given an odd value, a declaration, a section, a line dropped or doubled, the file cut short
    or given bytes that are no text."""
    from stortune.workloads.fio import template_text

    lines = template_text(draw(st.sampled_from(JOB_TEMPLATES))).splitlines()
    for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
        how = draw(st.sampled_from(["danger", "danger", "danger", "value", "declare", "section"]
                                   + ["drop", "double"]))  # fmt: skip
        at = draw(st.integers(0, len(lines)))
        if how == "danger":
            line = job_line(draw(st.sampled_from(DANGEROUS)), canary, outside)
            key, _, value = line.partition("=")
            written = draw(st.sampled_from(WRITTEN)).format(
                line=line, key=key, value=value, upper=line.upper()
            )
            lines[at:at] = written.split("\n")
        elif how == "value":
            option = draw(st.sampled_from(NUMBER_OPTIONS))
            lines[at:at] = [f"{option}={draw(st.sampled_from(ODD_VALUES))}"]
        elif how == "declare":
            lines[at:at] = draw(st.sampled_from(DECLARATIONS)).split("\n")
        elif how == "section":
            lines[at:at] = draw(st.sampled_from(SECTIONS)).split("\n")
        elif how == "drop" and lines:
            del lines[min(at, len(lines) - 1)]
        elif how == "double" and lines:
            lines.insert(at, lines[min(at, len(lines) - 1)])
    data = "\n".join(lines).encode("utf-8", errors="surrogatepass")
    ending = draw(st.sampled_from(["", "", "", "cut", "bytes", "long"]))
    if ending == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif ending == "bytes":
        data += draw(st.binary(min_size=1, max_size=64))
    elif ending == "long":
        data += b"\ndescription=" + b"x" * 200_000
    return data


def doubted(text: str, canary: Path, outside: Path) -> bool:
    """Whether an accepted job still mentions anything dangerous (a comment, say): such a job
    is run with fio for real, to see that it indeed does nothing."""
    words = ("exec", "program", "external", "replay", "iolog", "include", "cgroup", "uid")
    words += ("gid", "ioscheduler", "..", str(canary), str(outside))
    return any(word in text for word in words)


def run_for_real(path: Path, work: Path) -> None:
    """fio runs the job as a campaign would (rendered into a scratch folder), for a second at
    most, each file it writes held to 1 MiB: whatever it was told to run, it runs."""
    from stortune.errors import StortuneError
    from stortune.workloads.fio import FioWorkload

    REAL_RUNS["runs"] += 1
    OUTCOMES["job run by fio for real"] += 1
    folder = Path(tempfile.mkdtemp(dir=work, prefix="run-"))
    try:
        text = FioWorkload(str(path), runtime=1, size="1m").render(folder, 1)
    except StortuneError:
        return
    (folder / "job.fio").write_text(text)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        resource.setrlimit(resource.RLIMIT_DATA, (LIMIT_BYTES, LIMIT_BYTES))

    subprocess.run(
        ["fio", "--output=/dev/null", "job.fio"],
        cwd=folder,
        preexec_fn=limit,
        capture_output=True,
        timeout=LIMIT_SECONDS,
        check=False,
    )
    shutil.rmtree(folder, ignore_errors=True)


@fuzz_settings("job_file")
@given(data=st.data(), runtime=st.sampled_from([[], ["--runtime", "1"]]))
def test_job_files_are_checked_and_never_run_what_they_hold(
    data: st.DataObject, runtime: list[str], work: Path
) -> None:
    RAN["job_file"] += 1
    canary, outside = work / "JOB-CANARY", work / "outside"
    outside.mkdir(exist_ok=True)
    path = work / "fuzzed.fio"
    path.write_bytes(data.draw(job_files(canary, outside)))
    checks = [
        ["workload", "check", str(path), *runtime],
        ["sweep", "--dry-run", "--target", "tmpfs", "--space", "tmpfs", "-w", str(path), "-r",
         "1", *runtime, "--store", str(work / "jobs.db")],
    ]  # fmt: skip
    for argv in checks:  # a campaign reads the file as `workload check` does, and more
        code, _ = assert_handled(argv)
        text = path.read_bytes().decode(errors="replace")
        if code == 0 and doubted(text, canary, outside) and REAL_RUNS["runs"] < 20:
            run_for_real(path, work)
        if code != 0:
            break
    assert not canary.exists(), "a job file ran a program or wrote outside its directory"
    assert not any(outside.iterdir()), "a job file wrote outside its directory"


# ---- the command line: numbers ----------------------------------------------------------------
EXTREME_TEXT = ["-1", "0", "-0", "1", "2", "0.5", "-0.5", "1e-320", "1e308", "-1e308", "1e309"]
EXTREME_TEXT += ["inf", "-inf", "Infinity", "nan", "NaN", "-nan", str(2**31), str(2**32 - 1)]
EXTREME_TEXT += [str(2**32), str(2**63), str(2**64), "9" * 20, "9" * 400, "-" + "9" * 20]
EXTREME_TEXT += ["abc", "", " ", "0x10", "1_000", "１", "3.0", "1e3", "--", "-", "5 5", "\x00"]
# Each command's numeric options and the value each takes when another is fuzzed (small, so a
# command that accepts its values measures for a moment). Table replays: nothing is touched.
NUMERIC = {
    "run": (
        ["run", "--space", "localfs", *TABLE, "-o", "total.bw_mbs:max", "-q", "--tuner",
         "random"],
        {"--budget": "1", "--repetitions": "1", "--seconds": "", "--target-ci": "",
         "--min-repetitions": "1", "--timeout": "", "--seed": "", "--busy-wait": "",
         "--reference-every": "0", "--runtime": "", "--noise": "", "--noise-seed": ""},
    ),
    "tune": (
        ["tune", *TABLE, "-o", "total.bw_mbs:max", "-q", "--tuner", "random", "--no-intensify"],
        {"--budget": "1", "--repetitions": "1", "--seconds": "", "--verify": "0",
         "--verify-max": "", "--verify-seconds": "", "--top-k": "", "--rank-budget": "",
         "--timeout": "", "--seed": "", "--busy-wait": "", "--reference-every": "0",
         "--runtime": "", "--noise": "", "--noise-seed": ""},
    ),
    "sweep": (
        ["sweep", "--space", "localfs", *TABLE, "-q", "--design", "random"],
        {"--limit": "2", "--levels": "", "--repetitions": "1", "--seed": "", "--timeout": "",
         "--busy-wait": "", "--reference-every": "0", "--runtime": "", "--noise": "",
         "--noise-seed": ""},
    ),
    "noise": (
        ["noise", "--space", "localfs", *TABLE],
        {"--seconds": "1", "--target-ci": "", "--busy-wait": "", "--runtime": "",
         "--noise": "", "--noise-seed": ""},
    ),
    "sample": (["sample", "ext4"], {"-n": "3", "--seed": "", "--levels": ""}),
    "rank": (
        ["rank", "--space", "localfs", *TABLE, "-o", "total.bw_mbs:max"],
        {"--budget": "2", "--repetitions": "1", "--timeout": "", "--busy-wait": "",
         "--reference-every": "0", "--runtime": "", "--noise": "", "--noise-seed": ""},
    ),
    "workload check": (
        ["workload", "check", str(resources.files("stortune") / "workloads/jobs/randread.fio")],
        {"--runtime": ""},
    ),
}  # fmt: skip
# Above these, a value the command takes only makes it measure longer: it is measured with
# the small value instead (the value itself was checked when the command line was read).
COSTLY = {"--budget": 3, "--repetitions": 2, "--seconds": 5, "--limit": 5, "--levels": 3}
COSTLY |= {"--verify": 1, "--verify-max": 2, "--top-k": 50, "--rank-budget": 3, "-n": 50}
COSTLY |= {"--min-repetitions": 2, "--verify-seconds": 5}


@fuzz_settings("numeric")
@given(
    data=st.data(),
    command=st.sampled_from(list(NUMERIC)),
    value=st.one_of(
        st.sampled_from(EXTREME_TEXT),
        st.sampled_from(EXTREME_TEXT),
        st.integers(min_value=-(10**25), max_value=10**25).map(str),
        st.floats().map(repr),
    ),
)
def test_extreme_numbers_are_refused_as_the_command_line_is_read(
    data: st.DataObject, command: str, value: str, work: Path
) -> None:
    RAN["numeric"] += 1
    base, options = NUMERIC[command]
    option = data.draw(st.sampled_from(sorted(options)))
    given = {k: v for k, v in options.items() if v and k != option}
    argv = [*base, *(x for pair in given.items() for x in pair), option, value]
    small = option not in COSTLY or _small(value, COSTLY[option])
    if command == "sweep" and not small:
        argv.append("--dry-run")
    elif not small:
        argv[argv.index(option) + 1] = str(COSTLY[option])
    if command not in ("sample", "workload check"):
        argv += ["--store", str(work / f"numbers-{RAN['numeric']}.db")]
    code, output = assert_handled(argv, codes=(0, 1, 2), alone=False)
    refused = code == 2 and ("Invalid value" in output or "No such option" in output)
    OUTCOMES[f"numeric {'refused at parse' if refused else f'exit {code}'}"] += 1


# ---- the command line: output paths -----------------------------------------------------------
# Where a good path is tried too: commands that write in a moment and touch nothing else.
CHEAP_OUTPUTS = ["sample --csv", "export -o", "recommend --out", "model predict -o"]


@fuzz_settings("output_path")
@given(
    data=st.data(),
    option=st.sampled_from(list(OUTPUTS)),
    bad=st.booleans(),
)
@pytest.mark.usefixtures("nothing_measures_this_machine")
def test_output_paths_are_checked_before_anything_runs(
    data: st.DataObject,
    option: str,
    bad: bool,
    work: Path,
    real_store: Path,
    tuned: Path,
    model: dict[str, str],
) -> None:
    RAN["output_path"] += 1
    argv, kind = OUTPUTS[option]
    folder = work / "outputs"
    folder.mkdir(exist_ok=True)
    if bad or option not in CHEAP_OUTPUTS:
        what, path = data.draw(st.sampled_from(sorted(bad_outputs(folder, kind).items())))
    else:
        what = "any"
        path = data.draw(
            st.one_of(
                st.sampled_from(["out.csv", "/dev/null", "/dev/full", "a-file.csv", "./x.csv"]),
                st.text(max_size=30).filter(lambda t: "/" not in t and not t.startswith("-")),
                st.text(max_size=30).map(lambda t: f"new/{t}.csv"),
            )
        )
    values = {"real_store": str(real_store), "tuned": str(tuned), "work": str(folder), **model}
    before = sorted(p.name for p in folder.iterdir())
    with contextlib.chdir(folder):
        code, output = assert_handled([a.format_map({**values, "out": path}) for a in argv])
    if what != "any":
        assert code == 2, (option, what, output[-2000:])
        assert sorted(p.name for p in folder.iterdir()) == before, (option, what)
    OUTCOMES[f"output {what if what == 'any' else 'bad'} exit {code}"] += 1


# ---- the command line: tampered stores --------------------------------------------------------
TAMPERED_COLUMNS = [*JSON_COLUMNS, ("environments", "fingerprint")]
# What each command reads; a cell it reads that has the wrong shape must stop it, naming it.
READS = {
    "campaigns": {"campaigns"},
    "show": {"campaigns", "trials", "runs"},
    "resume": {"campaigns", "trials", "runs"},
    "tune --resume": {"campaigns", "trials", "runs"},
    "recommend": {"campaigns", "trials", "runs"},
    "rank --from": {"campaigns", "trials", "runs"},
    "report": {"campaigns", "trials", "runs"},  # a section it cannot build says why, in it
}
TAMPER_COMMANDS = {**READERS, "campaigns": ["campaigns"], "show": ["show", "t1"]}
# The keys stortune reads from each JSON column: junk under them goes deepest.
OWN_KEYS = {
    "target": ["kind", "dataset", "nearest", "noise", "space"],
    "workload": ["workloads"],
    "objective": ["metric", "direction", "scalarizer", "guardrails"],
    "settings": ["budget", "repetitions", "seconds", "intensify", "of", "rules", "timeout"],
    "config": ["fs", "journal_mode", "read_ahead_kb"],
    "summary": ["fileserver"],
    "info": ["source", "label", "race", "step", "at_seq", "disturbed_attempts"],
    "metrics": ["total.bw_mbs", "total.iops"],
    "fingerprint": ["kernel", "host"],
}
JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)


def json_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    )


JSON_VALUES = st.recursive(JSON_LEAVES, json_containers, max_leaves=6)


@st.composite
def junk_cells(draw: st.DrawFn, column: str) -> tuple[Any, bool]:
    """A value for a JSON cell, and whether its shape is wrong on its face (no JSON, or no
    object where stortune writes one)."""
    how = draw(st.sampled_from(["text", "json", "json", "own", "own", "own", "bytes"]))
    if how == "text":
        text = draw(st.sampled_from(["{", "[1,", "{'a': 1}", "NaN", "1e999", "nul", "", "}"]))
        return text, True
    if how == "bytes":
        return draw(st.binary(min_size=1, max_size=20)), True
    if how == "json":
        value = draw(JSON_VALUES)
        nullable = column in ("summary", "info")
        broken = not isinstance(value, dict) and not (value is None and nullable)
        return json.dumps(value), broken
    members = draw(
        st.dictionaries(st.sampled_from(OWN_KEYS[column]), JSON_VALUES, min_size=1, max_size=3)
    )
    return json.dumps(members), False


@fuzz_settings("tampered_store")
@given(
    data=st.data(),
    cell=st.sampled_from(TAMPERED_COLUMNS),
    command=st.sampled_from(
        ["campaigns", "show", "resume", "tune --resume", "recommend"] + ["rank --from", "report"]
    ),  # fmt: skip
    every_row=st.booleans(),
)
def test_tampered_stores_are_refused_naming_the_campaign_and_the_column(
    data: st.DataObject,
    cell: tuple[str, str],
    command: str,
    every_row: bool,
    work: Path,
    tuned: Path,
) -> None:
    RAN["tampered_store"] += 1
    table, column = cell
    value, broken = data.draw(junk_cells(column))
    path = work / "tampered.db"
    for extra in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        extra.unlink(missing_ok=True)
    shutil.copyfile(tuned, path)
    with contextlib.closing(sqlite3.connect(path)) as db:
        where = "" if every_row else f" WHERE rowid = (SELECT max(rowid) FROM {table})"
        db.execute(f"UPDATE {table} SET {column} = ?{where}", [value])
        db.commit()
    argv = [a.format(out=work / "tampered-report") for a in TAMPER_COMMANDS[command]]
    code, output = assert_handled([*argv, "--store", str(path)], codes=(0, 1, 2), alone=False)
    named = f"{table}.{column}" in output and "campaign 't1" in output
    if broken and table in READS[command] and every_row:
        assert code == 2 and named, (command, table, column, value, output[-2000:])
    if code == 2 and broken:
        assert named or f"{table}.{column}" not in output, output[-2000:]
    OUTCOMES[f"tampered exit {code}{' named' if named else ''}"] += 1


# ---- what the fuzz found, kept as plain tests -----------------------------------------------
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("forbid: " + "not " * 10_000 + "True", "at most 1000 characters"),
        ("forbid: '" + "(" * 400 + "a" + ")" * 400 + "'", "cannot parse"),
        ("forbid: " + "+".join(["a"] * 300) + " > 1", "nested deeper than"),
        ("forbid: \"'x' * 10**9 == 'y'\"", "arithmetic on str"),
        ("forbid: ((10**64)**64)**64 > a", "too large"),
        ("forbid: \"__import__('os').system('touch x')\"", "only the functions"),
        ("forbid: a.__class__ == 1", "Attribute is not allowed"),
        ("require: 5", "an expression is text"),
    ],
)
def test_expressions_that_broke_are_refused_in_one_line(text: str, says: str) -> None:
    base = "name: x\nparameters:\n  a: {type: int, low: 0, high: 3, default: 1}\nconstraints:\n"
    with pytest.raises(StortuneError, match=re.escape(says)) as caught:
        parse_space(base + "  - " + text + "\n", "x.yaml")
    assert len(str(caught.value).splitlines()) == 1


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("a: {type: float, low: 0, high: .inf, default: 1}", "'high' must be a finite number"),
        ("a: {type: float, low: .nan, high: 1, default: 1}", "'low' must be a finite number"),
        ("a: {type: int, low: 0, high: " + "9" * 400 + ", default: 1}", "within ±2**63"),
        ("a: {type: ordinal, values: [1, .inf], default: 1}", "'values' holds inf"),
        ("a: {type: categorical, values: [[1], x], default: x}", "'values' holds [1]"),
        ("'fs; rm -rf /': {type: int, low: 0, high: 3, default: 1}", "parameter name"),
        ("'': {type: int, low: 0, high: 3, default: 1}", "parameter name"),
        ("1: {type: int, low: 0, high: 3, default: 1}", "name is text"),
        ("a: {type: int, low: 0, high: 3, default: 1, log: 'no'}", "'log' must be true or false"),
        ("a: {type: int, low: 0, high: 3, default: 1, unit: [1]}", "'unit' must be text"),
        (
            "a: {type: int, low: 0, high: 3, default: 1, extendable: true, hard_high: x}",
            "hard_high",
        ),
        ("a: " + "[" * 1000 + "]" * 1000, "nested deeper than 64"),
        ("a: &r [*r]", "an alias refers to a value that contains it"),
    ],
)
def test_space_files_that_broke_are_refused_in_one_line(spec: str, says: str) -> None:
    with pytest.raises(StortuneError, match=re.escape(says)) as caught:
        parse_space(f"name: x\nparameters:\n  {spec}\n", "x.yaml")
    message = str(caught.value)
    assert message.startswith("x.yaml") and len(message.splitlines()) == 1


def test_an_alias_bomb_is_refused_before_it_is_expanded() -> None:
    bomb = alias_bomb(9, 10)  # 10**9 values once expanded
    text = f"name: x\ndescription: {bomb.text}\nparameters:\n  a: {{type: bool, default: true}}\n"
    with time_limit(5), pytest.raises(StortuneError, match="once aliases are expanded"):
        parse_space(text, "bomb.yaml")


def test_parameter_names_of_every_bundled_space_fit_the_rule() -> None:
    for name in [*SMALL_SPACES, "ceph"]:
        doc = yaml.safe_load(bundled_text(name))
        assert all(NAME.fullmatch(p) for p in doc["parameters"]), name


def test_space_check_of_a_huge_space_says_the_grid_size_without_enumerating_it() -> None:
    code, output = assert_handled(["space", "check", "ceph"])
    assert code == 0 and "too many to count" in " ".join(output.split())


@pytest.mark.parametrize(
    "argv",
    [
        ["sample", "ext4", "-n", "3", "--seed", "-1"],
        ["sample", "ext4", "-n", "100000000"],
        ["sample", "ext4", "--levels", "0", "-m", "factorial"],
        ["sample", "ceph", "-m", "factorial", "-n", "3"],
        ["sample", "ext4", "-n", "3", "--csv", "/no/such/folder/x.csv"],
        ["space", "check", "ext4", "--levels", "-1"],
        ["space", "check", "ext4", "-c", "block_size=nan"],
        ["space", "check", "/"],
        ["space", "check", "x" * 5_000],
        ["campaigns", "--store", "\x00"],
        ["campaigns", "--store", "postgresql://host:abc/x"],
    ],
)
def test_values_that_broke_are_refused_in_one_line(argv: list[str]) -> None:
    code, _ = assert_handled(argv)
    assert code == 2


@pytest.mark.parametrize(
    ("tables", "named"),
    [(["notes"], "notes"), (["runs"], "runs"), (["runs", "x"], "x"), (["meta"], "meta")],
)
def test_a_foreign_sqlite_file_is_refused_and_left_alone(
    tmp_path: Path, tables: list[str], named: str
) -> None:
    """Even one whose table has a name stortune uses too (`runs`): a stortune store has its
    `campaigns`, and no table stortune did not create."""
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        for table in tables:
            db.execute(f"CREATE TABLE {table} (text)")
        db.commit()
    code, output = assert_handled(["campaigns", "--store", str(path)])
    assert code == 2 and f"another program's database (tables {named})" in output
    with contextlib.closing(sqlite3.connect(path)) as db:
        found = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert found == set(tables)


def test_a_store_with_a_broken_cell_is_one_line(tmp_path: Path, real_store: Path) -> None:
    path = tmp_path / "broken.db"
    shutil.copyfile(real_store, path)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE campaigns SET target = '{not json'")
        db.commit()
    for argv in (
        ["campaigns"],
        ["show", "tiny"],
        ["export", "tiny", "-o", str(tmp_path / "x.csv")],
    ):
        code, output = assert_handled([*argv, "--store", str(path)])
        assert code == 2 and "error: cannot read campaign 'tiny'" in output
        assert "campaigns.target is not JSON" in output


# ---- what the fuzz found: numbers, input files, output paths, tampered stores ----------------
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--space", "localfs", *TABLE, *BW, *SMALL_RUN, "--seed", "-1"], "--seed"),
        (["run", "--space", "localfs", *TABLE, *BW, *SMALL_RUN, "--seed", "9" * 20], "--seed"),
        (["tune", *TABLE, *BW, *SMALL_RUN, "--verify", "0", "--seed", "4294967296"], "--seed"),
        (["sweep", "--space", "localfs", *TABLE, "--dry-run", "--seed", "-5"], "--seed"),
        (["run", "--space", "{space}", "--command", "{command}", "-o", "v:max", *SMALL_RUN,
          "--timeout", "1e308"], "--timeout"),
        (["run", "--space", "{space}", "--command", "{command}", "-o", "v:max", *SMALL_RUN,
          "--timeout", "inf"], "--timeout"),
        (["run", "--space", "{space}", "--command", "'", "-o", "v:max", *SMALL_RUN],
         "No closing quotation"),
        (["run", "--space", "localfs", "-w", "randread", *SMALL_RUN, "--image-size",
          "99999999999t"], "--image-size"),
        (["sweep", "--space", "localfs", "--dry-run", "--image-size", "99999999999t"],
         "--image-size"),
        (["sweep", "--space", "localfs", *TABLE, "--dry-run", "--levels", "9" * 20], "--levels"),
        (["noise", "--space", "localfs", *TABLE, "--seconds", "nan"], "--seconds"),
        (["noise", "--space", "localfs", *TABLE, "--seconds", "-inf"], "--seconds"),
        (["sweep", "--space", "localfs", *TABLE, "--design", "random", "--limit", "2147483648",
          "--dry-run"], "--limit"),
    ],
)  # fmt: skip
def test_numbers_that_broke_are_refused_before_anything_runs(
    argv: list[str], says: str, toy: dict[str, str], work: Path
) -> None:
    store = work / f"numbers-{len(list(work.glob('numbers-*')))}.db"
    code, output = assert_handled([*filled(argv, toy), "--store", str(store)])
    assert code == 2 and says in output, output[-2000:]
    assert not store.exists(), "a refused command stored something"


def test_a_space_of_700_int_parameters_is_counted_and_refused_for_a_factorial(
    work: Path,
) -> None:
    path = work / "wide.yaml"
    params = "".join(f"  p{i}: {{type: int, low: 0, high: 10, default: 1}}\n" for i in range(700))
    path.write_text(f"name: wide\nparameters:\n{params}")
    for argv in (["space", "check", str(path)], ["space", "check", str(path), "--json"]):
        code, output = assert_handled(argv)
        assert code == 0, output[-2000:]
    assert "too many to count" in " ".join(run_cli(["space", "check", str(path)])[1].split())
    code, output = assert_handled(["sample", str(path), "--method", "factorial"])
    assert code == 2 and "more than 250,000" in output, output[-2000:]


# 19 bad objectives and guardrails on the targets whose metric names are known (a table's
# columns, fio's report read from a program, a model's metric): each was measured, then failed.
@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--space", "localfs", *TABLE, *SMALL_RUN, "-o", "nope:max"],
        ["run", "--space", "localfs", *TABLE, *SMALL_RUN, "-o", "total.bw_mbs:max", "--guardrail",
         "nope:max"],
        ["run", "--space", "localfs", *TABLE, *SMALL_RUN, "-o", "total.bw_mbs:max", "-o",
         "nope:min"],
        ["tune", *TABLE, *SMALL_RUN, "--verify", "0", "-o", "nope:max"],
        ["tune", *TABLE, *SMALL_RUN, "--verify", "0", "-o", "total.iops:max", "--guardrail",
         "nope:min:5%"],
        ["sweep", "--space", "localfs", *TABLE, "--design", "random", "-n", "2", "-r", "1", "-q",
         "-o", "nope:max"],
        ["sweep", "--space", "localfs", *TABLE, "--design", "random", "-n", "2", "-r", "1", "-q",
         "-o", "total.bw_mbs:max", "--guardrail", "nope:max"],
        ["noise", "--space", "localfs", *TABLE, "--seconds", "1", "-o", "nope"],
        ["rank", "--budget", "3", "--space", "localfs", *TABLE, "-o", "nope:max"],
        ["run", "--space", "{space}", "--command", "{command}", "--output", "fio", *SMALL_RUN,
         "-o", "v:max"],
        ["tune", "--space", "{space}", "--command", "{command}", "--output", "fio", *SMALL_RUN,
         "--verify", "0", "-o", "v:max"],
        ["sweep", "--space", "{space}", "--command", "{command}", "--output", "fio", "-r", "1",
         "-q", "-o", "v:max"],
        ["noise", "--space", "{space}", "--command", "{command}", "--output", "fio", "--seconds",
         "1", "-o", "v"],
        ["rank", "--budget", "3", "--space", "{space}", "--command", "{command}", "--output",
         "fio", "-o", "v:max"],
        ["run", "--space", "{model_space}", "--model", "{model}", *SMALL_RUN, "-o", "nope:max"],
        ["tune", "--space", "{model_space}", "--model", "{model}", *SMALL_RUN, "--verify", "0",
         "-o", "nope:max"],
        ["sweep", "--space", "{model_space}", "--model", "{model}", "-r", "1", "-q", "-o",
         "nope:max"],
        ["noise", "--space", "{model_space}", "--model", "{model}", "--seconds", "1", "-o",
         "nope"],
        ["rank", "--budget", "3", "--space", "{model_space}", "--model", "{model}", "-o",
         "nope:max"],
    ],
)  # fmt: skip
def test_a_metric_no_run_can_report_is_refused_before_measuring(
    argv: list[str], toy: dict[str, str], model: dict[str, str], work: Path
) -> None:
    store = work / f"metrics-{len(list(work.glob('metrics-*')))}.db"
    code, output = assert_handled([*filled(argv, toy | model), "--store", str(store)])
    assert code == 2 and "is not a metric" in output, output[-2000:]
    assert not store.exists(), "a refused command stored something"


# Files stortune reads that never end (/dev/zero, /dev/urandom) or block until someone writes
# (a FIFO): each is refused in one line, before any of it is read.
ENDLESS_READS = {
    "dataset": ["tune", "--target", "table", "--dataset", "{input}", "-o", "x:max", *SMALL_RUN],
    "job file": ["run", "--target", "tmpfs", "--space", "tmpfs", "-w", "{input}", *SMALL_RUN],
    "workload check": ["workload", "check", "{input}"],
    "import": ["import", "{input}", "--name", "x", "--store", "{work}/import.db"],
    "rank --from": ["rank", "--from", "{input}"],
    "model fit --from": ["model", "fit", "--from", "{input}", "-o", "{work}/m.joblib"],
    "tune --compare": ["tune", *TABLE, "--compare", "{input}", *SMALL_RUN, "--verify", "0"],
    "space file": ["space", "check", "{input}"],
    "profile": ["profile-compare", "{input}", "{input}"],
}


ENDLESS_CASES = [(what, source) for what in ENDLESS_READS for source in ("/dev/zero", "fifo")]
ENDLESS_CASES += [("dataset", "/dev/urandom"), ("job file", "/dev/urandom")]


@pytest.mark.parametrize(("what", "source"), ENDLESS_CASES)
def test_an_endless_or_blocking_input_file_is_refused_within_the_limits(
    what: str, source: str, toy: dict[str, str]
) -> None:
    given = toy["fifo"] if source == "fifo" else source
    argv = [a.format(input=given, work=toy["work"]) for a in ENDLESS_READS[what]]
    assert_refused_within_limits(argv, "not a regular file")


def test_a_dataset_larger_than_the_bound_is_refused_without_reading_it(work: Path) -> None:
    big = work / "big.csv"
    with big.open("wb") as f:
        f.truncate(300 << 20)  # sparse: 300 MiB of zeros that take no room
    assert_refused_within_limits(
        ["import", str(big), "--store", str(work / "big.db")], "larger than"
    )


def test_a_random_sweep_of_two_billion_configs_is_refused_at_once(work: Path) -> None:
    argv = ["sweep", "--space", "localfs", *TABLE, "--design", "random"]
    argv += ["--limit", "2147483648", "--store", str(work / "limit.db")]
    assert_refused_within_limits(argv, "--limit")


@pytest.mark.usefixtures("nothing_measures_this_machine")
@pytest.mark.parametrize("option", list(OUTPUTS))
def test_every_output_path_is_checked_before_anything_runs(
    option: str,
    work: Path,
    real_store: Path,
    tuned: Path,
    model: dict[str, str],
) -> None:
    argv, kind = OUTPUTS[option]
    values = {"real_store": str(real_store), "tuned": str(tuned), "work": str(work), **model}
    for what, path in bad_outputs(work, kind).items():
        before = sorted(p.name for p in work.iterdir())
        with contextlib.chdir(work):
            code, output = assert_handled([a.format_map({**values, "out": path}) for a in argv])
        assert code == 2, (option, what, output[-2000:])
        assert sorted(p.name for p in work.iterdir()) == before, (option, what)


@pytest.mark.parametrize("option", ["sample --csv", "recommend --out", "model predict -o"])
def test_a_full_device_is_one_line(
    option: str, work: Path, real_store: Path, tuned: Path, model: dict[str, str]
) -> None:
    argv, _ = OUTPUTS[option]
    values = {"real_store": str(real_store), "tuned": str(tuned), "out": "/dev/full", **model}
    code, output = assert_handled([a.format_map(values) for a in argv])
    assert code == 2 and "No space left on device" in output, output[-2000:]


@pytest.mark.parametrize("option", ["report -o", "rank --plots"])
def test_a_folder_that_fills_up_is_one_line(option: str, tuned: Path, tmp_path: Path) -> None:
    """Every file the command writes may hold 40 KiB: the store's own (its 32 KiB index of
    the log) fit, a page or a figure does not."""
    argv, _ = OUTPUTS[option]
    values = {"tuned": str(tuned), "out": str(tmp_path / "out")}
    argv = [a.format_map(values) for a in argv]
    assert_refused_within_limits(argv, "cannot write", alone=False, file_bytes=40 << 10)


# Text that is no JSON in every column for every command; JSON of another type for resume.
TAMPERED = [(command, *cell, "{not json") for command in READERS for cell in JSON_COLUMNS]
TAMPERED += [("resume", *cell, junk) for cell in JSON_COLUMNS for junk in ("5", '"x"', "[1]")]


@pytest.mark.parametrize(("command", "table", "column", "junk"), TAMPERED)
def test_a_tampered_json_column_names_the_campaign_and_the_column(
    command: str, table: str, column: str, junk: str, tuned: Path, tmp_path: Path
) -> None:
    path = tmp_path / "tampered.db"
    tamper(tuned, path, table, column, junk)
    argv = [a.format(out=tmp_path / "report") for a in READERS[command]]
    code, output = assert_handled([*argv, "--store", str(path)])
    assert code == 2, output[-2000:]
    assert "campaign 't1" in output and f"{table}.{column}" in output, output[-2000:]


def test_the_check_of_stored_settings_knows_what_the_engine_stores() -> None:
    """Every setting the engine's settings classes read back is checked when a campaign is
    read, and what they write passes."""
    from stortune.measure.runner import RunRules
    from stortune.measure.sweeping import SweepSettings
    from stortune.measure.tuning import TuneSettings
    from stortune.measure.verify import VerifyRules
    from stortune.storecells import CAMPAIGN_CELLS, SETTINGS, VERIFY_SETTINGS

    classes = (RunRules, TuneSettings, SweepSettings)
    assert {f.name for c in classes for f in dataclasses.fields(c)} <= set(SETTINGS)
    assert {f.name for f in dataclasses.fields(VerifyRules)} - {"min_rounds"} == set(
        VERIFY_SETTINGS
    )
    for written in (*(c().to_dict() for c in classes), VerifyRules().to_settings()):
        assert CAMPAIGN_CELLS["settings"](written) is None, written


def test_usage_errors_are_one_line() -> None:
    code, out, err = run_cli(["sample", "ext4", "-n", "abc"])
    assert code == 2
    assert len([line for line in (out + err).splitlines() if line.strip()]) <= 3, out + err


def test_the_fuzz_ran_every_input(request: pytest.FixtureRequest) -> None:
    """The property tests above together ran STORTUNE_FUZZ_EXAMPLES inputs (when all ran)."""
    if set(RAN) != set(SHARES):
        pytest.skip(f"only some fuzz tests ran: {sorted(RAN)}")
    expected = sum(max(1, round(TOTAL * share)) for share in SHARES.values())
    print(f"fuzz inputs: {sum(RAN.values())} ({dict(RAN)}); {dict(OUTCOMES)}", file=sys.stderr)
    assert sum(RAN.values()) >= expected
