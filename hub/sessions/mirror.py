"""A session another node owns, followed here for this node's clients (several nodes on Redis).

Theory of operation
-------------------
The owner of a session (the node that runs its agent) writes every event to the session's
stream in the shared store. A node whose clients attach to a session it does not own builds a
``MirrorSession`` from the store (state, retained log, epoch) and follows the stream
(``hub.sessions.cluster``): each stored event is folded, appended to the mirror's log with the
seq and the frames the owner gave it, and written to the local clients' sinks — the owner
encoded it once, every node fans out the same bytes. Attaching, replay and cursors work as on
the owner, from the mirror's own log and state.

A mirror never emits events of its own: the attach and detach of its clients are not in the
owner's presence (``_hub_presence`` lists the owner's clients). What clients ask of the session
(prompts, cancels, policies) is forwarded to the owner (``Cluster.forward``) and answered back;
permission requests are offered by the owner to its own clients only.

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
from hub.sessions.client import ClientHandle
from hub.sessions.errors import SessionFailure
from hub.sessions.extensions import extension_role
from hub.sessions.session import Session
from hub.store import Restored
from hub.store.codec import update_of
from hub.store.log import Row

log = logging.getLogger("hub.sessions")

Forward = Callable[["MirrorSession", str, ClientHandle, dict[str, Any]], Awaitable[Any]]
"""Sends one client operation to the session's owner and returns its answer."""


class Gap(Exception):
    """The stream does not continue the mirror's log (the mirror must be rebuilt)."""


class MirrorSession(Session):
    """See the module docstring."""

    def __init__(self, restored: Restored, forward: Forward, **kwargs: Any) -> None:
        record = restored.record
        super().__init__(
            record.session_id,
            _Remote(record.agent),
            record.agent_session_id,
            cwd=record.cwd,
            log=restored.log,
            **kwargs,
        )
        self.created_at = record.created_at or self.created_at
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
        self.log = restored.log
        state = type(self.state)()
        try:
            state.apply_all(restored.updates)
        except InvalidParams as exc:
            log.warning("! %s: a stored update does not fold here: %s", self.id, exc)
        self.state = state
        policy = state.hub("_hub_policy") or {}
        self.prompt_policy = policy.get("prompt", restored.record.prompt_policy)
        self.permission_policy = policy.get("permission", restored.record.permission_policy)
        agent = state.hub("_hub_agent") or {}
        self.lost = agent.get("status") == "lost" or restored.record.status == "lost"

    def attach(self, client: ClientHandle, **kwargs: Any) -> dict[str, Any]:
        cursor = super().attach(client, **kwargs)
        if self.on_join is not None:
            self.on_join(self, client)
        return cursor

    def detach(self, client: ClientHandle, *, reason: str = "detached") -> None:
        attached = client.client_id in self.attached
        super().detach(client, reason=reason)
        if attached and self.on_leave is not None:
            self.on_leave(self, client, reason)

    def emit(self, update: dict[str, Any], *, origin: str | None = None) -> int | None:
        """A mirror records nothing itself (its clients' presence stays on this node)."""
        return None

    def snapshot(self) -> None:
        return None

    def ingest(self, rows: list[Row]) -> None:
        """Fold, log and fan out events read from the owner's stream, in order; ``Gap``
        when they do not continue the log."""
        for row in rows:
            seq = row[0]
            if seq <= self.log.last_seq:
                continue  # read twice (a retried read): already here
            if seq != self.log.last_seq + 1:
                raise Gap(f"event {seq} after {self.log.last_seq}")
            frame = orjson.loads(row[2])
            params = frame["params"]
            epoch = params.get("_meta", {}).get("acp-hub", {}).get("epoch")
            if isinstance(epoch, int) and epoch != self.log.epoch:
                self.log.continue_as(epoch)  # the owner continued the history (takeover)
            try:
                self.state.apply(update_of(row))
            except (InvalidParams, ValueError, KeyError) as exc:
                log.warning("! %s: event %s does not fold here: %s", self.id, seq, exc)
            _, message_id, v2, v1, v1_hub, origin, _ = row
            self.log.append_row(seq, message_id, v2, v1, v1_hub, origin)
            update = params.get("update") or {}
            if update.get("sessionUpdate") == "_hub_policy":
                self.prompt_policy = update.get("prompt", self.prompt_policy)
                self.permission_policy = update.get("permission", self.permission_policy)
            elif update.get("sessionUpdate") == "_hub_agent":
                self.lost = update.get("status") == "lost"
            for push in self._v2_pushes:
                push(v2)
            for attachment in self._v1_attached:
                if origin != attachment.client_id:
                    for out in v1_hub if attachment.hub_events else v1:
                        attachment.push(out)
        self.changed()

    def reset_clients(self) -> None:
        """After a rebuild: every local client gets a ``_hub_reset`` and the state."""
        for attachment in tuple(self.attached.values()):
            client = attachment.client
            client.outbox.push_pages(self.catch_up.reset(client, 0, 0))

    # -- what clients do: forwarded to the owner ---------------------------------------------

    async def prompt(self, client: ClientHandle, blocks: Any) -> dict[str, Any]:
        self.require(client, "driver", "session/prompt")
        result = await self._forward(self, "prompt", client, {"blocks": blocks})
        return dict(result) if isinstance(result, dict) else {}

    async def cancel(self, client: ClientHandle) -> None:
        self.require(client, "driver", "session/cancel")
        await self._forward(self, "cancel", client, {})

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


class _Remote:
    """The agent of a mirrored session: it runs on the owner's node, never here."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def prompt(self, session_id: str, blocks: Any, /) -> Any:
        raise AssertionError("a mirror forwards prompts")

    async def cancel(self, session_id: str, /) -> None:
        raise AssertionError("a mirror forwards cancels")

    async def set_config_option(
        self, session_id: str, config_id: str, kind: str, value: Any, /
    ) -> list[dict[str, Any]]:
        raise AssertionError("not on a mirror")

    async def set_mode(self, session_id: str, mode_id: str, /) -> None:
        raise AssertionError("not on a mirror")

    async def extension(
        self, session_id: str | None, method: str, params: dict[str, Any], /
    ) -> Any:
        raise AssertionError("a mirror forwards extension requests")

    async def close_session(self, session_id: str, /) -> None:
        return None

    async def delete_session(self, session_id: str, /) -> None:
        return None


__all__ = ["FORWARDED_METHODS", "Gap", "MirrorSession"]
