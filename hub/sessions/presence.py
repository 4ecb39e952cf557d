"""Presence: who is attached to a session, as ``_hub_presence`` deltas, coalesced.

Theory of operation
-------------------
Every join and leave is recorded with ``changed``. The attached-client list goes out as a
``_hub_presence`` event at once, or, within ``PRESENCE_INTERVAL`` of the previous one, in a
deferred task that coalesces the changes that followed. A burst of a thousand joins is then a
handful of events, not a thousand lists of up to a thousand clients each (quadratic bytes for
every client). Each event is a delta (``added`` records, ``removed`` ids); folding the deltas
from the start gives the full ``clients`` list, which is what compaction (replay, resets) sends.
Viewers are listed one by one only while there are at most ``presence_viewers`` of them: an
audience of thousands is counted, not listed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from hub.sessions.host import Host

PRESENCE_INTERVAL = 0.25
"""At most one ``_hub_presence`` event per this many seconds; changes in between coalesce."""


class Presence:
    """The ``_hub_presence`` events of one session; see the module docstring."""

    def __init__(self, session: Host) -> None:
        self._session = session
        self._changes: list[dict[str, Any]] = []
        self._listed: dict[str, dict[str, Any]] = {}
        """The client records the last ``_hub_presence`` left listed, by client id."""
        self._counts = (0, 0)
        self._flush_pending = False
        self._next = 0.0

    @property
    def settled(self) -> bool:
        """No coalesced change is waiting to go out."""
        return not self._flush_pending

    def changed(
        self, *, joined: str | None = None, left: str | None = None, reason: str | None = None
    ) -> None:
        """Record that client ``joined`` joined or client ``left`` left (for ``reason``); the
        event goes out now or coalesced (see the module docstring)."""
        change: dict[str, Any] = {"joined": joined} if joined is not None else {}
        if left is not None:
            change = {"left": left, "reason": reason or "detached"}
        self._changes.append(change)
        if self._flush_pending:
            return
        wait = self._next - time.monotonic()
        if wait <= 0:
            self.flush()
            return

        async def flush_later() -> None:
            await anyio.sleep(wait)
            self._flush_pending = False
            self.flush()

        self._flush_pending = self._session.run_later(flush_later, "presence")
        if not self._flush_pending:
            self.flush()  # no task to defer to: at once

    def _listing(self) -> tuple[dict[str, dict[str, Any]], int]:
        """The client records presence lists now (by id, in attach order) and the number of
        attached viewers."""
        attached = self._session.attached.values()
        viewers = sum(1 for a in attached if a.role == "viewer")
        list_viewers = viewers <= self._session.settings.presence_viewers
        listed = {
            a.client_id: {
                "clientId": a.client_id,
                "name": a.client.name,
                "principal": a.client.principal,
                "program": a.client.program,
                "role": a.role,
                "since": a.since,
                "protocolVersion": a.client.version,
            }
            for a in attached
            if list_viewers or a.role != "viewer"
        }
        return listed, viewers

    def flush(self) -> None:
        """Emit one ``_hub_presence`` delta for the changes since the last one.

        The event carries ``added`` (records of clients listed now that were not, or whose
        record changed), ``removed`` (ids no longer listed), ``count`` (attached clients) and
        ``viewers`` (attached viewers), and says what caused it: ``joined`` or ``left`` with
        ``reason``, or ``changes`` when several were coalesced (listed clients only).
        """
        changes, self._changes = self._changes, []
        if not changes:
            return
        listed, viewers = self._listing()
        before = self._listed
        counts = (len(self._session.attached), viewers)
        added = [record for cid, record in listed.items() if before.get(cid) != record]
        removed = [cid for cid in before if cid not in listed]
        if not added and not removed and counts == self._counts:
            return
        self._listed = listed
        self._counts = counts
        self._next = time.monotonic() + PRESENCE_INTERVAL
        shown = [
            c
            for c in changes
            if (c.get("joined") in listed) or (c.get("left") in before and c["left"] not in listed)
        ]
        update: dict[str, Any] = {
            "sessionUpdate": "_hub_presence",
            "added": added,
            "removed": removed,
            "count": counts[0],
            "viewers": counts[1],
        }
        if len(shown) == 1:
            update.update(shown[0])
        elif shown:
            update["changes"] = shown
        self._session.emit(update)
