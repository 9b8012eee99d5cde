"""Config files for the ceph space: the bundled expert config, or a tuned one.

Format (YAML)::

    name: expert
    description: what it is
    sources:
      micron: where the values come from
    config:
      osd_op_num_shards: {value: 8, source: micron, note: why}
      ms_async_op_threads: 4          # a bare value is fine too

A bundled file is named by its stem without the ``ceph-`` prefix (``expert`` for
``cephspace/ceph-expert.yaml``; kept out of ``spaces/``, where every YAML file is a space).

An extendable parameter's low/high are where a search starts, not what Ceph accepts: the space
validates expert and tuned values (a tuner with dynamic bounds goes past low/high) against its
hard bounds (`Parameter.valid_range`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from stortune.errors import ConfigError
from stortune.inputs import TEXT_BYTES, read_text
from stortune.space import Config, Space
from stortune.space.loader import load_yaml


def read_config_file(name_or_path: str | Path) -> dict[str, Any]:
    """The document of a config file, or of a bundled one (``expert``)."""
    path = Path(name_or_path)
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name too long, a NUL byte: no file, nor a bundled name
        exists = False
    if exists:
        text = read_text(path, "config file", TEXT_BYTES, ConfigError)
    else:
        bundled = resources.files("stortune.cephspace") / f"ceph-{name_or_path}.yaml"
        if "/" in str(name_or_path) or not bundled.is_file():
            raise ConfigError(f"no config file {str(name_or_path)[:200]!r} (bundled: expert)")
        text = bundled.read_text()
    doc = load_yaml(text, str(name_or_path))
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise ConfigError(f"{name_or_path}: a config file is a mapping with a 'config' mapping")
    return doc


def load_config(name_or_path: str | Path, space: Space) -> Config:
    """The config a file holds, checked against `space` (unknown options and bad values are
    errors that name them)."""
    return config_of(read_config_file(name_or_path), name_or_path, space)


def config_of(doc: dict[str, Any], name_or_path: str | Path, space: Space) -> Config:
    """The config of a document `read_config_file` read, checked against `space`."""
    values = {
        name: entry.get("value") if isinstance(entry, dict) else entry
        for name, entry in doc["config"].items()
    }
    try:
        return space.validate(values)
    except ConfigError as exc:
        raise ConfigError(f"{name_or_path}: {exc}") from None
