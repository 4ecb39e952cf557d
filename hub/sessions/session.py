"""A live session: its ordered log, its folded state, the clients attached to it.

Theory of operation
-------------------
Everything that happens in a session goes through ``emit``: the update is folded into the
``SessionState`` (a malformed one is logged and dropped, never fanned out), appended to the
``EventLog`` with the next ``seq``, encoded once per protocol version, and pushed to the outbox
of every attached client. ``emit`` is synchronous: the agent's reader calls it through
``on_update`` and it never waits for a client (a client that cannot keep up is closed by its
own outbox).

Attaching is synchronous too. In one step, without yielding to the event loop, the session
encodes the replay the client asked for (nothing, the compacted state, or the log after a
cursor), queues it and the response in the client's outbox, and adds the client to the fan-out
set. Every later event is therefore queued after the response: no hole, no duplicate.

Prompts, permission requests and elicitations are arbitrated here, by role and policy (see
``docs/arbitration.md``); ``hub.sessions.arbiter`` holds the rules that do not need I/O.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from hub.agents.errors import AgentError
from hub.protocol.compact import compact
from hub.protocol.errors import (
    AGENT_UNAVAILABLE,
    NOT_LEASE_HOLDER,
    QUEUE_FULL,
    REQUEST_CANCELLED,
    SESSION_BUSY,
    InvalidParams,
    ProtocolError,
    RpcError,
    RpcFailure,
    forbidden,
    hub_error,
    invalid_params,
)
from hub.protocol.state import SessionState
from hub.protocol.translate import (
    ClientV1Renderer,
    permission_outcome_for_agent,
    permission_request_v2_to_v1,
    stop_reason_for_v1,
)
from hub.sessions import arbiter
from hub.sessions.client import ClientHandle
from hub.sessions.log import Event, EventLog
from hub.settings import Settings

if TYPE_CHECKING:
    from hub.agents.agent import Agent

log = logging.getLogger("hub.sessions")

USER_MESSAGE_VARIANTS = frozenset({"user_message", "user_message_chunk"})
# The pieces of a `session/update` frame (see `Session._frame`).
_FRAME_OPEN = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
_UPDATE_OPEN = b',"update":'
_META_OPEN = b',"_meta":{"acp-hub":'
_FRAME_CLOSE = b"}}}"
PRESENCE_INTERVAL = 0.25
"""At most one ``_hub_presence`` event per this many seconds; changes in between coalesce."""
ATTRIBUTION_WAIT = 5.0
"""How long a v2 prompt answer waits for the agent's user message when the agent accepted
the prompt without naming it (seconds)."""


class SessionFailure(RpcFailure):
    """A client operation on a session failed; ``error`` is the JSON-RPC answer."""


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(slots=True)
class Attachment:
    """One client attached to one session."""

    client: ClientHandle
    since: str
    role: str
    via_attach: bool = False
    """Attached with ``session/attach`` (the multi-client proposal): gets its notices."""
    # What the fan-out reads for every event, taken from the client once.
    client_id: str = field(init=False)
    v2: bool = field(init=False)
    hub_events: bool = field(init=False)
    push: Callable[[bytes], bool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.client_id = self.client.client_id
        self.v2 = self.client.version >= 2
        self.hub_events = self.client.hub_events
        self.push = self.client.outbox.push


@dataclass(slots=True)
class QueuedPrompt:
    """A prompt waiting for the agent to become idle."""

    queue_id: str
    client: ClientHandle
    blocks: list[Any]
    queued_at: str
    started: anyio.Event = field(default_factory=anyio.Event)
    result: dict[str, Any] | None = None
    error: RpcError | None = None
    withdrawn: bool = False


@dataclass(slots=True)
class PendingPermission:
    """An agent permission request being offered to the clients that may answer it."""

    permission_id: str
    params: dict[str, Any]
    options: list[Any]
    copies: dict[str, Any] = field(default_factory=dict)  # client id -> request id it got
    declined: set[str] = field(default_factory=set)
    """Clients that answered their copy with an error (or cannot be shown it): not re-offered."""
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: dict[str, Any] | None = None
    resolved_by: ClientHandle | None = None


@dataclass(slots=True)
class Turn:
    """The prompt turn in progress: who started it, and who waits for its stop reason."""

    client: ClientHandle | None
    attributed: bool = False
    ended: anyio.Event = field(default_factory=anyio.Event)
    stop_reason: str | None = None
    error: RpcError | None = None
    cancelling: bool = False
    message_id: str | None = None
    """The id of the user message this turn's prompt became (from the agent's answer or its
    first user message)."""
    id_known: anyio.Event = field(default_factory=anyio.Event)
    """A ``session/cancel`` for this turn went to the agent (it goes once)."""


class Session:
    """One shared session on one agent; see the module docstring."""

    def __init__(
        self,
        session_id: str,
        agent: Agent,
        agent_session_id: str,
        *,
        cwd: str,
        settings: Settings,
        on_change: Callable[[Session], None] | None = None,
    ) -> None:
        self.id = session_id
        self.agent = agent
        self.agent_session_id = agent_session_id
        self.cwd = cwd
        self.settings = settings
        self.created_at = now_iso()
        self.state = SessionState()
        self.log = EventLog(max_events=settings.retained_events, max_bytes=settings.retained_bytes)
        self._frame_head = _FRAME_OPEN + orjson.dumps(session_id) + _UPDATE_OPEN
        self.v1 = ClientV1Renderer()
        self.attached: dict[str, Attachment] = {}
        # The fan-out's view of `attached`, rebuilt on every attach and detach: the push of
        # each v2 attachment, and the v1 attachments (read for every event).
        self._v2_pushes: tuple[Callable[[bytes], bool], ...] = ()
        self._v1_attached: tuple[Attachment, ...] = ()
        self.prompt_policy: str = settings.prompt_policy
        self.permission_policy: str = settings.permission_policy
        self.queue: list[QueuedPrompt] = []
        self.turn: Turn | None = None
        self.permissions: dict[str, PendingPermission] = {}
        self.elicitations: dict[str, ClientHandle] = {}
        self._asked: dict[str, list[tuple[Any, anyio.Event]]] = {}
        """Elicitations waiting for an answer, by the client asked."""
        self.lease_holder: ClientHandle | None = None
        self.lease_expires: float = 0.0
        self.closed = False
        self.lost = False
        self._counter = 0
        self._on_change = on_change
        self._send_next: Callable[[], None] | None = None
        self._spawn: Callable[[Callable[[], Awaitable[None]], str], None] | None = None
        self._presence_changes: list[dict[str, Any]] = []
        self._presence_listed: dict[str, dict[str, Any]] = {}
        """The client records the last ``_hub_presence`` left listed, by client id."""
        self._presence_counts = (0, 0)
        self._presence_flush_pending = False
        self._presence_next = 0.0

    # -- ids ---------------------------------------------------------------------------------

    def _mint(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._counter}"

    # -- the log and fan-out -----------------------------------------------------------------

    def _frame(self, update: dict[str, Any], meta: dict[str, Any]) -> bytes:
        """The ``session/update`` notification of ``update`` with ``_meta["acp-hub"] = meta``.

        Joined from pieces rather than encoded from a new dict: the same bytes as
        ``jsonrpc.notification``, built for every event, and exact-size (frames are kept in
        the log; orjson's own result keeps a 4 KiB buffer)."""
        return b"".join(
            (self._frame_head, orjson.dumps(update), _META_OPEN, orjson.dumps(meta), _FRAME_CLOSE)
        )

    def emit(self, update: dict[str, Any], *, origin: str | None = None) -> int | None:
        """Fold, log, encode once per version and fan out one update; see the module docs.

        Returns the event's seq, or ``None`` when the update was malformed (logged, dropped).
        """
        try:
            self.state.apply(update)
        except InvalidParams as exc:
            log.warning(
                "! %s: dropped a malformed update from %s: %s", self.id, self.agent.name, exc
            )
            return None
        seq = self.log.next_seq()
        meta = {"seq": seq, "epoch": self.log.epoch}
        v2 = self._frame(update, meta)
        try:
            v1_updates = self.v1.update(update)
        except ProtocolError as exc:
            log.warning(
                "! %s: no v1 rendering for %s: %s", self.id, update.get("sessionUpdate"), exc
            )
            v1_updates = []
        # Most updates render to v1 unchanged: those share the v2 frame (same bytes).
        v1 = tuple([v2 if u == update else self._frame(u, meta) for u in v1_updates])
        variant = update.get("sessionUpdate")
        if isinstance(variant, str) and variant.startswith("_hub_"):
            v1_hub, v1 = v1, ()
        elif not v1:
            # v1 clients that asked for the hub's events get the updates v1 cannot express
            # wrapped in `_hub_v2`, so that their seqs stay contiguous too.
            v1_hub = (self._frame({"sessionUpdate": "_hub_v2", "update": update}, meta),)
        else:
            v1_hub = v1
        message_id = update.get("messageId")
        origin = origin if variant in USER_MESSAGE_VARIANTS else None
        self.log.append_row(
            seq, message_id if isinstance(message_id, str) else None, v2, v1, v1_hub, origin
        )
        # Snapshots: a push that closes a client detaches it, which replaces them.
        for push in self._v2_pushes:
            push(v2)
        for attachment in self._v1_attached:
            if origin != attachment.client_id:  # `Event.for_v1`, inlined for the hot path
                for frame in v1_hub if attachment.hub_events else v1:
                    attachment.push(frame)
        return seq

    # -- attaching ---------------------------------------------------------------------------

    def attach(
        self,
        client: ClientHandle,
        *,
        replay: str | None,
        after: tuple[int, int] | None = None,
        role: str | None = None,
        via_attach: bool = False,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """Attach ``client`` and queue its catch-up in its outbox.

        ``replay`` is ``None`` (live only), ``"start"`` (compacted replay) or ``"after"`` with
        ``after = (epoch, seq)`` (the events after ``seq``, or a reset and the compacted replay
        when the cursor cannot be served). For ``session/attach``: ``"pending_only"`` (only
        what waits: pending permission records, queue, lease, policies, state) and
        ``"message"`` with ``message_id`` (the retained events after the last one of that
        message, or a reset and the compacted replay when the log does not hold it).
        ``role`` is capped at the client's own role. Returns the cursor meta
        ``{"epoch", "seq"}``: the client holds the state up to ``seq``. The caller must queue
        the response before yielding to the event loop, so that it precedes every later event.
        """
        replay_frames: Iterable[bytes]
        if replay == "after" and after is not None:
            epoch, seq = after
            events = self.log.after(seq) if epoch == self.log.epoch else None
            if events is None:
                replay_frames = self._reset_frames(client, epoch, seq)
            else:
                replay_frames = self._event_frames(client, events)
        elif replay in ("start", "after"):
            replay_frames = self._replay_frames(client, compact(self.state))
        elif replay == "pending_only":
            replay_frames = self._replay_frames(client, arbiter.pending_only(compact(self.state)))
        elif replay == "message" and message_id is not None:
            last = self.log.last_of_message(message_id)
            events = None if last is None else self.log.after(last)
            if events is None:
                replay_frames = self._reset_frames(client, self.log.epoch, 0)
            else:
                replay_frames = self._event_frames(client, events)
        else:
            replay_frames = []
        cursor = {"epoch": self.log.epoch, "seq": self.log.last_seq}
        client.outbox.push_pages(replay_frames)
        effective = arbiter.capped(role, client.role)
        previous = self.attached.get(client.client_id)
        since = previous.since if previous is not None and previous.role == effective else now_iso()
        self.attached[client.client_id] = Attachment(client, since, effective, via_attach)
        self._fanout_changed()
        return cursor

    def _fanout_changed(self) -> None:
        attachments = self.attached.values()
        self._v2_pushes = tuple(a.push for a in attachments if a.v2)
        self._v1_attached = tuple(a for a in attachments if not a.v2)

    def announce(self, client: ClientHandle) -> None:
        """After the attach response was queued: tell everyone who joined, and offer the new
        client the permission requests it may answer."""
        if client.client_id not in self.attached:
            return
        self._presence_changed(joined=client.client_id)
        self._offer_pending(client)
        self._changed()

    def detach(self, client: ClientHandle, *, reason: str = "detached") -> None:
        """Remove ``client``; its queued prompts are withdrawn, its permission copies and the
        elicitations it was asked too."""
        attachment = self.attached.pop(client.client_id, None)
        if attachment is None:
            return
        self._fanout_changed()
        for pending in self.permissions.values():
            request_id = pending.copies.pop(client.client_id, None)
            if request_id is not None:
                client.withdraw(request_id)
        for request_id, done in list(self._asked.get(client.client_id, ())):
            client.withdraw(request_id)
            done.set()  # answered `cancel`
        for entry in self.queue:
            if entry.client.client_id == client.client_id and not entry.withdrawn:
                self._withdraw(entry)
        if self.lease_holder is not None and self.lease_holder.client_id == client.client_id:
            self._set_lease(None, reason=reason)
        self._presence_changed(left=client.client_id, reason=reason)
        for other in self.attached.values():
            if other.via_attach:
                other.client.notify(
                    "_hub/client_disconnected",
                    {"sessionId": self.id, "clientId": client.client_id, "reason": reason},
                )
        self._changed()
        self._check_unanswerable()

    def _presence_changed(
        self, *, joined: str | None = None, left: str | None = None, reason: str | None = None
    ) -> None:
        """Record a join or a leave; the attached-client list goes out as a ``_hub_presence``
        event at once, or, within ``PRESENCE_INTERVAL`` of the previous one, coalesced with
        the changes that follow. A burst of a thousand joins is then a handful of events, not
        a thousand lists of up to a thousand clients each (quadratic bytes for every client)."""
        change: dict[str, Any] = {"joined": joined} if joined is not None else {}
        if left is not None:
            change = {"left": left, "reason": reason or "detached"}
        self._presence_changes.append(change)
        if self._presence_flush_pending:
            return
        wait = self._presence_next - time.monotonic()
        if wait <= 0 or self._spawn is None:
            self._flush_presence()
            return
        self._presence_flush_pending = True

        async def flush_later() -> None:
            await anyio.sleep(wait)
            self._presence_flush_pending = False
            self._flush_presence()

        self._spawn(flush_later, f"presence {self.id}")

    def _presence_listing(self) -> tuple[dict[str, dict[str, Any]], int]:
        """The client records presence lists now (by id, in attach order) and the number of
        attached viewers. Viewers are listed only while there are at most
        ``presence_viewers`` of them: an audience of thousands is counted, not listed."""
        viewers = sum(1 for a in self.attached.values() if a.role == "viewer")
        list_viewers = viewers <= self.settings.presence_viewers
        listed = {
            a.client.client_id: {
                "clientId": a.client.client_id,
                "name": a.client.name,
                "role": a.role,
                "since": a.since,
                "protocolVersion": a.client.version,
            }
            for a in self.attached.values()
            if list_viewers or a.role != "viewer"
        }
        return listed, viewers

    def _flush_presence(self) -> None:
        """Emit one ``_hub_presence`` delta for the changes since the last one.

        The event carries ``added`` (records of clients listed now that were not, or whose
        record changed), ``removed`` (ids no longer listed), ``count`` (attached clients) and
        ``viewers`` (attached viewers), and says what caused it: ``joined`` or ``left`` with
        ``reason``, or ``changes`` when several were coalesced (listed clients only). Folding
        the deltas from the start gives the full ``clients`` list, which is what compaction
        (replay, resets) sends; each client receives each join once, not the whole list.
        """
        changes, self._presence_changes = self._presence_changes, []
        if not changes:
            return
        listed, viewers = self._presence_listing()
        before = self._presence_listed
        counts = (len(self.attached), viewers)
        added = [record for cid, record in listed.items() if before.get(cid) != record]
        removed = [cid for cid in before if cid not in listed]
        if not added and not removed and counts == self._presence_counts:
            return
        self._presence_listed = listed
        self._presence_counts = counts
        self._presence_next = time.monotonic() + PRESENCE_INTERVAL
        shown = [
            c
            for c in changes
            if (c.get("joined") in listed) or (c.get("left") in before and c["left"] not in listed)
        ]
        update: dict[str, Any] = {
            "sessionUpdate": "_hub_presence",
            "added": added,
            "removed": removed,
            "count": counts[0],
            "viewers": counts[1],
        }
        if len(shown) == 1:
            update.update(shown[0])
        elif shown:
            update["changes"] = shown
        self.emit(update)

    @property
    def settled(self) -> bool:
        """No coalesced presence change is waiting to go out (the log is up to date)."""
        return not self._presence_flush_pending

    def bind_spawner(self, spawn: Callable[[Callable[[], Awaitable[None]], str], None]) -> None:
        """Give the session a way to run deferred work (coalesced presence) in a hub task."""
        self._spawn = spawn

    def _pages(self, client: ClientHandle, frames: Iterable[bytes]) -> Iterator[bytes]:
        """Group notification frames into v2 batch frames of bounded size (only for clients
        that asked for batches: the TypeScript SDK, for one, drops every batch it receives).

        Lazy: ``frames`` is consumed (and, for a replay, encoded) only as the client's outbox
        takes the pages, so a large replay does not stall everyone else while it is built."""
        if not client.batches:
            yield from frames
            return
        current: list[bytes] = []
        size = 0
        limit = self.settings.replay_page_bytes
        for frame in frames:
            if current and size + len(frame) > limit:
                yield b"[" + b",".join(current) + b"]" if len(current) > 1 else current[0]
                current, size = [], 0
            current.append(frame)
            size += len(frame) + 1
        if current:
            yield b"[" + b",".join(current) + b"]" if len(current) > 1 else current[0]

    def _replay_updates_for(self, client: ClientHandle, updates: list[dict[str, Any]]) -> list[Any]:
        if client.version >= 2:
            return updates
        rendered = self.v1.render_replay(updates)
        if not client.hub_events:
            rendered = [
                u for u in rendered if not str(u.get("sessionUpdate", "")).startswith("_hub_")
            ]
        return rendered

    def _replay_frames(
        self, client: ClientHandle, updates: list[dict[str, Any]]
    ) -> Iterator[bytes]:
        """``updates`` (a compaction, or part of one) as replay frames for ``client``: rendered
        for its version, ``_meta`` with the epoch and ``replay: true`` instead of a seq, in
        pages when it takes batches. The updates are rendered now and encoded lazily: a
        compaction is a snapshot (it shares no container the fold changes later)."""
        meta = {"epoch": self.log.epoch, "replay": True}
        rendered = self._replay_updates_for(client, updates)
        return self._pages(client, (self._frame(u, meta) for u in rendered))

    def _reset_frames(self, client: ClientHandle, epoch: int, seq: int) -> Iterator[bytes]:
        reason = "epoch changed" if epoch != self.log.epoch else "cursor older than the log"
        reset = {"sessionUpdate": "_hub_reset", "reason": reason, "epoch": self.log.epoch}
        log.info(
            "= %s: %s resumes from %s/%s: %s, full replay",
            self.id,
            client.client_id,
            epoch,
            seq,
            reason,
        )
        # Like every `_hub_*` update, the reset reaches v1 clients only if they opted in.
        return self._replay_frames(client, [reset, *compact(self.state)])

    def _event_frames(self, client: ClientHandle, events: list[Event]) -> Iterator[bytes]:
        frames: list[bytes] = []
        if client.version >= 2:
            frames = [event.v2 for event in events]
        else:
            for event in events:
                frames.extend(event.for_v1(client.client_id, client.hub_events))
        return self._pages(client, frames)

    # -- the agent's side (SessionSink) ------------------------------------------------------

    def on_update(self, update: dict[str, Any]) -> None:
        variant = update.get("sessionUpdate")
        turn = self.turn
        if (
            turn is not None
            and turn.client is not None
            and variant in USER_MESSAGE_VARIANTS
            and isinstance(update.get("messageId"), str)
            and (not turn.attributed or update["messageId"] == turn.message_id)
        ):
            if not turn.attributed:
                self._attribute(turn, turn.client, update["messageId"])
            # The prompt's own user message: a v1 sender rendered it already.
            self.emit(update, origin=turn.client.client_id)
            return
        self.emit(update)
        if variant == "state_update" and update.get("state") == "idle":
            self._turn_ended(update.get("stopReason"), None)

    def on_agent_event(self, event: dict[str, Any]) -> None:
        status = event.get("status")
        self.emit({"sessionUpdate": "_hub_agent", "agent": self.agent.name, **event})
        if status in ("exited", "lost"):
            if status == "lost":
                self.lost = True
            for pending in list(self.permissions.values()):
                self._finish_permission(pending, None, "cancelled")
            if self.turn is not None or self.state.foreground != "idle":
                error = hub_error(
                    AGENT_UNAVAILABLE, f"Agent '{self.agent.name}' {status} during the turn", event
                )
                # The same shape as the agent layer's own `idle` after an exit: the error object.
                self.emit(
                    {
                        "sessionUpdate": "state_update",
                        "state": "idle",
                        "_meta": {"acp-hub": {"error": error.to_dict()}},
                    }
                )
                self._turn_ended(None, error)
        self._changed()

    def on_extension(self, method: str, params: dict[str, Any]) -> None:
        for attachment in tuple(self.attached.values()):
            attachment.client.notify(method, params)

    # -- prompts -----------------------------------------------------------------------------

    def role_of(self, client: ClientHandle) -> str:
        """``client``'s role here: its attachment's (it may have attached with less than its
        connection's role), else its connection's."""
        attachment = self.attached.get(client.client_id)
        return attachment.role if attachment is not None else client.role

    def may(self, client: ClientHandle, needed: str) -> bool:
        return arbiter.allows(self.role_of(client), needed)

    def require(self, client: ClientHandle, needed: str, action: str) -> None:
        """Raise ``SessionFailure`` (FORBIDDEN) unless ``client`` has at least ``needed``."""
        have = self.role_of(client)
        if not arbiter.allows(have, needed):
            raise SessionFailure(forbidden(needed, have, action))

    @property
    def busy(self) -> bool:
        return self.turn is not None or self.state.foreground != "idle"

    async def prompt(self, client: ClientHandle, blocks: list[Any]) -> dict[str, Any]:
        """Arbitrate a prompt from ``client`` (see ``docs/arbitration.md``).

        v2 clients get the result when the agent accepted the prompt; v1 clients when the turn
        it started ended (``{"stopReason": ...}``).
        """
        self.require(client, "driver", "session/prompt")
        if not isinstance(blocks, list) or not blocks:
            raise SessionFailure(
                invalid_params("prompt must be a non-empty array of content blocks")
            )
        if self.prompt_policy == "lease":
            self.expire_lease()
        holder = self.lease_holder
        action = arbiter.prompt_action(
            self.prompt_policy,
            busy=self.busy,
            queued=bool(self.queue),
            holds_lease=holder is not None and holder.client_id == client.client_id,
        )
        if action == "not_holder":
            raise SessionFailure(
                hub_error(
                    NOT_LEASE_HOLDER,
                    "This session uses the lease policy and you do not hold the lease",
                    {"holder": None if holder is None else holder.client_id},
                )
            )
        if self.prompt_policy == "lease":
            self._touch_lease()  # a prompt from the holder is activity
        if action == "queue":
            return await self._queue_prompt(client, blocks)
        if action == "busy":
            raise SessionFailure(
                hub_error(
                    SESSION_BUSY,
                    "The agent is busy with another prompt; try again when it is idle",
                )
            )
        return await self._start_turn(client, blocks)

    async def _start_turn(self, client: ClientHandle, blocks: list[Any]) -> dict[str, Any]:
        turn = Turn(client)
        self.turn = turn
        self._changed()
        try:
            ack = await self.agent.prompt(self.agent_session_id, blocks)
        except AgentError as exc:
            if self.turn is turn:
                self.turn = None
            self._changed()
            self._pump_queue()
            raise SessionFailure(exc.error) from exc
        if ack.message_id is not None and not turn.attributed:
            self._attribute(turn, client, ack.message_id)
        if client.version >= 2:
            if turn.message_id is None:
                # The agent accepted with `{}`: its first user message names the prompt.
                with anyio.move_on_after(ATTRIBUTION_WAIT):
                    await turn.id_known.wait()
            meta: dict[str, Any] = {"queued": False}
            result: dict[str, Any] = {"_meta": {"acp-hub": meta}}
            if turn.message_id is not None:
                meta["messageId"] = turn.message_id
                # v2 clients (the TypeScript SDK's among them) expect the user message's id
                # at the top level of the prompt answer, as v2 agents give it.
                result["messageId"] = turn.message_id
            return result
        await turn.ended.wait()
        if turn.error is not None and turn.stop_reason is None:
            raise SessionFailure(turn.error)
        # The v1 enum is closed: a v2 agent's other stop reasons read as `end_turn`.
        return {"stopReason": stop_reason_for_v1(turn.stop_reason or "end_turn")}

    def _attribute(self, turn: Turn, client: ClientHandle, message_id: str) -> None:
        """Record (``_hub_prompt``) that the user message ``message_id`` is ``client``'s."""
        turn.attributed = True
        turn.message_id = message_id
        turn.id_known.set()
        self.emit(
            {
                "sessionUpdate": "_hub_prompt",
                "messageId": message_id,
                "clientId": client.client_id,
                "name": client.name,
            }
        )

    def _turn_ended(self, stop_reason: Any, error: RpcError | None) -> None:
        turn = self.turn
        if turn is None:
            return
        # An idle state ends the turn for arbitration even without a stop reason (agents may
        # stop at any point); a v1 client waiting for its stop reason then gets `end_turn`.
        turn.stop_reason = stop_reason if isinstance(stop_reason, str) else None
        turn.error = error
        turn.ended.set()
        turn.id_known.set()  # nobody waits for an id that will not come
        self.turn = None
        for pending in list(self.permissions.values()):
            self._finish_permission(pending, None, "cancelled")
        holder = self.lease_holder
        if (
            holder is not None
            and turn.client is not None
            and holder.client_id == turn.client.client_id
        ):
            self._touch_lease()  # inactivity counts from the end of the holder's turn
        self._changed()
        self._pump_queue()

    async def _queue_prompt(self, client: ClientHandle, blocks: list[Any]) -> dict[str, Any]:
        mine = [e for e in self.queue if not e.withdrawn]
        if len(mine) >= self.settings.max_queued_prompts:
            raise SessionFailure(hub_error(QUEUE_FULL, "The prompt queue of this session is full"))
        entry = QueuedPrompt(self._mint("q"), client, blocks, now_iso())
        self.queue.append(entry)
        self._queue_changed()
        if client.version >= 2:
            # Acknowledged on acceptance into the queue; the turn starts when the agent is idle.
            self._pump_queue()
            return {"_meta": {"acp-hub": {"queued": True, "queueId": entry.queue_id}}}
        self._pump_queue()
        try:
            await entry.started.wait()
        finally:
            if not entry.started.is_set() and entry in self.queue:
                # The v1 client cancelled its prompt ($/cancel_request) or went away.
                self._withdraw(entry)
        if entry.error is not None:
            raise SessionFailure(entry.error)
        return entry.result or {"stopReason": "end_turn"}

    def _queue_changed(self) -> None:
        entries = [
            {
                "queueId": e.queue_id,
                "clientId": e.client.client_id,
                "name": e.client.name,
                "preview": _preview(e.blocks),
                "queuedAt": e.queued_at,
            }
            for e in self.queue
            if not e.withdrawn
        ]
        self.emit({"sessionUpdate": "_hub_queue", "entries": entries})

    def withdraw(self, client: ClientHandle, queue_id: str) -> None:
        """Withdraw a queued prompt; only its sender (or an owner) may."""
        self.require(client, "driver", "_hub/queue/withdraw")
        for entry in self.queue:
            if entry.queue_id == queue_id and not entry.withdrawn:
                if entry.client.client_id != client.client_id:
                    self.require(client, "owner", "withdrawing another client's prompt")
                self._withdraw(entry)
                return
        raise SessionFailure(invalid_params(f"no queued prompt {queue_id!r}"))

    def _withdraw(self, entry: QueuedPrompt) -> None:
        entry.withdrawn = True
        entry.error = RpcError(REQUEST_CANCELLED, "The queued prompt was withdrawn")
        entry.started.set()
        self.queue = [e for e in self.queue if not e.withdrawn]
        self._queue_changed()

    def bind_runner(self, start_next: Callable[[], None]) -> None:
        """Give the session a way to start the next queued prompt in a task of the hub."""
        self._send_next = start_next

    def _pump_queue(self) -> None:
        if self.busy or not self.queue or self._send_next is None:
            return
        self._send_next()

    async def run_next_queued(self) -> None:
        """Start the head of the queue (called in a hub task by ``bind_runner``'s callback)."""
        if self.busy or not self.queue:
            return
        entry = self.queue.pop(0)
        self._queue_changed()
        if entry.withdrawn:
            self._pump_queue()
            return
        try:
            result = await self._start_turn(entry.client, entry.blocks)
        except SessionFailure as exc:
            entry.error = exc.error
        else:
            entry.result = result
        entry.started.set()

    async def cancel(self, client: ClientHandle) -> None:
        """Cancel the turn in progress: forwarded once; pending permissions resolve cancelled."""
        self.require(client, "driver", "session/cancel")
        turn = self.turn
        if turn is None and self.state.foreground == "idle":
            return
        if turn is not None:
            if turn.cancelling:
                return  # another driver's cancel of this turn already went to the agent
            turn.cancelling = True
        # The agent is told first, then its pending permission requests are answered
        # `cancelled` (the order ACP asks of a client), so that the turn ends `cancelled`.
        try:
            await self.agent.cancel(self.agent_session_id)
        finally:
            for pending in list(self.permissions.values()):
                self._finish_permission(pending, None, "cancelled")

    # -- leases and policies -----------------------------------------------------------------

    def expire_lease(self) -> float | None:
        """Take the lease from a holder inactive for ``lease_timeout`` seconds.

        Returns the seconds after which to call again, or ``None`` when nobody holds the
        lease. The holder's running turn counts as activity; its end starts the clock again.
        """
        holder = self.lease_holder
        if holder is None:
            return None
        turn = self.turn
        if (
            turn is not None
            and turn.client is not None
            and turn.client.client_id == holder.client_id
        ):
            return self.settings.lease_timeout
        left = self.lease_expires - time.monotonic()
        if left > 0:
            return left
        log.info("= %s: the lease of %s expired", self.id, holder.client_id)
        self._set_lease(None, reason="expired")
        return None

    def _touch_lease(self) -> None:
        """The holder was active: the lease runs for ``lease_timeout`` from now."""
        if self.lease_holder is not None:
            self._set_lease(self.lease_holder, reason="renewed")

    def _set_lease(self, holder: ClientHandle | None, *, reason: str) -> None:
        previous = self.lease_holder
        self.lease_holder = holder
        self.lease_expires = time.monotonic() + self.settings.lease_timeout
        payload: dict[str, Any] = {"sessionUpdate": "_hub_lease", "holder": None, "reason": reason}
        if holder is not None:
            payload["holder"] = {"clientId": holder.client_id, "name": holder.name}
            payload["expiresAt"] = time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + self.settings.lease_timeout)
            )
        self.emit(payload)
        same = (previous is None) == (holder is None) and (
            previous is None or holder is None or previous.client_id == holder.client_id
        )
        if not same and self.permission_policy == "lease":
            self._reoffer_permissions()

    def lease(self, client: ClientHandle, action: str, target: str | None = None) -> dict[str, Any]:
        """``request`` / ``release`` the prompt lease, or ``grant`` it (owner) to ``target``."""
        self.expire_lease()
        if action == "request":
            self.require(client, "driver", "_hub/lease/request")
            if self.lease_holder is not None and self.lease_holder.client_id != client.client_id:
                raise SessionFailure(
                    hub_error(
                        NOT_LEASE_HOLDER,
                        "Another client holds the lease",
                        {"holder": self.lease_holder.client_id},
                    )
                )
            self._set_lease(client, reason="requested")
        elif action == "release":
            self.require(client, "driver", "_hub/lease/release")
            holder = self.lease_holder
            if holder is not None:
                if holder.client_id != client.client_id and not self.may(client, "owner"):
                    raise SessionFailure(
                        hub_error(
                            NOT_LEASE_HOLDER,
                            "Only the lease holder or an owner can release the lease",
                            {"holder": holder.client_id},
                        )
                    )
                self._set_lease(None, reason="released")
        elif action == "grant":
            self.require(client, "owner", "_hub/lease/grant")
            if target is None:
                self._set_lease(None, reason="revoked")
            else:
                attachment = self.attached.get(target)
                if attachment is None:
                    raise SessionFailure(invalid_params(f"client {target!r} is not attached"))
                if not arbiter.allows(attachment.role, "driver"):
                    raise SessionFailure(forbidden("driver", attachment.role, "holding the lease"))
                self._set_lease(attachment.client, reason="granted")
        else:
            raise SessionFailure(invalid_params(f"unknown lease action {action!r}"))
        holder = self.lease_holder
        return {"holder": None if holder is None else holder.client_id}

    def emit_policies(self) -> None:
        """Record the session's current prompt and permission policies (``_hub_policy``)."""
        self.emit(
            {
                "sessionUpdate": "_hub_policy",
                "prompt": self.prompt_policy,
                "permission": self.permission_policy,
            }
        )

    def set_policy(self, client: ClientHandle, prompt: Any, permission: Any) -> dict[str, Any]:
        """Change the session's policies (owner only)."""
        self.require(client, "owner", "_hub/set_policy")
        try:
            if prompt is not None:
                prompt = arbiter.check_prompt_policy(prompt)
            if permission is not None:
                permission = arbiter.check_permission_policy(permission)
        except InvalidParams as exc:
            raise SessionFailure(invalid_params(str(exc))) from None
        if prompt is not None:
            self.prompt_policy = prompt
        if permission is not None:
            self.permission_policy = permission
        self.emit_policies()
        self._reoffer_permissions()
        self._changed()
        return {"prompt": self.prompt_policy, "permission": self.permission_policy}

    # -- permission requests -----------------------------------------------------------------

    def _eligible(self, attachment: Attachment) -> bool:
        holder = self.lease_holder
        holds = holder is not None and holder.client_id == attachment.client.client_id
        return arbiter.may_answer(self.permission_policy, attachment.role, holds)

    def _reoffer_permissions(self) -> None:
        """After the lease or the permission policy changed: newly eligible clients get a copy
        of each pending request, clients no longer eligible lose theirs."""
        for pending in list(self.permissions.values()):
            for attachment in tuple(self.attached.values()):
                client_id = attachment.client.client_id
                eligible = self._eligible(attachment)
                if eligible and client_id not in pending.copies:
                    pending.declined.discard(client_id)
                    self._offer(pending, attachment.client)
                elif not eligible and client_id in pending.copies:
                    attachment.client.withdraw(pending.copies.pop(client_id))
        self._check_unanswerable()

    async def on_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        options = params.get("options")
        if not isinstance(options, list) or not options:
            raise InvalidParams("session/request_permission needs a non-empty options array")
        permission_id = self._mint("perm")
        request = {k: v for k, v in params.items() if k != "sessionId"}
        pending = PendingPermission(permission_id, request, options)
        self.permissions[permission_id] = pending
        subject = request.get("subject")
        tool = subject.get("toolCall") if isinstance(subject, dict) else None
        if (
            isinstance(tool, dict)
            and isinstance(tool.get("toolCallId"), str)
            and self.state.tool_call(tool["toolCallId"]) is None
        ):
            # A tool call first seen in the request: the permission record does not fold into
            # the tool calls (see hub.protocol.state), so it is upserted as its own update.
            self.emit({**tool, "sessionUpdate": "tool_call_update"})
        self.emit(
            {
                "sessionUpdate": "_hub_permission",
                "permissionId": permission_id,
                "status": "pending",
                "request": request,
            }
        )
        for attachment in tuple(self.attached.values()):
            if self._eligible(attachment):
                self._offer(pending, attachment.client)
        self._changed()
        self._check_unanswerable()
        try:
            with anyio.move_on_after(self.settings.permission_timeout) as scope:
                await pending.done.wait()
            if scope.cancelled_caught:
                self._finish_permission(pending, None, "timed_out")
        finally:
            if not pending.done.is_set():
                # Cancelled by the agent ($/cancel_request) or because it died.
                self._finish_permission(pending, None, "cancelled")
        return pending.outcome or {"outcome": "cancelled"}

    def _offer_pending(self, client: ClientHandle) -> None:
        attachment = self.attached.get(client.client_id)
        if attachment is None:
            return
        for pending in self.permissions.values():
            if client.client_id not in pending.copies and self._eligible(attachment):
                self._offer(pending, client)

    def _offer(self, pending: PendingPermission, client: ClientHandle) -> None:
        params = {"sessionId": self.id, **pending.params}
        if client.version < 2:
            try:
                # The stored request has no sessionId (each copy names the hub's session id).
                v1_params = permission_request_v2_to_v1(params)
                params = {**v1_params, "sessionId": self.id}
            except ProtocolError as exc:
                log.warning("! %s: permission request not representable for v1: %s", self.id, exc)
                pending.declined.add(client.client_id)
                return

        # Which `_hub_permission` record this copy belongs to, so that a client can match
        # the record's resolution to the dialog it shows.
        meta = params.get("_meta")
        hub_meta = {"permissionId": pending.permission_id}
        params["_meta"] = (
            {**meta, "acp-hub": hub_meta} if isinstance(meta, dict) else {"acp-hub": hub_meta}
        )

        def on_reply(result: Any, error: RpcError | None) -> None:
            self._answer(pending, client, result, error)

        pending.copies[client.client_id] = client.request(
            "session/request_permission", params, on_reply
        )

    def _answer(
        self, pending: PendingPermission, client: ClientHandle, result: Any, error: RpcError | None
    ) -> None:
        if pending.done.is_set():
            return
        request_id = pending.copies.pop(client.client_id, None)
        if error is not None:
            # The client declined to answer (or went away): its copy is gone, others remain,
            # and it is not asked again (a client that cannot answer would loop).
            pending.declined.add(client.client_id)
            self._check_unanswerable()
            return
        attachment = self.attached.get(client.client_id)
        if attachment is None or not self._eligible(attachment):
            self._refuse(
                client,
                request_id,
                forbidden(arbiter.ANSWER_ROLE, client.role, "answering a permission request"),
            )
            return
        try:
            outcome = permission_outcome_for_agent(
                result.get("outcome") if isinstance(result, dict) else None, pending.options
            )
        except ProtocolError as exc:
            self._refuse(client, request_id, invalid_params(f"refused answer: {exc}"))
            log.warning(
                "! %s: refused a malformed permission answer from %s: %s",
                self.id,
                client.client_id,
                exc,
            )
            # The refused client gets a fresh copy at once, so it can answer again.
            self._offer(pending, client)
            self._check_unanswerable()
            return
        self._finish_permission(pending, client, "resolved", outcome)

    def _refuse(self, client: ClientHandle, request_id: Any, error: RpcError) -> None:
        client.notify(
            "_hub/answer_refused",
            {"sessionId": self.id, "requestId": request_id, "error": error.to_dict()},
        )

    def _check_unanswerable(self) -> None:
        """Resolve ``cancelled`` the pending requests nobody attached may answer any more."""
        for pending in list(self.permissions.values()):
            if pending.copies:
                continue
            # Eligible clients without a copy (a refused answer took it): offer again.
            for attachment in tuple(self.attached.values()):
                if attachment.client.client_id not in pending.declined and self._eligible(
                    attachment
                ):
                    self._offer(pending, attachment.client)
            if not pending.copies:
                self._finish_permission(pending, None, "cancelled")

    def _finish_permission(
        self,
        pending: PendingPermission,
        by: ClientHandle | None,
        status: str,
        outcome: dict[str, Any] | None = None,
    ) -> None:
        if pending.done.is_set():
            return
        pending.outcome = outcome if outcome is not None else {"outcome": "cancelled"}
        pending.resolved_by = by
        pending.done.set()
        self.permissions.pop(pending.permission_id, None)
        for client_id, request_id in list(pending.copies.items()):
            attachment = self.attached.get(client_id)
            if attachment is not None:
                attachment.client.withdraw(request_id)
        pending.copies.clear()
        record: dict[str, Any] = {
            "sessionUpdate": "_hub_permission",
            "permissionId": pending.permission_id,
            "status": status,
            "outcome": pending.outcome,
        }
        if by is not None:
            record["resolvedBy"] = {"clientId": by.client_id, "name": by.name}
        self.emit(record)
        for attachment in self.attached.values():
            if attachment.via_attach:
                attachment.client.notify(
                    "_hub/permission_resolved",
                    {
                        "sessionId": self.id,
                        "permissionId": pending.permission_id,
                        "status": status,
                        "outcome": pending.outcome,
                        "resolvedBy": record.get("resolvedBy"),
                    },
                )
        self._changed()

    # -- elicitation -------------------------------------------------------------------------

    async def on_elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        target = self._elicitation_target()
        if target is None:
            return {"action": "cancel"}
        done = anyio.Event()
        answer: dict[str, Any] = {"action": "cancel"}

        def on_reply(result: Any, error: RpcError | None) -> None:
            if (
                error is None
                and isinstance(result, dict)
                and result.get("action") in ("accept", "decline", "cancel")
            ):
                answer.clear()
                answer.update(result)
            done.set()

        elicitation_id = params.get("elicitationId")
        if isinstance(elicitation_id, str):
            self.elicitations[elicitation_id] = target
        request_id = target.request(
            "elicitation/create", {**params, "sessionId": self.id}, on_reply
        )
        # Asked of one client: if it detaches, the question is withdrawn and the agent is
        # answered `cancel` (the binding to that client is what ACP asks for).
        asked = self._asked.setdefault(target.client_id, [])
        entry = (request_id, done)
        asked.append(entry)
        try:
            await done.wait()
        finally:
            asked.remove(entry)
            if not done.is_set():
                target.withdraw(request_id)
        return answer

    def _elicitation_target(self) -> ClientHandle | None:
        turn = self.turn
        if (
            turn is not None
            and turn.client is not None
            and turn.client.client_id in self.attached
            and self.may(turn.client, arbiter.ELICITATION_ROLE)
        ):
            return turn.client
        for attachment in self.attached.values():
            if arbiter.allows(attachment.role, arbiter.ELICITATION_ROLE):
                return attachment.client
        return None

    def on_elicitation_complete(self, params: dict[str, Any]) -> None:
        elicitation_id = params.get("elicitationId")
        target = (
            self.elicitations.pop(elicitation_id, None) if isinstance(elicitation_id, str) else None
        )
        if target is not None and target.client_id in self.attached:
            target.notify("elicitation/complete", params)

    # -- views -------------------------------------------------------------------------------

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    def summary(self) -> dict[str, Any]:
        """The ``_meta["acp-hub"]`` of this session in ``session/list``."""
        return {
            "agent": self.agent.name,
            "agentSessionId": self.agent_session_id,
            "state": "lost" if self.lost else self.state.foreground,
            "stopReason": self.state.stop_reason,
            "clients": [
                {"clientId": a.client.client_id, "name": a.client.name, "role": a.role}
                for a in self.attached.values()
            ],
            "pendingPermissions": len(self.permissions),
            "queued": len(self.queue),
            "seq": self.log.last_seq,
            "epoch": self.log.epoch,
            "promptPolicy": self.prompt_policy,
            "permissionPolicy": self.permission_policy,
        }


def _preview(blocks: list[Any], limit: int = 120) -> str:
    for block in blocks:
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            text: str = block["text"]
            return text if len(text) <= limit else text[: limit - 1] + "\u2026"
    return "(non-text prompt)"


__all__ = ["Attachment", "Session", "SessionFailure"]
