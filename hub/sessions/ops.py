"""The one seam between a client's connection and a session, wherever the session is served.

A session this node owns (``hub.sessions.session.Session``) runs its agent and arbitrates what
its clients ask; a session another node owns (``hub.sessions.mirror.MirrorSession``) is
followed here from the store and sends what its clients ask to the owner. Both are
``SessionOps``: the server attaches, detaches and calls a session without knowing which it
has. The one thing it asks is ``answers_here``: a hub method a session answers synchronously
on its owner is, on a follower, sent to the owner and answered when the owner did
(``forward_method``).
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Any, Protocol

from hub.protocol.state import SessionState
from hub.sessions.client import ClientHandle
from hub.settings import PermissionPolicy, PromptPolicy, Role
from hub.store.log import EventLog

Replay = str | None
"""What ``SessionOps.attach`` replays: ``None``, ``"start"``, ``"after"``, ``"pending_only"``
or ``"message"`` (see ``Session.attach``)."""


class RunningTurn(Protocol):
    @property
    def started(self) -> float:
        """When the turn started (``time.monotonic()``)."""
        ...


class TurnsView(Protocol):
    """What is known here of the session's turns (nothing, on a node that does not own it)."""

    # Structural: a Protocol's read-only properties, declared one by one.
    @property
    def current(self) -> RunningTurn | None: ...

    @property
    def queue(self) -> Sized: ...


class SessionOps(Protocol):
    """What the server does with a session; see the module docstring."""

    # Structural: a Protocol's read-only properties, declared one by one.
    @property
    def id(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    @property
    def created_at(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    @property
    def lost(self) -> bool: ...

    @property
    def state(self) -> SessionState: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def state_bytes(self) -> int: ...

    @property
    def cursor(self) -> dict[str, int]: ...

    @property
    def config_options(self) -> list[Any]: ...

    @property
    def agent_name(self) -> str: ...

    @property
    def prompt_policy(self) -> PromptPolicy: ...

    @property
    def permission_policy(self) -> PermissionPolicy: ...

    @property
    def turns(self) -> TurnsView: ...

    @property
    def settled(self) -> bool:
        """No event this node coalesces for the session is waiting to go out."""
        ...

    def summary(self) -> dict[str, Any]:
        """The ``_meta["acp-hub"]`` of this session in ``session/list``."""
        ...

    # -- attaching ---------------------------------------------------------------------------

    # Structural: the signature Session and MirrorSession implement, and Caller.attach passes on.
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
        """Attach ``client`` and queue its catch-up; the cursor it holds (``Session.attach``)."""
        ...

    def announce(self, client: ClientHandle) -> None:
        """After the attach answer was queued: tell whom it concerns that ``client`` joined."""
        ...

    def detach(self, client: ClientHandle, *, reason: str = "detached") -> None: ...

    # -- roles -------------------------------------------------------------------------------

    def role_of(self, client: ClientHandle) -> Role: ...

    def may(self, client: ClientHandle, needed: Role) -> bool: ...

    def require(self, client: ClientHandle, needed: Role, action: str) -> None: ...

    # -- what clients do ---------------------------------------------------------------------

    async def prompt(self, client: ClientHandle, blocks: Any) -> dict[str, Any]: ...

    async def cancel(self, client: ClientHandle) -> None: ...

    def withdraw_prompt(self, client: ClientHandle, queue_id: str) -> None: ...

    def lease_action(
        self, client: ClientHandle, action: str, target: str | None = None
    ) -> dict[str, Any]: ...

    def set_policy(
        self, client: ClientHandle, prompt: Any, permission: Any, quorum: Any = None
    ) -> dict[str, Any]: ...

    async def set_config_option(
        self, client: ClientHandle, config_id: str, kind: str, value: Any
    ) -> list[dict[str, Any]]: ...

    async def set_mode(self, client: ClientHandle, mode_id: str) -> None: ...

    async def extension(self, client: ClientHandle, method: str, params: dict[str, Any]) -> Any: ...

    def answers_here(self, method: str) -> bool:
        """Whether the synchronous hub method ``method`` is answered by this node (else:
        ``forward_method``)."""
        ...

    async def forward_method(
        self, client: ClientHandle, method: str, params: dict[str, Any]
    ) -> Any:
        """``method`` for ``client``, answered by the node that owns the session."""
        ...


__all__ = ["Replay", "RunningTurn", "SessionOps", "TurnsView"]
