"""The coordinator's side of a Dask cluster: which nodes are there, and a visit sent to one.

A node is a Dask worker started by `stortune worker` (it offers the `stortune-node` resource);
other workers on the scheduler are left alone. Visits are submitted as not pure (a repeated
config is a new run), pinned to the node's worker, one at a time per node.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import CancelledError
from typing import Any

from stortune.cluster.node import RESOURCE, measure_visit
from stortune.errors import StortuneError

CONNECT_SECONDS = 20.0


class Cluster:
    """A connection to a Dask scheduler whose workers are stortune nodes."""

    def __init__(self, scheduler: str, timeout: float = CONNECT_SECONDS) -> None:
        from distributed import Client

        self.scheduler = scheduler
        try:
            self.client = Client(scheduler, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise StortuneError(
                f"no Dask scheduler answers at {scheduler} ({exc}): start one "
                "(`stortune cluster local`, or `dask scheduler` on the coordinator's host)"
            ) from None

    def nodes(self) -> dict[str, str] | None:
        """Connected nodes: name -> worker address; None while the scheduler does not answer
        (the client reconnects by itself when it comes back). Not knowing is not "no nodes": a
        scheduler busy removing a dead worker can miss one request while the others measure."""
        if self.client.status != "running":
            return None
        try:
            workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        except (OSError, TimeoutError, CancelledError):
            return None
        return {
            str(info.get("name")): address
            for address, info in workers.items()
            if RESOURCE in (info.get("resources") or {})
        }

    def submit(self, address: str, payload: Mapping[str, Any]) -> Any:
        return self.client.submit(
            measure_visit,
            dict(payload),
            key=f"visit-{uuid.uuid4().hex}",
            workers=[address],
            allow_other_workers=False,
            resources={RESOURCE: 1},
            pure=False,
            retries=0,
        )

    def wait_any(self, futures: Sequence[Any], timeout: float) -> None:
        """Until one of `futures` is done or `timeout` seconds pass."""
        from distributed import wait

        if not futures:
            return
        # a future cancelled (the scheduler's connection lost) is done: the caller sees it
        with self.client.as_current(), contextlib.suppress(TimeoutError, CancelledError, OSError):
            wait(list(futures), timeout=timeout, return_when="FIRST_COMPLETED")

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
