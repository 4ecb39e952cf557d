"""What the parts of a session this node owns see of it: ``Host``, and of each other.

``hub.sessions.session.Session`` composes its parts (presence, turns, lease, permissions,
elicitations, extensions) and hands each itself; a part knows it only through ``Host``, and
the other parts only through the narrow views below, so that no part imports the session or
another part (``tests/test_layers.py`` checks there is no import cycle).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from hub.access.audit import AuditSink
from hub.protocol.state import SessionState
from hub.sessions.agent_handle import AgentHandle
from hub.sessions.client import ClientHandle
from hub.sessions.core import Attachment
from hub.sessions.metrics import SessionMetrics
from hub.sessions.notices import Notice
from hub.settings import PermissionPolicy, PromptPolicy, Role, Settings


class StartedTurn(Protocol):
    """The turn in progress, as the other parts see it."""

    @property
    def client(self) -> ClientHandle | None:
        """Who sent its prompt (``None``: the agent started it)."""
        ...

    @property
    def started(self) -> float: ...


class TurnsPart(Protocol):
    @property
    def current(self) -> StartedTurn | None: ...

    def started_by(self, client_id: str) -> bool: ...


class LeasePart(Protocol):
    @property
    def holder(self) -> ClientHandle | None: ...

    def held_by(self, client_id: str) -> bool: ...

    def expire(self) -> float | None: ...

    def touch(self) -> None: ...


class PermissionsPart(Protocol):
    def reoffer(self) -> None: ...

    def cancel_all(self) -> None: ...


class ElicitationsPart(Protocol):
    def cancel_waiting(self) -> None: ...


class Host(Protocol):
    """The session, as its parts see it."""

    # Structural: a Protocol's read-only properties, declared one by one.
    @property
    def id(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    @property
    def agent(self) -> AgentHandle: ...

    @property
    def agent_session_id(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def state(self) -> SessionState: ...

    @property
    def metrics(self) -> SessionMetrics: ...

    @property
    def audit(self) -> AuditSink: ...

    notice: Callable[[Notice], None] | None
    """Told of every notice; a part may silence it for an event it emits."""

    @property
    def attached(self) -> dict[str, Attachment]: ...

    @property
    def viewers(self) -> int:
        """How many of ``attached`` are viewers."""
        ...

    @property
    def prompt_policy(self) -> PromptPolicy: ...

    @property
    def permission_policy(self) -> PermissionPolicy: ...

    @property
    def consensus_quorum(self) -> int: ...

    @property
    def turns(self) -> TurnsPart: ...

    @property
    def lease(self) -> LeasePart: ...

    @property
    def permissions(self) -> PermissionsPart: ...

    @property
    def elicitations(self) -> ElicitationsPart: ...

    def emit(self, update: dict[str, Any], *, origin: str | None = None) -> int | None: ...

    def mint(self, prefix: str) -> str: ...

    def run_later(self, fn: Callable[[], Awaitable[None]], name: str) -> bool: ...

    def changed(self) -> None: ...

    def role_of(self, client: ClientHandle) -> Role: ...

    def may(self, client: ClientHandle, needed: Role) -> bool: ...

    def require(self, client: ClientHandle, needed: Role, action: str) -> None: ...

    def notify_attached(self, method: str, params: dict[str, Any], *, via_attach: bool) -> None: ...


def attached_prompter(host: Host) -> ClientHandle | None:
    """Who sent the prompt of the turn in progress, while it is still attached (``None``: no
    turn, the agent started it, or that client left): the first a part asks something of."""
    turn = host.turns.current
    if turn is not None and turn.client is not None and turn.client.client_id in host.attached:
        return turn.client
    return None


__all__ = [
    "ElicitationsPart",
    "Host",
    "LeasePart",
    "PermissionsPart",
    "StartedTurn",
    "TurnsPart",
    "attached_prompter",
]
