"""The JSON-RPC connection to one agent process over its stdin and stdout.

Theory of operation
-------------------
One reader (``run``) consumes the agent's stdout in order: it frames lines
(``LineDecoder``), parses each once (``jsonrpc.parse``) and dispatches it without ever
waiting on anything but the next chunk:

* a response resolves the pending request it answers (``IdMap``: the hub numbers its own
  requests; the agent numbers its requests independently, from 0, so the two id spaces never
  mix). A response to an id that is no longer pending (cancelled, abandoned) is ignored;
* a notification is handed to ``on_notification`` synchronously, so updates keep the agent's
  order; ``$/cancel_request`` from the agent cancels the task serving that request;
* a request from the agent is served by ``on_request`` in a task of its own, so that a
  permission prompt waiting for a human never stalls the stream; its result or error is
  written back with the agent's own id, ``-32800`` if the agent withdrew it.
  ``on_request_seen`` (optional) is told of it synchronously first, in stream order;
* a line over the limit, bytes that are not JSON, or JSON that is not a JSON-RPC message are
  logged with the agent's name and answered per JSON-RPC (``-32700`` with ``id: null`` for
  unparseable input, ``-32600`` otherwise); nothing the agent sends can end the reader
  except the end of the stream.

Each line is dispatched inside ``dispatch_batch()`` (a context manager factory, by default
one that does nothing): the hub passes one that holds its writes to clients until the group is
dispatched (``hub.server.transport.held_writes``). A read of at most ``BATCH_LINES`` lines is a
live stream: its lines are dispatched one per group, so that each line's clients get it as soon
as it is folded, not after the lines read with it. A read of more is a burst the agent wrote at
once (a replay, a tool's output, many sessions due together): its lines are dispatched
``BATCH_LINES`` to a group, their writes back to back, which costs the hub and the clients'
side less per frame; a burst's lines waited for one another anyway.

Anything the reader writes (error replies) goes through a task: an agent blocked writing to a
full stdout pipe is not reading its stdin, and the reader must not deadlock on it.

``request`` sends a request and waits for its answer. If the waiting task is cancelled, or
the request has a deadline (``response_timeout``) that passes, the request is withdrawn:
forgotten locally (a late answer is ignored) and ``$/cancel_request`` is sent to the agent.
``start_request`` sends without waiting and calls ``on_reply`` from the reader, in stream
order, when the answer arrives (used for v1 prompt turns).
``close(error)`` fails every pending request with ``error``: nothing waits forever on a
dead agent.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import orjson

from hub.agents.errors import AgentError, agent_unavailable
from hub.mistakes import MistakeLog
from hub.protocol import jsonrpc
from hub.protocol.errors import (
    PARSE_ERROR,
    RpcError,
    internal_error,
    invalid_params,
    parse_error,
    request_cancelled,
)
from hub.protocol.framing import DEFAULT_MAX_LINE, LineDecoder, LineTooLong, encode_line
from hub.protocol.idmap import IdMap

__all__ = [
    "BATCH_LINES",
    "Connection",
    "DispatchBatch",
    "NotificationHandler",
    "ReplyHook",
    "RequestHandler",
]

logger = logging.getLogger("hub.agents")

RequestHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Serves one agent request: returns the result, or raises ``AgentError`` to answer an error."""

NotificationHandler = Callable[[str, dict[str, Any]], None]
"""Handles one agent notification, synchronously and without blocking."""

ReplyHook = Callable[[Any, RpcError | None], None]
"""Called from the reader with ``(result, None)`` or ``(None, error)`` when a request ends."""

DispatchBatch = Callable[[], AbstractContextManager[object]]
"""Entered around the dispatch of each group of lines read together (see the module docs)."""

BATCH_LINES = 16
"""The most lines dispatched inside one ``dispatch_batch()``, and the most one read may bring
for its lines to be dispatched one per group (see the module docstring). Larger groups save
little more CPU and make the first lines of a burst wait longer; groups of a few lines read
together make a live stream's first line wait for the others' work, which at the benchmark's
many-sessions load (S2-phased) multiplied its p99 (``docs/design/fanout.md``)."""

CANCEL_REQUEST = "$/cancel_request"


@dataclass(slots=True)
class _Outgoing:
    method: str
    on_reply: ReplyHook | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: RpcError | None = None


