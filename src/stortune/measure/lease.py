"""One process measures a campaign at a time: a lease in the store, with a heartbeat.

Two processes measuring one campaign would both add its next trial and runs: one of them dies
on the store's unique keys, or both spend the machine on the same slots. The machine's benchmark
lock (`lock.py`) does not prevent it: it is per machine, and machines share a campaign through
one PostgreSQL store. So whatever measures a campaign (`Measuring.run`: run, tune and its
verification, sweep, noise, resume) first takes the campaign's lease, a row in the store naming
the process (host, pid, a token of its own) with a heartbeat. A thread renews the heartbeat
every `stale / 12` seconds while it measures, and the runner confirms the lease before every run
it stores. Another process is refused (`CampaignBusy`, exit code 2) unless the lease is stale:

- its heartbeat is older than the stale limit (`STORTUNE_LEASE_STALE`, 60 s by default);
- its holder's pid is dead on this host (a kill gives a process no chance to release it);
- its holder is this very process, but no lease of it holds it (a sitting that never released).

A stale lease is taken over with one compare-and-swap on the old token, so of two processes
taking over at once only one wins. A holder that finds its token gone (another process took
over after its heartbeat lapsed) stops with `LeaseLost` and stores nothing more. Heartbeats are
judged by the reader's clock: hosts sharing a store keep their clocks well within the limit.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import secrets
import socket
import threading
import time
from contextlib import suppress
from pathlib import Path
from types import TracebackType

import sqlalchemy as sa

from stortune.errors import CampaignBusy, LeaseLost, StoreError, StortuneError
from stortune.store import Campaign, Lease, Store
from stortune.system.processes import pid_alive
from stortune.system.reentry import Held

log = logging.getLogger(__name__)

STALE_SECONDS = 60.0
STALE_ENV = "STORTUNE_LEASE_STALE"
BEATS_PER_STALE = 12  # heartbeats within the stale limit: a few may be late without harm
ATTEMPTS = 5  # tries at taking a lease that other processes keep taking

_held: Held[tuple[str, int], CampaignLease] = Held()  # (store url, campaign id) -> lease here


def stale_seconds() -> float:
    """The stale limit: `$STORTUNE_LEASE_STALE` seconds, else 60."""
    text = os.environ.get(STALE_ENV, "").strip()
    if not text:
        return STALE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise StortuneError(f"{STALE_ENV} must be a positive number of seconds, not {text!r}")
    return value


@functools.cache
def pid_space() -> str:
    """What this process's pids are numbers in: the boot and the pid namespace. Only a process
    that shares them can tell from a pid whether the holder lives."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "?"
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = "?"
    return f"{boot}/{namespace}"


class CampaignLease:
    """Holds a campaign's lease while in its context (see the module doc); re-entrant within a
    process, so a caller may take it before the runner takes it again."""

    def __init__(
        self,
        store: Store,
        campaign: Campaign,
        stale: float | None = None,
        every: float | None = None,
    ) -> None:
        """`stale`: the stale limit in seconds (default `stale_seconds()`); `every`: seconds
        between heartbeats (default a twelfth of it)."""
        self.store = store
        self.campaign = campaign
        self.stale = stale_seconds() if stale is None else stale
        self.every = self.stale / BEATS_PER_STALE if every is None else every
        self.token = secrets.token_hex(16)
        self._key = (store.url, campaign.id)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lost = False
        self._renewed = 0.0  # time.monotonic() of the last heartbeat

    # ---- the context ------------------------------------------------------------------------
    def __enter__(self) -> CampaignLease:
        return _held.take(self._key, self._start)

    def _start(self) -> CampaignLease:
        self._acquire()
        self._thread = threading.Thread(
            target=self._beat, name=f"lease {self.campaign.name}", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        holder = _held.release(self._key)
        if holder is None:
            return
        holder._stop.set()
        if holder._thread is not None:
            holder._thread.join()
        # a store that fails now: the lease goes stale by itself, and is taken over then
        with suppress(StortuneError, sa.exc.SQLAlchemyError):
            self.store.release_lease(self.campaign.id, holder.token)

    # ---- while measuring --------------------------------------------------------------------
    def confirm(self) -> None:
        """Raise LeaseLost when another process holds the lease now (before anything is
        stored); renew the heartbeat when one is due, should the thread be late."""
        if not self._lost:
            if time.monotonic() - self._renewed >= self.every:
                self._renew()
            else:
                held = self.store.lease(self.campaign.id)
                self._lost = held is None or held.token != self.token
        if self._lost:
            raise LeaseLost(lost_message(self.campaign.name, self.store.lease(self.campaign.id)))

    def _beat(self) -> None:
        while not self._stop.wait(self.every) and not self._lost:
            try:
                self._renew()
            except (StortuneError, sa.exc.SQLAlchemyError) as exc:  # the next beat tries again
                log.debug("campaign %s: heartbeat failed: %s", self.campaign.name, exc)

    def _renew(self) -> None:
        if self.store.renew_lease(self.campaign.id, self.token, time.time()):
            self._renewed = time.monotonic()
        else:
            self._lost = True

    # ---- taking it --------------------------------------------------------------------------
    def _acquire(self) -> None:
        for _ in range(ATTEMPTS):
            now = time.time()
            mine = Lease(
                self.campaign.id, self.token, socket.gethostname(), os.getpid(), pid_space(),
                now, now,
            )  # fmt: skip
            held = self.store.lease(self.campaign.id)
            if held is None:
                if self.store.claim_lease(mine):
                    break
                continue  # another process took it first: who?
            why = stale_because(held, now, self.stale)
            if why is None:
                raise CampaignBusy(busy_message(self.campaign.name, held, now))
            if self.store.claim_lease(mine, replacing=held.token):
                log.info(
                    "campaign %s: took over the lease of pid %s on host %s (%s)",
                    self.campaign.name, held.pid, held.host, why,
                )  # fmt: skip
                break
        else:
            raise StoreError(
                f"cannot take the lease of campaign {self.campaign.name!r} in {self.store.url}: "
                "other processes keep taking it"
            )
        self._renewed = time.monotonic()


def stale_because(held: Lease, now: float, stale: float) -> str | None:
    """Why a lease may be taken over (module doc), or None while its holder is alive."""
    quiet = now - held.heartbeat_at
    if quiet > stale:
        return f"no heartbeat for {quiet:.0f} s"
    if held.host != socket.gethostname() or held.pid_space != pid_space():
        return None  # its pid means nothing here: only the heartbeat tells
    if held.pid == os.getpid():
        if all(lease.token != held.token for lease in _held.values()):
            return "this process left it behind"
        return None
    return None if pid_alive(held.pid) else f"pid {held.pid} is gone"


def busy_message(name: str, held: Lease, now: float) -> str:
    ago = max(0, int(now - held.heartbeat_at))
    return (
        f"campaign {name!r} is being measured by pid {held.pid} on host {held.host} "
        f"(heartbeat {ago} s ago); wait for it or stop it"
    )


def lost_message(name: str, held: Lease | None) -> str:
    if held is None:
        return (
            f"campaign {name!r} lost its lease (another process released it or deleted the "
            "campaign); stopped without storing more"
        )
    return (
        f"campaign {name!r} was taken over by pid {held.pid} on host {held.host} while this "
        "process measured it (its heartbeat had lapsed); stopped without storing more"
    )
