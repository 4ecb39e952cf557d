"""Writing frames to one WebSocket client, as directly as the server allows.

Theory of operation
-------------------
Fan-out wants what ``websockets.broadcast()`` does: hand an already-encoded frame to every
client's socket without a task switch per client, and never wait for a slow one. ASGI only
offers an awaitable ``send``; behind it, uvicorn's ``websockets-sansio`` protocol writes the
frame synchronously unless its transport is paused (over its high-water mark).

``FrameWriter`` hides that difference:

* ``try_write(frame)`` writes *now* and returns ``True`` when the transport is known to accept
  data without waiting (uvicorn's sans-I/O protocol, transport not paused); otherwise it
  returns ``False`` and the caller queues the frame in the client's outbox.
* ``send(frame)`` is the general path, used by the outbox's writer task: it waits for the
  transport like any ASGI send.
* ``close_now(code, reason)`` sends a close frame even when the transport is paused (a slow
  consumer must still learn *why* it was dropped once it reads again), then gives the peer
  ``close_timeout`` seconds (``CLOSE_TIMEOUT``) before the connection is aborted. Frames held
  for the client and not written yet are dropped, not written before the close frame (the
  client resumes them with its cursor): the close frame follows only what the kernel and the
  transport's write buffer (bounded by its high-water mark) already hold. That can still be
  megabytes (the kernel's send buffer grows to several on a fast link), which a client that
  just woke up reads at its own pace: as long as it keeps reading (its unread bytes go down
  from one ``close_timeout`` to the next), it gets another ``close_timeout``, up to
  ``CLOSE_GRACE_ROUNDS`` in all; a client that reads nothing for ``close_timeout`` seconds is
  aborted.
* ``on_unanswered_ping(callback)`` takes over the server's keepalive timeout: the outbox, not
  the server, decides how a client that does not answer a ping is closed (a client that stopped
  reading is a slow consumer, 1013), and ``unread_bytes()`` tells how far behind it is.

The close is graceful whatever stands before the close frame: the transport keeps *reading*
until the client answers the close frame, and only then closes (uvicorn's closing handshake).
A socket closed with unread incoming bytes (a late pong, the client's own close frame) is reset
by the kernel, and a reset throws away everything not yet delivered: megabytes of frames a slow
consumer was about to read, and the close frame behind them. uvicorn's own keepalive timeout
does exactly that (it closes the transport, which stops reading, as soon as the ping times out),
which is why the hub handles that timeout itself.

The direct path relies on uvicorn internals (``protocol.conn``, ``protocol.transport``,
``protocol.writable``, ``protocol.keepalive_timeout``). It is detected once per connection;
with another server, or if uvicorn changes, every frame simply takes the general path and the
server's own keepalive stays in charge: correct, a little slower.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import sys
from collections.abc import Callable
from typing import Any, Protocol

from starlette.types import Message, Send
from websockets.protocol import State

log = logging.getLogger("hub.server")

CLOSE_TIMEOUT = 10.0
"""Seconds a client closed by the hub gets to read what was already written to it (the close
frame last) and to answer the close frame; then its connection is aborted, unless it read
some of it meanwhile (``CLOSE_GRACE_ROUNDS``)."""

CLOSE_GRACE_ROUNDS = 6
"""The most ``CLOSE_TIMEOUT`` periods a closed client that keeps reading its backlog is given
(a minute): a reader that makes progress is not cut off in the middle of its close frame's
backlog, and one that trickles cannot hold the connection for ever."""

if sys.platform == "linux":
    import fcntl
    import termios

    def _kernel_unsent(transport: Any) -> int:
        """Bytes in the socket's send queue that the peer has not acknowledged (SIOCOUTQ)."""
        sock = transport.get_extra_info("socket")
        if sock is None:
            return 0
        try:
            out = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
        except (OSError, ValueError):
            return 0
        return max(0, int.from_bytes(out, sys.byteorder, signed=True))

else:

    def _kernel_unsent(transport: Any) -> int:
        """Unknown on this platform."""
        return 0


_last_wire: list[bytes] = [b"", b""]

_held: list[tuple[Any, bytes]] | None = None
"""Direct writes held by ``held_writes``, in order; ``None`` outside it."""


class _Hold:
    """The context manager ``held_writes`` returns: one object, reused (the hub enters it for
    every line of an agent's stream, so it is a class of two plain methods rather than a
    generator's context manager, which costs a generator and a wrapper each time)."""

    __slots__ = ("_depth",)

    def __init__(self) -> None:
        self._depth = 0

    def __enter__(self) -> None:
        global _held
        self._depth += 1
        if self._depth == 1:
            _held = []

    def __exit__(self, *exc: object) -> None:
        global _held
        self._depth -= 1
        if self._depth == 0:
            try:
                _release()
            finally:
                _held = None


