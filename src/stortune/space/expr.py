"""A small, safe expression language for constraints and conditions.

Space files say things like ``inode_size <= block_size``, ``cache_kv_ratio + cache_meta_ratio
<= 1`` or ``fs in ('ext3', 'ext4')``. The text is parsed with Python's `ast` module, checked
against a whitelist of node types, and compiled into nested closures: user text is never given to
`eval`, and names can only refer to parameters.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stortune.errors import SpaceError

Evaluator = Callable[[Mapping[str, Any]], Any]

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "log2": math.log2,
    "log10": math.log10,
}
_CONSTANTS = {"true": True, "false": False, "True": True, "False": False}
_MAX_POWER = 64
# Bounds that keep a hostile space file from exhausting the parser, the stack or the memory: the
# bundled spaces' longest expression has about 100 characters and 6 levels of nesting.
MAX_LENGTH = 1000
MAX_DEPTH = 100
_MAX_BITS = 10_000  # an integer result of ** (2**64 needs 65)


class ExpressionError(SpaceError):
    """An expression that does not parse or refers to something it may not."""


@dataclass(frozen=True)
class Expression:
    """A compiled expression: its text, the parameter names it reads, and its evaluator."""

    text: str
    names: frozenset[str]
    _evaluate: Evaluator

    def __call__(self, values: Mapping[str, Any]) -> Any:
        return self._evaluate(values)


def compile_expression(text: str, known_names: set[str] | None = None) -> Expression:
    """Parse `text` into an Expression; names must be in `known_names` when that is given."""
    if not isinstance(text, str):
        kind = "a list" if isinstance(text, list) else "a mapping" if isinstance(text, dict) else ""
        raise ExpressionError(f"an expression is text, not {kind or repr(text)[:60]}")
    if not text.strip():
        raise ExpressionError("empty expression")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(
            f"{text[:40]!r}...: an expression has at most {MAX_LENGTH} characters, not {len(text)}"
        )
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"cannot parse {text!r}: {exc.msg}") from None
    except (MemoryError, RecursionError, ValueError):
        # CPython's parser gives up on deep nesting (10,000 `not`s) with these, not SyntaxError
        raise ExpressionError(f"cannot parse {text[:40]!r}...: nested too deeply") from None
    if _depth(tree.body) > MAX_DEPTH:
        raise ExpressionError(f"{text[:40]!r}...: nested deeper than {MAX_DEPTH} levels")
    names: set[str] = set()
    evaluate = _compile(tree.body, text, names)
    if known_names is not None:
        unknown = sorted(names - known_names)
        if unknown:
            raise ExpressionError(f"{text!r} names unknown parameter(s): {', '.join(unknown)}")
    return Expression(text.strip(), frozenset(names), evaluate)


def _compile(node: ast.AST, text: str, names: set[str]) -> Evaluator:
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, int | float | str | bool) and node.value is not None:
            raise ExpressionError(f"{text!r}: constant {node.value!r} is not allowed")
        value = node.value
        return lambda _v: value
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            constant = _CONSTANTS[node.id]
            return lambda _v: constant
        name = node.id
        names.add(name)
        return lambda v: v[name]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _compile(node.left, text, names), _compile(node.right, text, names)
        op = _arithmetic(_BINARY[type(node.op)])
        if isinstance(node.op, ast.Pow):
            return lambda v: _bounded_power(left(v), right(v))
        return lambda v: op(left(v), right(v))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        operand = _compile(node.operand, text, names)
        uop = _UNARY[type(node.op)]
        return lambda v: uop(operand(v))
    if isinstance(node, ast.BoolOp):
        parts = [_compile(value, text, names) for value in node.values]
        if isinstance(node.op, ast.And):
            return lambda v: all(p(v) for p in parts)
        return lambda v: any(p(v) for p in parts)
    if isinstance(node, ast.Compare):
        return _compile_compare(node, text, names)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        items = [_compile(e, text, names) for e in node.elts]
        return lambda v: tuple(i(v) for i in items)
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
            raise ExpressionError(
                f"{text!r}: only the functions {', '.join(sorted(_FUNCTIONS))} may be called"
            )
        func = _FUNCTIONS[node.func.id]
        args = [_compile(a, text, names) for a in node.args]
        return lambda v: func(*(a(v) for a in args))
    if isinstance(node, ast.IfExp):
        test, body, orelse = (_compile(n, text, names) for n in (node.test, node.body, node.orelse))
        return lambda v: body(v) if test(v) else orelse(v)
    raise ExpressionError(f"{text!r}: {type(node).__name__} is not allowed in an expression")


def _compile_compare(node: ast.Compare, text: str, names: set[str]) -> Evaluator:
    left = _compile(node.left, text, names)
    ops = []
    for op in node.ops:
        if type(op) not in _COMPARE:
            raise ExpressionError(f"{text!r}: comparison {type(op).__name__} is not allowed")
        ops.append(_COMPARE[type(op)])
    rights = [_compile(c, text, names) for c in node.comparators]

    def evaluate(values: Mapping[str, Any]) -> bool:
        current = left(values)
        for op, right in zip(ops, rights, strict=True):
            following = right(values)
            if not op(current, following):
                return False
            current = following
        return True

    return evaluate


def _depth(root: ast.AST) -> int:
    """How deeply the tree nests, counted without recursion (the tree may be deep)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _bounded_power(base: Any, exponent: Any) -> Any:
    """`**` with a bounded exponent and result, so that a space file cannot ask for a huge
    number (``(10**64)**64**...`` would take all memory and time)."""
    if abs(exponent) > _MAX_POWER:
        raise ExpressionError(f"exponent {exponent} is larger than {_MAX_POWER}")
    bits = abs(base).bit_length() if isinstance(base, int) else 0
    if isinstance(exponent, int) and bits * exponent > _MAX_BITS:
        raise ExpressionError(f"a power of {exponent} of a {bits}-bit number is too large")
    return base**exponent


def _arithmetic(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """An arithmetic operator on numbers only: ``'x' * 10**9`` or ``'%9999999d' % 1`` would build
    huge strings, and text has no arithmetic a constraint needs."""

    def apply(left: Any, right: Any) -> Any:
        for value in (left, right):
            if isinstance(value, str | tuple):
                raise TypeError(
                    f"arithmetic on {type(value).__name__} {value!r:.40} is not allowed"
                )
        return op(left, right)

    return apply
