"""One client of ``/acp`` (WebSocket, or Streamable HTTP): the hub speaking ACP as an agent.

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

The transport is the outbox's (``hub.server.outbox.ConnectionOutbox``); the method handlers
(``hub.server.methods``) see the connection as a ``Caller``; a session is a ``SessionOps``,
served here or by another node. docs/internals.md has the whole layout.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine
from enum import Enum
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from hub.access.gate import Gate
from hub.access.principal import Principal
from hub.mistakes import MistakeLog
from hub.protocol import jsonrpc
from hub.protocol.errors import (
    NOT_ATTACHED,
    RpcError,
    RpcFailure,
    hub_error,
    invalid_params,
    invalid_request,
    method_not_found,
    request_cancelled,
)
from hub.protocol.idmap import IdMap
from hub.protocol.jsonrpc import RequestId
from hub.ratelimit import TokenBucket
from hub.server import close_codes, roles, watch
from hub.server.admission import too_many as _too_many
from hub.server.batches import dispatch_batch
from hub.server.config_rendering import config_result
from hub.server.methods import ASYNC_METHODS, SYNC_METHODS, AsyncHandler, SyncHandler
from hub.server.methods.caller import failure_answer
from hub.server.methods.extensions import extension_handler
from hub.server.outbox import ConnectionOutbox, Outbox
from hub.server.transport import FrameWriter
from hub.sessions import arbiter
from hub.sessions.client import ReplyHandler
from hub.sessions.errors import SessionFailure
from hub.sessions.ops import Replay
from hub.sessions.ops import SessionOps as Session
from hub.sessions.registry import SessionRegistry
from hub.settings import Role, Settings

log = logging.getLogger("hub.server")


class ConnectionState(Enum):
    NEW = "new"
    READY = "ready"
    CLOSED = "closed"


class ClientConnection:
    """The hub's side of one ``/acp`` client; implements ``ClientHandle``.

    Give it the ``writer`` of a WebSocket, or a ready ``outbox`` (another transport)."""

    def __init__(
        self,
        registry: SessionRegistry,
        writer: FrameWriter | None = None,
        *,
        outbox: ConnectionOutbox | None = None,
        settings: Settings,
        role: Role,
        principal: str = "local",
        connection_id: str | None = None,
        transport: str = "websocket",
        access: Principal | None = None,
        gate: Gate | None = None,
        base_url: str | None = None,
    ) -> None:
        self.registry = registry
        # Every request naming a session outside the credential's reach is answered as if
        # that session did not exist.
        self.access = access or Principal(sub=principal, name=principal, role=role, agents=None)
        self.gate = gate
        self.base_url = base_url
        self._leave_reason = "disconnected"
        self.transport = transport
        """The transport the client came over (the ``transport`` label of the metrics)."""
        self.settings = settings
        self.connection_id = connection_id or f"c-{secrets.token_hex(8)}"
        self.principal = principal
        self._granted_role = role
        self._role = role
        self._name = "client"
        self._program = ""
        self._version = 0
        self._hub_events = False
        self._batches = False
        self.state = ConnectionState.NEW
        self._deadline: anyio.CancelScope | None = anyio.CancelScope()
        if outbox is None:
            if writer is None:
                raise ValueError("a connection needs a writer or an outbox")
            outbox = Outbox(writer, settings.outbox_bytes, name=self.connection_id)
        self._outbox: ConnectionOutbox = outbox
        self._requests: IdMap[ReplyHandler] = IdMap()
        self._inflight: dict[Any, anyio.CancelScope] = {}
        self.sessions: dict[str, Session] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._context: contextvars.Context | None = None
        """The context the outbox's writers run in (``_start_writer``), while ``run`` runs."""
        self._announce: list[Session] = []
        self._initializing: anyio.Event | None = None
        """Set while ``initialize`` runs: the read loop waits for it before the next frame."""
        self._bucket = TokenBucket(settings.request_rate, settings.request_burst, time.monotonic())
        """The connection's request rate (``request_rate``, ``request_burst``)."""
        self.mistake = MistakeLog(log, self.connection_id)
        """Logs a client mistake: one concise line, rate-limited (never a traceback)."""

    # -- ClientHandle (structural: the properties it declares, each a field) -----------------

    @property
    def client_id(self) -> str:
        return self.connection_id

    @property
    def name(self) -> str:
        return self._name

    @property
    def program(self) -> str:
        return self._program

    @property
    def role(self) -> Role:
        return self._role

    @property
    def granted_role(self) -> Role:  # ``role`` may be less, as asked
        return self._granted_role

    @property
    def closed(self) -> bool:
        return self.state is ConnectionState.CLOSED

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
    def outbox(self) -> ConnectionOutbox:
        return self._outbox

    def request(self, method: str, params: dict[str, Any], on_reply: ReplyHandler) -> RequestId:
        request_id = self._requests.register(on_reply)
        self._outbox.push(jsonrpc.request(request_id, method, params))
        return request_id

    def withdraw(self, request_id: RequestId) -> None:
        if self._requests.resolve(request_id) is not None:
            self._outbox.push(jsonrpc.notification("$/cancel_request", {"requestId": request_id}))

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._outbox.push(jsonrpc.notification(method, params))

    def identify(
        self,
        *,
        version: int,
        name: str,
        role: Role,
        hub_events: bool,
        batches: bool,
        program: str = "",
    ) -> None:
        """``initialize`` succeeded: fix what the sessions read once per attachment
        (``role`` is capped at ``granted_role``) and accept every other method."""
        self._version = version
        self._name = name
        self._program = program
        self._role = arbiter.capped(role, self._granted_role)
        self._hub_events = hub_events
        self._batches = batches
        self.state = ConnectionState.READY
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self, receive_text: Callable[[], Awaitable[str | None]]) -> None:
        """Serve the connection until the client goes away or is closed.

        ``receive_text`` returns the next text frame, or ``None`` when the peer closed.
        """
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                # The outbox's writer is a task only while there is something to write
                # (hub.server.outbox): most clients are idle most of the time.
                self._context = contextvars.copy_context()
                self._outbox.start(self._start_writer)
                tg.start_soon(self._initialize_deadline)
                while not self._outbox.closed:
                    text = await receive_text()
                    if text is None:
                        break
                    self.handle_frame(text)
                    # Fairness: frames a client has already sent are read without a task
                    # switch; yield after each one, so that a client flooding the hub takes
                    # its turn with the others instead of holding the event loop.
                    await anyio.lowlevel.checkpoint()
                    if self._initializing is not None:
                        # Messages pipelined behind `initialize` wait for its answer: they
                        # are handled as if the client had waited for it.
                        await self._initializing.wait()
                        self._initializing = None
                tg.cancel_scope.cancel()
        finally:
            self._tg = self._context = None
            self.close_down()

    async def _initialize_deadline(self) -> None:
        """Close a connection that does not ``initialize`` within ``initialize_timeout``."""
        timeout = self.settings.initialize_timeout
        # Cancelled by a successful initialize: the task ends then instead of sleeping out
        # the deadline (thousands of connections would each keep one sleeping).
        if self._deadline is None:
            return
        with self._deadline:
            await anyio.sleep(timeout)
            if self.state is ConnectionState.NEW:
                self.mistake("no initialize within %.0f s, closing 1008", timeout)
                self.close(close_codes.POLICY, "no initialize in time")

    def _start_writer(self, write: Callable[[], Awaitable[bool]]) -> None:
        """Start the outbox's writer (``Outbox.start``): a task of the connection's, in its
        context (the writer's log lines name this client, whichever task pushed the frame
        that started it), that stops the connection once the outbox ended (a slow consumer,
        shutdown). Once the connection is over its frames go nowhere."""
        tg = self._tg
        if tg is not None and self._context is not None:
            self._context.run(lambda: tg.start_soon(self._write_out, write, tg, name="outbox"))

    async def _write_out(
        self, write: Callable[[], Awaitable[bool]], tg: anyio.abc.TaskGroup
    ) -> None:
        if await write():
            tg.cancel_scope.cancel()  # the outbox closed: stop reading too

    def close_down(self) -> None:
        """Detach from every session and fail the hub's outstanding requests."""
        if self.state is ConnectionState.CLOSED:
            return
        self.state = ConnectionState.CLOSED
        watch.forget(self)
        for session in list(self.sessions.values()):
            session.detach(self, reason=self._leave_reason)
        self.sessions.clear()
        for handler in self._requests.reject_all():
            handler(None, request_cancelled("the client disconnected"))
        self._outbox.finish()

    def close(self, code: int, reason: str) -> None:
        """Close the WebSocket with ``code`` (1001 on shutdown, 1013 slow consumer, ...)."""
        self._outbox.close(code, reason)

    # -- incoming ----------------------------------------------------------------------------

    def handle_frame(self, text: str | bytes) -> None:
        """Parse and dispatch one text frame; never raises (the read loop must go on)."""
        try:
            parsed = jsonrpc.parse(text, allow_batch=self._version >= 2)
            if isinstance(parsed, jsonrpc.Batch):
                self._handle_batch(parsed)
                return
            if isinstance(parsed, jsonrpc.Invalid):
                self.mistake("invalid message: %s", parsed.error.data)
                self._outbox.push(jsonrpc.encode(parsed))
                return
            self._dispatch(parsed, self._reply)
        except Exception:
            # A bug of the hub's: logged with its traceback; the connection goes on.
            log.exception("! %s: internal error while handling a message", self.connection_id)

    def _reply(self, frame: bytes) -> None:
        self._outbox.push(frame)

    def _handle_batch(self, batch: jsonrpc.Batch) -> None:
        dispatch_batch(batch, self._dispatch, self._reply)

    def _dispatch(self, entry: jsonrpc.Message, reply: Callable[[bytes], None]) -> None:
        if isinstance(entry, jsonrpc.Response | jsonrpc.ErrorResponse):
            handler = self._requests.resolve(entry.id)
            if handler is None:
                self.mistake("answer to unknown or withdrawn request %r", entry.id)
                self._refuse_answer(entry.id)
                return
            if isinstance(entry, jsonrpc.Response):
                handler(entry.result, None)
            else:
                handler(None, entry.error)
            return
        params = entry.params if isinstance(entry.params, dict) else {}
        if entry.params is not None and not isinstance(entry.params, dict):
            self.mistake("%s with params that are not an object", entry.method)
            if isinstance(entry, jsonrpc.Request):
                reply(jsonrpc.error(entry.id, invalid_params("params must be an object")))
            return
        if isinstance(entry, jsonrpc.Notification):
            self._notification(entry.method, params)
            return
        self._request(entry, params, reply)

    def _refuse_answer(self, request_id: Any) -> None:
        """An answer that matches no request of the hub's still in play: tell the client that
        it did not count (``roles.answer_refusal`` says why)."""
        held = [s.role_of(self) for s in self.sessions.values()]
        error = roles.answer_refusal(held, self._role, request_id)
        self.notify("_hub/answer_refused", {"requestId": request_id, "error": error.to_dict()})

    def role_for(self, params: dict[str, Any]) -> Role:
        """The caller's role for a request: its role in the session ``params`` names when it
        is attached there (it may have attached with less), else the connection's role."""
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        return session.role_of(self) if session is not None else self._role

    def revoke(self, reason: str) -> None:
        """The credential that admitted this client was revoked: close with 1008, and the
        sessions it leaves show ``revoked`` as the reason in presence."""
        self._leave_reason = "revoked"
        self.close(close_codes.POLICY, reason)

    def expire(self) -> None:
        """The credential that admitted this client expired (``hub.server.expiry``): close
        with 1008, reason ``expired``; the sessions it leaves show ``expired`` in presence."""
        self._leave_reason = "expired"
        self.close(close_codes.POLICY, "expired")

    def take_request(self, what: str) -> RpcError | None:
        """Count one request against ``request_rate``: ``None``, or the refusal of ``what``
        over the rate (logged as a mistake). A request refused for its id counts too."""
        wait = self._bucket.take(time.monotonic())
        if not wait:
            return None
        self.mistake("%s over the request rate, refused", what)
        return _too_many("request_rate", retry_after=wait)

    def _check_role(self, method: str, params: dict[str, Any]) -> RpcError | None:
        """The refusal of ``method`` for this client's credential and role (``roles.refusal``),
        or ``None``."""
        return roles.refusal(self.access, method, params, self.role_for(params))

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if self.state is not ConnectionState.READY:
            self.mistake("notification %s before initialize, ignored", method)
            return
        refusal = self._check_role(method, params)
        if refusal is not None:
            # A notification has no answer: the refusal is a notification of its own.
            self.mistake("%s refused: %s", method, refusal.message)
            self.notify("_hub/refused", {"method": method, "error": refusal.to_dict()})
            return
        if method == "$/cancel_request":
            request_id = params.get("requestId")
            # Any JSON value may arrive here; only a string or a number can name a request.
            if isinstance(request_id, str | int):
                scope = self._inflight.get(request_id)
                if scope is not None:
                    scope.cancel()
            else:
                self.mistake(
                    "$/cancel_request with a requestId of type %s", type(request_id).__name__
                )
            return
        if method == "session/cancel":
            try:
                session = self.attached_session(params.get("sessionId"))
            except SessionFailure as exc:
                self.mistake("session/cancel refused: %s", exc.error.message)
                self.notify("_hub/refused", {"method": method, "error": exc.error.to_dict()})
                return
            self._spawn(lambda: self._cancel(session), "cancel")
            return
        self.mistake("notification %s ignored", method)

    async def _cancel(self, session: Session) -> None:
        try:
            await session.cancel(self)
        except RpcFailure as exc:
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
            self.mistake("%s before initialize, refused", method)
            reply(jsonrpc.error(entry.id, invalid_request("the first request must be initialize")))
            return
        if self.state is ConnectionState.READY and method == "initialize":
            self.mistake("initialize again, refused")
            reply(jsonrpc.error(entry.id, invalid_request("already initialized")))
            return
        refused = self.take_request(method)
        if refused is not None:
            reply(jsonrpc.error(entry.id, refused))
            return
        refusal = self._check_role(method, params)
        if refusal is not None:
            self.mistake("%s refused: %s", method, refusal.message)
            reply(jsonrpc.error(entry.id, refusal))
            return
        sync = SYNC_METHODS.get(method)
        if sync is not None:
            named = params.get("sessionId")
            session = self.sessions.get(named) if isinstance(named, str) else None
            if session is not None and not session.answers_here(method):
                # A session another node owns: the owner answers (hub.sessions.ops).
                self._spawn(lambda: self._forward(entry.id, session, method, params, reply), method)
                return
            if self.registry.follows_first(method, named):
                # A session another node owns, not followed here yet: follow it, then attach.
                self._spawn(lambda: self._attach_remote(entry.id, sync, params, reply), method)
                return
            reply(self._run_sync(entry.id, sync, params))
            self._flush_announcements()
            return
        handler = ASYNC_METHODS.get(method) or extension_handler(method)
        if handler is None:
            self.mistake("unknown method %s", method)
            reply(jsonrpc.error(entry.id, method_not_found(method)))
            return
        if len(self._inflight) >= self.settings.max_pending_requests:
            self.mistake("%s over max_pending_requests, refused", method)
            reply(jsonrpc.error(entry.id, _too_many("max_pending_requests")))
            return
        # The scope exists before the task starts, so that a `$/cancel_request` right behind
        # the request (a v1 client withdrawing a queued prompt) is not lost.
        scope = anyio.CancelScope()
        self._inflight[entry.id] = scope
        done = None
        if method == "initialize":
            done = self._initializing = anyio.Event()
        self._spawn(lambda: self._run_async(entry.id, handler, params, reply, scope, done), method)

    async def _forward(
        self,
        request_id: Any,
        session: Session,
        method: str,
        params: dict[str, Any],
        reply: Callable[[bytes], None],
    ) -> None:
        try:
            frame = jsonrpc.response(request_id, await session.forward_method(self, method, params))
        except Exception as exc:
            frame = jsonrpc.error(request_id, self._failure(exc))
        if self.state is not ConnectionState.CLOSED:
            reply(frame)

    async def _attach_remote(
        self,
        request_id: Any,
        handler: SyncHandler,
        params: dict[str, Any],
        reply: Callable[[bytes], None],
    ) -> None:
        try:
            await self.registry.load_remote(params["sessionId"])
        except Exception as exc:
            frame = jsonrpc.error(request_id, self._failure(exc))
        else:
            frame = self._run_sync(request_id, handler, params)
        if self.state is not ConnectionState.CLOSED:
            reply(frame)
            self._flush_announcements()

    def _failure(self, exc: Exception) -> RpcError:
        """The error answering a request whose handler raised ``exc`` (``failure_answer``)."""
        return failure_answer(exc, self.mistake, self.connection_id)

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
        done: anyio.Event | None = None,
    ) -> None:
        try:
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
        finally:
            if done is not None:
                done.set()

    def _flush_announcements(self) -> None:
        """Sessions attached by the request just answered announce the client now, so that
        the response precedes the presence event and any permission request."""
        while self._announce:
            self._announce.pop(0).announce(self)

    # -- the public API of the method handlers ------------------------------------------------

    def attached_session(self, session_id: Any) -> Session:
        """The session ``session_id`` this client is attached to; ``SessionFailure`` with
        ``-32002`` when it does not exist, ``-32043`` when the client is not attached."""
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

    def attach(
        self,
        session: Session,
        *,
        replay: Replay,
        after: tuple[int, int] | None = None,
        role: Role | None = None,
        via_attach: bool = False,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """``Session.attach`` this client, and the part every attaching answer shares: the
        session's id (a Streamable HTTP client opens the session's stream when it sees it,
        as the transport RFD's resume flow shows), the config options (v1: and modes) and
        ``_meta["acp-hub"]`` with the cursor and the agent's name. The client is announced
        once the answer is queued."""
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
        result: dict[str, Any] = {"sessionId": session.id}
        result.update(config_result(self._version, session.config_options))
        result["_meta"] = {"acp-hub": {**cursor, "agent": session.agent_name}}
        return result

    def reattach(self, session: Session, after: tuple[int, int]) -> None:
        """Attach again to ``session`` from the cursor ``after`` (a stream of another transport
        lost what it held): the events after it are queued again."""
        self.attach(session, replay="after", after=after)
        self._flush_announcements()

    def detach_session(self, session: Session) -> None:
        """Detach this client from ``session`` (``session/detach``)."""
        self.sessions.pop(session.id, None)
        session.detach(self)

    def forget_session(self, session: Session) -> None:
        """``session`` was closed: this client no longer counts as attached to it."""
        self.sessions.pop(session.id, None)
