"""One Server-Sent Events stream of the Streamable HTTP profile: a ``FrameWriter`` over the
GET requests that come and go for it.

Theory of operation
-------------------
A stream (a connection's, or a connection's for one session) outlives the GET requests that
read it: a client's GET may drop at any moment and come back with ``Last-Event-ID``. So the
writer is given to an ``Outbox`` like a WebSocket's (same byte bound, same slow-consumer close),
and GETs are attached to it with ``open``:

* ``writable()`` waits until a GET is attached; ``try_write`` always declines (an ASGI
  ``send`` must be awaited), so the outbox's writer task sends every frame with ``send``.
* ``send(frame)`` gives the frame its event id and writes ``id:`` + ``data:``. A frame written
  to a GET that turns out to be gone is not lost: the last ``retain_bytes`` of written frames are
  kept, and a GET that comes back with ``Last-Event-ID`` gets every kept frame after that id
  first (``open``). A frame is never an error for the outbox: the stream ends only by ``aclose``.
* Event ids carry the session's cursor (``docs/protocol.md``): a ``session/update`` with a seq
  has the id ``E:S`` (its epoch and seq); any other frame on a session stream ``E:S:k``, the
  ``k``-th after the update ``S``; on the connection's stream ``k``. ``cursor_of`` reads
  ``(E, S)`` back, so an id the stream no longer keeps can still resume the session from its
  cursor.
* ``keepalive()`` writes an SSE comment (proxies close idle responses); ``aclose`` writes a
  last ``event: close`` with ``{"code", "reason"}`` (the codes of the WebSocket profile) and
  ends the response.

All writes to the current GET go through one lock, so a keepalive, a catch-up and the outbox's
frames never interleave.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import orjson
from starlette.types import Send

log = logging.getLogger("hub.server")

CLOSE_TIMEOUT = 10.0
"""Seconds a closed stream's GET gets to take the last event before it is left."""

_UPDATE_OPEN = b'{"jsonrpc":"2.0","method":"session/update",'
_META_KEY = b',"_meta":{"acp-hub":'
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    # nginx buffers proxied responses unless told not to; an SSE stream must not be buffered.
    (b"x-accel-buffering", b"no"),
]


def event(event_id: str, frame: bytes) -> bytes:
    """One SSE event: ``id:`` and one ``data:`` line (frames are single-line JSON)."""
    return b"id: " + event_id.encode() + b"\ndata: " + frame + b"\n\n"


def cursor_of(event_id: str) -> tuple[int, int] | None:
    """The session cursor ``(epoch, seq)`` an event id of a session stream carries."""
    parts = event_id.split(":")
    if len(parts) not in (2, 3):
        return None
    try:
        epoch, seq = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return (epoch, seq) if seq >= 0 else None


def _update_meta(frame: bytes) -> dict[str, Any] | None:
    """``_meta["acp-hub"]`` of a ``session/update`` frame (its tail, as sessions encode it)."""
    if not frame.startswith(_UPDATE_OPEN):
        return None
    at = frame.rfind(_META_KEY)
    if at < 0:
        return None
    try:
        meta = orjson.loads(frame[at + len(_META_KEY) : -3])
    except orjson.JSONDecodeError:
        return None
    return meta if isinstance(meta, dict) else None


