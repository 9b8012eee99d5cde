"""Parameter spaces: parameters, conditions, constraints, YAML loading and encodings."""

from stortune.space.expr import Expression, compile_expression
from stortune.space.loader import bundled_spaces, load_space, parse_space
from stortune.space.parameter import WORKLOAD_LAYER, Application, Cost, Kind, Parameter
from stortune.space.space import Config, Constraint, Space


def __getattr__(name: str) -> object:
    """`space_from_dataset` needs pandas: imported on first use, not with every command."""
    if name == "space_from_dataset":
        from stortune.space.infer import space_from_dataset

        return space_from_dataset
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
    "load_space",
    "parse_space",
    "space_from_dataset",
]
