"""torch on one thread, for the small networks and models stortune trains."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """torch on one thread for the block: at these sizes (a few hundred rows, layers of tens of
    units) more threads cost more in hand-offs than they save (a DDPG campaign of 100 steps:
    11 s on one thread, 15 s on two)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
