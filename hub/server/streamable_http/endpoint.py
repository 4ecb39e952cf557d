"""The ASGI endpoint of the Streamable HTTP profile: ``POST``, ``GET`` (SSE) and ``DELETE``
on ``/acp``; the package docstring (``hub.server.streamable_http``) has the theory of
operation."""

from __future__ import annotations

import logging
import math
from typing import Any, Protocol, cast

import anyio
import anyio.abc
import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from hub.access.gate import Admission, Gate
from hub.access.principal import Principal, Refusal
from hub.mistakes import MistakeLog
from hub.protocol.errors import RATE_LIMITED, hub_error
from hub.protocol.jsonrpc import is_request_id
from hub.server.admission import ConnectionCaps, Ticket
from hub.server.close_codes import GOING_AWAY, NORMAL
from hub.server.connection import ClientConnection
from hub.server.forward import RELAYED_HEADER, NodeGone, NodeSilent, forward, relay_timeouts
from hub.server.placement import Place, Placements, node_url
from hub.server.streamable_http.connection import HttpConnection, session_for_get
from hub.server.streamable_http.sse_stream import SseWriter, cursor_of
from hub.server.streamable_http.wire import (
    CONNECTION_HEADER,
    COOKIE,
    SESSION_HEADER,
    Posted,
    base_url_of,
    clear_cookie,
    connection_id_of,
    drain,
    gone,
    json_error,
    read_body,
    rpc_error,
    set_cookie,
)
from hub.sessions.registry import SessionRegistry
from hub.settings import Settings
from hub.store import SharedStore, Store

__all__ = ["SESSION_SCOPED", "HubLike", "StreamableHttp"]

log = logging.getLogger("hub.server")
_mistake = MistakeLog(log, "http")
"""The mistakes of HTTP requests that name no connection yet (one line each, rate-limited)."""


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
            read = await self._read_post(request, admission)
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

    async def _read_post(self, request: Request, admission: Admission) -> Posted | Response:
        """The POST's body and its one JSON-RPC message, or the ``4xx`` that refuses it."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return json_error(415, "Content-Type must be application/json")
        body = await read_body(request, self.hub.settings.max_frame_bytes)
        if isinstance(body, Response):
            return body
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return rpc_error(400, -32700, "Parse error", str(exc))
        if isinstance(message, list):
            return json_error(501, "batch requests are not supported over HTTP")
        if not isinstance(message, dict):
            return rpc_error(400, -32600, "Invalid request", "a JSON-RPC message is an object")
        if "id" in message and not is_request_id(message["id"]):
            # Nothing could route its answer: refused before any connection sees it, though it
            # counts against the request rate of the connection it names.
            _mistake("a message whose id is %s, refused", type(message["id"]).__name__)
            over = self._over_rate(request, admission, "a message with an invalid id")
            if over is not None:
                return over
            return rpc_error(400, -32600, "Invalid request", "id must be a string or an integer")
        return Posted(bytes(body), message)

    def _over_rate(self, request: Request, admission: Admission, what: str) -> Response | None:
        """``429`` when the request is over the ``request_rate`` of the connection it names
        (one of this node's, of the same principal), after counting it; else ``None``."""
        http = self.connections.get(connection_id_of(request) or "")
        if http is None or http.conn.closed or http.conn.principal != admission.principal.sub:
            return None
        refused = http.conn.take_request(what)
        if refused is None:
            return None
        retry = str(max(1, math.ceil(float(refused.data["retryAfter"]))))
        return Response(
            orjson.dumps({"jsonrpc": "2.0", "id": None, "error": refused.to_dict()}),
            status_code=429,
            media_type="application/json",
            headers={"retry-after": retry},
        )

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
            return rpc_error(400, -32600, "Invalid request", data, request_id)
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
