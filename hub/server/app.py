"""The Starlette application: ``/acp`` (WebSocket, and Streamable HTTP through
``hub.server.streamable_http``), the web UI, health and readiness.

``create_app`` builds the app from settings and agent definitions. Its lifespan starts the
agent supervisor and the session registry; ``HubApp.close_connections`` closes every client
with 1001 before the server stops. ``/healthz`` answers while the process serves HTTP
(liveness); ``/readyz`` answers 200 only while the hub can take clients: its supervisor and
registry run and its store takes writes (readiness).

Access (``hub.access``, docs/security.md): every request, HTTP or WebSocket, first passes the
``Host`` check (421 otherwise); an ``/acp`` upgrade is then admitted by ``Gate.admit`` from
its credential and ``Origin``, or refused *before* the upgrade with 401/403 and a JSON body
``{"error": code, "message": ...}``. ``HubApp.principals`` maps each open connection to the
principal that admitted it. ``GET /auth/whoami`` tells a page who its token makes it (or why
it is refused), since browsers cannot read a refused upgrade's response.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.resources.abc import Traversable
from typing import Any

import anyio
import anyio.abc
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from hub.access.audit import NullAudit
from hub.access.gate import Admission, Gate
from hub.access.links import ancestry
from hub.access.principal import Principal, Refusal
from hub.agents.agent import RestartPolicy
from hub.agents.spec import AgentSpec
from hub.agents.supervisor import Supervisor
from hub.server import transport
from hub.server.admission import ConnectionCaps, Ticket
from hub.server.close_codes import GOING_AWAY, POLICY, UNSUPPORTED_DATA
from hub.server.connection import ClientConnection
from hub.server.expiry import Expiries
from hub.server.logs import client_context
from hub.server.metrics import HubMetrics
from hub.server.streamable_http.connection import HttpConnection
from hub.server.streamable_http.endpoint import StreamableHttp
from hub.server.streamable_http.wire import base_url_of
from hub.server.transport import AsgiFrameWriter
from hub.server.web import web_routes
from hub.server.webhooks import Webhooks, parse_webhooks
from hub.sessions.registry import SessionRegistry
from hub.sessions.rules import config_rules
from hub.settings import Settings
from hub.store import Store, open_store
from hub.store.audit import StoredAudit
from hub.store.links import StoredLinks

log = logging.getLogger("hub.server")

RAW_SEND = "acp_hub.raw_send"


class RawSendMiddleware:
    """Keeps the server's own ``send`` in the scope, before Starlette wraps it, so that the
    ``/acp`` endpoint can write frames without a task switch (``hub.server.transport``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Hands back the next application's awaitable (as HostCheckMiddleware does): no
        # frame of its own for as long as each WebSocket connection lasts.
        if scope["type"] == "websocket":
            scope[RAW_SEND] = send
        return self.app(scope, receive, send)


# Probes and scrapers address a hub by its IP (a container's health check, a Kubernetes
# probe, Prometheus): these routes answer whatever the Host, since they carry no session data
# and no counts (/healthz and /readyz say only ok or not; /metrics has its own token).
HOST_CHECK_EXEMPT = frozenset({"/healthz", "/readyz", "/metrics"})


class HostCheckMiddleware:
    """Refuses every HTTP request and WebSocket upgrade whose ``Host`` the hub does not serve
    (421 Misdirected Request), before any route runs: DNS rebinding protection. The probe
    routes of ``HOST_CHECK_EXEMPT`` are exempt."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function that hands back the next application's awaitable: no frame of
        # this middleware stays alive for as long as each WebSocket connection lasts.
        if scope["type"] not in ("http", "websocket") or (
            scope["type"] == "http" and scope.get("path") in HOST_CHECK_EXEMPT
        ):
            return self.app(scope, receive, send)
        host = _header(scope, b"host")
        try:
            self.gate.check_host(host)
        except Refusal as refusal:
            log.warning("! refused a request for host %r from %s", (host or "")[:80], _peer(scope))
            if scope["type"] == "http":
                response = JSONResponse(refusal.to_dict(), status_code=refusal.status)
                return response(scope, receive, send)
            return _deny(scope, receive, send, refusal)
        return self.app(scope, receive, send)


class HubApp:
    """The running hub: settings, supervisor, sessions and open client connections."""

    def __init__(
        self,
        settings: Settings,
        agents: Mapping[str, AgentSpec],
        default_agent: str | None,
        gate: Gate | None = None,
    ) -> None:
        self.settings = settings
        self.agents = dict(agents)
        self.default_agent = default_agent or (next(iter(agents)) if agents else None)
        self.store: Store = open_store(settings.store, node=settings.node_name)
        # Share links live in a durable store (shared by the nodes on Redis), else in
        # links.json; the audit trail goes to the store as well as to its file.
        durable_links = (
            StoredLinks(self.store) if self.store.durable and settings.auth == "token" else None
        )
        self.gate = gate or Gate.from_settings(settings, links=durable_links)
        self.stored_links = self.gate.links if isinstance(self.gate.links, StoredLinks) else None
        if self.stored_links is not None:
            self.stored_links.on_revoked = self.gate.link_revoked
        self.audit: StoredAudit | None = None
        """The audit trail as the store keeps it (``None``: ``audit_log = "off"``)."""
        if not isinstance(self.gate.audit, NullAudit):
            self.audit = StoredAudit(self.store, keep=settings.audit_retained, also=self.gate.audit)
            self.gate.audit = self.audit
        self.connections: set[ClientConnection] = set()
        self.principals: dict[ClientConnection, Principal] = {}
        """The principal that admitted each open connection (WebSocket and HTTP)."""
        self.gate.on_revoke.append(self.close_revoked)
        self.expiries = Expiries(self.gate.leeway_of)
        """Every open connection's credential deadline; each is closed as it passes."""
        self.caps = ConnectionCaps(
            total=settings.max_connections,
            per_address=settings.max_connections_per_address,
            per_principal=settings.max_connections_per_principal,
        )
        """Connections in total, per address and per principal (``docs/limits.md``)."""
        self.tickets: dict[ClientConnection, Ticket] = {}
        """The places in ``caps`` of the open Streamable HTTP connections."""
        self.supervisor: Supervisor | None = None
        self.registry: SessionRegistry | None = None
        self.metrics = HubMetrics(self)
        # A bad rule stops the hub at start.
        config_rules(settings.permission_rules, "hub")
        for spec in agents.values():
            try:
                config_rules(spec.permission_rules, "agent")
            except ValueError as exc:
                raise ValueError(f"[agents.{spec.name}] {exc}") from None
        self.webhooks = Webhooks(
            parse_webhooks(settings.webhooks), settings.public_url, self.metrics.registry
        )
        """Where the notices of the sessions this node owns are posted (``[[hub.webhooks]]``)."""
        self.http = StreamableHttp(self)
        self._http_tasks: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with (
            self.store.running(),
            self._access(),
            Supervisor(
                self.agents,
                self.default_agent,
                max_line=self.settings.max_line_bytes,
                stderr_lines=self.settings.stderr_lines,
                policy=RestartPolicy(response_timeout=self.settings.agent_response_timeout or None),
                dispatch_batch=transport.held_writes,
            ) as supervisor,
        ):
            self.supervisor = supervisor
            registry = SessionRegistry(
                self.settings,
                supervisor,
                self.store,
                metrics=self.metrics.sessions,
                audit=self.gate.audit,
            )
            if self.webhooks.hooks:
                registry.notices.append(self.webhooks.offer)
            async with (
                self.webhooks.running(),
                registry.running(),
                anyio.create_task_group() as http_tasks,
            ):
                self.registry = registry
                self._http_tasks = http_tasks
                http_tasks.start_soon(self.http.run, name="http connection places")
                http_tasks.start_soon(self.expiries.run, name="credential expiry")
                try:
                    yield
                finally:
                    self.close_connections(GOING_AWAY, "the hub is shutting down")
                    self.registry = None
                    self._http_tasks = None
                    # HTTP connections end with their streams; the rest is cut short.
                    with anyio.move_on_after(5):
                        while self.http.connections:  # noqa: ASYNC110 - no event to wait on
                            await anyio.sleep(0.01)
                    http_tasks.cancel_scope.cancel()
            self.supervisor = None

    @asynccontextmanager
    async def _access(self) -> AsyncIterator[None]:
        """Run the share links and the audit trail kept in the store (inside its block)."""
        async with AsyncExitStack() as stack:
            if self.stored_links is not None:
                await stack.enter_async_context(self.stored_links.running())
            if self.audit is not None:
                await stack.enter_async_context(self.audit.running())
            yield

    def close_connections(self, code: int, reason: str) -> None:
        """Close every client connection with ``code``."""
        for conn in list(self.connections):
            conn.close(code, reason)

    async def acp(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``GET /acp``: one ACP client over WebSocket."""
        websocket = WebSocket(scope, receive, send)
        registry = self.registry
        if registry is None:
            await websocket.close(code=GOING_AWAY)
            return
        try:
            admission = await self.admit(scope)
            ticket = self.caps.admit(client_address(scope), admission.principal.sub)
        except Refusal as refusal:
            # One line, without the credential: the reason and who asked.
            log.warning(
                "! refused /acp from %s: %s (%s)", _peer(scope), refusal.code, refusal.message
            )
            await _deny(scope, receive, send, refusal)
            return
        principal = admission.principal
        raw_send: Send = scope.get(RAW_SEND, send)
        conn = ClientConnection(
            registry,
            AsgiFrameWriter(raw_send),
            settings=self.settings,
            role=principal.role,
            principal=principal.sub,
            access=principal,
            gate=self.gate,
            base_url=base_url_of(scope),
        )
        self.principals[conn] = principal
        self.expiries.watch(conn, principal)
        # Every log line of this connection's tasks names it (hub.server.logs).
        with client_context(conn.connection_id, conn.principal):
            try:
                # Served here rather than in a method of its own: one coroutine frame less
                # for every connection, for as long as it lasts.
                await websocket.accept(
                    subprotocol=admission.subprotocol,
                    headers=[(b"acp-connection-id", conn.connection_id.encode())],
                )
                log.info(
                    "= %s: connected from %s as %s (%s, token from %s)",
                    conn.connection_id,
                    _peer(scope),
                    conn.principal,
                    conn.role,
                    admission.source or "nowhere",
                )
                self.metrics.connections_opened.labels(conn.transport).inc()
                client_code: list[int] = []

                async def receive_text() -> str | None:
                    message = await websocket.receive()
                    if message["type"] == "websocket.disconnect":
                        client_code.append(int(message.get("code", 1005)))
                        return None
                    text = message.get("text")
                    if text is None:
                        log.info("! %s: binary frame refused, closing 1003", conn.connection_id)
                        conn.close(UNSUPPORTED_DATA, "binary frames are not accepted; send text")
                        return None
                    return str(text)

                self.connections.add(conn)
                try:
                    await conn.run(receive_text)
                finally:
                    self.connections.discard(conn)
                    # The hub's own close code when it closed the connection, else the client's.
                    code = conn.outbox.close_code
                    self.metrics.closed(code if code is not None else next(iter(client_code), None))
                    log.info("= %s: disconnected", conn.connection_id)
            finally:
                self.principals.pop(conn, None)
                self.expiries.forget(conn)
                ticket.release()

    def start_connection(self, http: HttpConnection) -> None:
        """Run a Streamable HTTP client's connection in the hub's task group."""
        if self._http_tasks is None:
            http.conn.close(GOING_AWAY, "the hub is shutting down")
            self.http.forget(http)
            self._release(http.conn)
            return

        self.expiries.watch(http.conn, http.conn.access)

        async def serve() -> None:
            conn = http.conn
            with client_context(conn.connection_id, conn.principal):
                log.info("= %s: HTTP connection opened", conn.connection_id)
                self.metrics.connections_opened.labels("http").inc()
                self.connections.add(conn)
                try:
                    await http.run()
                finally:
                    self.connections.discard(conn)
                    self.expiries.forget(conn)
                    self.http.forget(http)
                    self._release(conn)
                    self.metrics.closed(conn.outbox.close_code)
                    log.info("= %s: HTTP connection closed", conn.connection_id)

        self._http_tasks.start_soon(serve, name=f"http {http.connection_id}")

    def renew(self, conn: ClientConnection, presented: Principal) -> None:
        """A later request of ``conn`` carries ``presented``: a fresh token of the same grant
        moves the connection's expiry (``hub.server.expiry``)."""
        if self.expiries.renew(conn, conn.access, presented):
            log.info("= %s: its credential was renewed", conn.connection_id)

    def close_revoked(self, link_id: str) -> int:
        """Close (1008) every connection the share link ``link_id`` admitted, or a link it
        minted (``ancestry``: links no longer mint links, older records may)."""
        doomed = [
            c
            for c, p in self.principals.items()
            if p.link_id is not None and link_id in ancestry(self.gate.links, p.link_id)
        ]
        for conn in doomed:
            log.info("= %s: its share link %s was revoked, closing", conn.connection_id, link_id)
            conn.revoke("the share link was revoked")
        return len(doomed)

    def _release(self, conn: ClientConnection) -> None:
        ticket = self.tickets.pop(conn, None)
        if ticket is not None:
            ticket.release()

    async def admit(self, scope: Scope, *, new_connection: bool = True) -> Admission:
        """``Gate.admit`` for a request's ``Host``, ``Origin`` and credential (``Refusal``);
        ``new_connection``: it opens a connection (a share link's use is counted)."""
        return await self.gate.admit(
            count_use=new_connection,
            host=_header(scope, b"host"),
            origin=_header(scope, b"origin"),
            authorization=_header(scope, b"authorization"),
            subprotocols=_header(scope, b"sec-websocket-protocol"),
            query_string=bytes(scope.get("query_string", b"")).decode("latin-1"),
        )

    async def whoami(self, request: Request) -> JSONResponse:
        """``GET /auth/whoami`` with ``Authorization: Bearer``: the principal the token proves
        (200), or why it is refused (401/403), so a page can say "link expired" or "revoked"
        instead of a bare connection failure. It reveals nothing the token holder could not
        learn from ``initialize``."""
        authorization = request.headers.get("authorization") or ""
        scheme, _, token = authorization.partition(" ")
        try:
            principal = await self.gate.verify(
                token.strip() if scheme.lower() == "bearer" and token.strip() else None
            )
        except Refusal as refusal:
            return JSONResponse(refusal.to_dict(), status_code=refusal.status, headers=_NO_STORE)
        return JSONResponse({**principal.public(), "auth": self.settings.auth}, headers=_NO_STORE)

    def readiness_checks(self) -> dict[str, bool]:
        """What readiness needs, each ``True`` when it holds: the agent supervisor and the
        session registry run, no agent's configured login failed, and the store takes
        writes."""
        supervisor = self.supervisor
        return {
            "agents": supervisor is not None,
            "logins": supervisor is not None
            and all(supervisor.get(n).login_status.state != "failed" for n in supervisor.names()),
            "sessions": self.registry is not None,
            "store": self.registry is not None and self.store.healthy,
        }

    async def readiness(self, request: Request) -> JSONResponse:
        """``GET /readyz``: 200 ``{"status": "ready", "checks": {...}}`` while the hub can take
        clients, 503 with ``"status": "unavailable"`` and the failing checks ``false`` while it
        starts or stops or its store is unreachable (a load balancer sends no new clients)."""
        checks = self.readiness_checks()
        ready = all(checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "unavailable", "checks": checks},
            status_code=200 if ready else 503,
        )

    async def health(self, request: Request) -> JSONResponse:
        """``GET /healthz``: 200 ``{"status": "ok"}`` while the process serves HTTP
        (``"starting"`` before the registry runs), and nothing else: it answers under any
        ``Host``, so a DNS-rebinding page could read it. Counts and the version are on
        ``/metrics``, behind its token."""
        return JSONResponse({"status": "ok" if self.registry is not None else "starting"})


class _AcpEndpoint:
    def __init__(self, hub: HubApp) -> None:
        self.hub = hub

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # The connection's own coroutine, not one more frame around it.
        return self.hub.acp(scope, receive, send)


_NO_STORE = {"Cache-Control": "no-store"}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def _deny(scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
    """Refuse a WebSocket upgrade with an HTTP response (status and JSON reason) where the
    server supports it, else with a close 1008 naming the reason."""
    websocket = WebSocket(scope, receive, send)
    if "websocket.http.response" in scope.get("extensions", {}):
        headers = dict(_NO_STORE)
        if refusal.status == 401:
            headers["WWW-Authenticate"] = (
                f'Bearer error="invalid_token", error_description="{refusal.code}"'
            )
        await websocket.send_denial_response(
            JSONResponse(refusal.to_dict(), status_code=refusal.status, headers=headers)
        )
        # uvicorn's websockets-sansio protocol sends the response but does not count it as
        # the end of the handshake, and would log "ASGI callable returned without completing
        # handshake" for every refusal. The server's own send is a method of that protocol.
        protocol = getattr(scope.get(RAW_SEND), "__self__", None)
        if getattr(protocol, "handshake_complete", None) is False:
            protocol.handshake_complete = True  # type: ignore[union-attr]
    else:
        await websocket.close(code=POLICY, reason=refusal.code)


def client_address(scope: Scope) -> str:
    """The remote address of a request (what the per-address connection cap counts)."""
    client: Any = scope.get("client")
    return str(client[0]) if client else "?"


def _peer(scope: Scope) -> str:
    client: Any = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "?"


def create_app(
    settings: Settings,
    agents: Mapping[str, AgentSpec],
    default_agent: str | None = None,
    *,
    web: Traversable | None = None,
    gate: Gate | None = None,
) -> tuple[Starlette, HubApp]:
    """Build the Starlette app and the ``HubApp`` behind it.

    ``web`` holds the browser UI's files; by default the package's own (``hub/web``, read
    through :mod:`importlib.resources`). ``gate`` defaults to ``Gate.from_settings``, which
    raises ``ValueError`` for an unusable key, issuer or share-link file."""
    hub = HubApp(settings, agents, default_agent, gate)
    routes: list[BaseRoute] = [
        WebSocketRoute("/acp", _AcpEndpoint(hub)),
        # The Streamable HTTP profile of the same endpoint (GET without Upgrade is SSE).
        Route("/acp", hub.http, methods=["GET", "POST", "DELETE"]),
        Route("/healthz", hub.health),
        Route("/readyz", hub.readiness),
        Route("/metrics", hub.metrics.endpoint),
        Route("/auth/whoami", hub.whoami),
    ]
    routes.extend(web_routes(web, embed_origins=settings.embed_origins))
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(RawSendMiddleware),
            Middleware(HostCheckMiddleware, gate=hub.gate),
        ],
        lifespan=hub.lifespan,
    )
    return app, hub
