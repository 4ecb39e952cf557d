"""The bridge's relay: an ACP agent on stdio towards the editor, a hub client over WebSocket.

Theory of operation
-------------------
The bridge speaks to the hub in the protocol version the editor asked for (``min(asked, 2)``):
the hub translates between its agents and each client, so the bridge only relays, remapping
request ids in both directions. It adds what an editor cannot do itself:

* **Sessions.** ``session/new`` starts a hub session on ``--agent`` (else the hub's default);
  with ``--session ID`` the editor's first ``session/new`` attaches to that shared session
  instead (``session/resume`` with the whole state replayed), answered with ``ID``, and the
  replay follows the answer so that the editor knows the session it belongs to. ``session/load``,
  ``session/resume`` and ``session/list`` are the hub's.
* **Cursors.** Every ``session/update`` from the hub carries ``(epoch, seq)``
  (``docs/protocol.md``); the bridge keeps the last one per session. v1 connections ask for the
  hub's events so that their seqs are contiguous too. The ``_hub_*`` updates are read by the
  bridge and not passed on: an editor does not know them.
* **Reconnects.** When the WebSocket drops, the bridge reconnects (backing off, for at most
  ``reconnect_window`` seconds) and resumes each session with ``replayFrom: _hub_after`` its
  cursor: the hub sends exactly the events after it, so the editor sees no gap and no
  duplicate (an update at or below the cursor would be dropped). Editor requests wait for the
  link meanwhile. A request that was in flight is settled after the resume: a prompt the hub
  had started (a ``_hub_prompt`` naming one of the bridge's connections) is answered from the
  session's events (v2: its message id; v1: the turn's stop reason), one it never started is
  sent again, ``session/new`` fails (it may or may not have happened), anything else is sent
  again. Permission requests that the hub offers again on the new connection are matched to
  the editor's open dialog by their ``permissionId``; one resolved meanwhile is withdrawn
  from the editor with ``$/cancel_request``. After a ``_hub_reset`` (the hub could not serve
  the cursor) the state that follows is cut to what the editor lacks (``unseen``).
* **Capabilities.** The hub is told the editor's client capabilities without ``fs`` and
  ``terminal``: the hub does not relay those requests, so the bridge does not claim them.

Errors the editor gets: the hub's own, and ``hub.bridge.link``'s (bad URL, refused token,
unreachable or gone hub), as JSON-RPC errors on the request that needed the hub.

The records the bridge keeps are in ``hub.bridge.tracking`` and the pure frame helpers in
``hub.bridge.frames``. What stays here (over 600 lines) is one state machine: relaying,
reconnecting and settling the orphans of a dropped connection read and write the same
pending-request tables under the same link generation, and every path through a reconnect
crosses all three; split across classes, each would reach into the others' state.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from hub.bridge.editor import EditorChannel, EditorClosed
from hub.bridge.frames import (
    HubError,
    answer_frame,
    hub_initialize_params,
    hub_meta,
    payload,
    with_hub_meta,
)
from hub.bridge.link import LinkFailure, Target, connect_hub, unreachable
from hub.bridge.tracking import Outgoing, Pending, PromptWait, Tracked, cursor_of, unseen
from hub.protocol import jsonrpc
from hub.protocol.errors import (
    RESOURCE_NOT_FOUND,
    LineTooLong,
    RpcError,
    VersionError,
    invalid_params,
    invalid_request,
)
from hub.protocol.idmap import IdMap
from hub.protocol.prompts import stop_reason_for_v1
from hub.protocol.version import negotiate_as_agent

log = logging.getLogger("hub.bridge")

RECONNECT_WINDOW = 60.0
"""Seconds the bridge keeps trying to reach a hub it lost before it gives up."""
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 2.0

# A request whose loss on a dropped connection is settled by sending it again.
_NOT_RETRIED = frozenset({"session/new"})


class Bridge:
    """One editor, one hub; see the module docstring."""

    def __init__(
        self,
        editor: EditorChannel,
        target: Target,
        *,
        agent: str | None = None,
        session: str | None = None,
        reconnect_window: float = RECONNECT_WINDOW,
    ) -> None:
        self.editor = editor
        self.target = target
        self.agent = agent
        self.attach_to = session
        self.reconnect_window = reconnect_window
        self.version = 0
        self.sessions: dict[str, Tracked] = {}
        self.connection_ids: list[str] = []
        self._hub_init: dict[str, Any] = {}
        self._ws: ClientConnection | None = None
        self._generation = 0
        self._established = False
        self._reconnecting = False
        self._closing = False
        self._ready = anyio.Event()
        self._down: RpcError | None = None
        self._pending: IdMap[Pending] = IdMap()
        self._in_flight: dict[Any, Pending] = {}
        self._orphans: list[Pending] = []
        self._outgoing: dict[int, Outgoing] = {}
        self._next_editor_id = 0
        self._permissions: dict[tuple[str, str], Outgoing] = {}
        self._announced: set[str] = set()
        self._held: dict[str, list[bytes]] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    # -- the main loop -----------------------------------------------------------------------

    async def run(self) -> None:
        """Relay until the editor closes stdin (or stdout)."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                try:
                    while True:
                        line = await self.editor.receive()
                        if line is None:
                            log.info("= the editor closed stdin")
                            break
                        await self._from_editor(line)
                except EditorClosed:
                    log.info("= the editor closed stdout")
                finally:
                    self._closing = True
                    tg.cancel_scope.cancel()
        finally:
            ws = self._ws
            self._ws = None
            if ws is not None:
                with anyio.move_on_after(2, shield=True):
                    await ws.close()

    def _spawn(self, fn: Callable[[], Any], name: str) -> None:
        if self._tg is None:
            raise RuntimeError("the bridge is not running")
        self._tg.start_soon(fn, name=name)

    # -- from the editor ---------------------------------------------------------------------

    async def _from_editor(self, line: bytes | LineTooLong) -> None:
        if isinstance(line, LineTooLong):
            log.warning("! a line from the editor is too long: %s", line)
            await self._to_editor(jsonrpc.error(None, invalid_request(str(line))))
            return
        entry = jsonrpc.parse(line, allow_batch=True)
        if isinstance(entry, jsonrpc.Batch):
            # The hub answers a batch as one array; the bridge relays message by message.
            error = invalid_request("the bridge takes one JSON-RPC message per line, not batches")
            await self._to_editor(jsonrpc.error(None, error))
            return
        if isinstance(entry, jsonrpc.Invalid):
            log.info("! invalid message from the editor: %s", entry.error.data)
            await self._to_editor(jsonrpc.encode(entry))
        elif isinstance(entry, jsonrpc.Response | jsonrpc.ErrorResponse):
            await self._editor_answer(entry)
        elif isinstance(entry, jsonrpc.Notification):
            await self._editor_notification(entry)
        elif isinstance(entry, jsonrpc.Request):
            await self._editor_request(entry)

    async def _editor_request(self, req: jsonrpc.Request) -> None:
        if req.params is not None and not isinstance(req.params, dict):
            await self._to_editor(jsonrpc.error(req.id, invalid_params("params must be an object")))
            return
        params = dict(req.params or {})
        if req.method == "initialize":
            await self._initialize(req.id, params)
            return
        if self.version == 0:
            error = invalid_request("the first request must be initialize")
            await self._to_editor(jsonrpc.error(req.id, error))
            return
        kind = "relay"
        method = req.method
        if method == "session/new" and self.attach_to is not None:
            kind, method, params = "attach", "session/resume", self._attach_params(params)
            self.attach_to = None  # only the first session/new attaches
        elif method == "session/new" and self.agent is not None:
            params = with_hub_meta(params, agent=self.agent, keep=True)
        elif method in ("session/load", "session/resume"):
            session_id = params.get("sessionId")
            if isinstance(session_id, str):
                self._announced.add(session_id)  # the editor knows it: its replay goes through
        pending = Pending(method, params, editor_id=req.id, kind=kind)
        if method == "session/prompt":
            session_id = params.get("sessionId")
            track = self.sessions.get(session_id) if isinstance(session_id, str) else None
            if track is not None:
                pending.prompt = PromptWait(track.session_id)
                track.prompts.append(pending.prompt)
        try:
            await self._wait_link()
        except LinkFailure as exc:
            self._forget_prompt(pending)
            await self._to_editor(jsonrpc.error(req.id, exc.error))
            return
        self._in_flight[req.id] = pending
        await self._send_request(pending)

    def _attach_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The ``session/resume`` that attaches the editor to ``--session``, replaying it all."""
        cwd = params.get("cwd")
        out: dict[str, Any] = {
            "sessionId": self.attach_to,
            "cwd": cwd if isinstance(cwd, str) else "/",
            "mcpServers": [],
        }
        if self.version >= 2:
            out["replayFrom"] = {"type": "start"}
        else:
            out["_meta"] = {"acp-hub": {"replay": "start"}}
        if params.get("mcpServers"):
            log.warning("! session/new attaches to %s: its mcpServers are ignored", self.attach_to)
        return out

    async def _editor_notification(self, note: jsonrpc.Notification) -> None:
        if self.version == 0:
            log.info("! notification %s before initialize, ignored", note.method)
            return
        params = note.params if isinstance(note.params, dict) else {}
        if note.method == "$/cancel_request":
            pending = self._in_flight.get(params.get("requestId"))
            if pending is None:
                return
            params = {**params, "requestId": pending.hub_id}
        try:
            await self._wait_link()
        except LinkFailure as exc:
            log.warning("! %s not sent: %s", note.method, exc.error.message)
            return
        await self._to_hub(jsonrpc.notification(note.method, params))

    async def _editor_answer(self, entry: jsonrpc.Response | jsonrpc.ErrorResponse) -> None:
        editor_id = entry.id
        out = self._outgoing.pop(editor_id, None) if isinstance(editor_id, int) else None
        if out is None:
            log.info("! the editor answered unknown or withdrawn request %r", editor_id)
            return
        log.info("= the editor answered request %r", editor_id)
        if out.key is not None:
            # Kept until the hub's record says the request is settled: if the connection drops
            # first, the hub offers the request again on the next one and gets this answer.
            out.answer = payload(entry)
            self._permissions[out.key] = out
        if out.generation == self._generation and self._ws is not None:
            await self._to_hub(answer_frame(out.hub_id, payload(entry)))
        elif out.key is None:
            log.info("! an answer to a request of a lost hub connection is dropped")

    # -- initialize --------------------------------------------------------------------------

    async def _initialize(self, editor_id: Any, params: dict[str, Any]) -> None:
        if self.version:
            await self._to_editor(jsonrpc.error(editor_id, invalid_request("already initialized")))
            return
        try:
            version = negotiate_as_agent(params.get("protocolVersion"))
        except VersionError as exc:
            await self._to_editor(jsonrpc.error(editor_id, invalid_params(str(exc))))
            return
        self._hub_init = hub_initialize_params(version, params)
        self.version = version
        try:
            ws = await connect_hub(self.target)
            result = await self._establish(ws)
        except LinkFailure as exc:
            self.version = 0  # the editor may try again
            log.error("! %s", exc.error.message)
            await self._to_editor(jsonrpc.error(editor_id, exc.error))
            return
        self._established = True
        self._ready.set()
        await self._to_editor(jsonrpc.response(editor_id, result))

    async def _establish(self, ws: ClientConnection) -> Any:
        """Start reading ``ws``, initialize on it and resume every session at its cursor."""
        self._generation += 1
        generation = self._generation
        self._ws = ws
        self._spawn(lambda: self._read_hub(ws, generation), "hub reader")
        try:
            result = await self._call(ws, "initialize", self._hub_init)
        except LinkFailure:
            await ws.close()
            raise
        except HubError as exc:
            await ws.close()
            raise LinkFailure(exc.error, fatal=True) from None
        connection_id = hub_meta(result).get("connectionId")
        if isinstance(connection_id, str):
            self.connection_ids.append(connection_id)
        log.info("= connected to %s as %s", self.target.url, connection_id)
        for track in list(self.sessions.values()):
            await self._resume(ws, track)
        return result

    async def _resume(self, ws: ClientConnection, track: Tracked) -> None:
        params: dict[str, Any] = {"sessionId": track.session_id, "cwd": track.cwd}
        if track.cursor is not None:
            epoch, seq = track.cursor
            if self.version >= 2:
                params["replayFrom"] = {"type": "_hub_after", "epoch": epoch, "seq": seq}
            else:
                params["_meta"] = {"acp-hub": {"after": {"epoch": epoch, "seq": seq}}}
        try:
            result = await self._call(ws, "session/resume", params)
        except HubError as exc:
            log.error("! session %s could not be resumed: %s", track.session_id, exc.error.message)
            if exc.error.code == RESOURCE_NOT_FOUND:
                await self._lose_session(track, exc.error)
            return
        cursor = cursor_of(result)
        if cursor is not None:
            track.cursor = cursor
        log.info("= resumed %s at %s", track.session_id, track.cursor)

    async def _lose_session(self, track: Tracked, error: RpcError) -> None:
        """The hub no longer has ``track``: its waiting prompts fail."""
        self.sessions.pop(track.session_id, None)
        message = f"the hub no longer has session {track.session_id}"
        for wait in track.prompts:
            if wait.orphan_of is not None:
                await self._to_editor(
                    jsonrpc.error(wait.orphan_of, RpcError(error.code, message, error.data))
                )
        track.prompts.clear()

    # -- the link ----------------------------------------------------------------------------

    async def _wait_link(self) -> None:
        """Return once the hub connection is up; ``LinkFailure`` if it cannot be had."""
        if self._down is not None and not self._reconnecting:
            # Given up earlier: try again now that the editor needs the hub.
            self._down = None
            self._ready = anyio.Event()
            self._start_reconnect()
        await self._ready.wait()
        if self._down is not None:
            raise LinkFailure(self._down, fatal=True)

    def _start_reconnect(self) -> None:
        if self._reconnecting or self._closing:
            return
        self._reconnecting = True
        self._spawn(self._reconnect, "reconnect")

    async def _reconnect(self) -> None:
        deadline = anyio.current_time() + self.reconnect_window
        delay = BACKOFF_FIRST
        failure = unreachable("the hub is gone", self.target.url)
        try:
            while not self._closing:
                try:
                    ws = await connect_hub(self.target)
                    await self._establish(ws)
                except LinkFailure as exc:
                    failure = exc.error
                    if exc.fatal or anyio.current_time() + delay > deadline:
                        break
                    log.info("= hub not reachable yet (%s); retrying", exc.error.message)
                    await anyio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_MAX)
                    continue
                await self._settle_orphans()
                self._ready.set()
                return
            self._give_up(failure)
            await self._fail_orphans(failure)
        finally:
            self._reconnecting = False

    def _give_up(self, error: RpcError) -> None:
        log.error("! giving up on the hub: %s", error.message)
        self._down = RpcError(error.code, f"the hub is gone: {error.message}", error.data)
        self._ready.set()

    def _dropped(self, generation: int, reason: str) -> None:
        """The connection of ``generation`` ended; reconnect if it was the current one."""
        if generation != self._generation or self._closing:
            return
        self._ws = None
        if self._ready.is_set():
            self._ready = anyio.Event()
        lost = unreachable(f"the connection to the hub was lost ({reason})", self.target.url)
        for pending in self._pending.reject_all():
            if pending.kind == "own":
                pending.error = lost
                pending.lost = True
                pending.done.set()
            else:
                self._orphans.append(pending)
        if self._established:
            log.warning("! the connection to the hub was lost (%s): reconnecting", reason)
            self._start_reconnect()

    async def _settle_orphans(self) -> None:
        """Requests whose answers were lost with the old connection, in the order sent."""
        orphans, self._orphans = self._orphans, []
        for pending in orphans:
            wait = pending.prompt
            if wait is not None and wait.message_id is not None:
                # The hub started it: its answer comes from the session's events.
                wait.orphan_of = pending.editor_id
                self._in_flight.pop(pending.editor_id, None)
                await self._settle_prompt(wait)
                if wait.orphan_of is not None and self.version < 2:
                    # A v1 connection is told of turn ends by the hub's events, but a replay
                    # (after a _hub_reset) carries none: ask the hub whether it is over.
                    wait.stop_reason = await self._turn_over(wait)
                    await self._settle_prompt(wait)
            elif pending.method in _NOT_RETRIED:
                self._in_flight.pop(pending.editor_id, None)
                error = unreachable(
                    f"the connection to the hub was lost during {pending.method}; "
                    "it may have taken effect: see session/list",
                    self.target.url,
                )
                await self._to_editor(jsonrpc.error(pending.editor_id, error))
            else:
                if pending.kind == "attach":
                    self._held.pop(str(pending.params.get("sessionId")), None)
                pending.done = anyio.Event()
                await self._send_request(pending)

    async def _turn_over(self, wait: PromptWait) -> str | None:
        """The stop reason of ``wait``'s turn if it is over, else ``None``."""
        track = self.sessions.get(wait.session_id)
        ws = self._ws
        if track is None or ws is None:
            return None
        if track.turn_message != wait.message_id:
            return "end_turn"  # a later prompt started: this turn ended, its reason unknown
        params: dict[str, Any] = {}
        # session/list is paged (docs/protocol.md): follow nextCursor until the session shows.
        while True:
            try:
                listed = await self._call(ws, "session/list", params)
            except (HubError, LinkFailure):
                return None
            if not isinstance(listed, dict):
                return None
            entries = listed.get("sessions")
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and entry.get("sessionId") == wait.session_id:
                    meta = hub_meta(entry)
                    if meta.get("state") == "idle":
                        reason = meta.get("stopReason")
                        return reason if isinstance(reason, str) else "end_turn"
                    return None
            cursor = listed.get("nextCursor")
            if not isinstance(cursor, str) or cursor == params.get("cursor"):
                return None
            params = {"cursor": cursor}

    async def _fail_orphans(self, error: RpcError) -> None:
        orphans, self._orphans = self._orphans, []
        for pending in orphans:
            self._in_flight.pop(pending.editor_id, None)
            self._forget_prompt(pending)
            if pending.prompt is None or not pending.prompt.answered:
                await self._to_editor(jsonrpc.error(pending.editor_id, self._down or error))

    # -- to the hub --------------------------------------------------------------------------

    async def _send_request(self, pending: Pending) -> None:
        ws = self._ws
        if ws is None:
            self._orphans.append(pending)
            self._start_reconnect()
            return
        await self._send_on(ws, pending)

    async def _send_on(self, ws: ClientConnection, pending: Pending) -> None:
        pending.hub_id = self._pending.register(pending)
        frame = jsonrpc.request(pending.hub_id, pending.method, pending.params)
        try:
            await ws.send(frame.decode())
        except ConnectionClosed:
            pass  # the reader sees the close and settles the request with the others

    async def _call(self, ws: ClientConnection, method: str, params: dict[str, Any]) -> Any:
        """The bridge's own request on ``ws``: its result, ``HubError``, or ``LinkFailure``."""
        pending = Pending(method, params, kind="own")
        await self._send_on(ws, pending)
        await pending.done.wait()
        if pending.error is not None:
            if pending.lost:
                raise LinkFailure(pending.error, fatal=False)
            raise HubError(pending.error)
        return pending.result

    async def _to_hub(self, frame: bytes) -> None:
        ws = self._ws
        if ws is None:
            return
        try:
            await ws.send(frame.decode())
        except ConnectionClosed:
            pass

    # -- from the hub ------------------------------------------------------------------------

    async def _read_hub(self, ws: ClientConnection, generation: int) -> None:
        try:
            async for raw in ws:
                if isinstance(raw, str):
                    await self._from_hub(raw, generation)
        except ConnectionClosed:
            pass
        except EditorClosed:
            log.info("= the editor closed stdout")
            self._closing = True
            if self._tg is not None:
                self._tg.cancel_scope.cancel()
        finally:
            code = ws.close_code
            reason = f"close code {code}" if code is not None else "connection lost"
            self._dropped(generation, reason)

    async def _from_hub(self, raw: str, generation: int) -> None:
        # The hub's frames wrap what it accepted (at most DEFAULT_MAX_DEPTH levels) a few
        # levels deeper, and its replay pages are bounded by bytes, not by entries.
        parsed = jsonrpc.parse(
            raw, allow_batch=True, max_depth=2 * jsonrpc.DEFAULT_MAX_DEPTH, max_batch=1 << 30
        )
        entries = parsed.entries if isinstance(parsed, jsonrpc.Batch) else (parsed,)
        for entry in entries:
            if isinstance(entry, jsonrpc.Response | jsonrpc.ErrorResponse):
                await self._hub_answer(entry)
            elif isinstance(entry, jsonrpc.Request):
                await self._hub_request(entry, generation)
            elif isinstance(entry, jsonrpc.Notification):
                await self._hub_notification(entry, generation)
            else:
                log.warning("! invalid message from the hub: %s", entry.error.data)

    async def _hub_answer(self, entry: jsonrpc.Response | jsonrpc.ErrorResponse) -> None:
        pending = self._pending.resolve(entry.id)
        if pending is None:
            log.info("! the hub answered unknown request %r", entry.id)
            return
        if isinstance(entry, jsonrpc.ErrorResponse):
            pending.error = entry.error
        else:
            pending.result = entry.result
        pending.done.set()
        if pending.kind == "own":
            return
        self._in_flight.pop(pending.editor_id, None)
        if isinstance(entry, jsonrpc.ErrorResponse):
            self._forget_prompt(pending)
            if pending.prompt is None or not pending.prompt.answered:
                await self._to_editor(jsonrpc.error(pending.editor_id, entry.error))
            return
        await self._relay_result(pending, entry.result)

    async def _relay_result(self, pending: Pending, result: Any) -> None:
        method = pending.method
        params = pending.params
        session_id: Any = None
        if pending.kind == "attach" or method in ("session/new", "session/load", "session/resume"):
            session_id = params.get("sessionId")
            if pending.kind == "attach" or method == "session/new":
                if isinstance(result, dict) and pending.kind == "attach":
                    result = {**result, "sessionId": session_id}
                session_id = result.get("sessionId") if isinstance(result, dict) else None
            if isinstance(session_id, str):
                cwd = params.get("cwd")
                track = self.sessions.get(session_id)
                if track is None:
                    track = Tracked(session_id, cwd if isinstance(cwd, str) else "/")
                    self.sessions[session_id] = track
                cursor = cursor_of(result)
                if cursor is not None:
                    track.cursor = cursor
        elif method in ("session/close", "session/delete"):
            closed = params.get("sessionId")
            if isinstance(closed, str):
                self.sessions.pop(closed, None)
        wait = pending.prompt
        if wait is not None:
            queued = hub_meta(result).get("queued") is True
            if not wait.answered:
                wait.answered = True
                await self._to_editor(jsonrpc.response(pending.editor_id, result))
            if not queued:
                self._forget_prompt(pending)
            return
        await self._to_editor(jsonrpc.response(pending.editor_id, result))
        if isinstance(session_id, str) and session_id not in self._announced:
            self._announced.add(session_id)
            for frame in self._held.pop(session_id, []):
                await self._to_editor(frame)

    async def _hub_request(self, req: jsonrpc.Request, generation: int) -> None:
        params = req.params if isinstance(req.params, dict) else {}
        key: tuple[str, str] | None = None
        permission_id = hub_meta(params).get("permissionId")
        session_id = params.get("sessionId")
        if isinstance(permission_id, str) and isinstance(session_id, str):
            key = (session_id, permission_id)
        known = self._permissions.get(key) if key is not None else None
        log.info(
            "= hub request %s %r (permission %s): %s",
            req.method,
            req.id,
            permission_id,
            "already shown" if known is not None else "to the editor",
        )
        if known is not None:
            # The same request offered again on a new connection: the editor already shows it.
            known.generation, known.hub_id = generation, req.id
            if known.answer is not None:
                await self._to_hub(answer_frame(req.id, known.answer))
            return
        self._next_editor_id += 1
        out = Outgoing(self._next_editor_id, generation, req.id, key)
        self._outgoing[out.editor_id] = out
        if key is not None:
            self._permissions[key] = out
        await self._to_editor(jsonrpc.request(out.editor_id, req.method, req.params))

    async def _hub_notification(self, note: jsonrpc.Notification, generation: int) -> None:
        params = note.params if isinstance(note.params, dict) else {}
        if note.method == "session/update":
            await self._hub_update(params)
        elif note.method == "$/cancel_request":
            request_id = params.get("requestId")
            for out in list(self._outgoing.values()):
                if out.generation == generation and out.hub_id == request_id:
                    await self._withdraw(out)
                    break
        elif note.method.startswith("_hub/"):
            log.info("= hub notice %s: %s", note.method, params)
        else:
            await self._to_editor(jsonrpc.notification(note.method, note.params))

    async def _withdraw(self, out: Outgoing) -> None:
        """The hub no longer wants the editor's answer to ``out``: withdraw it there."""
        self._outgoing.pop(out.editor_id, None)
        if out.key is not None:
            self._permissions.pop(out.key, None)
        if out.answer is None:
            log.info("= request %d withdrawn from the editor", out.editor_id)
            await self._to_editor(
                jsonrpc.notification("$/cancel_request", {"requestId": out.editor_id})
            )

    async def _hub_update(self, params: dict[str, Any]) -> None:
        session_id = params.get("sessionId")
        update = params.get("update")
        if not isinstance(session_id, str) or not isinstance(update, dict):
            log.warning("! malformed session/update from the hub, dropped")
            return
        track = self.sessions.get(session_id)
        meta = hub_meta(params)
        seq, epoch = meta.get("seq"), meta.get("epoch")
        if track is not None and isinstance(seq, int) and isinstance(epoch, int):
            cursor = track.cursor
            if cursor is not None and cursor[0] == epoch:
                if seq < cursor[1]:
                    log.warning("! %s: seq %d again (at %d): dropped", session_id, seq, cursor[1])
                    return
                if seq > cursor[1] + 1 and self.version >= 2:
                    log.warning("! %s: seqs %d..%d missing", session_id, cursor[1] + 1, seq - 1)
            track.cursor = (epoch, seq)
        await self._observe(track, update)
        variant = update.get("sessionUpdate")
        if isinstance(variant, str) and variant.startswith("_hub_"):
            return
        if track is not None:
            if isinstance(seq, int):
                track.resetting = False
            shown = unseen(track, update)
            if shown is None:
                return
            if shown is not update:
                params = {**params, "update": shown}
        frame = jsonrpc.notification("session/update", params)
        if session_id in self._announced:
            await self._to_editor(frame)
        else:
            self._held.setdefault(session_id, []).append(frame)

    async def _observe(self, track: Tracked | None, update: dict[str, Any]) -> None:
        """Follow what the editor's waiting requests depend on (see the module docs)."""
        variant = update.get("sessionUpdate")
        if variant == "_hub_v2":
            inner = update.get("update")
            if isinstance(inner, dict):
                await self._observe(track, inner)
            return
        if variant == "_hub_reset":
            if track is not None:
                track.resetting = True
            log.warning(
                "! %s: the hub could not serve the cursor (%s): the session's state is sent again",
                track.session_id if track else "?",
                update.get("reason"),
            )
            return
        if variant == "_hub_permission" and update.get("status") != "pending" and track:
            out = self._permissions.get((track.session_id, str(update.get("permissionId"))))
            if out is not None:
                await self._withdraw(out)
            return
        if track is None:
            return
        if variant == "_hub_prompt":
            message_id = update.get("messageId")
            if not isinstance(message_id, str):
                return
            track.turn_message = message_id
            if update.get("clientId") in self.connection_ids:
                track.own.add(message_id)
                wait = next((w for w in track.prompts if w.message_id is None), None)
                if wait is not None:
                    wait.message_id = message_id
                    await self._settle_prompt(wait)
        elif variant == "state_update" and update.get("state") == "idle":
            stop_reason = update.get("stopReason")
            if isinstance(stop_reason, str) and track.turn_message is not None:
                for wait in list(track.prompts):
                    if wait.message_id == track.turn_message:
                        wait.stop_reason = stop_reason
                        await self._settle_prompt(wait)

    async def _settle_prompt(self, wait: PromptWait) -> None:
        """Answer a prompt whose answer was lost, once the session's events tell it."""
        track = self.sessions.get(wait.session_id)
        if wait.answered and wait.message_id is not None:
            if track is not None and wait in track.prompts:
                track.prompts.remove(wait)  # a queued v2 prompt that has now started
            return
        if wait.orphan_of is None:
            return
        if self.version >= 2 and wait.message_id is not None:
            result: dict[str, Any] = {
                "messageId": wait.message_id,
                "_meta": {"acp-hub": {"queued": False, "messageId": wait.message_id}},
            }
        elif self.version < 2 and wait.stop_reason is not None:
            result = {"stopReason": stop_reason_for_v1(wait.stop_reason)}
        else:
            return
        editor_id, wait.orphan_of = wait.orphan_of, None
        wait.answered = True
        if track is not None and wait in track.prompts:
            track.prompts.remove(wait)
        await self._to_editor(jsonrpc.response(editor_id, result))

    def _forget_prompt(self, pending: Pending) -> None:
        wait = pending.prompt
        track = self.sessions.get(wait.session_id) if wait is not None else None
        if track is not None and wait in track.prompts:
            track.prompts.remove(wait)

    # -- to the editor -----------------------------------------------------------------------

    async def _to_editor(self, frame: bytes) -> None:
        await self.editor.send(frame)


async def run_stdio(
    target: Target,
    *,
    agent: str | None = None,
    session: str | None = None,
    reconnect_window: float = RECONNECT_WINDOW,
) -> None:
    """Run one bridge on this process's stdin and stdout until the editor closes them or
    SIGINT / SIGTERM arrives (then the hub connection is closed cleanly)."""
    editor = await EditorChannel.open()
    bridge = Bridge(editor, target, agent=agent, session=session, reconnect_window=reconnect_window)
    async with anyio.create_task_group() as tg:

        async def on_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    log.info("= signal %d: closing", signum)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(on_signals)
        try:
            await bridge.run()
        finally:
            tg.cancel_scope.cancel()
            editor.close()
