"""What this process holds, counted: a lock or lease that code already inside it takes again
(a loop and the target it drives both take the benchmark lock; a workflow and the runner both
take a campaign's lease) is counted, not taken twice, and freed by the last release only."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Held(Generic[K, V]):
    """Values held by key, each with how many times it was taken."""

    def __init__(self) -> None:
        self._held: dict[K, list] = {}  # key -> [value, depth]

    def take(self, key: K, acquire: Callable[[], V]) -> V:
        """The value held under `key`, taken once more; `acquire` makes it the first time."""
        held = self._held.get(key)
        if held is not None:
            held[1] += 1
            return held[0]
        value = acquire()
        self._held[key] = [value, 1]
        return value

    def release(self, key: K) -> V | None:
        """Count one release: the value when it was the last (the caller frees it), else None."""
        held = self._held.get(key)
        if held is None:
            return None
        held[1] -= 1
        if held[1] > 0:
            return None
        del self._held[key]
        return held[0]

    def values(self) -> Iterator[V]:
        return (held[0] for held in self._held.values())
