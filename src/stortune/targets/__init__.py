"""Targets: the systems under test. `make_target(spec)` rebuilds one from its stored spec.

Every `Target` subclass with a `kind` registers itself when its module is imported;
`registry()` first imports every module of this package, so a new target is found by being a
module here (or, for tests and plugins, by being imported).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stortune.errors import TargetError

if TYPE_CHECKING:
    from stortune.space import Space
    from stortune.targets.base import Target

_REGISTRY: dict[str, type[Target]] = {}
_discovered = False


def register(cls: type[Target]) -> None:
    """Called for every concrete Target subclass with a kind (`Target.__init_subclass__`)."""
    known = _REGISTRY.get(cls.kind)
    if known is not None and known.__qualname__ != cls.__qualname__:
        raise TargetError(
            f"two targets are named {cls.kind!r}: {known.__module__}.{known.__qualname__} and "
            f"{cls.__module__}.{cls.__qualname__}"
        )
    _REGISTRY[cls.kind] = cls


def registry() -> dict[str, type[Target]]:
    """Every known target by kind (this package's modules imported once)."""
    global _discovered
    if not _discovered:
        for module in pkgutil.iter_modules(__path__):
            if not module.ispkg and not module.name.startswith("_"):
                importlib.import_module(f"{__name__}.{module.name}")
        _discovered = True
    return dict(sorted(_REGISTRY.items()))


def target_class(kind: str) -> type[Target]:
    known = registry()
    if kind not in known:
        raise TargetError(f"unknown target {kind!r} (choose from {', '.join(known)})")
    return known[kind]


def make_target(spec: Mapping[str, Any], space: Space | None) -> Target:
    """The target a stored spec describes (`SpecError` when it describes none)."""
    from stortune.targets.base import SpecError

    kind = spec.get("kind")
    if str(kind) not in registry():
        raise SpecError(f"unknown target {kind!r} (choose from {', '.join(registry())})")
    return target_class(str(kind)).from_spec(dict(spec), space)


def __getattr__(name: str) -> Any:
    if name == "REGISTRY":  # the kinds and their classes, for contract tests and listings
        return registry()
    raise AttributeError(name)


__all__ = ["make_target", "register", "registry", "target_class"]
