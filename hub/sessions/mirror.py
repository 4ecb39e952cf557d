"""A session another node owns, followed here for this node's clients (several nodes on Redis).

Theory of operation
-------------------
The owner of a session (the node that runs its agent) writes every event to the session's
stream in the shared store. A node whose clients attach to a session it does not own builds a
``MirrorSession`` from the store (state, retained log, epoch) and follows the stream
(``hub.sessions.cluster``): each stored event is folded, appended to the mirror's log with the
seq and the frames the owner gave it, and written to the local clients' sinks — the owner
encoded it once, every node fans out the same bytes. Attaching, replay and cursors work as on
the owner, from the mirror's own log and state: a mirror and the owner's ``Session`` compose the
same ``SessionCore`` (``hub.sessions.core``) and are the same ``SessionOps`` to the server.

A mirror never emits events of its own: its policies and ``lost`` are the fold's, and its
clients reach the owner's presence through the stand-ins the owner attaches for them
(``on_join`` / ``on_leave``, ``hub.sessions.relay``). What clients ask of the session (prompts,
cancels, policies) is forwarded to the owner (``Relay.forward``) and answered back.

When the stream no longer holds the events after the mirror's last seq (it was trimmed while
this node could not read, or the session was taken over and its log replaced), the mirror is
rebuilt from the store and each local client gets a ``_hub_reset`` and the compacted state:
never a silent gap.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from hub.protocol.errors import NOT_OWNER, InvalidParams, hub_error
from hub.protocol.state import SessionState
from hub.sessions.client import ClientHandle
from hub.sessions.core import CoreViews, Defaults, SessionCore, Spawner
from hub.sessions.errors import SessionFailure
from hub.sessions.extensions import extension_role
from hub.sessions.metrics import SessionMetrics
from hub.sessions.ops import Replay, RunningTurn
from hub.sessions.turns import now_iso
from hub.settings import Role, Settings
from hub.store import Restored
from hub.store.codec import update_of
from hub.store.log import Row, row_frames

log = logging.getLogger("hub.sessions")

Forward = Callable[["MirrorSession", str, ClientHandle, dict[str, Any]], Awaitable[Any]]
"""Sends one client operation to the session's owner and returns its answer."""


class Gap(Exception):
    """The stream does not continue the mirror's log (the mirror must be rebuilt)."""


class _NoTurns:
    """The turns of a mirrored session: they run on the owner, none is known here."""

    current: RunningTurn | None = None
    queue: tuple[()] = ()


NO_TURNS = _NoTurns()


