"""One WebSocket client of ``/acp``: the hub speaking ACP as an agent.

Theory of operation
-------------------
The connection goes through three states::

    NEW --initialize--> READY --(close / disconnect / slow consumer)--> CLOSED

In ``NEW`` only ``initialize`` is accepted (anything else: ``-32600``). ``initialize``
negotiates the protocol version for this connection alone (``min(offered, 2)``), so v1 and v2
clients share sessions whatever their agent speaks.

Every frame for the client goes through its ``Outbox``: responses, notifications, hub
requests, in one order. Incoming messages are parsed once; a request whose handler is
synchronous (attach, list, detach, hub methods) is answered inline, so an attach queues its
replay, its response and then the live events in that order; a request that must wait for the
agent (new, prompt, config, close) runs in the connection's task group, where
``$/cancel_request`` can cancel it. Responses from the client answer the hub's own requests
(permission copies, elicitations) through an ``IdMap``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from enum import Enum
from typing import Any

import anyio
import anyio.abc

from hub import __version__
from hub.agents.errors import AgentError
from hub.protocol import jsonrpc
from hub.protocol.errors import (
    NOT_ATTACHED,
    STALE_ANSWER,
    ProtocolError,
    RpcError,
    VersionError,
    forbidden,
    hub_error,
    internal_error,
    invalid_params,
    invalid_request,
    method_not_found,
    request_cancelled,
)
from hub.protocol.idmap import IdMap
from hub.protocol.translate import (
    capabilities_v2_to_v1,
    config_options_v2_to_v1,
    mcp_servers_v1_to_v2,
    modes_from_config_options,
)
from hub.protocol.version import negotiate_as_agent
from hub.server.outbox import Outbox
from hub.server.transport import FrameWriter
from hub.sessions import arbiter
from hub.sessions.client import ReplyHandler
from hub.sessions.registry import SessionRegistry
from hub.sessions.session import Session, SessionFailure
from hub.settings import ROLES, Settings, role_rank

log = logging.getLogger("hub.server")

Result = dict[str, Any] | None
SyncHandler = Callable[["ClientConnection", dict[str, Any]], Result]
AsyncHandler = Callable[["ClientConnection", dict[str, Any]], Awaitable[Result]]


class ConnectionState(Enum):
    NEW = "new"
    READY = "ready"
    CLOSED = "closed"


class ClientConnection:
    """The hub's side of one ``/acp`` WebSocket; implements ``ClientHandle``."""

    def __init__(
        self,
        registry: SessionRegistry,
        writer: FrameWriter,
        *,
        settings: Settings,
        role: str,
        principal: str = "local",
        connection_id: str | None = None,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.connection_id = connection_id or f"c-{secrets.token_hex(8)}"
        self.principal = principal
        self._granted_role = role
        self._role = role
        self._name = "client"
        self._version = 0
        self._hub_events = False
        self._batches = False
        self.state = ConnectionState.NEW
        self._outbox = Outbox(writer, settings.outbox_bytes, name=self.connection_id)
        self._requests: IdMap[ReplyHandler] = IdMap()
        self._inflight: dict[Any, anyio.CancelScope] = {}
        self.sessions: dict[str, Session] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._announce: list[Session] = []
        self._lease_watches: set[str] = set()

    # -- ClientHandle ------------------------------------------------------------------------

    @property
    def client_id(self) -> str:
        return self.connection_id

    @property
    def name(self) -> str:
        return self._name

    @property
    def role(self) -> str:
        return self._role

    @property
    def version(self) -> int:
        return self._version

    @property
    def hub_events(self) -> bool:
        return self._hub_events

    @property
    def batches(self) -> bool:
        return self._batches

    @property
    def outbox(self) -> Outbox:
        return self._outbox

    def request(self, method: str, params: dict[str, Any], on_reply: ReplyHandler) -> Any:
        request_id = self._requests.register(on_reply)
        self._outbox.push(jsonrpc.request(request_id, method, params), bounded=False)
        return request_id

    def withdraw(self, request_id: Any) -> None:
        if self._requests.resolve(request_id) is not None:
            self._outbox.push(
                jsonrpc.notification("$/cancel_request", {"requestId": request_id}), bounded=False
            )

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._outbox.push(jsonrpc.notification(method, params))

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self, receive_text: Callable[[], Awaitable[str | None]]) -> None:
        """Serve the connection until the client goes away or is closed.

        ``receive_text`` returns the next text frame, or ``None`` when the peer closed.
        """
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._run_outbox, tg.cancel_scope)
                while not self._outbox.closed:
                    text = await receive_text()
                    if text is None:
                        break
                    self.handle_frame(text)
                tg.cancel_scope.cancel()
        finally:
            self.close_down()

    async def _run_outbox(self, scope: anyio.CancelScope) -> None:
        await self._outbox.run()
        scope.cancel()  # the outbox closed (slow consumer, shutdown): stop reading too

    def close_down(self) -> None:
        """Detach from every session and fail the hub's outstanding requests."""
        if self.state is ConnectionState.CLOSED:
            return
        self.state = ConnectionState.CLOSED
        for session in list(self.sessions.values()):
            session.detach(self, reason="disconnected")
        self.sessions.clear()
        for handler in self._requests.reject_all():
            handler(None, request_cancelled("the client disconnected"))
        self._outbox.finish()

    def close(self, code: int, reason: str) -> None:
        """Close the WebSocket with ``code`` (1001 on shutdown, 1013 slow consumer, ...)."""
        self._outbox.close(code, reason)

    # -- incoming ----------------------------------------------------------------------------

    def handle_frame(self, text: str | bytes) -> None:
        """Parse and dispatch one text frame."""
        parsed = jsonrpc.parse(text, allow_batch=self._version >= 2)
        if isinstance(parsed, jsonrpc.Batch):
            self._handle_batch(parsed)
            return
        if isinstance(parsed, jsonrpc.Invalid):
            log.info("! %s: invalid message: %s", self.connection_id, parsed.error.data)
            self._outbox.push(jsonrpc.encode(parsed), bounded=False)
            return
        self._dispatch(parsed, self._reply)

    def _reply(self, frame: bytes) -> None:
        self._outbox.push(frame, bounded=False)

    def _handle_batch(self, batch: jsonrpc.Batch) -> None:
        replies: list[jsonrpc.Response | jsonrpc.ErrorResponse | jsonrpc.Invalid] = []
        waiting = [
            sum(1 for e in batch.entries if isinstance(e, jsonrpc.Request | jsonrpc.Invalid))
        ]

        def collect(frame: bytes) -> None:
            entry = jsonrpc.parse(frame)
            if isinstance(entry, jsonrpc.Response | jsonrpc.ErrorResponse | jsonrpc.Invalid):
                replies.append(entry)
            waiting[0] -= 1
            if waiting[0] == 0:
                out = jsonrpc.batch_reply(replies)
                if out is not None:
                    self._outbox.push(out, bounded=False)

        for entry in batch.entries:
            if isinstance(entry, jsonrpc.Invalid):
                collect(jsonrpc.encode(entry))
            else:
                self._dispatch(entry, collect)

    def _dispatch(self, entry: jsonrpc.Message, reply: Callable[[bytes], None]) -> None:
        if isinstance(entry, jsonrpc.Response | jsonrpc.ErrorResponse):
            handler = self._requests.resolve(entry.id)
            if handler is None:
                log.info(
                    "! %s: answer to unknown or withdrawn request %r", self.connection_id, entry.id
                )
                self._refuse_answer(entry.id)
                return
            if isinstance(entry, jsonrpc.Response):
                handler(entry.result, None)
            else:
                handler(None, entry.error)
            return
        params = entry.params if isinstance(entry.params, dict) else {}
        if entry.params is not None and not isinstance(entry.params, dict):
            if isinstance(entry, jsonrpc.Request):
                reply(jsonrpc.error(entry.id, invalid_params("params must be an object")))
            return
        if isinstance(entry, jsonrpc.Notification):
            self._notification(entry.method, params)
            return
        self._request(entry, params, reply)

    def _refuse_answer(self, request_id: Any) -> None:
        """An answer that matches no request of the hub's still in play: tell the client that
        it did not count (a role below approver is named as such; else it was stale)."""
        roles = [a.role for s in self.sessions.values() if (a := s.attached.get(self.client_id))]
        have = max(roles, key=role_rank) if roles else self._role
        if not arbiter.allows(have, arbiter.ANSWER_ROLE):
            error = forbidden(arbiter.ANSWER_ROLE, have, "answering a request of the hub")
        else:
            error = hub_error(
                STALE_ANSWER, "The request was already resolved or withdrawn", {"id": request_id}
            )
        self.notify("_hub/answer_refused", {"requestId": request_id, "error": error.to_dict()})

    def role_for(self, params: dict[str, Any]) -> str:
        """The caller's role for a request: its role in the session ``params`` names when it
        is attached there (it may have attached with less), else the connection's role."""
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        attachment = session.attached.get(self.client_id) if session is not None else None
        return attachment.role if attachment is not None else self._role

    def _check_role(self, method: str, params: dict[str, Any]) -> RpcError | None:
        """The ``-32040`` refusal of ``method`` when the caller's role is below the one
        ``hub.sessions.arbiter.METHOD_ROLES`` names, else ``None``."""
        needed = arbiter.required_role(method)
        have = self.role_for(params)
        return None if arbiter.allows(have, needed) else forbidden(needed, have, method)

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if self.state is not ConnectionState.READY:
            log.info("! %s: notification %s before initialize, ignored", self.connection_id, method)
            return
        refusal = self._check_role(method, params)
        if refusal is not None:
            # A notification has no answer: the refusal is a notification of its own.
            log.info("! %s: %s refused: %s", self.connection_id, method, refusal.message)
            self.notify("_hub/refused", {"method": method, "error": refusal.to_dict()})
            return
        if method == "$/cancel_request":
            scope = self._inflight.get(params.get("requestId"))
            if scope is not None:
                scope.cancel()
            return
        if method == "session/cancel":
            try:
                session = self._attached_session(params)
            except SessionFailure as exc:
                log.info("! %s: session/cancel refused: %s", self.connection_id, exc.error.message)
                self.notify("_hub/refused", {"method": method, "error": exc.error.to_dict()})
                return
            self._spawn(lambda: self._cancel(session), "cancel")
            return
        log.info("= %s: notification %s ignored", self.connection_id, method)

    async def _cancel(self, session: Session) -> None:
        try:
            await session.cancel(self)
        except (SessionFailure, AgentError) as exc:
            log.info("! %s: cancel failed: %s", self.connection_id, exc)

    def _spawn(self, fn: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        if self._tg is None:
            raise RuntimeError("connection is not running")
        self._tg.start_soon(fn, name=name)

    def _request(
        self, entry: jsonrpc.Request, params: dict[str, Any], reply: Callable[[bytes], None]
    ) -> None:
        method = entry.method
        if self.state is ConnectionState.NEW and method != "initialize":
            reply(jsonrpc.error(entry.id, invalid_request("the first request must be initialize")))
            return
        if self.state is ConnectionState.READY and method == "initialize":
            reply(jsonrpc.error(entry.id, invalid_request("already initialized")))
            return
        refusal = self._check_role(method, params)
        if refusal is not None:
            log.info("! %s: %s refused: %s", self.connection_id, method, refusal.message)
            reply(jsonrpc.error(entry.id, refusal))
            return
        sync = SYNC_METHODS.get(method)
        if sync is not None:
            reply(self._run_sync(entry.id, sync, params))
            self._flush_announcements()
            return
        handler = ASYNC_METHODS.get(method)
        if handler is None:
            reply(jsonrpc.error(entry.id, method_not_found(method)))
            return
        # The scope exists before the task starts, so that a `$/cancel_request` right behind
        # the request (a v1 client withdrawing a queued prompt) is not lost.
        scope = anyio.CancelScope()
        self._inflight[entry.id] = scope
        self._spawn(lambda: self._run_async(entry.id, handler, params, reply, scope), method)

    def _failure(self, exc: Exception) -> RpcError:
        """The error answering a request whose handler raised ``exc`` (call it from the
        ``except`` block: an unexpected exception is logged with its traceback)."""
        if isinstance(exc, SessionFailure | AgentError):
            return exc.error
        if isinstance(exc, ProtocolError):
            return invalid_params(str(exc))
        log.exception("! %s: internal error", self.connection_id)
        return internal_error()

    def _run_sync(self, request_id: Any, handler: SyncHandler, params: dict[str, Any]) -> bytes:
        try:
            return jsonrpc.response(request_id, handler(self, params))
        except Exception as exc:
            return jsonrpc.error(request_id, self._failure(exc))

    async def _run_async(
        self,
        request_id: Any,
        handler: AsyncHandler,
        params: dict[str, Any],
        reply: Callable[[bytes], None],
        scope: anyio.CancelScope,
    ) -> None:
        with scope:
            try:
                frame = jsonrpc.response(request_id, await handler(self, params))
            except Exception as exc:
                frame = jsonrpc.error(request_id, self._failure(exc))
            finally:
                self._inflight.pop(request_id, None)
        if scope.cancelled_caught:
            frame = jsonrpc.error(request_id, request_cancelled())
        if self.state is not ConnectionState.CLOSED:
            reply(frame)
            self._flush_announcements()

    def watch_lease(self, session: Session) -> None:
        """While this client holds ``session``'s lease, take it away when it expires.

        The watch runs in this connection's task group: the lease never outlives the
        holder's connection (detaching releases it)."""
        if session.id in self._lease_watches or self._tg is None:
            return
        self._lease_watches.add(session.id)

        async def watch() -> None:
            try:
                while session.lease_holder is self:
                    delay = session.expire_lease()
                    if delay is None:
                        return
                    await anyio.sleep(max(delay, 0.01))
            finally:
                self._lease_watches.discard(session.id)

        self._spawn(watch, f"lease {session.id}")

    def _flush_announcements(self) -> None:
        """Sessions attached by the request just answered announce the client now, so that
        the response precedes the presence event and any permission request."""
        while self._announce:
            self._announce.pop(0).announce(self)

    # -- helpers -----------------------------------------------------------------------------

    def _attached_session(self, params: dict[str, Any]) -> Session:
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None and session.closed:
            # Closed by another client: the registry let go of it, and so does this client.
            del self.sessions[session.id]
            session = None
        if session is None:
            self.registry.get(session_id)  # -32002 when it does not exist at all
            raise SessionFailure(
                hub_error(NOT_ATTACHED, f"not attached to session {session_id!r}: resume it first")
            )
        return session

    def _config_result(self, options: list[Any]) -> dict[str, Any]:
        if self._version >= 2:
            return {"configOptions": options}
        result: dict[str, Any] = {"configOptions": config_options_v2_to_v1(options)}
        modes = modes_from_config_options(options)
        if modes is not None:
            result["modes"] = modes
        return result

    def attach(
        self, session: Session, params: dict[str, Any], *, default: str | None
    ) -> dict[str, Any]:
        """Attach to ``session`` following ``params`` (``replayFrom`` or the v1 ``_meta``)."""
        replay, after = _replay_request(params, default)
        role = _requested_role(params)
        if role is not None and role not in ROLES:
            raise SessionFailure(invalid_params(f"unknown role {role!r}"))
        return self._attach(session, replay=replay, after=after, role=role)

    def _attach(
        self,
        session: Session,
        *,
        replay: str | None,
        after: tuple[int, int] | None = None,
        role: str | None = None,
        via_attach: bool = False,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """``Session.attach`` this client, and the part every attaching answer shares: the
        config options (v1: and modes) and ``_meta["acp-hub"]`` with the cursor and the
        agent's name. The client is announced once the answer is queued."""
        self.sessions[session.id] = session
        cursor = session.attach(
            self,
            replay=replay,
            after=after,
            role=role,
            via_attach=via_attach,
            message_id=message_id,
        )
        self._announce.append(session)
        result = self._config_result(session.state.config_options)
        result["_meta"] = {"acp-hub": {**cursor, "agent": session.agent.name}}
        return result


# -- method handlers ---------------------------------------------------------------------------


def _requested_role(params: dict[str, Any]) -> str | None:
    role = _hub_meta(params).get("role")
    if role is None:
        role = params.get("role")
    return role if isinstance(role, str) else None


def _hub_meta(params: dict[str, Any]) -> dict[str, Any]:
    meta = params.get("_meta")
    hub_meta = meta.get("acp-hub") if isinstance(meta, dict) else None
    return hub_meta if isinstance(hub_meta, dict) else {}


def _replay_request(
    params: dict[str, Any], default: str | None
) -> tuple[str | None, tuple[int, int] | None]:
    replay_from = params.get("replayFrom")
    hub_meta = _hub_meta(params)
    if replay_from is None:
        after = hub_meta.get("after")
        if isinstance(after, dict):
            replay_from = {"type": "_hub_after", **after}
        elif hub_meta.get("replay") == "start":
            replay_from = {"type": "start"}
    if replay_from is None:
        return default, None
    if not isinstance(replay_from, dict):
        raise SessionFailure(invalid_params("replayFrom must be an object"))
    kind = replay_from.get("type")
    if kind == "start":
        return "start", None
    if kind == "_hub_after":
        epoch, seq = replay_from.get("epoch"), replay_from.get("seq")
        if (
            not isinstance(epoch, int)
            or not isinstance(seq, int)
            or isinstance(seq, bool)
            or seq < 0
        ):
            raise SessionFailure(invalid_params("_hub_after needs integer epoch and seq >= 0"))
        return "after", (epoch, seq)
    raise SessionFailure(invalid_params(f"unsupported replayFrom type {kind!r}"))


async def _initialize(conn: ClientConnection, params: dict[str, Any]) -> Result:
    try:
        version = negotiate_as_agent(params.get("protocolVersion"))
    except VersionError as exc:
        raise SessionFailure(invalid_params(str(exc))) from None
    hub_meta = _hub_meta(params)
    info = params.get("info") if version >= 2 else params.get("clientInfo")
    if not isinstance(info, dict):
        info = params.get("clientInfo") or params.get("info")
    name = hub_meta.get("name")
    if not isinstance(name, str) and isinstance(info, dict) and isinstance(info.get("name"), str):
        name = info["name"]
    conn._name = name if isinstance(name, str) and name else f"client {conn.connection_id[-4:]}"
    requested = hub_meta.get("role")
    if isinstance(requested, str):
        if requested not in ROLES:
            raise SessionFailure(invalid_params(f"unknown role {requested!r}"))
        conn._role = arbiter.capped(requested, conn._granted_role)
    conn._version = version
    conn._hub_events = version >= 2 or hub_meta.get("events") is True
    conn._batches = version >= 2 and hub_meta.get("batches") is True
    conn.state = ConnectionState.READY
    supervisor = conn.registry.supervisor
    agents = [{"name": n, "default": n == supervisor.default_name} for n in supervisor.names()]
    capabilities = await _capabilities(conn)
    meta = {
        "acp-hub": {
            "connectionId": conn.connection_id,
            "clientId": conn.connection_id,
            "principal": conn.principal,
            "role": conn._role,
            "name": conn._name,
            "agents": agents,
            "defaultAgent": supervisor.default_name,
            "features": ["replay", "cursor", "batch-replay", "arbitration", "attach"],
            "version": __version__,
        }
    }
    hub_info = {"name": "acp-hub", "title": "acp-hub", "version": __version__}
    log.info(
        "= %s: initialized v%d as %s (%s)", conn.connection_id, version, conn._role, conn._name
    )
    if version >= 2:
        return {
            "protocolVersion": version,
            "info": hub_info,
            "capabilities": capabilities,
            "authMethods": [],
            "_meta": meta,
        }
    v1caps = capabilities_v2_to_v1(capabilities)
    v1caps["loadSession"] = True
    session_caps = v1caps.setdefault("sessionCapabilities", {})
    session_caps.update({"list": {}, "resume": {}, "close": {}, "delete": {}})
    session_caps["attach"] = {"roles": list(ROLES)}
    return {
        "protocolVersion": version,
        "agentInfo": hub_info,
        "agentCapabilities": v1caps,
        "authMethods": [],
        "_meta": meta,
    }


async def _capabilities(conn: ClientConnection) -> dict[str, Any]:
    """The v2 capabilities the hub advertises: the default agent's prompt and MCP support,
    and the session operations the hub serves itself."""
    session: dict[str, Any] = {"delete": {}, "mcp": {"stdio": {}}}
    # The multi-client attach proposal: session/attach and session/detach with these roles.
    session["attach"] = {"roles": [*ROLES, *arbiter.ATTACH_ROLE_NAMES]}
    supervisor = conn.registry.supervisor
    name = supervisor.default_name
    if name is not None:
        agent = supervisor.get(name)
        try:
            await agent.ensure_started()
        except AgentError as exc:
            log.warning("! default agent %s did not start: %s", name, exc)
        agent_session = agent.capabilities.get("session") if agent.capabilities else None
        if isinstance(agent_session, dict):
            for key in ("prompt", "mcp", "additionalDirectories"):
                if isinstance(agent_session.get(key), dict):
                    session[key] = agent_session[key]
    return {"session": session}


async def _session_new(conn: ClientConnection, params: dict[str, Any]) -> Result:
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        raise SessionFailure(invalid_params("cwd must be an absolute path"))
    servers = params.get("mcpServers", [])
    if servers is None:
        servers = []
    if not isinstance(servers, list):
        raise SessionFailure(invalid_params("mcpServers must be an array"))
    if conn.version < 2:
        servers = mcp_servers_v1_to_v2(servers)
    agent = _hub_meta(params).get("agent")
    if agent is not None and not isinstance(agent, str):
        raise SessionFailure(invalid_params("_meta['acp-hub'].agent must be a string"))
    session = await conn.registry.new_session(conn, agent, cwd, servers)
    if conn.state is ConnectionState.CLOSED:
        return None
    result = conn._attach(session, replay="after", after=(session.log.epoch, 0))
    result["sessionId"] = session.id
    return result


def _session_list(conn: ClientConnection, params: dict[str, Any]) -> Result:
    entries = conn.registry.list()
    cwd = params.get("cwd")
    if isinstance(cwd, str):
        entries = [e for e in entries if e["cwd"] == cwd]
    return {"sessions": entries}


def _session_resume(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.registry.get(params.get("sessionId"))
    return conn.attach(session, params, default=None)


def _session_load(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.registry.get(params.get("sessionId"))
    return conn.attach(session, params, default="start")


def _session_attach(conn: ClientConnection, params: dict[str, Any]) -> Result:
    """The multi-client attach proposal: role + historyPolicy."""
    session = conn.registry.get(params.get("sessionId"))
    policy = arbiter.history_policy(params.get("historyPolicy"))
    mapped_role = arbiter.attach_role(params.get("role"))
    replay: str | None = {
        "full": "start",
        "none": None,
        "pending_only": "pending_only",
        "after": "message",
    }[policy.kind]
    result = conn._attach(
        session, replay=replay, role=mapped_role, via_attach=True, message_id=policy.message_id
    )
    result["role"] = session.role_of(conn)
    return result


def _session_detach(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn._attached_session(params)
    conn.sessions.pop(session.id, None)
    session.detach(conn)
    return {}


async def _session_prompt(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn._attached_session(params)
    return await session.prompt(conn, params.get("prompt"))  # type: ignore[arg-type]


async def _session_set_config_option(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn._attached_session(params)
    session.require(conn, "driver", "session/set_config_option")
    config_id = params.get("configId")
    if not isinstance(config_id, str) or "value" not in params:
        raise SessionFailure(invalid_params("configId and value are required"))
    value = params["value"]
    kind = params.get("type")
    if kind is None:
        kind = "boolean" if isinstance(value, bool) else "id"
    options = await session.agent.set_config_option(
        session.agent_session_id, config_id, kind, value
    )
    session.emit({"sessionUpdate": "config_option_update", "configOptions": options})
    return conn._config_result(options)


async def _session_set_mode(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn._attached_session(params)
    session.require(conn, "driver", "session/set_mode")
    mode_id = params.get("modeId")
    if not isinstance(mode_id, str):
        raise SessionFailure(invalid_params("modeId is required"))
    mode_option = next(
        (
            o
            for o in session.state.config_options
            if isinstance(o, dict) and o.get("category") == "mode"
        ),
        None,
    )
    if mode_option is not None:
        options = await session.agent.set_config_option(
            session.agent_session_id, mode_option["configId"], "id", mode_id
        )
        session.emit({"sessionUpdate": "config_option_update", "configOptions": options})
    else:
        await session.agent.set_mode(session.agent_session_id, mode_id)
    return {}


async def _session_close(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.registry.get(params.get("sessionId"))
    await conn.registry.close(conn, session, delete=False)
    conn.sessions.pop(session.id, None)
    return {}


async def _session_delete(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session_id = params.get("sessionId")
    if session_id not in conn.registry.sessions:
        return {}  # idempotent, as ACP asks
    session = conn.registry.get(session_id)
    await conn.registry.close(conn, session, delete=True)
    conn.sessions.pop(session.id, None)
    return {}


def _hub_queue_withdraw(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn._attached_session(params)
    queue_id = params.get("queueId")
    if not isinstance(queue_id, str):
        raise SessionFailure(invalid_params("queueId is required"))
    session.withdraw(conn, queue_id)
    return {}


def _hub_set_policy(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn._attached_session(params)
    return session.set_policy(conn, params.get("prompt"), params.get("permission"))


def _hub_lease(action: str) -> SyncHandler:
    def handler(conn: ClientConnection, params: dict[str, Any]) -> Result:
        session = conn._attached_session(params)
        target = params.get("clientId")
        result = session.lease(conn, action, target if isinstance(target, str) else None)
        holder = session.lease_holder
        if isinstance(holder, ClientConnection):
            holder.watch_lease(session)
        return result

    return handler


def _hub_agent_stderr(conn: ClientConnection, params: dict[str, Any]) -> Result:
    name = params.get("agent") or conn.registry.supervisor.default_name
    try:
        agent = conn.registry.supervisor.get(name)
    except KeyError:
        raise SessionFailure(invalid_params(f"unknown agent {name!r}")) from None
    return {"agent": agent.name, "stderr": agent.stderr_tail()}


SYNC_METHODS: dict[str, SyncHandler] = {
    "session/list": _session_list,
    "session/resume": _session_resume,
    "session/load": _session_load,
    "session/attach": _session_attach,
    "session/detach": _session_detach,
    "_hub/queue/withdraw": _hub_queue_withdraw,
    "_hub/set_policy": _hub_set_policy,
    "_hub/lease/request": _hub_lease("request"),
    "_hub/lease/release": _hub_lease("release"),
    "_hub/lease/grant": _hub_lease("grant"),
    "_hub/agent_stderr": _hub_agent_stderr,
}

ASYNC_METHODS: dict[str, AsyncHandler] = {
    "initialize": _initialize,
    "session/new": _session_new,
    "session/prompt": _session_prompt,
    "session/set_config_option": _session_set_config_option,
    "session/set_mode": _session_set_mode,
    "session/close": _session_close,
    "session/delete": _session_delete,
}
