"""Keepalive pings for every WebSocket connection of a server, on one timer.

Theory of operation
-------------------
uvicorn pings each connection on a timer of its own (``call_later``) and, for each ping, arms
one more for the pong's deadline and cancels it when the pong comes: with 20,000 idle
connections and a ping every 20 s, a thousand timers a second made and as many cancelled, each
ping encoded on its own, and as many wake-ups of the event loop.

One ``Keepalive`` per server (per uvicorn ``Config``) does it for all of them on one timer. The
connections sit in a wheel of ``slots`` slots, one ``tick`` apart, that turns once per
``ping_interval``. Each tick:

1. checks the pings sent ``ping_timeout`` ago (one batch per tick): a connection whose ping
   from that batch is still unanswered gets its ``keepalive_timeout`` (which the hub replaces,
   ``hub.server.transport``, to close it as a slow consumer or with 1011);
2. pings the connections of the next slot, the same frame for all of them (a random payload
   per tick; the pong must carry it), except those whose last ping is still unanswered (as
   uvicorn, which sends the next ping only after the pong).

A connection joins the slot served one turn after it opened, so it is pinged about every
``ping_interval`` (within a tick) and one that does not answer is found within a tick of
``ping_timeout``. The timer runs only while a connection is registered or a batch waits.
Nothing here is per connection but its entry in one slot and the ping it waits for.

The protocol that uses it (``hub.server.wsprotocol``) registers a connection where uvicorn
would start its keepalive, removes it where uvicorn would stop it, and clears the ping it
waits for when the matching pong comes; it relies on uvicorn internals (``conn``,
``transport``, ``close_sent``, ``pending_ping_payload``, ``ping_sent_at``,
``keepalive_timeout``) as ``hub.server.transport`` does.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import weakref
from collections import deque
from typing import Any

from websockets.protocol import State

__all__ = ["Keepalive", "keepalive_for"]

log = logging.getLogger("hub.server")

TICK = 1.0
"""The longest time between two ticks (shorter for a short ``ping_interval``)."""
MIN_SLOTS = 10
"""The fewest slots of a wheel: a tick is at most a tenth of the ping interval."""


def _ping_frame(payload: bytes) -> bytes:
    """An unmasked ping frame carrying ``payload`` (under 126 bytes), as a server sends it."""
    return bytes((0x89, len(payload))) + payload


class Keepalive:
    """The keepalive pings of one server's connections; see the module docstring."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, interval: float, timeout: float | None
    ) -> None:
        self.loop = loop
        self.interval = interval
        self.timeout = timeout
        slots = max(MIN_SLOTS, math.ceil(interval / TICK))
        self.tick = interval / slots
        self._slots: list[dict[Any, None]] = [{} for _ in range(slots)]
        self._slot_of: dict[Any, int] = {}
        """Each registered connection's slot."""
        self._current = 0
        """The slot the next tick pings."""
        self._batches: deque[tuple[float, bytes, list[Any]]] = deque()
        """The pings awaiting their deadline: (deadline, payload, connections), oldest first."""
        self._timer: asyncio.TimerHandle | None = None
        self._next_at = 0.0

    def __len__(self) -> int:
        return len(self._slot_of)

    def add(self, proto: Any) -> None:
        """Ping ``proto`` from now on, first about ``interval`` from now."""
        if proto in self._slot_of:
            return
        if self._timer is None:
            self._next_at = self.loop.time() + self.tick
            self._timer = self.loop.call_at(self._next_at, self._turn)
        # The slot served last of the next turn: its first tick is `interval` away, or less
        # by under a tick.
        slot = (self._current - 1) % len(self._slots)
        self._slots[slot][proto] = None
        self._slot_of[proto] = slot

    def discard(self, proto: Any) -> None:
        """Stop pinging ``proto`` (the ping it waits for, if any, is no longer checked)."""
        slot = self._slot_of.pop(proto, None)
        if slot is not None:
            del self._slots[slot][proto]

    def _turn(self) -> None:
        # `_timer` stays set meanwhile: a connection added now does not start another timer.
        now = self.loop.time()
        try:
            self._check(now)
            self._ping(now)
        finally:
            self._timer = None
            if self._slot_of or self._batches:
                # On the tick's own clock (no drift), unless the loop fell behind it.
                self._next_at = max(self._next_at + self.tick, now + self.tick / 2)
                self._timer = self.loop.call_at(self._next_at, self._turn)

    def _check(self, now: float) -> None:
        """Time out the connections whose ping's deadline passed unanswered."""
        batches = self._batches
        while batches and batches[0][0] <= now:
            _, payload, protos = batches.popleft()
            for proto in protos:
                if proto.pending_ping_payload is payload and proto in self._slot_of:
                    try:
                        # Looked up on the instance: the hub replaces it per connection.
                        proto.keepalive_timeout()
                    except Exception:
                        log.exception("keepalive timeout of a connection failed")

    def _ping(self, now: float) -> None:
        """Ping the connections of the current slot (not those still awaiting a pong)."""
        slot = self._slots[self._current]
        self._current = (self._current + 1) % len(self._slots)
        if not slot:
            return
        payload = os.urandom(4)
        frame = _ping_frame(payload)
        pinged = []
        for proto in slot:
            if proto.pending_ping_payload is not None:
                continue
            transport = proto.transport
            if proto.close_sent or transport.is_closing() or proto.conn.state is not State.OPEN:
                continue
            proto.pending_ping_payload = payload
            proto.ping_sent_at = now
            transport.write(frame)
            pinged.append(proto)
        if pinged and self.timeout is not None:
            self._batches.append((now + self.timeout, payload, pinged))


_KEEPALIVES: weakref.WeakKeyDictionary[Any, Keepalive] = weakref.WeakKeyDictionary()


def keepalive_for(
    config: Any, loop: asyncio.AbstractEventLoop, interval: float, timeout: float | None
) -> Keepalive:
    """The ``Keepalive`` of the server whose uvicorn ``Config`` is ``config``, on ``loop``."""
    keepalive = _KEEPALIVES.get(config)
    if keepalive is None or keepalive.loop is not loop:
        keepalive = _KEEPALIVES[config] = Keepalive(loop, interval, timeout)
    return keepalive
