"""What every session holds wherever it is served: its state, its log, its attached clients,
the fan-out of its events and the catch-up of an attaching client.

A session this node owns (``hub.sessions.session.Session``) and one it follows for its
clients while another node owns it (``hub.sessions.mirror.MirrorSession``) each compose one
``SessionCore``: the owner folds and logs the events it emits, the follower those it reads
from the owner's stream, and both fan them out to their clients through ``fan_out``.

Attaching is synchronous. In one step, without yielding to the event loop, ``attach`` queues
the catch-up the client asked for (``hub.sessions.catchup``) in its sink and adds the client to
the fan-out set; every later event is queued after the attach answer: no hole, no duplicate.

What the session's policies are and whether its agent lost it are derived from the fold (the
latest ``_hub_policy`` and ``_hub_agent``), falling back to ``defaults`` (the settings', or the
directory record's) before the log says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from hub.protocol.client_v1 import ClientV1Renderer
from hub.protocol.errors import InvalidParams, forbidden
from hub.protocol.state import SessionState
from hub.sessions import arbiter
from hub.sessions.catchup import CatchUp
from hub.sessions.client import ClientHandle
from hub.sessions.errors import SessionFailure
from hub.sessions.metrics import SessionMetrics
from hub.sessions.ops import Replay
from hub.settings import (
    PERMISSION_POLICIES,
    PROMPT_POLICIES,
    PermissionPolicy,
    PromptPolicy,
    Role,
    Settings,
)
from hub.store import SessionRecord
from hub.store.log import EventLog

# The pieces of a `session/update` frame (see `SessionCore.frame`).
_FRAME_OPEN = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
_UPDATE_OPEN = b',"update":'
_META_OPEN = b',"_meta":{"acp-hub":'
_FRAME_CLOSE = b"}}}"

Spawner = Callable[[Callable[[], Awaitable[None]], str], None]
"""Runs an async callable in a task of the hub (named for the logs); errors are logged."""


@dataclass(slots=True)
class Attachment:
    """One client attached to one session."""

    client: ClientHandle
    since: str
    role: Role
    via_attach: bool = False
    """Attached with ``session/attach`` (the multi-client proposal): gets its notices."""
    relayed: bool = False
    """A client of another node (``hub.sessions.remote``): its node reads the events from the
    store, so it is outside this fan-out, and its node tells it what happens to the session."""
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
class Defaults:
    """What the session's derived state is before its log says otherwise."""

    prompt_policy: PromptPolicy
    permission_policy: PermissionPolicy
    lost: bool = False
    quorum: int = 1
    """The distinct principals ``consensus`` needs: the settings', or the last one asked for
    (``_hub_policy`` records it with the ``consensus`` policy)."""

    @classmethod
    def of(cls, record: SessionRecord, settings: Settings) -> Defaults:
        """What the directory record says of a session's policies and ``lost`` (the
        settings' policies when it names ones that do not exist)."""
        try:
            prompt = arbiter.check_prompt_policy(record.prompt_policy)
            permission = arbiter.check_permission_policy(record.permission_policy)
        except InvalidParams:
            prompt, permission = settings.prompt_policy, settings.permission_policy
        return cls(prompt, permission, record.status == "lost", settings.consensus_quorum)


