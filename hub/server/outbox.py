"""A client's outbox: the ordered frames it has not received yet, bounded in bytes.

Theory of operation
-------------------
``push`` is called synchronously by the fan-out for every frame meant for this client. When
nothing is queued and the transport accepts data at once, the frame is written directly (no
task switch, like ``websockets.broadcast``). Otherwise it is appended to the queue, and the
outbox's writer task (``run``) sends queued frames in order as the transport drains.

Every queued byte counts against ``limit``: live events, responses, the hub's own requests and
notifications alike (a client that never reads but keeps asking must not grow the hub). A client
that passes the bound is a slow consumer: its queue is dropped and it is closed with 1013; it
reconnects and resumes with its cursor, so nothing is lost for it and nobody else waits for it.
A replay is queued with ``push_pages`` as a lazy source, not as bytes: the writer builds and
encodes its pages as the transport drains (so its bytes are never queued), up to
``CATCH_UP_BURST`` bytes of them written together (one write to the transport, not one per
page), and lets the event loop run between those bursts; its size is the session state's,
which the hub bounds.

The writer is a task only while there is something to write. A WebSocket connection hands
its outbox a way to start one (``start``): the writer is started when a frame has to be
queued (or a close written through the general path) and ends once the queue is empty, so
an idle client (most of them, most of the time) costs no task, no event and no queue: about
5 KB less each (benchmark S8). ``run`` is the other way, a writer task for the outbox's whole
life (the streams of a Streamable HTTP connection).

A client that stops reading fills the kernel's buffers (megabytes on a fast link) before its
outbox, and at a low rate that can take longer than the keepalive allows: its ping is stuck
behind the data it has not read. The writer hands that timeout to the outbox
(``FrameWriter.on_unanswered_ping``): a client that still has bytes to read is a slow consumer
too (1013); one that has none did not answer at all (1011, keepalive ping timeout). Either way
the close frame comes after everything already written to it (never after frames still
queued: those are dropped), and the connection is aborted if it stops reading that for
``transport.CLOSE_TIMEOUT`` seconds (``transport.CLOSE_GRACE_ROUNDS``).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Protocol

import anyio
import anyio.lowlevel

from hub.server.close_codes import KEEPALIVE_TIMEOUT, SLOW_CONSUMER
from hub.server.transport import FrameWriter, PeerGone, held_writes

log = logging.getLogger("hub.server")

__all__ = ["ConnectionOutbox", "Outbox", "Spawn"]

Spawn = Callable[[Callable[[], Awaitable[bool]]], None]
"""``spawn(write)`` runs ``write()`` in a task of the connection's (it may drop it when the
connection is ending); ``write`` returns whether the outbox ended (closed, or its client
gone), after which the connection stops reading."""


class ConnectionOutbox(Protocol):
    """What a connection needs from its outbox (``Outbox`` is one, the Streamable HTTP
    ``StreamOutbox`` another; see ``Outbox`` for the contract of each call)."""

    @property
    def closed(self) -> bool: ...

    @property
    def close_code(self) -> int | None: ...

    @property
    def queued_bytes(self) -> int: ...

    def push(self, frame: bytes) -> bool: ...

    def push_pages(self, pages: Iterable[bytes]) -> bool: ...

    def close(self, code: int, reason: str) -> None: ...

    def finish(self) -> None: ...

    def start(self, spawn: Spawn) -> None: ...

    async def run(self) -> None: ...


CATCH_UP_BURST = 64 * 1024
"""About how many bytes of a lazy source (a replay, a resume's events) the writer takes and
writes at once before it lets the event loop run. A client that does not take batches gets one
frame per event: written one at a time, a resume after a few seconds away cost a write and a
task switch per event, which was most of a reconnect storm's work (S10)."""


class Outbox:
    """Ordered, byte-bounded frames for one client; see the module docstring."""

    __slots__ = (
        "_about",
        "_closing",
        "_done",
        "_limit",
        "_name",
        "_queue",
        "_queued_bytes",
        "_spawn",
        "_wakeup",
        "_writer",
        "_writing",
    )

    def __init__(self, writer: FrameWriter, limit: int, *, name: str = "client") -> None:
        self._writer = writer
        self._limit = limit
        self._name = name
        # Outbox lines are logged from the fan-out's and the server's tasks, outside the
        # client's own: they name it explicitly (hub.server.logs).
        self._about = {"connection": name}
        # Frames (counted against the bound), and lazy sources of frames (a replay being
        # built, whose frames are made only when the transport takes them); made when a
        # first frame waits, and let go of when the writer emptied it (an empty deque is
        # 760 bytes).
        self._queue: deque[bytes | Iterator[bytes]] | None = None
        self._queued_bytes = 0  # bytes of the frames in the queue
        self._spawn: Spawn | None = None
        """How writers are started (``start``); ``None``: ``run`` is the writer."""
        self._writing = False
        """Whether a writer started by ``_spawn`` has not returned yet."""
        self._wakeup: anyio.Event | None = None
        """What ``run`` waits on while there is nothing to write."""
        self._closing: tuple[int, str] | None = None
        self._done = False
        writer.on_unanswered_ping(self._unanswered_ping)

    @property
    def queued_bytes(self) -> int:
        """Bytes of the frames waiting in the queue (what the bound applies to)."""
        return self._queued_bytes

    @property
    def catching_up(self) -> bool:
        """Whether a catch-up (``push_pages``: a replay, a resume) is still being written."""
        return any(not isinstance(item, bytes) for item in self._queue or ())

    @property
    def close_code(self) -> int | None:
        """The code the hub closed the client with (``close``), ``None`` if it did not."""
        return self._closing[0] if self._closing is not None else None

    @property
    def closed(self) -> bool:
        """Whether the outbox stopped accepting frames (closing or closed)."""
        return self._closing is not None or self._done

    def push(self, frame: bytes) -> bool:
        """Queue ``frame`` after everything pushed before; ``False`` once the outbox is closed.

        A push that takes the queue over the limit closes the client with 1013.
        """
        if self._closing is not None or self._done:
            return False
        queue = self._queue
        if not queue:
            if self._writer.try_write(frame):
                return True
            if queue is None:
                queue = self._queue = deque()
        queue.append(frame)
        self._queued_bytes += len(frame)
        if self._queued_bytes > self._limit:
            log.warning(
                "! %s: slow consumer, %d bytes queued over the bound of %d: closing with 1013",
                self._name,
                self._queued_bytes,
                self._limit,
                extra=self._about,
            )
            self.close(SLOW_CONSUMER, "slow consumer: resume with your cursor")
            return False
        self._wake()
        return True

    def push_pages(self, pages: Iterable[bytes]) -> bool:
        """Queue the frames ``pages`` yields, after everything pushed before and before
        everything pushed later (a replay); ``False`` once the outbox is closed.

        ``pages`` is consumed lazily by the writer task, one frame each time the transport
        takes more, yielding to the event loop in between: building and encoding a large
        replay is spread out instead of stalling every other client while it is built.
        """
        if self._closing is not None or self._done:
            return False
        if self._queue is None:
            self._queue = deque()
        self._queue.append(iter(pages))
        self._wake()
        return True

    def close(self, code: int, reason: str) -> None:
        """Drop whatever is queued and close the client with ``code``; never waits."""
        if self._closing is not None or self._done:
            return
        self._closing = (code, reason)
        self._queue = None
        self._queued_bytes = 0
        if self._writer.close_now(code, reason):
            self._done = True
        self._wake()

    def _unanswered_ping(self) -> None:
        """The client did not answer a keepalive ping in time: close it, with 1013 if it has
        not read what it was sent (the ping is behind it), else with 1011."""
        if self._closing is not None or self._done:
            return
        queued = sum(len(f) if isinstance(f, bytes) else 1 for f in self._queue or ())
        behind = queued + self._writer.unread_bytes()
        if behind > 0:
            log.warning(
                "! %s: slow consumer, no answer to a ping and %d bytes not read: closing with 1013",
                self._name,
                behind,
                extra=self._about,
            )
            self.close(SLOW_CONSUMER, "slow consumer: resume with your cursor")
        else:
            log.info("! %s: no answer to a ping: closing with 1011", self._name, extra=self._about)
            self.close(KEEPALIVE_TIMEOUT, "keepalive ping timeout")

    def finish(self) -> None:
        """Stop the writer after the queued frames (the connection is going away)."""
        self._done = True
        if self._spawn is None:
            self._wake()
        # Else a writer runs while frames are queued, and ends after them; with none queued
        # there is no writer to stop.

    def start(self, spawn: Spawn) -> None:
        """Have ``spawn`` start a writer whenever there is something to write, instead of
        ``run`` (see the module docstring); what is already waiting is written now."""
        self._spawn = spawn
        if self._queue or self._closing is not None:
            self._wake()

    def _wake(self) -> None:
        """There is something for the writer: queued frames, a close to write, the end."""
        spawn = self._spawn
        if spawn is None:
            if self._wakeup is not None:
                self._wakeup.set()
        elif not self._writing:
            self._writing = True
            spawn(self._write_started)

    async def _write_started(self) -> bool:
        try:
            return await self._write()
        finally:
            self._writing = False

    def _burst(self, source: Iterator[bytes], written: int) -> None:
        """Write more of the lazy ``source`` at the head of the queue, up to
        ``CATCH_UP_BURST`` bytes with the ``written`` ones, held so that they reach the
        transport as one write. A page the writer cannot write directly goes back to the head
        of the queue, before the rest of ``source``."""
        with held_writes():
            while written < CATCH_UP_BURST and self._closing is None:
                frame = next(source, None)
                if frame is None:
                    return  # exhausted: the next round takes it off the queue
                if not self._writer.try_write(frame):
                    queue = self._queue
                    if queue is not None:  # else closed meanwhile: nothing more is written
                        queue.appendleft(frame)
                        self._queued_bytes += len(frame)
                    return
                written += len(frame)

    async def run(self) -> None:
        """The writer task: send queued frames in order until the outbox is closed."""
        while not await self._write():
            self._wakeup = anyio.Event()
            await self._wakeup.wait()

    async def _write(self) -> bool:
        """Send the queued frames in order until none is left (``False``), or the outbox
        closed (its close frame written) or its client went away (``True``)."""
        while (queue := self._queue) and self._closing is None:
            # Wait for the transport first, and take the frame only then: a frame must
            # never be in flight in a server `send` when a close (1013) is written, or
            # the server would refuse the send after the close and drop the connection
            # before the client reads its close code.
            await self._writer.writable()
            if self._closing is not None or queue is not self._queue or not queue:
                break
            head = queue[0]
            frame = head if isinstance(head, bytes) else next(head, None)
            lazy = frame is not head
            if frame is None or not lazy:
                queue.popleft()
                if not queue:
                    self._queue = None
            if frame is None:
                continue  # the lazy source is exhausted
            if not lazy:
                self._queued_bytes -= len(frame)
            if not self._writer.try_write(frame):
                try:
                    await self._writer.send(frame)
                except PeerGone as exc:
                    log.info("= %s: gone while sending (%s)", self._name, exc, extra=self._about)
                    self._queue = None
                    self._queued_bytes = 0
                    self._done = True
                    return True
            if lazy:
                assert not isinstance(head, bytes)
                self._burst(head, len(frame))
                # Let the rest of the hub run between the bursts of a replay.
                await anyio.lowlevel.checkpoint()
        if self._closing is not None:
            if not self._done:
                self._done = True
                code, reason = self._closing
                await self._writer.aclose(code, reason)
            return True
        return self._done
