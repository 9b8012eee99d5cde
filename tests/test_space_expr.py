import pytest

from stortune.space import compile_expression
from stortune.space.expr import ExpressionError


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        ("inode_size <= block_size", {"inode_size": 256, "block_size": 4096}, True),
        ("a + b <= 1", {"a": 0.6, "b": 0.5}, False),
        ("fs in ('ext3', 'ext4')", {"fs": "ext4"}, True),
        ("fs not in ['xfs']", {"fs": "xfs"}, False),
        ("1 < x <= 3", {"x": 3}, True),
        ("1 < x <= 3", {"x": 1}, False),
        ("not flag or n >= 2", {"flag": True, "n": 1}, False),
        ("max(a, b) * 2 == 8", {"a": 4, "b": 1}, True),
        ("log2(bs) == 12", {"bs": 4096}, True),
        ("x if flag else -x", {"x": 2, "flag": False}, -2),
        ("true and mode == 'b'", {"mode": "b"}, True),
    ],
)
def test_expressions_evaluate(text: str, values: dict, expected: object) -> None:
    assert compile_expression(text)(values) == expected


def test_names_are_collected() -> None:
    assert compile_expression("a + b <= max(c, 1)").names == {"a", "b", "c"}


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "x.__class__",
        "open('/etc/passwd')",
        "(lambda: 1)()",
        "[i for i in range(3)]",
        "x[0]",
        "a := 1",
    ],
)
def test_unsafe_expressions_are_refused(text: str) -> None:
    with pytest.raises(ExpressionError):
        compile_expression(text)


def test_unknown_names_are_refused_when_names_are_known() -> None:
    with pytest.raises(ExpressionError, match="unknown parameter.*typo"):
        compile_expression("typo <= 1", {"a", "b"})


def test_huge_powers_are_refused_at_evaluation() -> None:
    expr = compile_expression("x ** y > 1")
    with pytest.raises(ExpressionError, match="exponent"):
        expr({"x": 10, "y": 10**9})


def test_syntax_error_names_the_text() -> None:
    with pytest.raises(ExpressionError, match="cannot parse 'a <='"):
        compile_expression("a <=")