class Connection:
    """JSON-RPC over an agent's stdio (see the module docstring).

    ``task_group`` runs the request-serving tasks and the reader's writes; cancelling it
    abandons them. ``run`` must be running for answers to arrive.
    """

    def __init__(
        self,
        name: str,
        send: anyio.abc.ByteSendStream,
        receive: anyio.abc.ByteReceiveStream,
        task_group: anyio.abc.TaskGroup,
        *,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
        on_request_seen: NotificationHandler | None = None,
        max_line: int = DEFAULT_MAX_LINE,
        dispatch_batch: DispatchBatch = contextlib.nullcontext,
        response_timeout: float | None = None,
    ) -> None:
        self.name = name
        self.response_timeout = response_timeout
        """How long a request made with ``deadline`` waits for its answer (``None``: for
        ever)."""
        self._send_stream = send
        self._receive = receive
        self._tg = task_group
        self._on_request = on_request
        self._on_notification = on_notification
        self._on_request_seen = on_request_seen
        self._max_line = max_line
        self._batch = dispatch_batch
        self._write_lock = anyio.Lock()
        self._outgoing: IdMap[_Outgoing] = IdMap()
        # Requests from the agent being served, by the agent's id (JSON-encoded: 1 != "1").
        self._incoming: dict[bytes, anyio.CancelScope] = {}
        self._closed: RpcError | None = None
        self.debug = logger.isEnabledFor(logging.DEBUG)
        # The agent's protocol faults: one line each, rate-limited (a lying agent must not
        # flood the log).
        self.fault = MistakeLog(logger, f"agent {name}", level=logging.WARNING)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def pending(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._outgoing)

    # -- sending -----------------------------------------------------------------------------

    async def _write(self, payload: bytes) -> None:
        if self._closed is not None:
            raise AgentError(self._closed)
        try:
            async with self._write_lock:
                await self._send_stream.send(encode_line(payload))
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise agent_unavailable(self.name, f"cannot write to its stdin ({exc!r})") from None
        if self.debug:
            logger.debug("> %s %s", self.name, payload[:400])

    async def _write_quietly(self, payload: bytes) -> None:
        """Write where nobody can be told of a failure (replies, cancellations)."""
        try:
            await self._write(payload)
        except AgentError as exc:
            logger.debug("! agent %s: dropped an outgoing message: %s", self.name, exc)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification; raises ``AgentError`` if the agent cannot be written to."""
        await self._write(jsonrpc.notification(method, params))

    async def start_request(
        self, method: str, params: dict[str, Any] | None, on_reply: ReplyHook
    ) -> int:
        """Send a request without waiting; ``on_reply`` is called from the reader (or by
        ``close``) exactly once. Returns the request's id."""
        pending = _Outgoing(method, on_reply)
        request_id = self._register(pending)
        try:
            await self._write(jsonrpc.request(request_id, method, params))
        except BaseException:
            self._outgoing.resolve(request_id)
            raise
        return request_id

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_reply: ReplyHook | None = None,
        deadline: bool = False,
    ) -> Any:
        """Send a request and return its result.

        ``on_reply``, if given, is called from the reader as the answer is dispatched,
        before any later message of the agent is (for bookkeeping that must not race with
        the agent's next notifications); it is not called for a withdrawn request.

        Raises ``AgentError`` with the agent's error, or ``AGENT_UNAVAILABLE`` if the agent
        is (or goes) down. If the calling task is cancelled, the request is withdrawn with
        ``$/cancel_request`` and its late answer ignored. With ``deadline``, an agent that
        does not answer within ``response_timeout`` seconds is treated the same way and the
        request fails with ``AGENT_UNAVAILABLE`` (a stopped or wedged agent must not hold a
        client's request for ever).
        """
        pending = _Outgoing(method, on_reply)
        request_id = self._register(pending)
        limit = self.response_timeout if deadline else None
        try:
            with anyio.fail_after(limit):
                await self._write(jsonrpc.request(request_id, method, params))
                await pending.done.wait()
        except BaseException as exc:
            if self._outgoing.resolve(request_id) is not None and self._closed is None:
                logger.info("= agent %s: withdrawing %s (id %d)", self.name, method, request_id)
                self._tg.start_soon(
                    self._write_quietly,
                    jsonrpc.notification(CANCEL_REQUEST, {"requestId": request_id}),
                )
            if isinstance(exc, TimeoutError) and limit is not None:
                logger.warning("! agent %s: no answer to %s within %ss", self.name, method, limit)
                raise agent_unavailable(
                    self.name, f"no answer to {method} within {limit:g}s"
                ) from None
            raise
        if pending.error is not None:
            raise AgentError(pending.error)
        return pending.result

    def _register(self, pending: _Outgoing) -> int:
        if self._closed is not None:
            raise AgentError(self._closed)
        return self._outgoing.register(pending)

    def close(self, error: RpcError) -> None:
        """Fail every pending request with ``error``; later requests fail at once."""
        if self._closed is None:
            self._closed = error
        for pending in self._outgoing.reject_all():
            self._finish(pending, None, error)
        for scope in self._incoming.values():
            scope.cancel()

    def _finish(self, pending: _Outgoing, result: Any, error: RpcError | None) -> None:
        pending.result = result
        pending.error = error
        pending.done.set()
        if pending.on_reply is not None:
            try:
                pending.on_reply(result, error)
            except Exception:
                logger.exception("! agent %s: reply hook of %s failed", self.name, pending.method)

    # -- receiving ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Read and dispatch the agent's stdout until it ends."""
        decoder = LineDecoder(self._max_line)
        try:
            async for chunk in self._receive:
                lines = decoder.feed(chunk)
                group = 1 if len(lines) <= BATCH_LINES else BATCH_LINES
                for start in range(0, len(lines), group):
                    with self._batch():
                        for line in lines[start : start + group]:
                            self._dispatch_line(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        for line in decoder.close():
            self._dispatch_line(line)
        logger.info("= agent %s: stdout closed", self.name)

    def _reply_soon(self, payload: bytes) -> None:
        self._tg.start_soon(self._write_quietly, payload)

    def _dispatch_line(self, line: bytes | LineTooLong) -> None:
        if isinstance(line, LineTooLong):
            self.fault("%s; line dropped", line)
            self._reply_soon(jsonrpc.error(None, parse_error(str(line))))
            return
        if self.debug:
            logger.debug("< %s %s", self.name, line[:400])
        entry = jsonrpc.parse(line)
        if type(entry) is jsonrpc.Notification:  # the common case first (an agent streams)
            self._on_notification_entry(entry)
            return
        if isinstance(entry, jsonrpc.Batch):  # pragma: no cover - parse() without allow_batch
            entry = jsonrpc.Invalid(None, parse_error("unexpected batch"))
        if isinstance(entry, jsonrpc.Invalid):
            kind = "unparseable line" if entry.error.code == PARSE_ERROR else "invalid message"
            self.fault("%s (%s): %r", kind, entry.error.data, line[:200])
            pending = self._outgoing.resolve(entry.id) if entry.answers else None
            if pending is not None:
                # A broken answer to one of our requests: that request fails now, instead of
                # waiting for an answer that will not come (JSON-RPC answers no answer).
                self._finish(pending, None, entry.error)
            else:
                self._reply_soon(jsonrpc.error(entry.id, entry.error))
        elif isinstance(entry, jsonrpc.Response | jsonrpc.ErrorResponse):
            self._on_answer(entry)
        elif isinstance(entry, jsonrpc.Notification):
            self._on_notification_entry(entry)
        else:
            self._on_request_entry(entry)

    def _on_answer(self, entry: jsonrpc.Response | jsonrpc.ErrorResponse) -> None:
        pending = self._outgoing.resolve(entry.id)
        if pending is None:
            if isinstance(entry, jsonrpc.ErrorResponse) and entry.id is None:
                self.fault("error without an id: %s", entry.error.to_dict())
            else:
                logger.info("= agent %s: ignored an answer to id %r", self.name, entry.id)
            return
        if isinstance(entry, jsonrpc.Response):
            self._finish(pending, entry.result, None)
        else:
            self._finish(pending, None, entry.error)

    def _on_notification_entry(self, entry: jsonrpc.Notification) -> None:
        params = entry.params
        if type(params) is not dict:
            if params is not None:
                self.fault("%s with non-object params dropped", entry.method)
                return
            params = {}
        if entry.method == CANCEL_REQUEST:
            key = orjson.dumps(params.get("requestId"))
            scope = self._incoming.get(key)
            if scope is not None:
                logger.info("= agent %s withdrew its request %s", self.name, key.decode())
                scope.cancel()
            return
        try:
            self._on_notification(entry.method, params)
        except Exception:
            logger.exception("! agent %s: handling %s failed", self.name, entry.method)

    def _on_request_entry(self, entry: jsonrpc.Request) -> None:
        if entry.params is not None and not isinstance(entry.params, dict):
            self._reply_soon(jsonrpc.error(entry.id, invalid_params("params must be an object")))
            return
        if self._on_request_seen is not None:
            try:
                self._on_request_seen(
                    entry.method, entry.params if isinstance(entry.params, dict) else {}
                )
            except Exception:
                logger.exception("! agent %s: noting %s failed", self.name, entry.method)
        scope = anyio.CancelScope()
        self._incoming[orjson.dumps(entry.id)] = scope
        self._tg.start_soon(self._serve, entry, scope)

    async def _serve(self, entry: jsonrpc.Request, scope: anyio.CancelScope) -> None:
        key = orjson.dumps(entry.id)
        params = entry.params if isinstance(entry.params, dict) else {}
        reply: bytes
        try:
            with scope:
                try:
                    result = await self._on_request(entry.method, params)
                    reply = jsonrpc.response(entry.id, result)
                except AgentError as exc:
                    reply = jsonrpc.error(entry.id, exc.error)
                except Exception:
                    logger.exception("! agent %s: serving %s failed", self.name, entry.method)
                    reply = jsonrpc.error(entry.id, internal_error())
        finally:
            if self._incoming.get(key) is scope:
                del self._incoming[key]
        if scope.cancelled_caught:
            if self._closed is not None:
                return  # the agent is gone: nobody to answer
            reply = jsonrpc.error(entry.id, request_cancelled())
        await self._write_quietly(reply)
