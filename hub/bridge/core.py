"""The bridge's core: the relay's state machine, without I/O.

Theory of operation
-------------------
``Relay`` is told what happens (a line from the editor, a frame from the hub, a hub connection
up or dropped, the answers to the bridge's own requests) and returns what to do about it, as
``hub.bridge.actions`` in the order they must happen: frames for the editor and the hub, a
connection to open, an editor request to send once the link is up. ``hub.bridge.relay`` reads
stdin and the WebSocket, waits, backs off and writes; every decision is here, so it is tested
without processes or sockets (``tests/bridge/test_core.py``).

* **Editor side** (``from_editor``). ``initialize`` is checked and negotiated (``min(asked, 2)``)
  here and the hub's ``initialize`` built (``hub_initialize``); requests get their hub form
  (``--agent`` on ``session/new``, ``--session``'s attach as a ``session/resume`` replaying from
  the start) and go out by ``Submit`` once the link is up (``submit``), under ids minted by an
  ``IdMap``; answers to the hub's requests go to ``Dialogs``.
* **Hub side** (``from_hub``). Answers go back to the editor under its own ids (and teach the
  bridge the sessions it tracks); requests are shown to the editor (``Dialogs``); updates move
  the session's cursor (``hub.bridge.cursors``), feed the prompt settlement
  (``hub.bridge.prompts``) and reach the editor cut to what it lacks (``unseen``), held until
  the editor got the answer that names their session. ``_hub_*`` updates are the bridge's.
* **Link** (``linked``, ``connected``, ``resumed``, ``dropped``). Each connection has a
  generation; a drop rejects what was sent on it: the bridge's own requests fail (``lost``), the
  editor's become orphans. An own request made for a connection that is no longer up fails at
  once (``own_request``): nothing would answer it.
* **Orphans** (``settle_orphan``, ``fail_orphans``). Once a new connection resumed every
  session, each orphan, in the order sent, is settled: a prompt the hub had started from the
  session's events (v1: perhaps only ``session/list`` tells, ``turn_ended``), ``session/new``
  fails (it may or may not have happened), anything else is sent again. When the hub stays
  gone, they fail.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from hub.bridge import cursors, prompts
from hub.bridge.actions import (
    Action,
    Connect,
    Notify,
    OwnAnswer,
    Reconnect,
    Submit,
    ToEditor,
    ToHub,
)
from hub.bridge.dialogs import Dialogs
from hub.bridge.frames import hub_initialize_params, hub_meta, unreachable, with_hub_meta
from hub.bridge.tracking import Pending, PromptWait, Tracked, cursor_of, unseen
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
from hub.protocol.version import negotiate_as_agent

__all__ = ["NOT_RETRIED", "Relay"]

log = logging.getLogger("hub.bridge")

NOT_RETRIED = frozenset({"session/new"})
"""Requests whose loss on a dropped connection fails them: they may have taken effect."""


class Relay:
    """One editor, one hub, without I/O; see the module docstring.

    ``agent`` is ``--agent``, ``session`` is ``--session``, ``url`` names the hub in errors.
    Every method that takes an event returns the actions it calls for, in order."""

    def __init__(self, url: str, *, agent: str | None = None, session: str | None = None) -> None:
        self.url = url
        self.agent = agent
        self.attach_to = session
        self.version = 0
        """The negotiated protocol version (0: not initialized)."""
        self.sessions: dict[str, Tracked] = {}
        """The sessions the editor knows, by id."""
        self.connection_ids: list[str] = []
        """The hub's ids of every connection the bridge had (its ``_hub_prompt`` names them)."""
        self.generation = 0
        """The current hub connection (counting from 1)."""
        self.up = False
        """A hub connection is up (``linked`` and not yet ``dropped``)."""
        self.established = False
        """The editor's ``initialize`` succeeded: a drop is reconnected."""
        self.dialogs = Dialogs()
        self.orphans: list[Pending] = []
        """The editor's requests whose connection dropped before they were answered."""
        self._hub_init: dict[str, Any] = {}
        self._pending: IdMap[Pending] = IdMap()
        self._in_flight: dict[Any, Pending] = {}
        self._announced: set[str] = set()
        self._held: dict[str, list[bytes]] = {}

    # -- the editor side ---------------------------------------------------------------------

    def from_editor(self, line: bytes | LineTooLong) -> list[Action]:
        """A line from the editor (or the ``LineTooLong`` in its place)."""
        if isinstance(line, LineTooLong):
            log.warning("! a line from the editor is too long: %s", line)
            return [ToEditor(jsonrpc.error(None, invalid_request(str(line))))]
        entry = jsonrpc.parse(line, allow_batch=True)
        if isinstance(entry, jsonrpc.Batch):
            # The hub answers a batch as one array; the bridge relays message by message.
            error = invalid_request("the bridge takes one JSON-RPC message per line, not batches")
            return [ToEditor(jsonrpc.error(None, error))]
        if isinstance(entry, jsonrpc.Invalid):
            log.info("! invalid message from the editor: %s", entry.error.data)
            return [ToEditor(jsonrpc.encode(entry))]
        if isinstance(entry, jsonrpc.Response | jsonrpc.ErrorResponse):
            return self.dialogs.answered(entry, self.generation if self.up else None)
        if isinstance(entry, jsonrpc.Notification):
            return self._editor_notification(entry)
        return self._editor_request(entry)

    def _editor_request(self, req: jsonrpc.Request) -> list[Action]:
        if req.params is not None and not isinstance(req.params, dict):
            return [ToEditor(jsonrpc.error(req.id, invalid_params("params must be an object")))]
        params = dict(req.params or {})
        if req.method == "initialize":
            return self._initialize(req.id, params)
        if self.version == 0:
            error = invalid_request("the first request must be initialize")
            return [ToEditor(jsonrpc.error(req.id, error))]
        kind = "relay"
        method = req.method
        if method == "session/new" and self.attach_to is not None:
            params = cursors.attach_params(self.attach_to, params, self.version)
            kind, method = "attach", "session/resume"
            self.attach_to = None  # only the first session/new attaches
        elif method == "session/new" and self.agent is not None:
            params = with_hub_meta(params, agent=self.agent, keep=True)
        elif method in ("session/load", "session/resume"):
            session_id = params.get("sessionId")
            if isinstance(session_id, str):
                self._announced.add(session_id)  # the editor knows it: its replay goes through
        pending = Pending(method, params, editor_id=req.id, kind=kind)
        if method == "session/prompt":
            prompts.follow(self.sessions, pending)
        return [Submit(pending)]

    def _initialize(self, editor_id: Any, params: dict[str, Any]) -> list[Action]:
        if self.version:
            return [ToEditor(jsonrpc.error(editor_id, invalid_request("already initialized")))]
        try:
            self.version = negotiate_as_agent(params.get("protocolVersion"))
        except VersionError as exc:
            return [ToEditor(jsonrpc.error(editor_id, invalid_params(str(exc))))]
        self._hub_init = hub_initialize_params(self.version, params)
        return [Connect(editor_id)]

    def initialized(self, editor_id: Any, result: Any) -> list[Action]:
        """The first hub connection is up and initialized: answer the editor's ``initialize``
        with the hub's answer."""
        self.established = True
        return [ToEditor(jsonrpc.response(editor_id, result))]

    def initialize_failed(self, editor_id: Any, error: RpcError) -> list[Action]:
        """The first hub connection failed: the editor gets ``error`` and may try again."""
        self.version = 0
        return [ToEditor(jsonrpc.error(editor_id, error))]

    def _editor_notification(self, note: jsonrpc.Notification) -> list[Action]:
        if self.version == 0:
            log.info("! notification %s before initialize, ignored", note.method)
            return []
        params = note.params if isinstance(note.params, dict) else {}
        if note.method == "$/cancel_request":
            pending = self._in_flight.get(params.get("requestId"))
            if pending is None:
                return []
            params = {**params, "requestId": pending.hub_id}
        return [Notify(note.method, jsonrpc.notification(note.method, params))]

    def submit(self, pending: Pending) -> list[Action]:
        """The link is up for ``pending`` (a ``Submit``): send it."""
        self._in_flight[pending.editor_id] = pending
        return self._send(pending)

    def refuse(self, pending: Pending, error: RpcError) -> list[Action]:
        """No link could be had for ``pending`` (a ``Submit``): the editor gets ``error``."""
        prompts.forget(self.sessions, pending)
        return [ToEditor(jsonrpc.error(pending.editor_id, error))]

    def _send(self, pending: Pending) -> list[Action]:
        if not self.up:
            self.orphans.append(pending)
            return [Reconnect()]
        pending.hub_id = self._pending.register(pending)
        return [ToHub(jsonrpc.request(pending.hub_id, pending.method, pending.params))]

    def own_request(
        self, method: str, params: dict[str, Any], generation: int
    ) -> tuple[Pending, bytes | None]:
        """One of the bridge's own requests on the hub connection ``generation`` and its frame;
        its answer comes as ``OwnAnswer``. If that connection is no longer up (its requests were
        rejected when it dropped, so none would answer this one), nothing is sent: the frame is
        ``None`` and the request has already failed as ``lost``."""
        pending = Pending(method, params, kind="own")
        if generation != self.generation or not self.up:
            self._lose(pending, f"before {method} was sent")
            return pending, None
        pending.hub_id = self._pending.register(pending)
        return pending, jsonrpc.request(pending.hub_id, method, params)

    def _lose(self, pending: Pending, reason: str) -> None:
        """Fail one of the bridge's own requests with its connection."""
        pending.error = unreachable(f"the connection to the hub was lost ({reason})", self.url)
        pending.lost = True

    # -- the hub side ------------------------------------------------------------------------

    def from_hub(self, raw: str | bytes, generation: int) -> list[Action]:
        """A frame from the hub connection ``generation``."""
        # The hub's frames wrap what it accepted (at most DEFAULT_MAX_DEPTH levels) a few
        # levels deeper, and its replay pages are bounded by bytes, not by entries.
        parsed = jsonrpc.parse(
            raw, allow_batch=True, max_depth=2 * jsonrpc.DEFAULT_MAX_DEPTH, max_batch=1 << 30
        )
        entries = parsed.entries if isinstance(parsed, jsonrpc.Batch) else (parsed,)
        out: list[Action] = []
        for entry in entries:
            if isinstance(entry, jsonrpc.Response | jsonrpc.ErrorResponse):
                out.extend(self._hub_answer(entry))
            elif isinstance(entry, jsonrpc.Request):
                out.extend(self.dialogs.from_hub(entry, generation))
            elif isinstance(entry, jsonrpc.Notification):
                out.extend(self._hub_notification(entry, generation))
            else:
                log.warning("! invalid message from the hub: %s", entry.error.data)
        return out

    def _hub_answer(self, entry: jsonrpc.Response | jsonrpc.ErrorResponse) -> list[Action]:
        pending = self._pending.resolve(entry.id)
        if pending is None:
            log.info("! the hub answered unknown request %r", entry.id)
            return []
        if isinstance(entry, jsonrpc.ErrorResponse):
            pending.error = entry.error
        else:
            pending.result = entry.result
        if pending.kind == "own":
            return [OwnAnswer(pending)]
        self._in_flight.pop(pending.editor_id, None)
        if isinstance(entry, jsonrpc.ErrorResponse):
            prompts.forget(self.sessions, pending)
            if pending.prompt is None or not pending.prompt.answered:
                return [ToEditor(jsonrpc.error(pending.editor_id, entry.error))]
            return []
        return self._relay_result(pending, entry.result)

    def _relay_result(self, pending: Pending, result: Any) -> list[Action]:
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
                self._track(session_id, params, result)
        elif method in ("session/close", "session/delete"):
            closed = params.get("sessionId")
            if isinstance(closed, str):
                self.sessions.pop(closed, None)
        if pending.prompt is not None:
            return prompts.prompt_answered(self.sessions, pending, result)
        out: list[Action] = [ToEditor(jsonrpc.response(pending.editor_id, result))]
        if isinstance(session_id, str) and session_id not in self._announced:
            self._announced.add(session_id)
            out.extend(ToEditor(frame) for frame in self._held.pop(session_id, []))
        return out

    def _track(self, session_id: str, params: dict[str, Any], result: Any) -> None:
        track = self.sessions.get(session_id)
        if track is None:
            cwd = params.get("cwd")
            track = Tracked(session_id, cwd if isinstance(cwd, str) else "/")
            self.sessions[session_id] = track
        cursor = cursor_of(result)
        if cursor is not None:
            track.cursor = cursor

    def _hub_notification(self, note: jsonrpc.Notification, generation: int) -> list[Action]:
        params = note.params if isinstance(note.params, dict) else {}
        if note.method == "session/update":
            return self._hub_update(params)
        if note.method == "$/cancel_request":
            return self.dialogs.cancelled(params.get("requestId"), generation)
        if note.method.startswith("_hub/"):
            log.info("= hub notice %s: %s", note.method, params)
            return []
        return [ToEditor(jsonrpc.notification(note.method, note.params))]

    def _hub_update(self, params: dict[str, Any]) -> list[Action]:
        session_id = params.get("sessionId")
        update = params.get("update")
        if not isinstance(session_id, str) or not isinstance(update, dict):
            log.warning("! malformed session/update from the hub, dropped")
            return []
        track = self.sessions.get(session_id)
        meta = hub_meta(params)
        if track is not None and not cursors.advance(track, meta, self.version):
            return []
        out = self._observe(track, update)
        variant = update.get("sessionUpdate")
        if isinstance(variant, str) and variant.startswith("_hub_"):
            return out
        if track is not None:
            if isinstance(meta.get("seq"), int):
                track.resetting = False
            shown = unseen(track, update)
            if shown is None:
                return out
            if shown is not update:
                params = {**params, "update": shown}
        frame = jsonrpc.notification("session/update", params)
        if session_id in self._announced:
            out.append(ToEditor(frame))
        else:
            self._held.setdefault(session_id, []).append(frame)
        return out

    def _observe(self, track: Tracked | None, update: dict[str, Any]) -> list[Action]:
        """Follow what the editor's waiting requests depend on (see the module docs)."""
        variant = update.get("sessionUpdate")
        if variant == "_hub_v2":
            inner = update.get("update")
            return self._observe(track, inner) if isinstance(inner, dict) else []
        if variant == "_hub_reset":
            if track is not None:
                track.resetting = True
            log.warning(
                "! %s: the hub could not serve the cursor (%s): the session's state is sent again",
                track.session_id if track else "?",
                update.get("reason"),
            )
            return []
        if variant == "_hub_permission" and update.get("status") != "pending" and track:
            return self.dialogs.settled(track.session_id, str(update.get("permissionId")))
        if track is None:
            return []
        if variant == "_hub_prompt":
            return prompts.prompt_started(
                self.sessions, track, update, self.connection_ids, self.version
            )
        if variant == "state_update" and update.get("state") == "idle":
            stop_reason = update.get("stopReason")
            if isinstance(stop_reason, str):
                return prompts.turn_ended(self.sessions, track, stop_reason, self.version)
        return []

    # -- the link ----------------------------------------------------------------------------

    def hub_initialize(self) -> dict[str, Any]:
        """The params of the ``initialize`` each hub connection starts with."""
        return self._hub_init

    def linked(self) -> int:
        """A new hub connection is up (not yet initialized); its generation."""
        self.generation += 1
        self.up = True
        return self.generation

    def connected(self, result: Any) -> str | None:
        """The hub answered the connection's ``initialize`` with ``result``; its id there."""
        connection_id = hub_meta(result).get("connectionId")
        if not isinstance(connection_id, str):
            return None
        self.connection_ids.append(connection_id)
        return connection_id

    def resumes(self) -> Iterator[tuple[Tracked, dict[str, Any]]]:
        """Each tracked session with the ``session/resume`` params that take it up after its
        cursor, made when its turn comes (the resumes before it may move it, or lose it)."""
        for track in list(self.sessions.values()):
            yield track, cursors.resume_params(track, self.version)

    def resumed(self, track: Tracked, result: Any) -> None:
        """``track``'s ``session/resume`` on a new connection answered ``result``."""
        cursor = cursor_of(result)
        if cursor is not None:
            track.cursor = cursor
        log.info("= resumed %s at %s", track.session_id, track.cursor)

    def resume_failed(self, track: Tracked, error: RpcError) -> list[Action]:
        """``track``'s ``session/resume`` failed: a session the hub no longer has is lost."""
        log.error("! session %s could not be resumed: %s", track.session_id, error.message)
        if error.code != RESOURCE_NOT_FOUND:
            return []
        return prompts.lose_session(self.sessions, track, error)

    def dropped(self, generation: int, reason: str) -> list[Action]:
        """The hub connection ``generation`` ended (``reason`` for the logs). The current one's
        requests are rejected (own: ``OwnAnswer`` with ``lost``; the editor's become orphans),
        and it is reconnected if the editor was initialized."""
        if generation != self.generation or not self.up:
            return []
        self.up = False
        out: list[Action] = []
        for pending in self._pending.reject_all():
            if pending.kind == "own":
                self._lose(pending, reason)
                out.append(OwnAnswer(pending))
            else:
                self.orphans.append(pending)
        if self.established:
            log.warning("! the connection to the hub was lost (%s): reconnecting", reason)
            out.append(Reconnect())
        return out

    # -- orphans -----------------------------------------------------------------------------

    def take_orphans(self) -> list[Pending]:
        """The orphans to settle now that a new connection resumed every session, in the order
        they were sent (each goes to ``settle_orphan``)."""
        orphans, self.orphans = self.orphans, []
        return orphans

    def settle_orphan(self, pending: Pending) -> tuple[list[Action], PromptWait | None]:
        """Settle one orphan; the ``PromptWait`` returned (v1) is a prompt whose turn may have
        ended unseen: ask the hub (``prompts.turn_over_known``, ``prompts.read_listing``) and
        report with ``turn_ended``."""
        wait = pending.prompt
        if wait is not None and wait.message_id is not None:
            # The hub started it: its answer comes from the session's events.
            wait.orphan_of = pending.editor_id
            self._in_flight.pop(pending.editor_id, None)
            out = prompts.settle(self.sessions, wait, self.version)
            # A v1 connection is told of turn ends by the hub's events, but a replay (after a
            # _hub_reset) carries none: the hub is asked whether it is over.
            ask = wait.orphan_of is not None and self.version < 2
            return out, wait if ask else None
        if pending.method in NOT_RETRIED:
            self._in_flight.pop(pending.editor_id, None)
            error = unreachable(
                f"the connection to the hub was lost during {pending.method}; "
                "it may have taken effect: see session/list",
                self.url,
            )
            return [ToEditor(jsonrpc.error(pending.editor_id, error))], None
        if pending.kind == "attach":
            self._held.pop(str(pending.params.get("sessionId")), None)
        return self._send(pending), None

    def turn_ended(self, wait: PromptWait, stop_reason: str | None) -> list[Action]:
        """What the hub told of an orphaned v1 prompt's turn (``None``: not over, or unknown)."""
        wait.stop_reason = stop_reason
        return prompts.settle(self.sessions, wait, self.version)

    def fail_orphans(self, error: RpcError) -> list[Action]:
        """The hub stays gone: every orphan not yet answered fails with ``error``."""
        out: list[Action] = []
        for pending in self.take_orphans():
            self._in_flight.pop(pending.editor_id, None)
            prompts.forget(self.sessions, pending)
            if pending.prompt is None or not pending.prompt.answered:
                out.append(ToEditor(jsonrpc.error(pending.editor_id, error)))
        return out
