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

Nothing here grows with the audience per change: a flush looks only at the clients that
joined or left since the last one (and the session keeps its count of viewers), and past a
thousand clients the events are further apart (``interval``): each is a frame for every
client, and at a fixed rate an audience joining one by one would cost the square of its size
in frames.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from hub.sessions.host import Host

PRESENCE_INTERVAL = 0.25
"""At most one ``_hub_presence`` event per this many seconds; changes in between coalesce."""
PRESENCE_DELIVERIES = 4000
"""At most this many ``_hub_presence`` frames per second for one session's audience: past
``PRESENCE_INTERVAL`` times this many clients (1,000), the events are further apart (2.5 s
for 10,000 clients), so that a session's presence costs the hub and its clients the same
whatever its audience instead of growing with it (an audience joining one by one would
otherwise cost the square of its size in frames)."""


def interval(count: int) -> float:
    """The least time between two ``_hub_presence`` events of a session with ``count``
    attached clients: ``PRESENCE_INTERVAL``, longer past ``PRESENCE_DELIVERIES`` frames a
    second."""
    return max(PRESENCE_INTERVAL, count / PRESENCE_DELIVERIES)


class Presence:
    """The ``_hub_presence`` events of one session; see the module docstring."""

    def __init__(self, session: Host) -> None:
        self._session = session
        self._changes: list[dict[str, Any]] = []
        self._listed: dict[str, dict[str, Any]] = {}
        """The client records the ``_hub_presence`` events left listed, by client id."""
        self._list_viewers = True
        """Whether ``_listed`` lists the viewers (at most ``presence_viewers`` of them)."""
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

    def _record(self, client_id: str, list_viewers: bool) -> dict[str, Any] | None:
        """The record presence lists for ``client_id`` now (``None``: not listed)."""
        a = self._session.attached.get(client_id)
        if a is None or (a.role == "viewer" and not list_viewers):
            return None
        return {
            "clientId": a.client_id,
            "name": a.client.name,
            "principal": a.client.principal,
            "program": a.client.program,
            "role": a.role,
            "since": a.since,
            "protocolVersion": a.client.version,
        }

    def _relist(
        self, changes: list[dict[str, Any]], list_viewers: bool
    ) -> dict[str, dict[str, Any] | None]:
        """Bring ``_listed`` up to date with ``changes``; the records it changed (``None``:
        no longer listed), by id, in the order the changes name them.

        Only the clients the changes name are looked at, so a flush costs the same whatever
        the audience. A record changes only when its client attaches (again) or leaves,
        each of which is a change here: the clients not named keep their records. When
        viewers start or stop being listed (their number crossed ``presence_viewers``),
        every client is looked at again."""
        listed = self._listed
        if list_viewers != self._list_viewers or any(
            c.get("joined") is None and c.get("left") is None for c in changes
        ):
            self._list_viewers = list_viewers
            ids = list(dict.fromkeys([*listed, *self._session.attached]))
        else:
            ids = list(dict.fromkeys(c["joined"] if "joined" in c else c["left"] for c in changes))
        updated: dict[str, dict[str, Any] | None] = {}
        for client_id in ids:
            record = self._record(client_id, list_viewers)
            if record is None:
                if listed.pop(client_id, None) is not None:
                    updated[client_id] = None
            elif listed.get(client_id) != record:
                listed[client_id] = record
                updated[client_id] = record
        return updated

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
        session = self._session
        viewers = session.viewers
        listed = self._listed
        # Who was listed before: the changed clients' part of it is all ``shown`` reads.
        before = {c["left"] for c in changes if c.get("left") in listed}
        updated = self._relist(changes, viewers <= session.settings.presence_viewers)
        counts = (len(session.attached), viewers)
        added = [record for record in updated.values() if record is not None]
        removed = [cid for cid, record in updated.items() if record is None]
        if not added and not removed and counts == self._counts:
            return
        self._counts = counts
        self._next = time.monotonic() + interval(counts[0])
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