class SessionCore:
    """The state, log, attachments and fan-out of one session; see the module docstring."""

    def __init__(
        self,
        session_id: str,
        *,
        settings: Settings,
        log: EventLog,
        defaults: Defaults,
        metrics: SessionMetrics | None = None,
        on_change: Callable[[Any], None] | None = None,
        owner: Any = None,
        spawn: Spawner | None = None,
    ) -> None:
        self.id = session_id
        self.settings = settings
        self.state = SessionState()
        self.log = log
        self.defaults = defaults
        self.metrics = metrics if metrics is not None else SessionMetrics()
        """Where the session counts and times what it does (the hub's ``/metrics``)."""
        self.v1 = ClientV1Renderer()
        self.attached: dict[str, Attachment] = {}
        self.viewers = 0
        """How many of ``attached`` are viewers (presence counts them for every change)."""
        # The fan-out's view of `attached`, kept up to date one attachment at a time (an
        # attach or a detach costs the same whatever the audience): the push of each v2
        # attachment and the v1 attachments, by client id, in attach order. The tuples the
        # fan-out reads for every event are taken from them on the first event after a
        # change (``None``: to be taken again).
        self._v2: dict[str, Callable[[bytes], bool]] = {}
        self._v1: dict[str, Attachment] = {}
        self._v2_pushes: tuple[Callable[[bytes], bool], ...] | None = ()
        self._v1_attached: tuple[Attachment, ...] | None = ()
        self._frame_head = _FRAME_OPEN + orjson.dumps(session_id) + _UPDATE_OPEN
        self.catch_up = CatchUp(self)
        self.counter = 0
        """The last number ``mint`` gave out."""
        self._on_change = on_change
        self._owner = owner
        """What ``on_change`` is told changed (the session that composes this core)."""
        self._spawn = spawn

    # -- plumbing ----------------------------------------------------------------------------

    def mint(self, prefix: str) -> str:
        """A new id unique in this session (``q-3``, ``perm-4``)."""
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def bind_spawner(self, spawn: Spawner) -> None:
        """Give the session a way to run deferred work in a hub task."""
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
            self._on_change(self._owner)

    # -- frames and fan-out ------------------------------------------------------------------

    def frame(self, update: dict[str, Any], meta: dict[str, Any]) -> bytes:
        """The ``session/update`` notification of ``update`` with ``_meta["acp-hub"] = meta``.

        Joined from pieces rather than encoded from a new dict: the same bytes as
        ``jsonrpc.notification``, built for every event, and exact-size (frames are kept in
        the log; orjson's own result keeps a 4 KiB buffer)."""
        return self.frame_of(orjson.dumps(update), meta)

    def frame_of(self, body: bytes, meta: dict[str, Any]) -> bytes:
        """``frame`` of an update already encoded (``body``)."""
        return b"".join((self._frame_head, body, _META_OPEN, orjson.dumps(meta), _FRAME_CLOSE))

    def fan_out(
        self, v2: bytes, v1: tuple[bytes, ...], v1_hub: tuple[bytes, ...], origin: str | None
    ) -> tuple[int, int]:
        """Push one event's frames to every client in the fan-out (v1 clients: not the user
        message of their own prompt, ``origin``). Returns the deliveries and their bytes."""
        # Snapshots: a push that closes a client detaches it, and the loop goes on over the
        # tuples taken before (the next event takes new ones).
        v2_pushes = self._v2_pushes
        if v2_pushes is None:
            v2_pushes = self._v2_pushes = tuple(self._v2.values())
        v1_attached = self._v1_attached
        if v1_attached is None:
            v1_attached = self._v1_attached = tuple(self._v1.values())
        for push in v2_pushes:
            push(v2)
        deliveries = len(v2_pushes)
        delivered = deliveries * len(v2)
        for attachment in v1_attached:
            if origin != attachment.client_id:  # `Event.for_v1`, inlined for the hot path
                frames = v1_hub if attachment.hub_events else v1
                for frame in frames:
                    attachment.push(frame)
                    delivered += len(frame)
                deliveries += len(frames)
        return deliveries, delivered

    # -- attachments -------------------------------------------------------------------------

    def attach(
        self,
        client: ClientHandle,
        *,
        replay: Replay,
        after: tuple[int, int] | None,
        role: Role | None,
        via_attach: bool,
        message_id: str | None,
        since: str,
        relayed: bool = False,
    ) -> dict[str, int]:
        """Queue ``client``'s catch-up in its sink and add it to the fan-out, in one step
        (``Session.attach`` documents the arguments). Returns the cursor it holds."""
        cursor = self.cursor
        if not relayed:
            client.outbox.push_pages(self.catch_up.frames(client, replay, after, message_id))
        effective = arbiter.capped(role, client.role)
        client_id = client.client_id
        previous = self.attached.get(client_id)
        if previous is not None and previous.role == effective:
            since = previous.since
        attachment = Attachment(client, since, effective, via_attach, relayed)
        # Attached again: the same place in the attachments and the fan-out, as before.
        self.attached[client_id] = attachment
        if previous is not None:
            self._leave_counts(previous)
        if effective == "viewer":
            self.viewers += 1
        if relayed:
            self._leave_fanout(client_id)
        elif attachment.v2:
            self._v2[client_id] = attachment.push
            self._v2_pushes = None
        else:
            self._v1[client_id] = attachment
            self._v1_attached = None
        return cursor

    def remove(self, client: ClientHandle) -> Attachment | None:
        """Take ``client`` out of the attachments and the fan-out; its attachment, if any."""
        attachment = self.attached.pop(client.client_id, None)
        if attachment is not None:
            self._leave_counts(attachment)
            self._leave_fanout(attachment.client_id)
        return attachment

    def _leave_counts(self, attachment: Attachment) -> None:
        if attachment.role == "viewer":
            self.viewers -= 1

    def _leave_fanout(self, client_id: str) -> None:
        if self._v2.pop(client_id, None) is not None:
            self._v2_pushes = None
        if self._v1.pop(client_id, None) is not None:
            self._v1_attached = None

    def notify_attached(self, method: str, params: dict[str, Any], *, via_attach: bool) -> None:
        """Send a notification to every attached client (``via_attach``: only to those that
        attached with ``session/attach``, which asked for the proposal's notices)."""
        for attachment in tuple(self.attached.values()):
            if attachment.via_attach or not via_attach:
                attachment.client.notify(method, params)

    def tell_left(self, client_id: str, reason: str) -> None:
        """Tell the clients that attached with ``session/attach`` that ``client_id`` left."""
        for other in tuple(self.attached.values()):
            if other.via_attach:
                other.client.notify(
                    "_hub/client_disconnected",
                    {"sessionId": self.id, "clientId": client_id, "reason": reason},
                )

    def reset_clients(self) -> None:
        """Every client here gets a ``_hub_reset`` and the state (the log was replaced)."""
        for attachment in tuple(self.attached.values()):
            client = attachment.client
            if not attachment.relayed:
                client.outbox.push_pages(self.catch_up.reset(client, 0, 0))

    @property
    def cursor(self) -> dict[str, int]:
        """``{"epoch", "seq"}`` of the last event in the log."""
        return {"epoch": self.log.epoch, "seq": self.log.last_seq}

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

    # -- derived from the fold ---------------------------------------------------------------

    @property
    def prompt_policy(self) -> PromptPolicy:
        value = (self.state.hub("_hub_policy") or {}).get("prompt")
        for policy in PROMPT_POLICIES:
            if policy == value:
                return policy
        return self.defaults.prompt_policy

    @property
    def permission_policy(self) -> PermissionPolicy:
        value = (self.state.hub("_hub_policy") or {}).get("permission")
        for policy in PERMISSION_POLICIES:
            if policy == value:
                return policy
        return self.defaults.permission_policy

    @property
    def consensus_quorum(self) -> int:
        """How many distinct principals the ``consensus`` policy needs: what the latest
        ``_hub_policy`` says while it names ``consensus``, else ``defaults.quorum``."""
        policy = self.state.hub("_hub_policy") or {}
        quorum = policy.get("quorum")
        if policy.get("permission") == "consensus" and isinstance(quorum, int):
            return quorum
        return self.defaults.quorum

    @property
    def lost(self) -> bool:
        """The agent lost the session (it can be read, not prompted): the latest
        ``_hub_agent`` says so, or the session was lost before its log was read here."""
        agent = self.state.hub("_hub_agent")
        return self.defaults.lost or (agent is not None and agent.get("status") == "lost")

    @property
    def config_options(self) -> list[Any]:
        """The agent's current v2 config options."""
        return self.state.config_options

    def summary(
        self,
        agent_name: str,
        agent_session_id: str,
        *,
        pending_permissions: int = 0,
        queued: int = 0,
    ) -> dict[str, Any]:
        """The ``_meta["acp-hub"]`` of the session in ``session/list``."""
        return {
            "agent": agent_name,
            "agentSessionId": agent_session_id,
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
            "pendingPermissions": pending_permissions,
            "queued": queued,
            "seq": self.log.last_seq,
            "epoch": self.log.epoch,
            "promptPolicy": self.prompt_policy,
            "permissionPolicy": self.permission_policy,
        }