_HOLD = _Hold()


def held_writes() -> _Hold:
    """Hold the fan-out's direct writes made inside, and make them, in order, on the way out.

    The hub enters it around each group of lines it read from an agent (one line of a live
    stream, up to ``hub.agents.connection.BATCH_LINES`` of a burst): the work on the lines
    runs first, then the
    writes to every client follow one another, instead of alternating with that work.
    Back-to-back writes cost the kernel less (a reader on the same machine is woken once
    for several frames), and the last line of a burst reaches its clients sooner; the first
    waits for at most one group's work. Nothing can come between a held write and its turn
    except what this module writes itself, and a close frame writes the held frames first
    (``_release``). Nested use is the outer one's. A held write to a client that closed
    meanwhile is dropped. The block must not wait (it is entered by synchronous code only:
    one event loop, one hold at a time).
    """
    return _HOLD


def _release() -> None:
    """Make the held writes now (the batch, if any, stays open); consecutive writes to one
    transport (a catch-up's frames, say) go out as one write."""
    held = _held
    if held:
        i, n = 0, len(held)
        while i < n:
            transport, data = held[i]
            j = i + 1
            while j < n and held[j][0] is transport:
                j += 1
            if not transport.is_closing():
                transport.write(data if j == i + 1 else b"".join(d for _, d in held[i:j]))
            i = j
        held.clear()


def _drop_held(transport: Any) -> None:
    """Forget the held writes meant for ``transport`` (it is being closed: its client
    resumes them with its cursor); the others stay held, in order."""
    held = _held
    if held and any(t is transport for t, _ in held):
        held[:] = [(t, data) for t, data in held if t is not transport]


def wire_frame(payload: bytes) -> bytes:
    """``payload`` as one unmasked, final WebSocket text frame (RFC 6455 section 5.2).

    The last result is kept: a fan-out asks for the same payload object once per client, and
    the cache holds a reference to it, so an identical ``is`` means the very same frame.
    """
    if _last_wire[0] is payload:
        return _last_wire[1]
    length = len(payload)
    if length < 126:
        header = bytes((0x81, length))
    elif length < 65536:
        header = struct.pack("!BBH", 0x81, 126, length)
    else:
        header = struct.pack("!BBQ", 0x81, 127, length)
    wire = header + payload
    _last_wire[0] = payload
    _last_wire[1] = wire
    return wire


class PeerGone(Exception):
    """The client went away while a frame was being sent."""


