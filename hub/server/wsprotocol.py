"""The WebSocket protocol ``/acp`` is served with: uvicorn's ``websockets-sansio`` protocol,
reading a client's input a slice at a time.

Theory of operation
-------------------
uvicorn parses everything one socket read delivers in one call (``data_received``): up to a
few hundred kilobytes, thousands of small frames from a client that sends as fast as it can,
10-20 ms during which no other client is served. Its flow control (reading pauses while
parsed messages wait for the application) only applies after that call.

``FairWebSocketProtocol`` keeps what a read delivered and parses it ``READ_SLICE`` bytes at a
time, and only when the application asks for a message and none is parsed yet (``receive``):
a connection's input costs the event loop at most one slice per message its handler takes,
and the hub's read loop yields after each message (``hub.server.connection``), so a flooding
client takes its turn with the others. Reading from the socket stays paused while unparsed
input is kept, so that input is bounded by one read. After the hub sent its close frame,
reads go on until the client answers it (a socket closed with unread input is reset, and
the reset destroys what the client has not read yet), but what a flooding client had sent
meanwhile (megabytes in the kernel's buffers) is parsed one slice per turn of the event loop
(and discarded), not in one go: until the answer comes or the close timeout aborts the
connection. The opening handshake is parsed as uvicorn does.

The messages parsed for the application wait in an ``Inbox`` instead of uvicorn's
``asyncio.Queue``: it holds what that queue held for uvicorn (``put_nowait``, ``empty`` and
``get``, one reader) without the queue's four deques and its event, about 3 KB for every
connection (benchmark S8). The write flow-control flag (``writable``) is a ``Writable``,
an ``asyncio.Event`` without the deque of waiters it makes up front (760 bytes), and the
handshake's response is let go of once it is sent.

It relies on uvicorn internals (``conn``, ``queue``, ``read_paused``, ``close_sent``,
``handshake_complete``), as ``hub.server.transport`` does; ``tests/server/test_wsprotocol.py``
checks them.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, cast

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame

from hub.server.keepalive import keepalive_for

__all__ = ["READ_SLICE", "FairWebSocketProtocol", "Inbox", "Writable"]

READ_SLICE = 2 * 1024
"""Bytes of a client's input parsed at once: about 35 small requests, a tenth of a
millisecond. A flooding client's slice is work every other client waits behind: with 8 KiB
slices (about 140 requests, half a millisecond and more on a busy core) a normal client's
round-trip p99 doubled under a flood (benchmark S9, 2.2 against 1.0 ms); with 2 KiB it was
no higher than without the flood. A large message costs a few more calls (about 0.2 ms
more per megabyte)."""


class Inbox:
    """The messages uvicorn's protocol parsed for the application, in order: the part of
    ``asyncio.Queue`` the protocol uses (``put_nowait``, ``empty``, ``get``) for one reader,
    the application's ``receive``. An ``asyncio.Queue`` costs four deques (760 bytes each
    while empty) and an event; this costs a list and, while the reader waits, a future."""

    __slots__ = ("_head", "_items", "_waiter")

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._head = 0
        """The index of the next message in ``_items`` (taken ones are cleared, not moved)."""
        self._waiter: asyncio.Future[None] | None = None

    def qsize(self) -> int:
        return len(self._items) - self._head

    def empty(self) -> bool:
        return self._head >= len(self._items)

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def get_nowait(self) -> Any:
        if self.empty():
            raise asyncio.QueueEmpty
        item = self._items[self._head]
        self._items[self._head] = None
        self._head += 1
        if self._head == len(self._items):
            self._items.clear()
            self._head = 0
        return item

    async def get(self) -> Any:
        while self.empty():
            if self._waiter is not None:
                raise RuntimeError("the inbox has one reader, and it is waiting already")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self.get_nowait()


class Writable(asyncio.Event):
    """uvicorn's write flow-control flag: an ``asyncio.Event`` (``hub.server.transport``
    checks for one) whose waiters are listed only while some wait. ``asyncio.Event`` makes a
    deque for them up front, 760 bytes for every connection, which nearly never waits."""

    def __init__(self) -> None:
        # Not the base class's: its state is the deque this class does without.
        self._set = False
        self._futures: list[asyncio.Future[None]] | None = None

    def __repr__(self) -> str:
        return f"<Writable {'set' if self._set else 'unset'}>"

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        futures, self._futures = self._futures, None
        for future in futures or ():
            if not future.done():
                future.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> Literal[True]:
        if self._set:
            return True
        future = asyncio.get_running_loop().create_future()
        if self._futures is None:
            self._futures = []
        futures = self._futures
        futures.append(future)
        try:
            await future
            return True
        finally:
            if future in futures:
                futures.remove(future)


class FairWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol, parsing input a slice at a time (see above)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # In place of uvicorn's queue (see the module docstring): the protocol only calls
        # ``put_nowait``, ``empty`` and ``get`` on it, and the application is its one reader.
        self.queue = cast("asyncio.Queue[Any]", Inbox())
        self.writable = Writable()
        self.writable.set()
        self._unparsed = b""
        """Input read from the socket and not parsed yet, from ``_offset`` on."""
        self._offset = 0
        self._scheduled = False

    # -- keepalive (hub.server.keepalive) ---------------------------------------------------

    def start_keepalive(self) -> None:
        if self.ping_interval is not None and self.ping_interval > 0:
            keepalive_for(self.config, self.loop, self.ping_interval, self.ping_timeout).add(self)

    def stop_keepalive(self) -> None:
        if self.ping_interval is not None and self.ping_interval > 0:
            keepalive_for(self.config, self.loop, self.ping_interval, self.ping_timeout).discard(
                self
            )
        self.pending_ping_payload = None

    def handle_pong(self, event: Frame) -> None:
        # Only the pong of the ping in flight counts (not an unsolicited or a stale one).
        pending = self.pending_ping_payload
        if pending is not None and bytes(event.data) == pending:
            self.last_ping_rtt = self.loop.time() - self.ping_sent_at
            self.pending_ping_payload = None

    def data_received(self, data: bytes) -> None:
        if not self.handshake_complete:
            super().data_received(data)
            return
        if self._offset < len(self._unparsed):
            self._unparsed = self._unparsed[self._offset :] + data
        else:
            self._unparsed = data
        self._offset = 0
        if self.close_sent:
            self._pause()
            self._after_close()
        else:
            self._parse_until_a_message()
            self._flow()

    def _pause(self) -> None:
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def _flow(self) -> None:
        """Read from the socket only while nothing read waits: no message for the handler,
        no input unparsed (a slice may hold only part of a frame, or a ping or pong)."""
        if self._unparsed or not self.queue.empty():
            self._pause()
        elif self.read_paused and not self.close_sent and not self.transport.is_closing():
            self.read_paused = False
            self.transport.resume_reading()

    def closing(self) -> None:
        """The hub sent its close frame: look for the client's answer in what was read."""
        if self._unparsed:
            self._after_close()

    async def send(self, message: Any) -> None:
        await super().send(message)
        if self.close_sent:
            self.closing()
        elif message["type"] == "websocket.accept" and self.handshake_complete:
            # The handshake's response is sent: uvicorn reads it only before (its headers
            # are about 1 KB that every connection would keep).
            del self.response

    def _after_close(self) -> None:
        """After the close frame, input is read only to find the client's answer to it (the
        messages are discarded): one slice per turn of the event loop, however much a client
        that floods the hub had sent, until the answer comes or the close timeout ends it."""
        if self._scheduled or self.transport.is_closing():
            return
        self._scheduled = True
        self.loop.call_soon(self._slice_after_close)

    def _slice_after_close(self) -> None:
        self._scheduled = False
        if self.transport.is_closing():
            return
        piece = self._next_slice()
        if piece:
            super().data_received(piece)
        if self._unparsed:
            self._after_close()
        elif self.read_paused and not self.transport.is_closing():
            self.read_paused = False
            self.transport.resume_reading()

    def _next_slice(self) -> bytes:
        end = self._offset + READ_SLICE
        piece = self._unparsed[self._offset : end]
        self._offset = min(end, len(self._unparsed))
        if self._offset == len(self._unparsed):
            self._unparsed, self._offset = b"", 0
        return piece

    def _parse_until_a_message(self) -> None:
        """Parse slices until a message waits for the application or nothing is left."""
        while self.queue.empty() and self._unparsed and not self.close_sent:
            super().data_received(self._next_slice())
            if self.transport.is_closing():
                break
        if self.close_sent and self._unparsed:
            self._after_close()

    def connection_lost(self, exc: Exception | None) -> None:
        # What the client sent before it went is the application's, before the disconnect.
        if self._offset < len(self._unparsed) and not self.close_sent:
            rest = self._unparsed[self._offset :]
            self._unparsed, self._offset = b"", 0
            super().data_received(rest)
        super().connection_lost(exc)

    async def receive(self) -> Any:
        self._parse_until_a_message()
        if self.queue.empty():
            # What was read held no whole message (the start of one whose end is not read
            # yet): read on, or the handler would wait for ever for the rest of that frame.
            self._flow()
        message = await self.queue.get()
        self._flow()
        return message
