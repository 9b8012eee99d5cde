"""Bad input never escapes as a traceback: property-based fuzzing of space files, expressions,
command-line values and stores.

Whatever a user hands stortune (a space file someone else wrote, a value typed wrong, a store a
disk corrupted), a command either works (exit 0) or refuses in one line on stderr (exit 2), runs
no code it was given, and neither hangs nor exhausts memory. Space files and expressions are
fuzzed both through `parse_space` (fast, so most inputs go there) and through the command line;
command-line values and stores only through the command line.

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
import shutil
import signal
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

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
SHARES = {
    "space_text": 0.36,
    "expressions": 0.24,
    "cli_space": 0.12,
    "cli_sample": 0.06,
    "cli_run": 0.06,
    "cli_store_file": 0.10,
    "cli_store_url": 0.06,
}
RAN: Counter[str] = Counter()
OUTCOMES: Counter[str] = Counter()  # how inputs ended, printed at the end: a fuzz that only
# ever hits the first check proves little
TIME_LIMIT = 20  # seconds for one input: a hang is a failure, not a slow test

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


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `stortune ARGV`, run in this process: the rich consoles
    write to whatever sys.stdout/sys.stderr are when they print."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with (
            time_limit(TIME_LIMIT),
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


def assert_handled(argv: list[str], codes: tuple[int, ...] = (0, 2)) -> tuple[int, str]:
    """The command works, or refuses in one line without a traceback: on exit 2 all it prints
    is that line; on exit 1 (a campaign that ran and achieved nothing) stdout has its summary
    and stderr the one line. Returns the exit code and everything printed."""
    code, out, err = run_cli(argv)
    output = out + err
    shown = [a[:60] for a in argv]
    assert "Traceback" not in output, (shown, output[-2000:])
    assert code in codes, (shown, code, output[-2000:])
    if code != 0:
        lines = [line for line in (output if code == 2 else err).splitlines() if line.strip()]
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
        assert code == 2 and "error: cannot read the store" in output


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