class CoreViews:
    """What a session shows of its ``core``: a session this node owns and one it follows
    for another node's owner both compose a ``SessionCore`` and show it the same way."""

    # Structural: a property a field of the core, each read through (written once, here).
    core: SessionCore

    @property
    def state(self) -> SessionState:
        return self.core.state

    @property
    def log(self) -> EventLog:
        return self.core.log

    @property
    def attached(self) -> dict[str, Attachment]:
        return self.core.attached

    @property
    def viewers(self) -> int:
        """How many attached clients are viewers."""
        return self.core.viewers

    @property
    def prompt_policy(self) -> PromptPolicy:
        return self.core.prompt_policy

    @property
    def permission_policy(self) -> PermissionPolicy:
        return self.core.permission_policy

    @property
    def lost(self) -> bool:
        return self.core.lost

    @property
    def cursor(self) -> dict[str, int]:
        """``{"epoch", "seq"}`` of the last event in the log."""
        return self.core.cursor

    @property
    def config_options(self) -> list[Any]:
        """The agent's current v2 config options."""
        return self.core.config_options

    def role_of(self, client: ClientHandle) -> Role:
        return self.core.role_of(client)

    def may(self, client: ClientHandle, needed: Role) -> bool:
        return self.core.may(client, needed)

    def require(self, client: ClientHandle, needed: Role, action: str) -> None:
        """Raise ``SessionFailure`` (FORBIDDEN) unless ``client`` has at least ``needed``."""
        self.core.require(client, needed, action)


__all__ = ["Attachment", "CoreViews", "Defaults", "SessionCore", "Spawner"]
