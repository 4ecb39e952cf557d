"""The streams of one Streamable HTTP connection: ``StreamOutbox`` routes each frame the
connection sends to the SSE stream it belongs on (``hub.server.streamable_http`` has the routing
rules: the connection's stream, a session's stream, or the ``initialize`` POST's own body).

Each stream is an ``Outbox`` (byte-bounded, slow consumers closed) over an ``SseWriter``
(``hub.server.streamable_http.sse_stream``); a frame for a stream that no GET reads yet waits
in that stream's outbox.

What a client can make a connection hold is bounded (``docs/limits.md``):

* a session's stream exists only for a session the connection is attached to, or one a GET
  opened (its session exists and the credential may see it); a frame about any other session
  (the answer to a request whose ``Acp-Session-Id`` names no session of the connection, a
  refusal) goes on the connection's stream;
* at most ``max_streams_per_connection`` session streams: one more first takes the place of a
  stream nobody reads, with nothing queued, of a session the connection left; failing that,
  the session's frames go on the connection's stream (and a GET for it is refused);
* every stream's queued bytes together stay under ``outbox_bytes`` (past it: 1013, as one
  WebSocket outbox);
* the answer routes (which stream answers which request) number at most
  ``max_pending_requests + ROUTE_SLACK``: a request beyond them is refused before it is read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any

import anyio
import anyio.abc
import orjson

from hub.server.close_codes import SLOW_CONSUMER
from hub.server.outbox import Outbox, Spawn
from hub.server.streamable_http.sse_stream import SseWriter
from hub.settings import Settings

__all__ = ["RETAIN_SHARE", "ROUTE_SLACK", "StreamOutbox"]

log = logging.getLogger("hub.server")

RETAIN_SHARE = 4
"""A stream keeps the last ``outbox_bytes // RETAIN_SHARE`` bytes it wrote, for GETs that come
back with ``Last-Event-ID`` (1 MiB with the default bound)."""
ROUTE_SLACK = 128
"""Answer routes a connection may hold beyond ``max_pending_requests``: the requests waiting
in its inbox (64) and those handled whose answer is on its way."""

_UPDATE_PREFIX = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'


class StreamOutbox:
    """A ``ConnectionOutbox`` that routes each frame to its stream (``hub.server.streamable_http``
    has the rules)."""

    def __init__(self, settings: Settings, name: str) -> None:
        self._settings = settings
        self._name = name
        self.streams: dict[str | None, Outbox] = {}
        self.writers: dict[str | None, SseWriter] = {}
        self._answers_to: dict[Any, str | None] = {}
        self._requests_on: dict[Any, str | None] = {}
        self._waiting: dict[Any, list[bytes]] = {}
        self._waiter = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing: tuple[int, str] | None = None
        self._finished = False
        self._done = anyio.Event()
        self.max_streams = settings.max_streams_per_connection
        self.max_routes = settings.max_pending_requests + ROUTE_SLACK
        self.attached: Callable[[str], bool] = _nowhere
        """Whether the connection is attached to a session (its owner sets it)."""
        self.stream(None)

    # -- streams -----------------------------------------------------------------------------

    def stream(self, session_id: str | None) -> Outbox:
        """The outbox of the connection's stream (``None``) or of a session's, made on demand."""
        outbox = self.streams.get(session_id)
        if outbox is None:
            name = self._name if session_id is None else f"{self._name}/{session_id}"
            writer = SseWriter(
                session=session_id is not None,
                retain_bytes=self._settings.outbox_bytes // RETAIN_SHARE,
                name=name,
            )
            outbox = Outbox(writer, self._settings.outbox_bytes, name=name)
            self.streams[session_id] = outbox
            self.writers[session_id] = writer
            if self._tg is not None:
                self._tg.start_soon(self._run_stream, session_id, outbox)
        return outbox

    @property
    def session_streams(self) -> int:
        """How many session streams the connection holds."""
        return len(self.streams) - 1

    @property
    def routes(self) -> int:
        """How many answers to the client's requests wait to be routed."""
        return len(self._answers_to)

    def open_stream(self, session_id: str, *, check_only: bool = False) -> bool:
        """Make ``session_id``'s stream for a GET (the caller checked the session); ``False``
        when the connection holds ``max_streams`` already and none can give way. With
        ``check_only``, only whether it could be made (a stream may give way already)."""
        if session_id not in self.streams and not self._room():
            return False
        if not check_only:
            self.stream(session_id)
        return True

    def _target(self, session_id: str | None) -> str | None:
        """The stream a frame about ``session_id`` goes on: its own while it exists or while
        the connection is attached to the session (room permitting), else the connection's."""
        if session_id is None or session_id in self.streams:
            return session_id
        if self.attached(session_id) and self._room():
            return session_id
        return None

    def _room(self) -> bool:
        """Whether one more session stream may be made, once a stream nobody reads, with
        nothing queued, of a session the connection left gave way if need be."""
        if self.session_streams < self.max_streams:
            return True
        for session_id, outbox in self.streams.items():
            if (
                session_id is not None
                and not self.attached(session_id)
                and not self.writers[session_id].attached
                and outbox.queued_bytes == 0
            ):
                del self.streams[session_id]
                del self.writers[session_id]
                outbox.finish()
                return True
        return False

    def reset_stream(self, session_id: str) -> Outbox:
        """Drop what waits for ``session_id``'s stream and start it afresh (a resume from a
        cursor the stream no longer keeps will queue the session's events again)."""
        old = self.streams.pop(session_id, None)
        self.writers.pop(session_id, None)
        if old is not None:
            old.finish()
        return self.stream(session_id)

    def expect_answer(self, request_id: Any, session_id: str | None) -> None:
        """The answer to the client's request ``request_id`` goes on ``session_id``'s stream
        (``None``: the connection's)."""
        self._answers_to[_key(request_id)] = session_id

    @property
    def routes_full(self) -> bool:
        """Whether the client has ``max_routes`` requests unanswered: refuse the next."""
        return len(self._answers_to) >= self.max_routes

    def answered(self, request_id: Any) -> None:
        """The client answered the hub's request ``request_id``: nothing to withdraw later."""
        self._requests_on.pop(_key(request_id), None)

    def hold_answer(self, request_id: Any) -> None:
        """The answer to ``request_id`` is the POST's own body (``initialize``)."""
        self._waiting[_key(request_id)] = []

    async def held_answer(self, request_id: Any) -> bytes:
        """Wait for the answer ``hold_answer`` kept for the POST."""
        key = _key(request_id)
        while not self._waiting.get(key):
            if self.closed:
                raise anyio.ClosedResourceError
            waiter = self._waiter
            await waiter.wait()
        return self._waiting.pop(key)[0]

    def _route(self, frame: bytes) -> tuple[str, Any]:
        """``("stream", session id or None)`` or ``("post", request id)`` for ``frame``."""
        if frame.startswith(_UPDATE_PREFIX):
            end = frame.find(b'"', len(_UPDATE_PREFIX))
            return "stream", frame[len(_UPDATE_PREFIX) : end].decode()
        try:
            obj = orjson.loads(frame)
        except orjson.JSONDecodeError:
            return "stream", None
        if not isinstance(obj, dict):
            return "stream", None
        params = obj.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        session_id = session_id if isinstance(session_id, str) else None
        if "method" in obj:
            if obj["method"] == "$/cancel_request" and isinstance(params, dict):
                # Withdrawing a hub request: on the stream the request went on.
                return "stream", self._requests_on.pop(_key(params.get("requestId")), None)
            if "id" in obj:
                # Its withdrawal goes where the request went, whatever room there is by then.
                target = self._target(session_id)
                self._requests_on[_key(obj["id"])] = target
                return "stream", target
            return "stream", session_id
        request_id = _key(obj.get("id"))
        if request_id in self._waiting and not self._waiting[request_id]:
            return "post", request_id
        return "stream", self._answers_to.pop(_key(request_id), None)

    # -- ConnectionOutbox ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closing is not None or self._finished

    @property
    def close_code(self) -> int | None:
        return None if self._closing is None else self._closing[0]

    @property
    def queued_bytes(self) -> int:
        return sum(o.queued_bytes for o in self.streams.values())

    def push(self, frame: bytes) -> bool:
        if self.closed:
            return False
        kind, target = self._route(frame)
        if kind == "post":
            self._waiting[target].append(frame)
            self._waiter.set()
            self._waiter = anyio.Event()
            return True
        if not self.stream(self._target(target)).push(frame):
            return False
        queued = self.queued_bytes
        if queued > self._settings.outbox_bytes:
            log.warning(
                "! %s: slow consumer, %d bytes queued on its streams over the bound of %d: "
                "closing with 1013",
                self._name,
                queued,
                self._settings.outbox_bytes,
            )
            self.close(SLOW_CONSUMER, "slow consumer: resume with your cursor")
            return False
        return True

    def push_pages(self, pages: Iterable[bytes]) -> bool:
        if self.closed:
            return False
        pages = iter(pages)
        first = next(pages, None)
        if first is None:
            return True
        _, target = self._route(first)  # a replay: every page is for one session
        return self.stream(self._target(target)).push_pages(_prepend(first, pages))

    def close(self, code: int, reason: str) -> None:
        if self.closed:
            return
        self._closing = (code, reason)
        for outbox in self.streams.values():
            outbox.close(code, reason)
        self._waiter.set()

    def finish(self) -> None:
        self._finished = True
        for outbox in self.streams.values():
            outbox.finish()
        self._waiter.set()

    def start(self, spawn: Spawn) -> None:
        """Run every stream's writer (``run``) in a task ``spawn`` starts, until the
        connection closes: a stream's outbox has its writer task for as long as it lasts."""
        spawn(self._run_all)

    async def _run_all(self) -> bool:
        await self.run()
        return True

    async def run(self) -> None:
        """Run every stream's writer until the connection closes."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for session_id, outbox in list(self.streams.items()):
                tg.start_soon(self._run_stream, session_id, outbox)
            await self._done.wait()
            tg.cancel_scope.cancel()

    async def _run_stream(self, session_id: str | None, outbox: Outbox) -> None:
        await outbox.run()
        if outbox.close_code is not None and self._closing is None:
            # One stream closed itself (a slow consumer): the connection goes with it, as a
            # WebSocket would, and the client resumes with its cursor.
            self.close(outbox.close_code, "slow consumer: resume with your cursor")
        if self.closed and all(o.closed for o in self.streams.values()):
            self._done.set()


def _nowhere(session_id: str) -> bool:
    return False


def _key(request_id: Any) -> Any:
    return request_id if isinstance(request_id, str | int) else repr(request_id)


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    return chain((first,), rest)
