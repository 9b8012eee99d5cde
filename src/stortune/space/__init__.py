"""Parameter spaces: parameters, conditions, constraints, YAML loading and encodings."""

from stortune.space.expr import Expression, compile_expression
from stortune.space.loader import bundled_spaces, load_space, parse_space
from stortune.space.parameter import WORKLOAD_LAYER, Application, Cost, Kind, Parameter
from stortune.space.space import Config, Constraint, Space


def __getattr__(name: str) -> object:
    """`space_from_dataset` and `fold_one_hot` need pandas: imported on first use, not with
    every command."""
    if name in ("space_from_dataset", "fold_one_hot"):
        from stortune.space import infer

        return getattr(infer, name)
    raise AttributeError(f"module 'stortune.space' has no attribute {name!r}")


__all__ = [
    "WORKLOAD_LAYER",
    "Application",
    "Config",
    "Constraint",
    "Cost",
    "Expression",
    "Kind",
    "Parameter",
    "Space",
    "bundled_spaces",
    "compile_expression",
    "fold_one_hot",
    "load_space",
    "parse_space",
    "space_from_dataset",
]
