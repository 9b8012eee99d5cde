"""A config of a joint space (an application's options composed with the stack beneath it)
split into its two parts: its stack settings with the application at its defaults, and its
application settings on the default stack.

A tuner searching both layers at once with few evaluations can keep a setting of one layer that
costs part of what the other layer gave. Verifying each part beside the whole says which part
the gain comes from, and lets the recommendation change fewer settings when a part alone is
verified at least as good.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stortune.errors import StortuneError
from stortune.space.space import Config, Space

STACK_PART = "stack part"
APPLICATION_PART = "application part"
PART_LABELS = (STACK_PART, APPLICATION_PART)


def layer_parts(space: Space, config: Mapping[str, Any]) -> dict[str, Config]:
    """`config` split into its stack part and its application part, by label, each completed
    with the default of the other layer. Empty unless the config changes settings of both
    layers (a part equal to the whole, or to the default, tells nothing); a part that needs
    the other (a constraint across the layers) is left out."""
    default = space.default_config()
    full = space.validate(dict(config))
    changed = {k for k, v in full.items() if default.get(k) != v}
    application = {p.name for p in space.parameters if p.application is not None}
    in_application = changed & application
    if not in_application or in_application == changed:
        return {}
    out = {}
    for label, kept in ((STACK_PART, changed - application), (APPLICATION_PART, in_application)):
        try:
            out[label] = space.validate({**default, **{k: full[k] for k in kept}})
        except StortuneError:
            continue
    return out