class FrameWriter(Protocol):
    """Writes text frames to one client."""

    def try_write(self, frame: bytes) -> bool:
        """Write ``frame`` without waiting, or return ``False`` if that is not possible now."""
        ...

    async def writable(self) -> None:
        """Wait until ``try_write`` may succeed (returns at once when that cannot be known)."""
        ...

    async def send(self, frame: bytes) -> None:
        """Write ``frame``, waiting for the transport if it is backed up; ``PeerGone`` when
        the client disconnected."""
        ...

    def close_now(self, code: int, reason: str) -> bool:
        """Send a close frame now, even if the transport is backed up; ``False`` if only
        ``aclose`` can do it."""
        ...

    def unread_bytes(self) -> int:
        """Bytes written for the client that it has not taken yet, as far as can be known:
        the transport's buffer and, where the platform tells, the kernel's unacknowledged
        bytes (0 when unknown)."""
        ...

    def on_unanswered_ping(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` instead of the server's own keepalive close when the client does
        not answer a ping in time (the callback closes it). Without the direct path the
        server's keepalive stays in charge."""
        ...

    async def aclose(self, code: int, reason: str) -> None:
        """Send a close frame through the general path (bounded by the close timeout)."""
        ...


class AsgiFrameWriter:
    """The general writer over an ASGI ``send``, with uvicorn's direct path when available."""

    __slots__ = (
        "_close_timeout",
        "_closed",
        "_plain",
        "_proto",
        "_send",
        "_transport",
        "_writable",
    )

    def __init__(self, send: Send, *, close_timeout: float = CLOSE_TIMEOUT) -> None:
        self._send = send
        self._close_timeout = close_timeout
        self._closed = False
        proto: Any = getattr(send, "__self__", None)
        direct = (
            proto is not None
            and hasattr(proto, "conn")
            and hasattr(proto, "transport")
            and isinstance(getattr(proto, "writable", None), asyncio.Event)
            and hasattr(proto.conn, "send_text")
            and hasattr(proto.conn, "data_to_send")
            and hasattr(proto, "close_sent")
            and hasattr(proto, "disconnected")
        )
        self._proto: Any = proto if direct else None
        # Read once: fixed for the life of the connection (the handshake is over).
        self._writable: Any = proto.writable if direct else None
        self._transport: Any = proto.transport if direct else None
        self._plain = bool(direct and not proto.conn.extensions)

    @property
    def direct(self) -> bool:
        """Whether frames can be written without a task switch."""
        return self._proto is not None

    def try_write(self, frame: bytes) -> bool:
        # Called once per client for every event: the checks are kept to attribute reads of
        # the writer, uvicorn's protocol and the transport.
        proto = self._proto
        if proto is None or self._closed or not self._writable.is_set():
            return False
        transport = self._transport
        if proto.close_sent or proto.disconnected or transport.is_closing():
            return False
        if self._plain:
            # Server frames are unmasked and, without extensions, the same bytes for every
            # client: built once per frame (the fan-out writes one frame to many clients).
            # The websockets state needs no check here: uvicorn sets `close_sent` or closes
            # the transport in the same callback in which the state leaves OPEN (a close
            # sent, a close received, a protocol error, the end of the stream).
            last = _last_wire
            data = last[1] if last[0] is frame else wire_frame(frame)
            if _held is None:
                transport.write(data)
            else:
                _held.append((transport, data))
            return True
        conn = proto.conn
        if conn.state is not State.OPEN:
            return False
        conn.send_text(frame)
        transport.write(b"".join(conn.data_to_send()))
        return True

    async def writable(self) -> None:
        if self._proto is not None:
            # uvicorn's own flow-control flag (also set when the connection is lost).
            await self._proto.writable.wait()

    async def send(self, frame: bytes) -> None:
        message: Message = {"type": "websocket.send", "text": frame.decode()}
        try:
            await self._send(message)
        except Exception as exc:  # the server's own "disconnected" errors vary by server
            raise PeerGone(str(exc) or type(exc).__name__) from exc

    def close_now(self, code: int, reason: str) -> bool:
        proto = self._proto
        if proto is None:
            return False
        if self._closed:
            return True
        self._closed = True
        if getattr(proto, "close_sent", False) or proto.transport.is_closing():
            return True
        # Frames held for this client are dropped, not written ahead of its close frame:
        # behind a backlog the client may be slow to read, they would only delay it.
        _drop_held(proto.transport)
        with contextlib.suppress(Exception):
            proto.conn.send_close(code, reason)
            proto.transport.write(b"".join(proto.conn.data_to_send()))
        proto.close_sent = True
        stop_keepalive = getattr(proto, "stop_keepalive", None)
        if callable(stop_keepalive):
            stop_keepalive()
        # Read on until the client answers the close frame (see the module docstring): uvicorn
        # pauses reading while the app has not taken a message, and the app is done now.
        if getattr(proto, "read_paused", False):
            proto.read_paused = False
            proto.transport.resume_reading()
        closing = getattr(proto, "closing", None)
        if callable(closing):
            closing()  # input already read is searched for the answer too (hub.server.wsprotocol)
        # The client's answer closes the transport gracefully (uvicorn's ``handle_close``,
        # which cancels ``close_timer``); a client that does not read its close frame in time
        # is aborted (``_close_round``).
        if getattr(proto, "close_timer", None) is None:
            self._close_round(proto, self.unread_bytes(), 1)
        return True

    def _close_round(self, proto: Any, unread: int, rounds: int) -> None:
        """Arm the close timer for one ``close_timeout``: when it fires, a client that read
        some of its backlog meanwhile (fewer unread bytes than ``unread``) gets another round,
        up to ``CLOSE_GRACE_ROUNDS``; otherwise the connection is aborted."""

        def fire() -> None:
            transport = proto.transport
            if transport.is_closing():
                return
            left = self.unread_bytes()
            if left and left < unread and rounds < CLOSE_GRACE_ROUNDS:
                self._close_round(proto, left, rounds + 1)
                return
            transport.abort()

        loop = asyncio.get_running_loop()
        proto.close_timer = loop.call_later(self._close_timeout, fire)

    def unread_bytes(self) -> int:
        proto = self._proto
        if proto is None:
            return 0
        transport = proto.transport
        return int(transport.get_write_buffer_size()) + _kernel_unsent(transport)

    def on_unanswered_ping(self, callback: Callable[[], None]) -> None:
        proto = self._proto
        if proto is None or not callable(getattr(proto, "keepalive_timeout", None)):
            return

        def keepalive_timeout() -> None:
            # Replaces uvicorn's, which writes 1011 and closes the transport at once (reading
            # stops, and a late pong then makes the kernel reset the connection).
            proto.pong_timer = None
            proto.pending_ping_payload = None
            if self._closed or proto.close_sent or proto.transport.is_closing():
                return
            callback()

        # uvicorn looks the method up on the instance each time it arms the pong timer.
        proto.keepalive_timeout = keepalive_timeout

    async def aclose(self, code: int, reason: str) -> None:
        if self.close_now(code, reason):
            return
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                self._send({"type": "websocket.close", "code": code, "reason": reason}),
                self._close_timeout,
            )
