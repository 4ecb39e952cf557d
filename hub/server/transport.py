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
  ``close_timeout`` seconds before the connection is aborted.

The direct path relies on uvicorn internals (``protocol.conn``, ``protocol.transport``,
``protocol.writable``). It is detected once per connection; with another server, or if uvicorn
changes, every frame simply takes the general path: correct, a little slower.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from typing import Any, Protocol

from starlette.types import Message, Send
from websockets.protocol import State

log = logging.getLogger("hub.server")


_last_wire: list[bytes] = [b"", b""]


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

    async def aclose(self, code: int, reason: str) -> None:
        """Send a close frame through the general path (bounded by the close timeout)."""
        ...


class AsgiFrameWriter:
    """The general writer over an ASGI ``send``, with uvicorn's direct path when available."""

    def __init__(self, send: Send, *, close_timeout: float = 10.0) -> None:
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
        )
        self._proto: Any = proto if direct else None

    @property
    def direct(self) -> bool:
        """Whether frames can be written without a task switch."""
        return self._proto is not None

    def try_write(self, frame: bytes) -> bool:
        proto = self._proto
        if proto is None or self._closed:
            return False
        if not proto.writable.is_set() or proto.transport.is_closing():
            return False
        if getattr(proto, "close_sent", False) or getattr(proto, "disconnected", False):
            return False
        conn = proto.conn
        if conn.extensions or conn.state is not State.OPEN:
            conn.send_text(frame)
            proto.transport.write(b"".join(conn.data_to_send()))
        else:
            # Server frames are unmasked and, without extensions, the same bytes for every
            # client: built once per frame (the fan-out writes one frame to many clients).
            proto.transport.write(wire_frame(frame))
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
        with contextlib.suppress(Exception):
            proto.conn.send_close(code, reason)
            proto.transport.write(b"".join(proto.conn.data_to_send()))
        proto.close_sent = True
        loop = asyncio.get_running_loop()
        if getattr(proto, "close_timer", None) is None:
            proto.close_timer = loop.call_later(self._close_timeout, proto.transport.abort)
        return True

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
