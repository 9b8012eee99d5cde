"""A small per-process cache of expensive fits, keyed by the data they were made on.

The split search fits one technique on the same ten folds at hundreds of hyperparameter
points. Where one deep fit holds the answer for many points (MARS's forward pass, Cubist's
committees), the deep fit is kept here per fold and each point narrows it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Generic, TypeVar

import numpy as np

Fit = TypeVar("Fit")


def data_key(Z: np.ndarray, y: np.ndarray) -> tuple[Any, ...]:
    """Identifies a training set by content: a fold rebuilt from the same rows hits the cache."""
    digest = hashlib.blake2b(Z.tobytes() + y.tobytes(), digest_size=16).digest()
    return (Z.shape, digest)


class FitMemo(Generic[Fit]):
    """Least-recently-used fits; `size` covers 10 folds and the full data of two techniques."""

    def __init__(self, size: int = 24) -> None:
        self.size = size
        self._fits: OrderedDict[tuple[Any, ...], Fit] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> Fit | None:
        fit = self._fits.get(key)
        if fit is not None:
            self._fits.move_to_end(key)
        return fit

    def put(self, key: tuple[Any, ...], fit: Fit) -> Fit:
        self._fits[key] = fit
        self._fits.move_to_end(key)
        while len(self._fits) > self.size:
            self._fits.popitem(last=False)
        return fit

    def values(self) -> list[Fit]:
        return list(self._fits.values())

    def clear(self) -> None:
        self._fits.clear()

    def __len__(self) -> int:
        return len(self._fits)