class MirrorSession(CoreViews):
    """See the module docstring; a ``SessionOps`` (``hub.sessions.ops``)."""

    def __init__(
        self,
        restored: Restored,
        forward: Forward,
        *,
        settings: Settings,
        on_change: Callable[[Any], None] | None = None,
        spawn: Spawner | None = None,
        metrics: SessionMetrics | None = None,
    ) -> None:
        record = restored.record
        self.id = record.session_id
        self.cwd = record.cwd
        self.agent_name = record.agent
        self.agent_session_id = record.agent_session_id
        self.created_at = record.created_at or now_iso()
        self.settings = settings
        self.core = SessionCore(
            self.id,
            settings=settings,
            log=restored.log,
            defaults=Defaults(settings.prompt_policy, settings.permission_policy),
            metrics=metrics,
            on_change=on_change,
            owner=self,
            spawn=spawn,
        )
        self.closed = False
        self.state_bytes = 0
        """Nothing is emitted here (the owner counts what its state grows by)."""
        self.turns = NO_TURNS
        self.settled = True
        """Nothing is coalesced here (the presence is the owner's)."""
        self._forward = forward
        self.idle = False
        """No local client at the last directory scan (the next one stops following it)."""
        self.on_join: Callable[[MirrorSession, ClientHandle], None] | None = None
        self.on_leave: Callable[[MirrorSession, ClientHandle, str], None] | None = None
        self.registered_with: str | None = None
        """The owner this node told about its clients of this session."""
        self.load(restored)

    def load(self, restored: Restored) -> None:
        """Take the state and log of ``restored`` (at build time, and to rebuild)."""
        core = self.core
        core.log = restored.log
        state = SessionState()
        try:
            state.apply_all(restored.updates)
        except InvalidParams as exc:
            log.warning("! %s: a stored update does not fold here: %s", self.id, exc)
        core.state = state
        core.defaults = Defaults.of(restored.record, self.settings)

    # -- what the core holds -----------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        return self.core.summary(self.agent_name, self.agent_session_id)

    # -- attaching: this node's clients, in its own fan-out ----------------------------------

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
    ) -> dict[str, Any]:
        """As ``Session.attach``, from the mirror's log and state; the owner is told."""
        cursor = self.core.attach(
            client,
            replay=replay,
            after=after,
            role=role,
            via_attach=via_attach,
            message_id=message_id,
            since=now_iso(),
        )
        if self.on_join is not None:
            self.on_join(self, client)
        return cursor

    def announce(self, client: ClientHandle) -> None:
        """The presence is the owner's (it heard of the client from ``on_join``)."""
        if client.client_id in self.core.attached:
            self.core.changed()

    def detach(self, client: ClientHandle, *, reason: str = "detached") -> None:
        if self.core.remove(client) is None:
            return
        self.core.tell_left(client.client_id, reason)
        self.core.changed()
        if self.on_leave is not None:
            self.on_leave(self, client, reason)

    # -- following the owner's stream --------------------------------------------------------

    def ingest(self, rows: list[Row]) -> None:
        """Fold, log and fan out events read from the owner's stream, in order; ``Gap``
        when they do not continue the log."""
        core = self.core
        for row in rows:
            seq = row[0]
            if seq <= core.log.last_seq:
                continue  # read twice (a retried read): already here
            if seq != core.log.last_seq + 1:
                raise Gap(f"event {seq} after {core.log.last_seq}")
            frame = orjson.loads(row[2])
            params = frame["params"]
            epoch = params.get("_meta", {}).get("acp-hub", {}).get("epoch")
            if isinstance(epoch, int) and epoch != core.log.epoch:
                core.log.continue_as(epoch)  # the owner continued the history (takeover)
            try:
                core.state.apply(update_of(row))
            except (InvalidParams, ValueError, KeyError) as exc:
                log.warning("! %s: event %s does not fold here: %s", self.id, seq, exc)
            v2 = row[2]
            v1, v1_hub = row_frames(row)
            core.log.append_row(seq, row[1], v2, v1, v1_hub, row[5])
            core.fan_out(v2, v1, v1_hub, row[5])
        core.changed()

    def reset_clients(self) -> None:
        """After a rebuild: every local client gets a ``_hub_reset`` and the state."""
        self.core.reset_clients()

    # -- what clients do: forwarded to the owner ---------------------------------------------

    async def prompt(self, client: ClientHandle, blocks: Any) -> dict[str, Any]:
        self.require(client, "driver", "session/prompt")
        result = await self._forward(self, "prompt", client, {"blocks": blocks})
        return dict(result) if isinstance(result, dict) else {}

    async def cancel(self, client: ClientHandle) -> None:
        self.require(client, "driver", "session/cancel")
        await self._forward(self, "cancel", client, {})

    def answers_here(self, method: str) -> bool:
        return method not in FORWARDED_METHODS

    async def forward_method(
        self, client: ClientHandle, method: str, params: dict[str, Any]
    ) -> Any:
        """A hub method the owner answers (``FORWARDED_METHODS``): policies, the lease, queue
        withdrawal."""
        if method not in FORWARDED_METHODS:
            raise _not_here(method)
        return await self._forward(self, "method", client, {"method": method, "params": params})

    def set_policy(
        self, client: ClientHandle, prompt: Any, permission: Any, quorum: Any = None
    ) -> dict[str, Any]:
        raise _not_here("_hub/set_policy")  # forwarded before it gets here (forward_method)

    def lease_action(
        self, client: ClientHandle, action: str, target: str | None = None
    ) -> dict[str, Any]:
        raise _not_here(f"_hub/lease/{action}")

    def withdraw_prompt(self, client: ClientHandle, queue_id: str) -> None:
        raise _not_here("_hub/queue/withdraw")

    async def set_config_option(
        self, client: ClientHandle, config_id: str, kind: str, value: Any
    ) -> list[dict[str, Any]]:
        self.require(client, "driver", "session/set_config_option")
        params = {"configId": config_id, "kind": kind, "value": value}
        options = await self._forward(self, "config", client, params)
        return list(options) if isinstance(options, list) else []

    async def set_mode(self, client: ClientHandle, mode_id: str) -> None:
        self.require(client, "driver", "session/set_mode")
        await self._forward(self, "mode", client, {"modeId": mode_id})

    async def extension(self, client: ClientHandle, method: str, params: dict[str, Any]) -> Any:
        """An extension request (``hub.sessions.extensions``): the owner's agent answers."""
        self.require(client, extension_role(method, self.settings.extension_roles), method)
        return await self._forward(self, "extension", client, {"method": method, "params": params})

    async def close_at_owner(self, client: ClientHandle, *, delete: bool) -> None:
        """``session/close`` / ``session/delete``, done by the owner."""
        await self._forward(self, "close", client, {"delete": delete})


FORWARDED_METHODS = frozenset(
    {
        "_hub/set_policy",
        "_hub/lease/request",
        "_hub/lease/release",
        "_hub/lease/grant",
        "_hub/queue/withdraw",
        "_hub/rules/add",
        "_hub/rules/remove",
    }
)
"""Synchronous hub methods that a mirror forwards to the owner (the connection answers them
once the owner did)."""


def _not_here(method: str) -> Exception:
    return SessionFailure(
        hub_error(
            NOT_OWNER,
            f"{method} on a session another node owns is not forwarded; "
            "connect to the owner's node",
            {"method": method},
        )
    )


__all__ = ["FORWARDED_METHODS", "Gap", "MirrorSession"]
