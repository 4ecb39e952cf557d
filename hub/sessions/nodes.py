"""What the pieces of a hub on several nodes (``hub.sessions.cluster``, ``hub.sessions.relay``)
share: the registry as they see it (``Node``) and the heartbeat's timing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from hub.sessions.client import ClientHandle
from hub.sessions.metrics import SessionMetrics
from hub.sessions.ops import SessionOps
from hub.sessions.session import Session
from hub.settings import Settings

FOLLOW_BLOCK = 0.5
"""Seconds one ``XREAD`` of the followed streams waits before the set is looked at again."""
RETRY = 0.5
"""Seconds before a failed read of the store is tried again."""


def beat(lease: float) -> tuple[float, float]:
    """The heartbeat's TTL and how often it is renewed, for ``node_lease`` ``lease``."""
    ttl = max(3.0, lease / 3)
    return ttl, ttl / 3


class Node(Protocol):
    """This node's sessions (``hub.sessions.registry.SessionRegistry``), as the cluster sees
    them."""

    @property
    def settings(self) -> Settings: ...

    @property
    def sessions(self) -> dict[str, Session]:
        """The sessions this node owns."""
        ...

    @property
    def bounds(self) -> dict[str, int]: ...

    @property
    def metrics(self) -> SessionMetrics: ...

    def spawn(self, fn: Callable[[], Awaitable[Any]], name: str) -> None: ...

    async def take(self, session_id: str, agent_name: str, creator: str | None) -> bool: ...

    def changed(self, session: SessionOps) -> None: ...

    async def close(
        self, client: ClientHandle | None, found: SessionOps, *, delete: bool
    ) -> None: ...


__all__ = ["FOLLOW_BLOCK", "RETRY", "Node", "beat"]
