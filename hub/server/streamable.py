"""The Streamable HTTP profile of ``/acp`` (the ACP transport RFD): POST, GET (SSE), DELETE.

Theory of operation
-------------------
An HTTP client is a ``ClientConnection`` like a WebSocket client: the same method table, roles,
limits and arbitration. Only its outbox differs. ``StreamOutbox`` (``hub.server.streams``)
satisfies the connection's ``ConnectionOutbox`` and routes every frame to the stream it belongs
on, each stream being an ``Outbox`` (byte-bounded, slow consumers closed) over an ``SseWriter``
(``hub.server.sse``):

* the connection's stream (a GET with ``Acp-Connection-Id`` alone) carries the answers to
  connection-level requests (``session/new``, ``session/load``, ``session/resume``,
  ``session/list``...) and notifications that name no session;
* a session's stream (a GET with ``Acp-Session-Id`` too) carries that session's updates, the
  hub's requests about it (permission requests, elicitations) and their withdrawals, and the
  answers to the session-scoped requests (``session/prompt``, ``session/cancel``,
  ``session/set_mode``, ``session/set_config_option``, ``session/close``).

A frame for a stream that no GET reads yet waits in that stream's outbox (a client opens a
session's stream once it learnt the session's id from the answer on the connection's stream).
The answer to ``initialize`` is the one that does not travel on a stream: it is the POST's
``200`` body, with the ``Acp-Connection-Id`` header (and an ``acp-connection`` cookie, which the
hub honours in place of the header, except on ``initialize``: one without the header always
starts a new connection, whatever cookie it carries). Every other POST is answered ``202`` once
the connection took the message; one the connection could not route (an id JSON-RPC does not
allow, a second ``initialize``, too many requests unanswered) is answered ``4xx`` at once with
a JSON-RPC error body. ``DELETE`` closes the connection; it and a ``404`` for the connection
the cookie names clear the cookie.

With several nodes on one Redis, the node that answered ``initialize`` records where the
connection lives (``hub.server.placement``), and a request for it that reaches another node is
relayed to it (``hub.server.forward``) once that node admitted the credential and found it is
the connection's principal's; ``docs/design/http-cluster.md`` has the design.

The connection's message loop (``ClientConnection.run``) runs in the hub's task group and
reads what POSTs hand it through a bounded channel, so a client that posts faster than the hub
handles waits on its POSTs. A connection with no GET open and no POST for ``IDLE_TIMEOUT``
seconds is closed (its sessions go on; it resumes them on a new connection), and so is one that
opened no stream within ``FIRST_GET_TIMEOUT`` seconds of its ``initialize``.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any, Protocol, cast

import anyio
import anyio.abc
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from hub.access.gate import Admission, Gate
from hub.access.principal import Principal, Refusal
from hub.mistakes import MistakeLog
from hub.protocol.errors import RATE_LIMITED, hub_error
from hub.protocol.jsonrpc import is_request_id
from hub.server.caps import ConnectionCaps, Ticket
from hub.server.close_codes import GOING_AWAY, NORMAL
from hub.server.connection import ClientConnection
from hub.server.forward import RELAYED_HEADER, NodeGone, NodeSilent, forward, relay_timeouts
from hub.server.placement import Place, Placements, node_url
from hub.server.sse import SseWriter, cursor_of
from hub.server.streams import StreamOutbox
from hub.sessions.errors import SessionFailure
from hub.sessions.registry import SessionRegistry
from hub.settings import Role, Settings
from hub.store import SharedStore, Store

log = logging.getLogger("hub.server")
_mistake = MistakeLog(log, "http")
"""The mistakes of HTTP requests that name no connection yet (one line each, rate-limited)."""

CONNECTION_HEADER = "acp-connection-id"
SESSION_HEADER = "acp-session-id"
COOKIE = "acp-connection"
COOKIE_MAX_AGE = 86_400
"""Seconds the ``acp-connection`` cookie lives after the last answer that set it (the
``initialize`` answer, then every ``202`` to a POST that carried it)."""
IDLE_TIMEOUT = 300.0
"""Seconds an HTTP connection lives with no GET reading it and no POST."""
FIRST_GET_TIMEOUT = 30.0
"""Seconds a new HTTP connection has to open its first stream: one that never reads is not
kept for ``IDLE_TIMEOUT`` (initializing costs a client one POST; the hub holds it longer)."""
INBOX_FRAMES = 64
"""Messages a connection takes ahead of handling them before its POSTs wait."""

# Requests that name an existing session and are answered on its stream (the RFD's list, as
# the SDKs send them with `Acp-Session-Id`).
SESSION_SCOPED = frozenset(
    {
        "session/prompt",
        "session/cancel",
        "session/set_mode",
        "session/set_config_option",
        "session/close",
    }
)


class HttpConnection:
    """One Streamable HTTP client: its ``ClientConnection``, outbox and inbound channel."""

    def __init__(
        self,
        registry: SessionRegistry,
        settings: Settings,
        role: Role,
        principal: str,
        *,
        access: Principal | None = None,
        gate: Gate | None = None,
        base_url: str | None = None,
    ) -> None:
        connection_id = f"c-{secrets.token_hex(16)}"
        self.outbox = StreamOutbox(settings, connection_id)
        self.conn: ClientConnection = ClientConnection(
            registry,
            outbox=self.outbox,
            settings=settings,
            role=role,
            principal=principal,
            connection_id=connection_id,
            access=access,
            gate=gate,
            base_url=base_url,
        )
        self.outbox.attached = self.conn.sessions.__contains__
        self.inbox: MemoryObjectSendStream[str]
        self._inbound: MemoryObjectReceiveStream[str]
        self.inbox, self._inbound = anyio.create_memory_object_stream[str](INBOX_FRAMES)
        self.last_activity = anyio.current_time()
        self.open_gets = 0
        self.ever_read = False
        self.ended = anyio.Event()

    @property
    def connection_id(self) -> str:
        return self.conn.connection_id

    async def _receive_text(self) -> str | None:
        try:
            return await self._inbound.receive()
        except anyio.EndOfStream:
            return None

    async def run(self) -> None:
        """The connection's message loop, and its idle watch."""
        try:
            async with anyio.create_task_group() as tg:

                async def watch_idle() -> None:
                    with anyio.move_on_after(FIRST_GET_TIMEOUT):
                        while not self.ever_read:  # noqa: ASYNC110 - checked rarely, no event
                            await anyio.sleep(FIRST_GET_TIMEOUT / 10)
                    if not self.ever_read:
                        log.info("= %s: no stream opened, closing", self.connection_id)
                        self.conn.close(GOING_AWAY, "no stream was opened")
                        return
                    while True:
                        await anyio.sleep(IDLE_TIMEOUT / 4)
                        idle = anyio.current_time() - self.last_activity
                        if self.open_gets == 0 and idle > IDLE_TIMEOUT:
                            log.info("= %s: idle, closing", self.connection_id)
                            self.conn.close(GOING_AWAY, "idle: no stream open and no request")
                            return

                tg.start_soon(watch_idle)
                await self.conn.run(self._receive_text)
                tg.cancel_scope.cancel()
        finally:
            self.inbox.close()
            self._inbound.close()
            self.ended.set()

    async def post(self, text: str) -> None:
        self.last_activity = anyio.current_time()
        await self.inbox.send(text)


