"""A session this node owns: it runs the session's agent and arbitrates what its clients ask.

Theory of operation
-------------------
Everything that happens in a session goes through ``emit``: the update is folded into the
``SessionState`` (a malformed one is logged and dropped, never fanned out), appended to the
``EventLog`` with the next ``seq``, encoded once per protocol version, and pushed to the
``FrameSink`` of every attached client. ``emit`` is synchronous: the agent's reader calls it
through ``on_update`` and it never waits for a client (a client that cannot keep up is closed
by its own sink).

The state, the log, the attachments, the fan-out and the catch-up are the session's
``SessionCore`` (``hub.sessions.core``), which a session followed for another node's owner
(``hub.sessions.mirror``) composes too; both are the ``SessionOps`` the server calls
(``hub.sessions.ops``). The rest of what happens in a session is arbitrated by its parts, one
concept each (see ``docs/arbitration.md``):

* ``presence`` (``hub.sessions.presence``): the attached-client list, coalesced;
* ``turns`` (``hub.sessions.turns``): the turn in progress, the prompt queue, prompt policies;
* ``lease`` (``hub.sessions.lease``): the prompt lease and its expiry;
* ``permissions`` (``hub.sessions.permissions``): the agent's permission requests, offered to
  every client allowed to answer, the first valid answer wins;
* ``elicitations`` (``hub.sessions.elicitation``): elicitations, asked of one client.

``hub.sessions.arbiter`` holds the rules that need no state. The parts see the session through
the narrow protocol of ``hub.sessions.host``, never this class.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
import orjson

from hub.access.audit import AuditSink, NullAudit
from hub.protocol.checks import is_plain_chunk
from hub.protocol.client_v1 import ClientV1Renderer
from hub.protocol.compact import compact
from hub.protocol.config_options import mode_option
from hub.protocol.display import clamp_title
from hub.protocol.errors import (
    AGENT_UNAVAILABLE,
    SESSION_LOST,
    InvalidParams,
    PeerError,
    hub_error,
    invalid_params,
)
from hub.protocol.jsonrpc import depth_exceeds
from hub.sessions import arbiter
from hub.sessions.agent_handle import AgentHandle
from hub.sessions.catchup import CatchUp
from hub.sessions.client import ClientHandle
from hub.sessions.core import Attachment, CoreViews, Defaults, SessionCore, Spawner
from hub.sessions.elicitation import Elicitations
from hub.sessions.errors import SessionFailure
from hub.sessions.extensions import Extensions
from hub.sessions.lease import Lease
from hub.sessions.metrics import SessionMetrics
from hub.sessions.notices import NOTICE_VARIANTS, Notice, notice_of
from hub.sessions.ops import Replay
from hub.sessions.permissions import Permissions
from hub.sessions.presence import Presence
from hub.sessions.turns import USER_MESSAGE_VARIANTS, Turns, now_iso
from hub.settings import PermissionPolicy, PromptPolicy, Role, Settings
from hub.store import Store
from hub.store.log import EventLog

log = logging.getLogger("hub.sessions")

MAX_UPDATE_DEPTH: Final = 128
"""How deeply an update may nest objects and arrays. Far below the 254 levels orjson writes:
the hub re-encodes updates inside frames and records of its own (``_hub_v2``, compactions);
deeper ones are dropped before the fold. Every message is bounded more tightly on arrival
(``hub.protocol.jsonrpc.DEFAULT_MAX_DEPTH``): this guards what the hub builds itself."""

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


def snapshot_phase(session_id: str, every: int) -> int:
    """Where in each run of ``every`` events session ``session_id`` takes its snapshot: it
    snapshots after the events whose ``seq + phase`` is a multiple of ``every``.

    Each session has its own phase (a hash of its id, the same on every node and at every
    start), so that sessions that advance in step (a fleet of agents started together, a
    benchmark's streams) do not all compact their state and write it in the same instant.
    ``0`` when ``every`` is not positive (no snapshots).
    """
    return zlib.crc32(session_id.encode()) % every if every > 0 else 0


class Session(CoreViews):
    """One shared session on one agent; see the module docstring.

    The server calls it as ``SessionOps`` (``hub.sessions.ops``; the client operations raise
    ``SessionFailure`` or ``AgentError``, both ``RpcFailure``); its parts see it as ``Host``
    (``hub.sessions.host``); the ``SessionSink`` callbacks (``on_update``, ...) are the agent's.
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
        if log is None:
            bounds = settings.retained_events, settings.retained_bytes
            if store is not None:
                log = store.open_log(session_id, max_events=bounds[0], max_bytes=bounds[1])
            else:
                log = EventLog(max_events=bounds[0], max_bytes=bounds[1])
        self.core = SessionCore(
            session_id,
            settings=settings,
            log=log,
            defaults=Defaults(
                settings.prompt_policy, settings.permission_policy, quorum=settings.consensus_quorum
            ),
            metrics=metrics,
            on_change=on_change,
            owner=self,
            spawn=spawn,
        )
        self.id = session_id
        self.audit: AuditSink = NullAudit()
        """Where policy changes and permission decisions are recorded (the registry's)."""
        self.agent = agent
        self.agent_session_id = agent_session_id
        self.cwd = cwd
        self.settings = settings
        self.created_at = now_iso()
        # A durable store gets a compacted snapshot every `snapshot_events` events; with the
        # memory store the fan-out's path pays one falsy test.
        self._store = store if store is not None and store.durable else None
        self._snapshot_every = settings.snapshot_events if self._store is not None else 0
        self._snapshot_phase = snapshot_phase(session_id, self._snapshot_every)
        self.ready: anyio.Event | None = None
        """While a restored session waits for its agent to take it back: set once it did
        (or could not); prompts wait for it."""
        self.mcp_servers: list[dict[str, Any]] = []
        """The v2 MCP server entries the session was created with (a resume needs them)."""
        self.creator: str | None = None
        """The principal that created the session (``None``: unknown)."""
        self.on_record: Callable[[Session], None] | None = None
        """Called when what the store's directory keeps of the session changed (policies)."""
        self.notice: Callable[[Notice], None] | None = None
        """Told of every notice (``hub.sessions.notices``); must not block (the registry's)."""
        self.closed = False
        self.idle_since: float | None = None
        """Since when (``anyio.current_time()``) nobody is attached and no turn runs; kept by
        the registry's idle-session reaper."""
        self.state_bytes = 0
        """Bytes of appended content folded into ``state`` (``GROWING_VARIANTS``): what the
        ``max_state_bytes`` limit counts (snapshots replace, so they do not add up)."""
        self.presence = Presence(self)
        self.turns = Turns(self)
        self.lease = Lease(self)
        self.permissions = Permissions(self)
        self.elicitations = Elicitations(self)
        self.extensions = Extensions(self)

    # -- what the core holds (structural: each property reads it) ----------------------------

    @property
    def consensus_quorum(self) -> int:
        return self.core.consensus_quorum

    @property
    def metrics(self) -> SessionMetrics:
        """Where the session counts and times what it does (the hub's ``/metrics``)."""
        return self.core.metrics

    @property
    def catch_up(self) -> CatchUp:
        return self.core.catch_up

    def mint(self, prefix: str) -> str:
        """A new id unique in this session (``q-3``, ``perm-4``)."""
        return self.core.mint(prefix)

    def bind_spawner(self, spawn: Spawner) -> None:
        """Give the session a way to run deferred work (the next queued prompt, coalesced
        presence, lease expiry) in a hub task."""
        self.core.bind_spawner(spawn)

    def run_later(self, fn: Callable[[], Awaitable[None]], name: str) -> bool:
        """Run ``fn`` in a hub task; ``False`` (nothing runs) when no spawner is bound."""
        return self.core.run_later(fn, name)

    def changed(self) -> None:
        """Tell the registry's listeners that the session's summary may have changed."""
        self.core.changed()

    def frame(self, update: dict[str, Any], meta: dict[str, Any]) -> bytes:
        return self.core.frame(update, meta)

    def notify_attached(self, method: str, params: dict[str, Any], *, via_attach: bool) -> None:
        """Send a notification to every attached client (``via_attach``: only to those that
        attached with ``session/attach``, which asked for the proposal's notices)."""
        self.core.notify_attached(method, params, via_attach=via_attach)

    # -- the log and fan-out -----------------------------------------------------------------

    def emit(self, update: dict[str, Any], *, origin: str | None = None) -> int | None:
        """Fold, log, encode once per version and fan out one update; see the module docs.

        Returns the event's seq, or ``None`` when the update was malformed (logged, dropped).
        ``origin`` is the client whose prompt a user message is (a v1 client is spared it).
        """
        # A plain text chunk (most of what agents stream) is valid by its shape, two levels
        # deep, and the same in v1: asked once, it skips the checks below.
        plain = is_plain_chunk(update)
        try:
            body = orjson.dumps(update)
            if plain:
                self.state.fold_plain_chunk(update)
            else:
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
        core = self.core
        seq = core.log.next_seq()
        meta = {"seq": seq, "epoch": core.log.epoch}
        v2 = core.frame_of(body, meta)
        v1: tuple[bytes, ...]
        if plain:
            core.v1.plain_chunk(update)
            v1 = (v2,)
        else:
            try:
                v1_updates = core.v1.update(update)
            except PeerError as exc:
                log.warning(
                    "! %s: no v1 rendering for %s: %s", self.id, update.get("sessionUpdate"), exc
                )
                v1_updates = []
            # Most updates render to v1 unchanged: those share the v2 frame (same bytes).
            v1 = tuple([v2 if u == update else core.frame(u, meta) for u in v1_updates])
        variant = update.get("sessionUpdate")
        if isinstance(variant, str) and variant.startswith("_hub_"):
            v1_hub, v1 = v1, ()
        elif not v1:
            # v1 clients that asked for the hub's events get the updates v1 cannot express
            # wrapped in `_hub_v2`, so that their seqs stay contiguous too.
            v1_hub = (core.frame({"sessionUpdate": "_hub_v2", "update": update}, meta),)
        else:
            v1_hub = v1
        if variant in GROWING_VARIANTS:
            self.state_bytes += len(v2)
        message_id = update.get("messageId")
        origin = origin if variant in USER_MESSAGE_VARIANTS else None
        core.log.append_row(
            seq, message_id if isinstance(message_id, str) else None, v2, v1, v1_hub, origin
        )
        if self._snapshot_every and (seq + self._snapshot_phase) % self._snapshot_every == 0:
            self.snapshot()
        deliveries, delivered = core.fan_out(v2, v1, v1_hub, origin)
        # Counted once per event, not per client (hub.sessions.metrics).
        metrics = core.metrics
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

    # Structural: the signature SessionOps declares (hub.sessions.ops).
    def attach(
        self,
        client: ClientHandle,
        *,
        replay: Replay,
        after: tuple[int, int] | None = None,
        role: Role | None = None,
        via_attach: bool = False,
        message_id: str | None = None,
        relayed: bool = False,
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
        and then call ``announce``. ``relayed``: a client of another node
        (``hub.sessions.remote``), in the presence but outside the fan-out.
        """
        return self.core.attach(
            client,
            replay=replay,
            after=after,
            role=role,
            via_attach=via_attach,
            message_id=message_id,
            since=now_iso(),
            relayed=relayed,
        )

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
        if self.core.remove(client) is None:
            return
        self.permissions.forget_client(client)
        self.elicitations.forget_client(client)
        self.extensions.forget_client(client)
        self.turns.forget_client(client)
        self.lease.forget_client(client, reason)
        self.presence.changed(left=client.client_id, reason=reason)
        self.core.tell_left(client.client_id, reason)
        self.changed()
        self.permissions.check_unanswerable()

    def dismiss(self, closed: dict[str, Any], reason: str) -> None:
        """The session is closed here: every client is detached, and those of this node are
        told with ``_hub/session_closed`` and ``closed`` (a client of another node hears it
        from its own node, which sees the session gone)."""
        for attachment in tuple(self.attached.values()):
            if not attachment.relayed:
                attachment.client.notify("_hub/session_closed", closed)
            self.detach(attachment.client, reason=reason)

    @property
    def settled(self) -> bool:
        """No coalesced presence change is waiting to go out (the log is up to date)."""
        return self.presence.settled

    def snapshot(self) -> None:
        """Hand the store a compaction of the state as of the last event (durable stores;
        a restart then folds it and the events after it, not the whole history)."""
        if self._store is not None:
            self._store.snapshot(self.log, compact(self.state))

    # -- the agent's side (SessionSink) ------------------------------------------------------

    def on_update(self, update: dict[str, Any]) -> None:
        self.metrics.updates_in += 1
        variant = update.get("sessionUpdate")
        if variant in USER_MESSAGE_VARIANTS and self.turns.on_user_message(update):
            return
        if variant == "session_info_update":
            update = dict(clamp_title(update))  # no title can fill a page
        self.emit(update)
        if variant == "state_update" and update.get("state") == "idle":
            self.turns.ended(update.get("stopReason"), None)

    def on_agent_event(self, event: dict[str, Any]) -> None:
        status = event.get("status")
        self.emit({"sessionUpdate": "_hub_agent", "agent": self.agent.name, **event})
        if status in ("exited", "lost"):
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

    def emit_policies(
        self,
        prompt: PromptPolicy | None = None,
        permission: PermissionPolicy | None = None,
        quorum: int | None = None,
    ) -> None:
        """Record the session's prompt and permission policies (``_hub_policy``; with
        ``consensus``, its quorum too), with ``prompt`` / ``permission`` / ``quorum`` in place of
        the current ones; the session's policies are what the latest ``_hub_policy`` says
        (``hub.sessions.core``)."""
        update: dict[str, Any] = {
            "sessionUpdate": "_hub_policy",
            "prompt": prompt or self.prompt_policy,
            "permission": permission or self.permission_policy,
        }
        if update["permission"] == "consensus":
            update["quorum"] = quorum or self.consensus_quorum
        self.emit(update)

    def set_policy(
        self, client: ClientHandle, prompt: Any, permission: Any, quorum: Any = None
    ) -> dict[str, Any]:
        """Change the session's policies (owner only); ``None`` leaves one as it is.
        ``quorum``: how many distinct principals the ``consensus`` policy needs."""
        self.require(client, "owner", "_hub/set_policy")
        if quorum is not None:
            if not isinstance(quorum, int) or isinstance(quorum, bool) or not 1 <= quorum <= 100:
                raise SessionFailure(invalid_params("quorum must be an integer from 1 to 100"))
            self.core.defaults.quorum = quorum
        try:
            new_prompt = None if prompt is None else arbiter.check_prompt_policy(prompt)
            new_permission = (
                None if permission is None else arbiter.check_permission_policy(permission)
            )
        except InvalidParams as exc:
            raise SessionFailure(invalid_params(str(exc))) from None
        self.emit_policies(new_prompt, new_permission, quorum)
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

    # -- views (structural: each property reads a part) --------------------------------------

    @property
    def agent_name(self) -> str:
        return self.agent.name

    @property
    def v1(self) -> ClientV1Renderer:
        """The live v1 rendering of the session's updates."""
        return self.core.v1

    def answers_here(self, method: str) -> bool:
        return True

    async def forward_method(
        self, client: ClientHandle, method: str, params: dict[str, Any]
    ) -> Any:
        raise AssertionError(f"{method} is answered here")  # see ``answers_here``

    def summary(self) -> dict[str, Any]:
        """The ``_meta["acp-hub"]`` of this session in ``session/list``."""
        return self.core.summary(
            self.agent.name,
            self.agent_session_id,
            pending_permissions=len(self.permissions),
            queued=len(self.turns.queue),
        )


__all__ = ["Attachment", "Replay", "Session", "SessionFailure", "Spawner", "snapshot_phase"]
