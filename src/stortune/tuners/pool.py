"""Tuning over a pool: the configs a measured table holds, and nothing else.

On a table that is not a full grid, a tuner free to propose any config of the inferred space
mostly proposes configs nobody measured. FLASH's and PromiseTune's protocol instead lets tuners
choose among the table's rows. Tuners that can search a finite set themselves take the pool
(`Tuner.takes_pool`: FLASH, bo, DDPG, random, LHS); any other is wrapped in `PoolProjection`,
which answers each proposal with the nearest unmeasured row in the unit-cube encoding and tells
the tuner that row, the config really measured, never the proposal it stands in for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from stortune.errors import ConfigError, StortuneError
from stortune.sampling import config_key
from stortune.space import Config, Space
from stortune.tuners.base import Tuner


class Pool:
    """Distinct configs of a space with their encodings, and which of them are still open."""

    def __init__(self, space: Space, configs: Sequence[Mapping]) -> None:
        unique = {config_key(c): dict(c) for c in configs}  # each distinct config once, in order
        if not unique:
            raise StortuneError("a pool needs at least one config")
        self.space = space
        self.keys = list(unique)
        self.configs: list[Config] = list(unique.values())
        self.points = space.encode_many(self.configs)
        self._index = {k: i for i, k in enumerate(self.keys)}
        self._open = np.ones(len(self.keys), dtype=bool)

    def __len__(self) -> int:
        return len(self.configs)

    def __contains__(self, config: Mapping) -> bool:
        return config_key(config) in self._index

    def close(self, config: Mapping) -> None:
        """Mark a config measured (configs outside the pool are ignored)."""
        i = self._index.get(config_key(config))
        if i is not None:
            self._open[i] = False

    @property
    def open_mask(self) -> np.ndarray:
        """Per config, whether it is still unmeasured."""
        return self._open

    def open_rows(self) -> np.ndarray:
        """Indices of the configs not measured yet; an error once every one is."""
        rows = np.flatnonzero(self._open)
        if not len(rows):
            raise StortuneError(f"every one of the {len(self)} configs of the pool is measured")
        return rows

    def is_open(self, config: Mapping) -> bool:
        i = self._index.get(config_key(config))
        return i is not None and bool(self._open[i])

    def random_open(self, rng: np.random.Generator) -> Config:
        rows = self.open_rows()
        return dict(self.configs[int(rows[rng.integers(len(rows))])])

    def nearest_open(self, config: Mapping) -> Config:
        """The config itself when it is an open row, else the open row nearest to it."""
        if self.is_open(config):
            return dict(self.configs[self._index[config_key(config)]])
        return self.nearest_open_to(self.space.encode(config))

    def nearest_open_to(self, point: np.ndarray) -> Config:
        """The open row nearest to a point of the unit-cube encoding."""
        rows = self.open_rows()
        distances = np.linalg.norm(self.points[rows] - point, axis=1)
        return dict(self.configs[int(rows[int(np.argmin(distances))])])

    def open_row_at(self, unit: np.ndarray) -> Config:
        """The open row a unit-cube point picks through the open rows' conditional quantiles:
        its first coordinate picks the u-quantile of the rows' first parameter, the next picks
        among the rows holding that value, and so on until one row is left (the empirical
        Rosenblatt transform). A uniform point draws a uniform row; a Latin hypercube of
        points draws rows stratified in the first parameter. Unlike a point moved to its
        nearest row, it keeps the rows' joint structure: a one-hot group (a table's platform
        as four binary columns) or a column that varies only with another's value is drawn as
        the rows hold it, and no row is reached more often for lying near many points."""
        rows = self.open_rows()
        for j, u in enumerate(np.asarray(unit)):
            if len(rows) == 1:
                break
            values = self.points[rows, j]
            value = np.sort(values)[min(int(u * len(values)), len(values) - 1)]
            rows = rows[values == value]
        return dict(self.configs[int(rows[0])])

    def quantile_points(self, unit: np.ndarray) -> np.ndarray:
        """Unit-cube points moved through the pool's marginal quantiles: coordinate u of a
        parameter becomes the u-quantile of the rows' values of it. A design spread evenly in
        the cube is then spread evenly over where the rows are; moved straight to the nearest
        row, it lands on rows at the edges of the table's sampling as often as on its bulk."""
        ordered = np.sort(self.points, axis=0)
        index = np.minimum((np.asarray(unit) * len(ordered)).astype(int), len(ordered) - 1)
        return ordered[index, np.arange(ordered.shape[1])]


def pool_within(
    space: Space, configs: Sequence[Mapping] | None, valid_in: Space | None = None
) -> list[Config] | None:
    """The pool's configs that `space` holds as they are (a ranked space pins parameters, a
    safe space drops risky values); None without a pool. Configs already validated in
    `valid_in`, a space of the same definition, are all held (validating a large table's rows
    again costs seconds)."""
    if configs is None:
        return None
    if valid_in is not None and (valid_in is space or valid_in.to_dict() == space.to_dict()):
        return [dict(c) for c in configs]
    kept = []
    for config in configs:
        try:
            if config_key(space.validate(config)) == config_key(config):
                kept.append(dict(config))
        except ConfigError:
            continue
    if not kept:
        raise StortuneError(f"no config of the pool lies in the space {space.name!r} tuned")
    return kept


class PoolProjection(Tuner):
    """Any tuner on a pool: its proposals are moved to the nearest unmeasured row (module doc)."""

    def __init__(self, inner: Tuner, pool: Sequence[Mapping]) -> None:
        super().__init__(inner.space, inner.direction, inner.seed, inner.budget)
        self.inner = inner
        self.name = inner.name
        self.pool = Pool(inner.space, pool)

    @property
    def asks_pending(self) -> bool:  # type: ignore[override]
        return self.inner.asks_pending

    def ask(self) -> Config:
        proposal = self.inner.ask()
        row = self.pool.nearest_open(proposal)
        if config_key(row) != config_key(proposal):
            self.inner.withdraw(proposal)
        return row

    def observe_state(self, state: Mapping[str, float]) -> None:
        self.inner.observe_state(state)

    def _observe(self, config: Config, value: float | None) -> None:
        self.pool.close(config)
        self.inner.tell(config, value)

    def recommend(self) -> Config | None:
        return self.inner.recommend()
