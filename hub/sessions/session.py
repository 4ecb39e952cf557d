"""A live session: its ordered log, its folded state, the clients attached to it.

Theory of operation
-------------------
Everything that happens in a session goes through ``emit``: the update is folded into the
``SessionState`` (a malformed one is logged and dropped, never fanned out), appended to the
``EventLog`` with the next ``seq``, encoded once per protocol version, and pushed to the
``FrameSink`` of every attached client. ``emit`` is synchronous: the agent's reader calls it
through ``on_update`` and it never waits for a client (a client that cannot keep up is closed
by its own sink).

Attaching is synchronous too. In one step, without yielding to the event loop, the session
encodes the replay the client asked for (nothing, the compacted state, or the log after a
cursor), queues it and the response in the client's sink, and adds the client to the fan-out
set. Every later event is therefore queued after the response: no hole, no duplicate.

The session owns the log, the fan-out and the attachments; the rest of what happens in it is
arbitrated by its parts, one concept each (see ``docs/arbitration.md``):

* ``catch_up`` (``hub.sessions.catchup``): what an attaching client is sent before its answer;
* ``presence`` (``hub.sessions.presence``): the attached-client list, coalesced;
* ``turns`` (``hub.sessions.turns``): the turn in progress, the prompt queue, prompt policies;
* ``lease`` (``hub.sessions.lease``): the prompt lease and its expiry;
* ``permissions`` (``hub.sessions.permissions``): the agent's permission requests, offered to
  every client allowed to answer, the first valid answer wins;
* ``elicitations`` (``hub.sessions.elicitation``): elicitations, asked of one client.

``hub.sessions.arbiter`` holds the rules that need no state.

Past 600 lines on purpose: what is left here is the part that must stay one object (the log,
the fan-out and the attach, whose no-hole-no-duplicate order rests on happening in one
synchronous step) and the session's public API for the server layer, most of it one-line
delegations to the parts above; moving those out would make callers reach into the parts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import orjson

from hub.access.audit import AuditSink, NullAudit
from hub.protocol.client_v1 import ClientV1Renderer
from hub.protocol.compact import compact
from hub.protocol.config_options import mode_option
from hub.protocol.display import clamp_title
from hub.protocol.errors import (
    AGENT_UNAVAILABLE,
    SESSION_LOST,
    InvalidParams,
    PeerError,
    forbidden,
    hub_error,
    invalid_params,
)
from hub.protocol.jsonrpc import depth_exceeds
from hub.protocol.state import SessionState
from hub.sessions import arbiter
from hub.sessions.agent_handle import AgentHandle
from hub.sessions.catchup import CatchUp
from hub.sessions.client import ClientHandle
from hub.sessions.elicitation import Elicitations
from hub.sessions.errors import SessionFailure
from hub.sessions.extensions import Extensions
from hub.sessions.lease import Lease
from hub.sessions.log import EventLog
from hub.sessions.metrics import SessionMetrics
from hub.sessions.notices import NOTICE_VARIANTS, Notice, notice_of
from hub.sessions.permissions import Permissions
from hub.sessions.presence import Presence
from hub.sessions.turns import USER_MESSAGE_VARIANTS, Turns, now_iso
from hub.settings import PermissionPolicy, PromptPolicy, Role, Settings
from hub.store import Store

log = logging.getLogger("hub.sessions")

# The pieces of a `session/update` frame (see `Session.frame`).
_FRAME_OPEN = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
_UPDATE_OPEN = b',"update":'
_META_OPEN = b',"_meta":{"acp-hub":'
_FRAME_CLOSE = b"}}}"

MAX_UPDATE_DEPTH: Final = 128
"""How deeply an update may nest objects and arrays. Far below the 254 levels orjson writes:
the hub re-encodes updates inside frames and records of its own (``_hub_v2``, compactions);
deeper ones are dropped before the fold. Every message is bounded more tightly on arrival
(``hub.protocol.jsonrpc.DEFAULT_MAX_DEPTH``): this guards what the hub builds itself."""


Spawner = Callable[[Callable[[], Awaitable[None]], str], None]
"""Runs an async callable in a task of the hub (named for the logs); errors are logged."""

Replay = str | None
"""What ``Session.attach`` replays: ``None``, ``"start"``, ``"after"``, ``"pending_only"`` or
``"message"`` (see ``Session.attach``)."""


@dataclass(slots=True)
class Attachment:
    """One client attached to one session."""

    client: ClientHandle
    since: str
    role: Role
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


GROWING_VARIANTS: Final = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call_content_chunk",
        "terminal_output_chunk",
    }
)
"""The update variants whose content is appended to a session's state (the others replace a
snapshot or a whole record): what ``Session.state_bytes`` counts."""


class Session:
    """One shared session on one agent; see the module docstring.

    The public API the server builds on: ``attach`` / ``announce`` / ``detach``, the role
    checks ``role_of`` / ``may`` / ``require``, the client operations ``prompt``, ``cancel``,
    ``withdraw_prompt``, ``lease_action``, ``set_policy``, ``set_config_option``, ``set_mode``
    (each raises ``SessionFailure`` or ``AgentError``, both ``RpcFailure``), and the read-only
    views ``state``, ``log``, ``cursor``, ``config_options``, ``agent_name``, ``summary()``.
    The ``SessionSink`` callbacks (``on_update``, ``on_permission``, ...) are the agent's side.
    """

    def __init__(
        self,
        session_id: str,
        agent: AgentHandle,
        agent_session_id: str,
        *,
        cwd: str,
        settings: Settings,
        on_change: Callable[[Session], None] | None = None,
        spawn: Spawner | None = None,
        metrics: SessionMetrics | None = None,
        store: Store | None = None,
        log: EventLog | None = None,
    ) -> None:
        self.id = session_id
        self.audit: AuditSink = NullAudit()
        """Where policy changes and permission decisions are recorded (the registry's)."""
        self.consensus_quorum = settings.consensus_quorum
        self.agent = agent
        self.agent_session_id = agent_session_id
        self.cwd = cwd
        self.settings = settings
        self.created_at = now_iso()
        self.state = SessionState()
        if log is None:
            bounds = settings.retained_events, settings.retained_bytes
            if store is not None:
                log = store.open_log(session_id, max_events=bounds[0], max_bytes=bounds[1])
            else:
                log = EventLog(max_events=bounds[0], max_bytes=bounds[1])
        self.log = log
        # A durable store gets a compacted snapshot every `snapshot_events` events; with the
        # memory store the fan-out's path pays one falsy test.
        self._store = store if store is not None and store.durable else None
        self._snapshot_every = settings.snapshot_events if self._store is not None else 0
        self.ready: anyio.Event | None = None
        """While a restored session waits for its agent to take it back: set once it did
        (or could not); prompts wait for it."""
        self.mcp_servers: list[dict[str, Any]] = []
        """The v2 MCP server entries the session was created with (a resume needs them)."""
        self.creator: str | None = None
        """The principal that created the session (``None``: unknown)."""
        self.on_record: Callable[[Session], None] | None = None
        self.notice: Callable[[Notice], None] | None = None
        """Told of every notice (``hub.sessions.notices``); must not block (the registry's)."""
        """Called when what the store's directory keeps of the session changed (policies)."""
        self._frame_head = _FRAME_OPEN + orjson.dumps(session_id) + _UPDATE_OPEN
        self.v1 = ClientV1Renderer()
        self.attached: dict[str, Attachment] = {}
        # The fan-out's view of `attached`, rebuilt on every attach and detach: the push of
        # each v2 attachment, and the v1 attachments (read for every event).
        self._v2_pushes: tuple[Callable[[bytes], bool], ...] = ()
        self._v1_attached: tuple[Attachment, ...] = ()
        self.prompt_policy: PromptPolicy = settings.prompt_policy
        self.permission_policy: PermissionPolicy = settings.permission_policy
        self.closed = False
        self.lost = False
        self.idle_since: float | None = None
        """Since when (``anyio.current_time()``) nobody is attached and no turn runs; kept by
        the registry's idle-session reaper."""
        self.state_bytes = 0
        """Bytes of appended content folded into ``state`` (``GROWING_VARIANTS``): what the
        ``max_state_bytes`` limit counts (snapshots replace, so they do not add up)."""
        self.metrics = metrics if metrics is not None else SessionMetrics()
        """Where the session counts and times what it does (the hub's ``/metrics``)."""
        self._counter = 0
        self._on_change = on_change
        self._spawn = spawn
        self.presence = Presence(self)
        self.turns = Turns(self)
        self.lease = Lease(self)
        self.permissions = Permissions(self)
        self.elicitations = Elicitations(self)
        self.extensions = Extensions(self)
        self.catch_up = CatchUp(self)

    # -- plumbing for the session's parts ----------------------------------------------------

    def mint(self, prefix: str) -> str:
        """A new id unique in this session (``q-3``, ``perm-4``)."""
        self._counter += 1
        return f"{prefix}-{self._counter}"

    def bind_spawner(self, spawn: Spawner) -> None:
        """Give the session a way to run deferred work (the next queued prompt, coalesced
        presence, lease expiry) in a hub task."""
        self._spawn = spawn

    def run_later(self, fn: Callable[[], Awaitable[None]], name: str) -> bool:
        """Run ``fn`` in a hub task; ``False`` (nothing runs) when no spawner is bound."""
        if self._spawn is None:
            return False
        self._spawn(fn, f"{name} {self.id}")
        return True

    def changed(self) -> None:
        """Tell the registry's listeners that the session's summary may have changed."""
        if self._on_change is not None:
            self._on_change(self)

    # -- the log and fan-out -----------------------------------------------------------------

    def frame(self, update: dict[str, Any], meta: dict[str, Any]) -> bytes:
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
        ``origin`` is the client whose prompt a user message is (a v1 client is spared it).
        """
        try:
            body = orjson.dumps(update)
            if body.count(b"{") + body.count(b"[") > MAX_UPDATE_DEPTH and depth_exceeds(
                update, MAX_UPDATE_DEPTH
            ):
                raise InvalidParams(f"nested more than {MAX_UPDATE_DEPTH} levels deep")
            self.state.apply(update)
        except (InvalidParams, TypeError) as exc:  # orjson.JSONEncodeError is a TypeError
            # Checked before the fold: what the state holds must encode for every client,
            # in every frame (replays, v1 renderings) built from it later.
            log.warning(
                "! %s: dropped a malformed update from %s: %s", self.id, self.agent.name, exc
            )
            return None
        seq = self.log.next_seq()
        meta = {"seq": seq, "epoch": self.log.epoch}
        v2 = b"".join((self._frame_head, body, _META_OPEN, orjson.dumps(meta), _FRAME_CLOSE))
        try:
            v1_updates = self.v1.update(update)
        except PeerError as exc:
            log.warning(
                "! %s: no v1 rendering for %s: %s", self.id, update.get("sessionUpdate"), exc
            )
            v1_updates = []
        # Most updates render to v1 unchanged: those share the v2 frame (same bytes).
        v1 = tuple([v2 if u == update else self.frame(u, meta) for u in v1_updates])
        variant = update.get("sessionUpdate")
        if isinstance(variant, str) and variant.startswith("_hub_"):
            v1_hub, v1 = v1, ()
        elif not v1:
            # v1 clients that asked for the hub's events get the updates v1 cannot express
            # wrapped in `_hub_v2`, so that their seqs stay contiguous too.
            v1_hub = (self.frame({"sessionUpdate": "_hub_v2", "update": update}, meta),)
        else:
            v1_hub = v1
        if variant in GROWING_VARIANTS:
            self.state_bytes += len(v2)
        message_id = update.get("messageId")
        origin = origin if variant in USER_MESSAGE_VARIANTS else None
        self.log.append_row(
            seq, message_id if isinstance(message_id, str) else None, v2, v1, v1_hub, origin
        )
        if self._snapshot_every and seq % self._snapshot_every == 0:
            self.snapshot()
        # Snapshots: a push that closes a client detaches it, which replaces them.
        v2_pushes = self._v2_pushes
        for push in v2_pushes:
            push(v2)
        # Counted once per event, not per client (hub.sessions.metrics).
        deliveries = len(v2_pushes)
        delivered = deliveries * len(v2)
        for attachment in self._v1_attached:
            if origin != attachment.client_id:  # `Event.for_v1`, inlined for the hot path
                frames = v1_hub if attachment.hub_events else v1
                for frame in frames:
                    attachment.push(frame)
                    delivered += len(frame)
                deliveries += len(frames)
        metrics = self.metrics
        metrics.deliveries += deliveries
        metrics.delivered_bytes += delivered
        if variant in NOTICE_VARIANTS and self.notice is not None:
            self.tell(update, seq)
        return seq

    def tell(self, update: dict[str, Any], seq: int | None) -> None:
        """Hand the notice ``update`` is, if any, to ``notice`` (``hub.sessions.notices``)."""
        found = notice_of(update)
        if found is not None and self.notice is not None:
            event, detail = found
            self.notice(Notice(event, self.id, self.agent.name, self.cwd, detail, seq))

    # -- attaching ---------------------------------------------------------------------------

    def attach(
        self,
        client: ClientHandle,
        *,
        replay: Replay,
        after: tuple[int, int] | None = None,
        role: Role | None = None,
        via_attach: bool = False,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """Attach ``client`` and queue its catch-up in its sink.

        ``replay`` is ``None`` (live only), ``"start"`` (compacted replay) or ``"after"`` with
        ``after = (epoch, seq)`` (the events after ``seq``, or a reset and the compacted replay
        when the cursor cannot be served). For ``session/attach``: ``"pending_only"`` (only
        what waits: pending permission records, queue, lease, policies, state) and
        ``"message"`` with ``message_id`` (the retained events after the last one of that
        message, or a reset and the compacted replay when the log does not hold it).
        ``role`` is capped at the client's own role. Returns the cursor meta
        ``{"epoch", "seq"}``: the client holds the state up to ``seq``. The caller must queue
        the response before yielding to the event loop, so that it precedes every later event,
        and then call ``announce``.
        """
        cursor = self.cursor
        client.outbox.push_pages(self.catch_up.frames(client, replay, after, message_id))
        effective = arbiter.capped(role, client.role)
        previous = self.attached.get(client.client_id)
        since = previous.since if previous is not None and previous.role == effective else now_iso()
        self.attached[client.client_id] = Attachment(client, since, effective, via_attach)
        self._fanout_changed()
        return cursor

    def _fanout_changed(self) -> None:
        # Clients of other nodes (hub.sessions.cluster) get the events from the store.
        attachments = [a for a in self.attached.values() if not getattr(a.client, "remote", False)]
        self._v2_pushes = tuple(a.push for a in attachments if a.v2)
        self._v1_attached = tuple(a for a in attachments if not a.v2)

    def announce(self, client: ClientHandle) -> None:
        """After the attach response was queued: tell everyone who joined, and offer the new
        client the permission requests it may answer."""
        if client.client_id not in self.attached:
            return
        self.presence.changed(joined=client.client_id)
        self.permissions.offer_pending(client)
        self.elicitations.offer_pending(client)
        self.changed()

    def detach(self, client: ClientHandle, *, reason: str = "detached") -> None:
        """Remove ``client``; its queued prompts are withdrawn, its permission copies and the
        elicitations it was asked too, and the lease it held is released."""
        attachment = self.attached.pop(client.client_id, None)
        if attachment is None:
            return
        self._fanout_changed()
        self.permissions.forget_client(client)
        self.elicitations.forget_client(client)
        self.extensions.forget_client(client)
        self.turns.forget_client(client)
        self.lease.forget_client(client, reason)
        self.presence.changed(left=client.client_id, reason=reason)
        for other in self.attached.values():
            if other.via_attach:
                other.client.notify(
                    "_hub/client_disconnected",
                    {"sessionId": self.id, "clientId": client.client_id, "reason": reason},
                )
        self.changed()
        self.permissions.check_unanswerable()

    def notify_attached(self, method: str, params: dict[str, Any], *, via_attach: bool) -> None:
        """Send a notification to every attached client (``via_attach``: only to those that
        attached with ``session/attach``, which asked for the proposal's notices)."""
        for attachment in tuple(self.attached.values()):
            if attachment.via_attach or not via_attach:
                attachment.client.notify(method, params)

    @property
    def settled(self) -> bool:
        """No coalesced presence change is waiting to go out (the log is up to date)."""
        return self.presence.settled

    def snapshot(self) -> None:
        """Hand the store a compaction of the state as of the last event (durable stores;
        a restart then folds it and the events after it, not the whole history)."""
        if self._store is not None:
            self._store.snapshot(self.log, compact(self.state))

    @property
    def cursor(self) -> dict[str, int]:
        """``{"epoch", "seq"}`` of the last event in the log."""
        return {"epoch": self.log.epoch, "seq": self.log.last_seq}

    # -- the agent's side (SessionSink) ------------------------------------------------------

    def on_update(self, update: dict[str, Any]) -> None:
        self.metrics.updates_in += 1
        if self.turns.on_user_message(update):
            return
        if update.get("sessionUpdate") == "session_info_update":
            update = dict(clamp_title(update))  # no title can fill a page
        self.emit(update)
        if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
            self.turns.ended(update.get("stopReason"), None)

    def on_agent_event(self, event: dict[str, Any]) -> None:
        status = event.get("status")
        self.emit({"sessionUpdate": "_hub_agent", "agent": self.agent.name, **event})
        if status in ("exited", "lost"):
            if status == "lost":
                self.lost = True
            self.permissions.cancel_all()
            self.elicitations.cancel_waiting()
            if self.turns.busy:
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
                self.turns.ended(None, error)
        self.changed()

    def on_extension(self, method: str, params: dict[str, Any]) -> None:
        # Clients know the session by the hub's id, not by the agent's.
        self.notify_attached(method, {**params, "sessionId": self.id}, via_attach=False)

    async def on_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self.permissions.request(params)

    async def on_elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self.elicitations.request(params)

    def on_elicitation_complete(self, params: dict[str, Any]) -> None:
        self.elicitations.complete(params)

    async def on_extension_request(self, method: str, params: dict[str, Any]) -> Any:
        return await self.extensions.agent_request(method, params)

    async def extension(self, client: ClientHandle, method: str, params: dict[str, Any]) -> Any:
        """A request of ``client`` the hub has no handler for, answered by the agent
        (``hub.sessions.extensions``)."""
        return await self.extensions.client_request(client, method, params)

    # -- roles -------------------------------------------------------------------------------

    def role_of(self, client: ClientHandle) -> Role:
        """``client``'s role here: its attachment's (it may have attached with less than its
        connection's role), else its connection's."""
        attachment = self.attached.get(client.client_id)
        return attachment.role if attachment is not None else client.role

    def may(self, client: ClientHandle, needed: Role) -> bool:
        return arbiter.allows(self.role_of(client), needed)

    def require(self, client: ClientHandle, needed: Role, action: str) -> None:
        """Raise ``SessionFailure`` (FORBIDDEN) unless ``client`` has at least ``needed``."""
        have = self.role_of(client)
        if not arbiter.allows(have, needed):
            raise SessionFailure(forbidden(needed, have, action))

    # -- what clients do ---------------------------------------------------------------------

    async def prompt(self, client: ClientHandle, blocks: Any) -> dict[str, Any]:
        """Arbitrate a prompt from ``client`` (see ``docs/arbitration.md``).

        v2 clients get the result when the prompt is accepted (started, or queued) with the
        user message's ``messageId``; v1 clients when the turn it started ended
        (``{"stopReason": ...}``). ``blocks`` must be a non-empty list of content blocks.
        A session restored from the store waits until its agent took it back; a ``lost``
        session refuses with ``SESSION_LOST``.
        """
        self.require(client, "driver", "session/prompt")
        if self.ready is not None:
            await self.ready.wait()
        if self.lost:
            raise SessionFailure(
                hub_error(
                    SESSION_LOST,
                    f"Agent '{self.agent.name}' lost this session; it can be read, not prompted",
                    {"agent": self.agent.name, "sessionId": self.id},
                )
            )
        return await self.turns.prompt(client, blocks)

    async def cancel(self, client: ClientHandle) -> None:
        """Cancel the turn in progress: forwarded once; pending permissions resolve cancelled."""
        await self.turns.cancel(client)

    def withdraw_prompt(self, client: ClientHandle, queue_id: str) -> None:
        """Withdraw a queued prompt; only its sender (or an owner) may."""
        self.turns.withdraw(client, queue_id)

    def lease_action(
        self, client: ClientHandle, action: str, target: str | None = None
    ) -> dict[str, Any]:
        """``request`` / ``release`` the prompt lease, or ``grant`` it (owner) to ``target``
        (``None``: revoke it). Returns ``{"holder": client id or None}``."""
        return self.lease.act(client, action, target)

    async def set_config_option(
        self, client: ClientHandle, config_id: str, kind: str, value: Any
    ) -> list[dict[str, Any]]:
        """Set one of the agent's config options (driver); every client sees the new set as
        a ``config_option_update``. Returns the full v2 option set."""
        self.require(client, "driver", "session/set_config_option")
        options = await self.agent.set_config_option(self.agent_session_id, config_id, kind, value)
        self.emit({"sessionUpdate": "config_option_update", "configOptions": options})
        return options

    async def set_mode(self, client: ClientHandle, mode_id: str) -> None:
        """Set the session mode (driver): through the agent's ``mode`` config option when it
        has one, else with v1 ``session/set_mode``."""
        self.require(client, "driver", "session/set_mode")
        option = mode_option(self.state.config_options)
        if option is not None:
            options = await self.agent.set_config_option(
                self.agent_session_id, option["configId"], "id", mode_id
            )
            self.emit({"sessionUpdate": "config_option_update", "configOptions": options})
        else:
            await self.agent.set_mode(self.agent_session_id, mode_id)

    # -- policies ----------------------------------------------------------------------------

    def emit_policies(self) -> None:
        """Record the session's current prompt and permission policies (``_hub_policy``)."""
        self.emit(
            {
                "sessionUpdate": "_hub_policy",
                "prompt": self.prompt_policy,
                "permission": self.permission_policy,
            }
        )

    def set_policy(
        self, client: ClientHandle, prompt: Any, permission: Any, quorum: Any = None
    ) -> dict[str, Any]:
        """Change the session's policies (owner only); ``None`` leaves one as it is.
        ``quorum``: how many distinct principals the ``consensus`` policy needs."""
        self.require(client, "owner", "_hub/set_policy")
        if quorum is not None:
            if not isinstance(quorum, int) or isinstance(quorum, bool) or not 1 <= quorum <= 100:
                raise SessionFailure(invalid_params("quorum must be an integer from 1 to 100"))
            self.consensus_quorum = quorum
        try:
            new_prompt = None if prompt is None else arbiter.check_prompt_policy(prompt)
            new_permission = (
                None if permission is None else arbiter.check_permission_policy(permission)
            )
        except InvalidParams as exc:
            raise SessionFailure(invalid_params(str(exc))) from None
        if new_prompt is not None:
            self.prompt_policy = new_prompt
        if new_permission is not None:
            self.permission_policy = new_permission
        self.emit_policies()
        self.permissions.reoffer()
        self.changed()
        if self.on_record is not None:
            self.on_record(self)
        self.audit.record(
            "policy_changed",
            sessionId=self.id,
            principal=client.principal,
            prompt=self.prompt_policy,
            permission=self.permission_policy,
            quorum=self.consensus_quorum,
        )
        return {
            "prompt": self.prompt_policy,
            "permission": self.permission_policy,
            "quorum": self.consensus_quorum,
        }

    # -- views -------------------------------------------------------------------------------

    @property
    def agent_name(self) -> str:
        return self.agent.name

    @property
    def config_options(self) -> list[Any]:
        """The agent's current v2 config options."""
        return self.state.config_options

    def summary(self) -> dict[str, Any]:
        """The ``_meta["acp-hub"]`` of this session in ``session/list``."""
        return {
            "agent": self.agent.name,
            "agentSessionId": self.agent_session_id,
            "state": "lost" if self.lost else self.state.foreground,
            "stopReason": self.state.stop_reason,
            "clients": [
                {
                    "clientId": a.client.client_id,
                    "name": a.client.name,
                    "principal": a.client.principal,
                    "role": a.role,
                }
                for a in self.attached.values()
            ],
            "pendingPermissions": len(self.permissions),
            "queued": len(self.turns.queue),
            "seq": self.log.last_seq,
            "epoch": self.log.epoch,
            "promptPolicy": self.prompt_policy,
            "permissionPolicy": self.permission_policy,
        }


__all__ = ["Attachment", "Session", "SessionFailure", "Spawner"]
