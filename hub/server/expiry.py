"""Connections end when their credential does: ``Expiries`` closes each open connection once
its token's ``exp`` has passed, past the issuer's leeway.

Theory of operation
-------------------
A credential is checked when a connection opens (and, on Streamable HTTP, on every request);
without more, a WebSocket admitted by a two-second share link would go on prompting for as long
as it stays open. So every connection whose principal carries an ``exp`` is given a deadline,
``exp + leeway`` (the leeway of the issuer that signed it: ``token_leeway`` for the hub's own
tokens), and one task of the hub's closes each connection whose deadline has passed: with
``1008`` and the reason ``expired`` on a WebSocket; a Streamable HTTP connection's SSE streams
end with a ``close`` event naming it, and its later requests are refused ``401 expired`` by the
credential check. One heap for every connection, not a timer each: a hub holding thousands of
connections keeps one sleeping task.

A client that wants to stay renews its credential before the deadline:

* on Streamable HTTP, by sending a fresh token of the same grant (same principal, role,
  sessions, agents, origins and share link) on any later request of the connection: the
  deadline moves to the new token's;
* on a WebSocket, by connecting again with a fresh token (a new share link, or a token from
  its issuer) and resuming its sessions from their cursors (``session/resume`` with
  ``replayFrom`` ``_hub_after``), which loses nothing.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from itertools import count
from typing import Protocol

import anyio

from hub.access.principal import Principal

log = logging.getLogger("hub.server")


class Expiring(Protocol):
    """What ``Expiries`` needs of a connection (``ClientConnection`` is one)."""

    @property
    def connection_id(self) -> str: ...

    def expire(self) -> None:
        """Close the connection: its credential expired."""
        ...


def same_grant(old: Principal, new: Principal) -> bool:
    """Whether ``new`` grants exactly what ``old`` did (only its id and expiry may differ):
    the only kind of token that may renew a connection ``old`` admitted."""
    return replace(new, jti=old.jti, expires_at=old.expires_at) == old


class Expiries:
    """The deadlines of the open connections; ``run`` closes each one as it passes.

    ``leeway_of`` gives the seconds of leeway of a principal's issuer; ``clock`` the wall
    clock the tokens' ``exp`` is measured on (tests may pass their own)."""

    def __init__(
        self,
        leeway_of: Callable[[Principal], float],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._leeway_of = leeway_of
        self._clock = clock
        self._deadlines: dict[Expiring, float] = {}
        self._heap: list[tuple[float, int, Expiring]] = []
        self._order = count()
        self._wakeup = anyio.Event()

    def __len__(self) -> int:
        return len(self._deadlines)

    def deadline_of(self, principal: Principal) -> float | None:
        """The wall-clock time past which ``principal``'s connections close (``None``: its
        credential does not expire)."""
        if principal.expires_at is None:
            return None
        return principal.expires_at + self._leeway_of(principal)

    def watch(self, conn: Expiring, principal: Principal) -> None:
        """Close ``conn`` once ``principal``'s credential expires (a new ``watch`` of the
        same connection replaces its deadline)."""
        deadline = self.deadline_of(principal)
        if deadline is None:
            self._deadlines.pop(conn, None)
            return
        self._deadlines[conn] = deadline
        first = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (deadline, next(self._order), conn))
        if first is None or deadline < first:
            self._wakeup.set()

    def renew(self, conn: Expiring, admitted: Principal, presented: Principal) -> bool:
        """A later request of ``conn`` (admitted by ``admitted``) carries ``presented``: move
        the deadline to its expiry when it grants the same and lasts longer. Whether it did."""
        current = self._deadlines.get(conn)
        deadline = self.deadline_of(presented)
        if current is None or deadline is None or deadline <= current:
            return False
        if not same_grant(admitted, presented):
            return False
        self.watch(conn, presented)
        return True

    def forget(self, conn: Expiring) -> None:
        """``conn`` ended: nothing to close any more. Its heap entry is skipped when it comes
        up, and the heap is rebuilt once most of it is such entries (connections that end
        long before their week-long tokens would otherwise pile up)."""
        self._deadlines.pop(conn, None)
        if len(self._heap) > 2 * len(self._deadlines) + 64:
            self._heap = [e for e in self._heap if self._deadlines.get(e[2]) == e[0]]
            heapq.heapify(self._heap)

    def expire_due(self) -> float | None:
        """Close every connection whose deadline has passed; the next deadline, if any."""
        now = self._clock()
        while self._heap:
            deadline, _, conn = self._heap[0]
            if self._deadlines.get(conn) != deadline:
                heapq.heappop(self._heap)  # ended, or given another deadline since
                continue
            if deadline > now:
                return deadline
            heapq.heappop(self._heap)
            del self._deadlines[conn]
            log.info("= %s: its credential expired, closing 1008", conn.connection_id)
            conn.expire()
        return None

    async def run(self) -> None:
        """Close connections as their deadlines pass, until cancelled."""
        while True:
            self._wakeup = anyio.Event()
            following = self.expire_due()
            if following is None:
                await self._wakeup.wait()
                continue
            with anyio.move_on_after(max(0.0, following - self._clock()) + 0.01):
                await self._wakeup.wait()