class SseWriter:
    """The ``FrameWriter`` of one stream; see the module docstring."""

    def __init__(self, *, session: bool, retain_bytes: int, name: str) -> None:
        self._session = session
        self._retain_bytes = retain_bytes
        self._name = name
        self._retained: deque[tuple[str, bytes]] = deque()
        self._retained_size = 0
        self._epoch = 0
        self._seq = 0
        self._k = 0
        self._send: Send | None = None
        self._attached = anyio.Event()
        self._detached = anyio.Event()
        self._lock = anyio.Lock()
        self._closed = False
        self._writing: anyio.CancelScope | None = None
        self._stalled = False

    @property
    def attached(self) -> bool:
        """Whether a GET is reading the stream now."""
        return self._send is not None

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the GETs ------------------------------------------------------------------------------

    def keeps(self, event_id: str) -> bool:
        """Whether the frames after ``event_id`` can be written again from what is kept."""
        return any(i == event_id for i, _ in self._retained)

    async def open(self, send: Send, last_event_id: str | None) -> tuple[anyio.Event, bool]:
        """Attach the GET whose ASGI ``send`` this is (the previous one, if any, ends): start
        its response and write the kept frames after ``last_event_id``. Returns the event set
        when this GET is replaced or the stream closes, and whether ``last_event_id`` was found
        among the kept frames (``True`` without one)."""
        async with self._lock:
            await self._end_current()
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            found = last_event_id is None
            if last_event_id is not None:
                ids = [i for i, _ in self._retained]
                if last_event_id in ids:
                    found = True
                    for event_id, frame in list(self._retained)[ids.index(last_event_id) + 1 :]:
                        await send(_body(event(event_id, frame)))
            if self._closed:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                done = anyio.Event()
                done.set()
                return done, found
            self._send = send
            self._detached = anyio.Event()
            self._attached.set()
            return self._detached, found

    async def detach(self, send: Send) -> None:
        """The GET whose ``send`` this is went away (if it is still the current one)."""
        async with self._lock:
            if self._send is send:
                self._send = None
                self._attached = anyio.Event()
                self._detached.set()

    async def keepalive(self) -> None:
        """An SSE comment on the current GET."""
        async with self._lock:
            await self._write(b": keepalive\n\n")

    async def _end_current(self) -> None:
        send = self._send
        if send is None:
            return
        self._send = None
        self._attached = anyio.Event()
        self._detached.set()
        try:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception as exc:  # the server's own "disconnected" errors vary by server
            log.debug("= %s: ending a replaced GET: %s", self._name, exc)

    async def _write(self, data: bytes) -> None:
        send = self._send
        if send is None or self._stalled:
            return
        try:
            with anyio.CancelScope() as scope:
                self._writing = scope
                await send(_body(data))
            self._writing = None
            if scope.cancelled_caught:
                # Closed while the client did not take what was written (a slow consumer):
                # nothing more can be written to it.
                self._stalled = True
        except Exception as exc:  # the client went away: the frame stays kept for a resume
            log.info("= %s: a GET went away while written to (%s)", self._name, exc)
            self._send = None
            self._attached = anyio.Event()
            self._detached.set()

    # -- FrameWriter -----------------------------------------------------------------------

    def try_write(self, frame: bytes) -> bool:
        return False

    async def writable(self) -> None:
        await self._attached.wait()

    async def send(self, frame: bytes) -> None:
        event_id = self._next_id(frame)
        self._retained.append((event_id, frame))
        self._retained_size += len(frame)
        while self._retained_size > self._retain_bytes and len(self._retained) > 1:
            self._retained_size -= len(self._retained.popleft()[1])
        async with self._lock:
            await self._write(event(event_id, frame))

    def close_now(self, code: int, reason: str) -> bool:
        # An ASGI send must be awaited: ``aclose`` writes the close. The outbox's writer task
        # may be waiting for a GET that will not come, or in a write the client does not read
        # (a slow consumer): let it go on to ``aclose``.
        self._attached.set()
        if self._writing is not None:
            self._writing.cancel()
        return False

    def unread_bytes(self) -> int:
        return 0

    def on_unanswered_ping(self, callback: Callable[[], None]) -> None:
        return None  # keepalives are comments: HTTP has no pong

    async def aclose(self, code: int, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self._attached.set()  # nobody waits for a GET any more
        payload = orjson.dumps({"code": code, "reason": reason})
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            async with self._lock:
                await self._write(b"event: close\ndata: " + payload + b"\n\n")
                if self._stalled:
                    # The response cannot be ended cleanly: its GET just stops (the server
                    # closes the TCP connection under it).
                    self._send = None
                    self._detached.set()
                else:
                    await self._end_current()

    # -- event ids -------------------------------------------------------------------------

    def _next_id(self, frame: bytes) -> str:
        if not self._session:
            self._k += 1
            return str(self._k)
        meta = _update_meta(frame)
        if meta is not None:
            epoch, seq = meta.get("epoch"), meta.get("seq")
            if isinstance(epoch, int) and epoch != self._epoch:
                self._epoch, self._seq, self._k = epoch, 0, 0
            if isinstance(seq, int) and seq != self._seq:
                self._seq, self._k = seq, 0
                return f"{self._epoch}:{seq}"
        self._k += 1
        return f"{self._epoch}:{self._seq}:{self._k}"


def _body(data: bytes) -> dict[str, Any]:
    return {"type": "http.response.body", "body": data, "more_body": True}