async def session_for_get(registry: SessionRegistry, session_id: str, access: Principal) -> bool:
    """Whether a session stream may be opened for ``session_id``: the credential's
    ``sessions`` cover it and the hub has it. On one node of several that may be a session
    another node owns, which this node follows from now on (as ``session/resume`` would: the
    client opens the stream before it resumes). The store's errors propagate."""
    if not access.may_see(session_id):
        return False
    if registry.find(session_id) is not None:
        return True
    if not registry.is_remote(session_id):
        return False
    try:
        await registry.load_remote(session_id)
    except SessionFailure:
        return False
    return True


def base_url_of(scope: Scope) -> str | None:
    """``http(s)://host`` as the client reached the hub (its ``Host`` passed the host check
    before any route ran), for the links the hub hands out."""
    for key, value in scope.get("headers", ()):
        if key == b"host":
            secure = scope.get("scheme") in ("https", "wss")
            return f"{'https' if secure else 'http'}://{bytes(value).decode('latin-1')}"
    return None


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """A plain HTTP error with a JSON body ``{"error": message}`` (no JSON-RPC message)."""
    return Response(
        orjson.dumps({"error": message}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def connection_id_of(request: Request | Scope) -> str | None:
    """``Acp-Connection-Id``, else the ``acp-connection`` cookie."""
    req = request if isinstance(request, Request) else Request(request)
    return req.headers.get(CONNECTION_HEADER) or req.cookies.get(COOKIE)


def came_over_https(request: Request) -> bool:
    """Whether the client reached the hub over https: uvicorn takes ``X-Forwarded-Proto``
    only from the proxies ``trusted_proxies`` names; a request another node relayed carries the
    scheme that node saw. (A client that claims https without it only makes its own cookie
    ``Secure``: the claim can add the flag, never take it away.)"""
    if request.url.scheme == "https":
        return True
    relayed = RELAYED_HEADER.decode() in request.headers
    return relayed and request.headers.get("x-forwarded-proto") == "https"


def set_cookie(response: Response, request: Request, connection_id: str) -> None:
    """Name the connection in the ``acp-connection`` cookie: ``HttpOnly``, ``SameSite=Strict``
    (never sent across sites), ``Max-Age`` ``COOKIE_MAX_AGE``, ``Secure`` over https."""
    response.set_cookie(
        COOKIE,
        connection_id,
        max_age=COOKIE_MAX_AGE,
        path="/acp",
        secure=came_over_https(request),
        httponly=True,
        samesite="strict",
    )


def gone(request: Request, connection_id: str | None, message: str) -> Response:
    """``404`` for a connection that is unknown, closed or another principal's; the cookie is
    cleared when it names that connection (a cookie jar would present it for ever)."""
    response = json_error(404, message)
    if connection_id is not None and request.cookies.get(COOKIE) == connection_id:
        clear_cookie(response, request)
    return response


def clear_cookie(response: Response, request: Request) -> None:
    """Expire the ``acp-connection`` cookie."""
    response.delete_cookie(
        COOKIE,
        path="/acp",
        secure=came_over_https(request),
        httponly=True,
        samesite="strict",
    )


async def drain(receive: Receive) -> None:
    """Wait until the client of a streaming response disconnects."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


@dataclass(frozen=True, slots=True)
class Posted:
    """A POST's body and the JSON-RPC message it holds (an object, its id valid)."""

    body: bytes
    message: dict[str, Any]

    @property
    def initialize(self) -> bool:
        """Whether it is an ``initialize`` request."""
        return self.message.get("method") == "initialize" and "id" in self.message


class HubLike(Protocol):
    """What the endpoint needs from the running hub (``hub.server.app.HubApp``)."""

    settings: Settings
    store: Store
    registry: SessionRegistry | None
    connections: set[ClientConnection]
    principals: dict[ClientConnection, Principal]
    gate: Gate
    caps: ConnectionCaps
    tickets: dict[ClientConnection, Ticket]

    async def admit(self, scope: Scope, *, new_connection: bool = True) -> Admission:
        """The credential, ``Host`` and ``Origin`` decision for one request (``Refusal``)."""
        ...

    def start_connection(self, http: HttpConnection) -> None: ...

    def renew(self, conn: ClientConnection, presented: Principal) -> None: ...


class StreamableHttp:
    """The ASGI endpoint of ``POST``, ``GET`` (without ``Upgrade``) and ``DELETE`` on ``/acp``."""

    def __init__(self, hub: HubLike) -> None:
        self.hub = hub
        self.connections: dict[str, HttpConnection] = {}
        self.placements: Placements | None = None
        """With a shared store: where the connections of every node live."""
        if hub.store.shared:
            self.placements = Placements(cast(SharedStore, hub.store), hub.settings.node_lease)

    async def run(self) -> None:
        """Keep this node's connections' places recorded (a shared store), until cancelled."""
        if self.placements is not None:
            await self.placements.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await self._answer(request, scope, receive, send)
        if response is not None:
            await response(scope, receive, send)

    async def _answer(
        self, request: Request, scope: Scope, receive: Receive, send: Send
    ) -> Response | None:
        """The response to ``request``, or ``None`` once it was answered (a stream, a relay)."""
        registry = self.hub.registry
        try:
            # Every request carries the credential (as the upgrade does), and a connection
            # answers only to the principal that opened it: its id alone is not enough.
            admission = await self.hub.admit(scope, new_connection=False)
        except Refusal as refusal:
            log.warning("! refused an HTTP request: %s (%s)", refusal.code, refusal.message)
            return JSONResponse(refusal.to_dict(), status_code=refusal.status)
        if registry is None:
            return json_error(503, "the hub is starting or stopping")
        posted: Posted | None = None
        if request.method == "POST":
            read = await self._read_post(request)
            if isinstance(read, Response):
                return read
            posted = read
            if posted.initialize and CONNECTION_HEADER not in request.headers:
                # A new connection, whatever cookie names an old one (a cookie jar keeps it):
                # never another connection's business, on this node or another.
                return await self.initialize(registry, posted.message, admission, request)
        elsewhere = await self._elsewhere(request, admission)
        if isinstance(elsewhere, Place):
            body = posted.body if posted is not None else b""
            await self._relay(elsewhere, request, scope, receive, send, body)
            return None
        if elsewhere is not None:
            return elsewhere
        if request.method == "GET":
            await self.get(request, registry, scope, receive, send, admission)
            return None
        if posted is not None:
            return await self.post(request, admission, posted)
        if request.method == "DELETE":
            return self.delete(request, admission)
        return json_error(405, "use POST, GET or DELETE", {"allow": "POST, GET, DELETE"})

    def _connection(self, request: Request, admission: Admission) -> HttpConnection | Response:
        connection_id = connection_id_of(request)
        if connection_id is None:
            return json_error(400, "Acp-Connection-Id is required: POST initialize first")
        http = self.connections.get(connection_id)
        if http is None or http.conn.closed:
            return gone(request, connection_id, "unknown or closed connection: initialize again")
        if http.conn.principal != admission.principal.sub:
            # Another principal's connection is none of this one's business: as unknown.
            return gone(request, connection_id, "unknown or closed connection: initialize again")
        self.hub.renew(http.conn, admission.principal)  # a fresh token moves its expiry
        return http

    # -- another node's connections --------------------------------------------------------

    async def _elsewhere(self, request: Request, admission: Admission) -> Place | Response | None:
        """Where to relay a request for a connection another node holds (``Place``), or the
        refusal (``Response``); ``None`` when the request is this node's to answer (it holds
        the connection, knows of none, or the request was relayed here already)."""
        placements = self.placements
        connection_id = connection_id_of(request)
        if (
            placements is None
            or connection_id is None
            or connection_id in self.connections
            or RELAYED_HEADER.decode() in request.headers
        ):
            return None
        try:
            place = await placements.find(connection_id)
        except Exception as exc:  # the store's and the redis client's errors alike
            log.warning("! the place of %s cannot be read: %s", connection_id, exc)
            return json_error(503, "the hub's store does not answer: try again")
        if place is None or place.node == placements.node:
            return None
        if place.principal != admission.principal.sub:
            # As for a connection of this node: another principal's is none of its business.
            log.warning("! %s presented by another principal, refused", connection_id)
            return gone(request, connection_id, "unknown or closed connection: initialize again")
        return place

    async def _relay(
        self,
        place: Place,
        request: Request,
        scope: Scope,
        receive: Receive,
        send: Send,
        body: bytes,
    ) -> None:
        """Relay the request to the node holding its connection, and its answer back."""
        answer, idle = relay_timeouts(request.method, self.hub.settings.ping_interval)
        connection_id = connection_id_of(request)
        try:
            node = self.hub.store.node
            await forward(place.url, scope, body, receive, send, node, answer, idle)
            return
        except NodeGone as exc:
            log.info("= %s: its node %s is gone (%s)", connection_id, place.node, exc)
            message = "the node holding the connection is gone: initialize again"
            response = gone(request, connection_id, message)
        except NodeSilent as exc:
            log.warning("! %s: its node %s does not answer (%s)", connection_id, place.node, exc)
            message = "the node holding the connection does not answer: try again"
            response = json_error(503, message, {"retry-after": "1"})
        await response(scope, receive, send)

    # -- POST ------------------------------------------------------------------------------

    async def _read_post(self, request: Request) -> Posted | Response:
        """The POST's body and its one JSON-RPC message, or the ``4xx`` that refuses it."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return json_error(415, "Content-Type must be application/json")
        body = await _read_body(request, self.hub.settings.max_frame_bytes)
        if isinstance(body, Response):
            return body
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return _rpc_error(400, -32700, "Parse error", str(exc))
        if isinstance(message, list):
            return json_error(501, "batch requests are not supported over HTTP")
        if not isinstance(message, dict):
            return _rpc_error(400, -32600, "Invalid request", "a JSON-RPC message is an object")
        if "id" in message and not is_request_id(message["id"]):
            # Nothing could route its answer: refused before any connection sees it.
            _mistake("a message whose id is %s, refused", type(message["id"]).__name__)
            return _rpc_error(400, -32600, "Invalid request", "id must be a string or an integer")
        return Posted(bytes(body), message)

    async def post(self, request: Request, admission: Admission, posted: Posted) -> Response:
        found = self._connection(request, admission)
        if isinstance(found, Response):
            return found
        http = found
        message = posted.message
        method = message.get("method")
        request_id = message.get("id")
        is_request = isinstance(method, str) and "id" in message
        if posted.initialize:
            http.conn.mistake("initialize on a connection, refused")
            data = "already initialized: POST initialize without Acp-Connection-Id to start anew"
            return _rpc_error(400, -32600, "Invalid request", data, request_id)
        session_id = request.headers.get(SESSION_HEADER)
        params = message.get("params")
        named = params.get("sessionId") if isinstance(params, dict) else None
        # A method that is not a string (unhashable, even) is the connection's to refuse.
        scoped = isinstance(method, str) and method in SESSION_SCOPED
        if scoped:
            if session_id is None:
                return json_error(400, f"Acp-Session-Id is required for {method}")
            if named != session_id:
                return json_error(400, "Acp-Session-Id does not match params.sessionId")
        if is_request:
            if http.outbox.routes_full:
                limit = http.outbox.max_routes
                http.conn.mistake("%s with %d requests unanswered, refused", method, limit)
                error = hub_error(
                    RATE_LIMITED,
                    "Too many requests in progress: wait for answers",
                    {"limit": "max_pending_requests"},
                )
                return Response(
                    orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()}),
                    status_code=429,
                    media_type="application/json",
                )
            http.outbox.expect_answer(request_id, session_id if scoped else None)
        elif method is None:
            http.outbox.answered(request_id)
        try:
            await http.post(posted.body.decode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return gone(request, http.connection_id, "the connection closed: initialize again")
        response = Response(status_code=202)
        if request.cookies.get(COOKIE) == http.connection_id:
            set_cookie(response, request, http.connection_id)  # a cookie client's: renewed
        return response

    async def initialize(
        self,
        registry: SessionRegistry,
        message: dict[str, Any],
        admission: Admission,
        request: Request,
    ) -> Response:
        scope = request.scope
        address = request.client.host if request.client else "?"
        request_id = message.get("id")
        params = message.get("params")
        if isinstance(params, dict):
            meta = params.get("_meta")
            hub_meta = meta.get("acp-hub") if isinstance(meta, dict) else None
            if isinstance(hub_meta, dict):
                # One message per SSE event: batches would need the client to split them.
                hub_meta.pop("batches", None)
        settings = self.hub.settings
        principal = admission.principal
        try:
            ticket = self.hub.caps.admit(address, principal.sub)
        except Refusal as refusal:
            log.warning("! refused an HTTP connection from %s: %s", address, refusal.code)
            return JSONResponse(refusal.to_dict(), status_code=refusal.status)
        if principal.link_id is not None:
            # A new connection: it counts as one use of its share link, as an upgrade does.
            try:
                await self.hub.gate.links.use(principal.link_id)
            except Refusal as refusal:
                ticket.release()
                log.warning("! refused an HTTP connection from %s: %s", address, refusal.code)
                return JSONResponse(refusal.to_dict(), status_code=refusal.status)
        http = HttpConnection(
            registry,
            settings,
            principal.role,
            principal.sub,
            access=principal,
            gate=self.hub.gate,
            base_url=base_url_of(scope),
        )
        self.hub.tickets[http.conn] = ticket
        self.connections[http.connection_id] = http
        if self.placements is not None:
            self.placements.open(http.connection_id)
        self.hub.principals[http.conn] = principal
        self.hub.start_connection(http)
        http.outbox.hold_answer(request_id)
        await http.post(orjson.dumps(message).decode())
        try:
            with anyio.fail_after(settings.ping_timeout + 30):
                frame = await http.outbox.held_answer(request_id)
        except (TimeoutError, anyio.ClosedResourceError):
            http.conn.close(GOING_AWAY, "initialize did not complete")
            return json_error(503, "initialize did not complete")
        if b'"error":' in frame and orjson.loads(frame).get("error") is not None:
            http.conn.close(NORMAL, "initialize failed")
        elif self.placements is not None:
            url = node_url(settings, scope)
            if url is not None:
                # Recorded before the client learns the id: its next request may reach any node.
                await self.placements.place(http.connection_id, url, principal.sub)
        response = Response(
            frame,
            status_code=200,
            media_type="application/json",
            headers={"Acp-Connection-Id": http.connection_id},
        )
        # Clients of the RFD keep cookies for the connection's life; the hub takes this one in
        # place of the header (never across sites: SameSite=Strict).
        set_cookie(response, request, http.connection_id)
        return response

    def forget(self, http: HttpConnection) -> None:
        self.connections.pop(http.connection_id, None)
        self.hub.principals.pop(http.conn, None)
        if self.placements is not None:
            self.placements.forget(http.connection_id)

    # -- DELETE ----------------------------------------------------------------------------

    def delete(self, request: Request, admission: Admission) -> Response:
        found = self._connection(request, admission)
        if isinstance(found, Response):
            return found
        found.conn.close(NORMAL, "the client ended the connection")
        response = Response(status_code=202)
        if request.cookies.get(COOKIE) == found.connection_id:
            clear_cookie(response, request)
        return response

    # -- GET -------------------------------------------------------------------------------

    async def get(
        self,
        request: Request,
        registry: SessionRegistry,
        scope: Scope,
        receive: Receive,
        send: Send,
        admission: Admission,
    ) -> None:
        if "text/event-stream" not in request.headers.get("accept", ""):
            await json_error(406, "Accept must include text/event-stream")(scope, receive, send)
            return
        found = self._connection(request, admission)
        if isinstance(found, Response):
            await found(scope, receive, send)
            return
        http = found
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is not None and not http.outbox.open_stream(session_id, check_only=True):
            # Before the session is looked up: past the cap a GET makes no node follow it.
            await self._too_many_streams(http, session_id, scope, receive, send)
            return
        if session_id is not None:
            try:
                known = await session_for_get(registry, session_id, http.conn.access)
            except Exception as exc:  # the store's and the redis client's errors alike
                log.warning(
                    "! %s: session %s cannot be read: %s", http.connection_id, session_id, exc
                )
                known = None
            if not known:
                response = (
                    json_error(404, f"unknown session {session_id}")
                    if known is False
                    else json_error(503, "the hub's store does not answer: try again")
                )
                await response(scope, receive, send)
                return
        if session_id is not None and not http.outbox.open_stream(session_id):
            await self._too_many_streams(http, session_id, scope, receive, send)
            return
        last_event_id = request.headers.get("last-event-id")
        writer = http.outbox.writers[session_id]
        resume_from: tuple[int, int] | None = None
        if last_event_id and session_id is not None and not writer.keeps(last_event_id):
            # Older than what the stream keeps (or from another connection): the session's
            # cursor in the id resumes its events; what waited for the stream is dropped.
            session = http.conn.sessions.get(session_id)
            resume_from = cursor_of(last_event_id)
            if session is not None and resume_from is not None:
                http.outbox.reset_stream(session_id)
                writer = http.outbox.writers[session_id]
            last_event_id = None
        http.open_gets += 1
        http.ever_read = True
        try:
            detached, found_id = await writer.open(send, last_event_id)
            if not found_id:
                log.info("= %s: Last-Event-ID %s not kept", http.connection_id, last_event_id)
            session = http.conn.sessions.get(session_id) if session_id else None
            if resume_from is not None and session is not None:
                http.conn.reattach(session, resume_from)
            await self._hold(http, writer, detached, receive)
        finally:
            with anyio.CancelScope(shield=True):
                await writer.detach(send)
            http.open_gets -= 1
            http.last_activity = anyio.current_time()

    async def _too_many_streams(
        self, http: HttpConnection, session_id: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        limit = http.outbox.max_streams
        http.conn.mistake("a stream for %s past %d session streams, refused", session_id, limit)
        message = f"max_streams_per_connection: at most {limit} session streams"
        await json_error(429, message)(scope, receive, send)

    async def _hold(
        self, http: HttpConnection, writer: SseWriter, detached: anyio.Event, receive: Receive
    ) -> None:
        """Keep the GET open (with keepalives) until it is replaced, the stream closes or the
        client goes away."""
        interval = self.hub.settings.ping_interval
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await drain(receive)
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            while not detached.is_set():
                with anyio.move_on_after(interval):
                    await detached.wait()
                if not detached.is_set():
                    await writer.keepalive()
            tg.cancel_scope.cancel()


async def _read_body(request: Request, limit: int) -> bytearray | Response:
    """The request's body, or ``413`` once it passes ``limit`` bytes (the rest is not read)."""
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            return json_error(413, f"a message may not exceed {limit} bytes")
    return body


def _rpc_error(status: int, code: int, message: str, data: Any, request_id: Any = None) -> Response:
    error = {"code": code, "message": message, "data": data}
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")
