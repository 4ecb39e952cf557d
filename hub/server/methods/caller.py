"""What a method handler may use of the client that called it: ``Caller``.

The handlers never see the connection class (``hub.server.connection.ClientConnection``
satisfies ``Caller`` structurally), so the method table and the connection that dispatches
to it do not import each other. ``Result``, ``SyncHandler`` and ``AsyncHandler`` are the
handler types, and ``failure_answer`` the error that answers a handler's exception.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from hub.access.gate import Gate
from hub.access.principal import Principal
from hub.protocol.errors import (
    UNSUPPORTED,
    PeerError,
    RpcError,
    RpcFailure,
    TranslationError,
    hub_error,
    internal_error,
    invalid_params,
)
from hub.sessions.client import ClientHandle
from hub.sessions.ops import Replay
from hub.sessions.ops import SessionOps as Session
from hub.sessions.registry import SessionRegistry
from hub.settings import Role, Settings

__all__ = ["AsyncHandler", "Caller", "Result", "SyncHandler", "failure_answer"]

log = logging.getLogger("hub.server")


class Caller(ClientHandle, Protocol):
    """The client of one request, as the handlers see it: its credential, the hub's parts it
    reaches, and the calls that change what it is attached to."""

    # Structural: a Protocol's read-only properties, declared one by one.
    @property
    def registry(self) -> SessionRegistry: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def access(self) -> Principal:
        """The credential's principal: role ceiling, sessions and agents in reach."""
        ...

    @property
    def gate(self) -> Gate | None:
        """The hub's access gate (share links), ``None`` in tests of other layers."""
        ...

    @property
    def base_url(self) -> str | None:
        """``http(s)://host`` as this client reached the hub."""
        ...

    @property
    def connection_id(self) -> str: ...

    @property
    def granted_role(self) -> Role: ...

    @property
    def closed(self) -> bool: ...

    # Structural: the signature Connection implements (hub.server.connection).
    def identify(
        self,
        *,
        version: int,
        name: str,
        role: Role,
        hub_events: bool,
        batches: bool,
        program: str = "",
    ) -> None:
        """``initialize`` succeeded: fix the client's version, name and role."""
        ...

    # Structural: SessionOps.attach's keywords, which the connection passes on (hub.sessions.ops).
    def attach(
        self,
        session: Session,
        *,
        replay: Replay,
        after: tuple[int, int] | None = None,
        role: Role | None = None,
        via_attach: bool = False,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """Attach the client to ``session``; the part of the answer every attach shares."""
        ...

    def attached_session(self, session_id: Any) -> Session:
        """The session ``session_id`` the client is attached to (``SessionFailure`` if not)."""
        ...

    def detach_session(self, session: Session) -> None: ...

    def forget_session(self, session: Session) -> None: ...

    def role_for(self, params: dict[str, Any]) -> Role:
        """The caller's role in the session ``params`` names, else the connection's."""
        ...


Result = dict[str, Any] | None
SyncHandler = Callable[[Caller, dict[str, Any]], Result]
AsyncHandler = Callable[[Caller, dict[str, Any]], Awaitable[Result]]


def failure_answer(exc: Exception, mistake: Callable[..., object], connection_id: str) -> RpcError:
    """The error answering a request whose handler raised ``exc`` (call it from the ``except``
    block). The peer's faults and refusals get one ``mistake`` line; anything else is our
    bug: ``-32603``, logged with its traceback (see ``hub.protocol.errors``)."""
    if isinstance(exc, RpcFailure):
        return exc.error
    if isinstance(exc, PeerError):
        mistake("invalid params: %s", exc)
        return invalid_params(str(exc))
    if isinstance(exc, TranslationError):
        # Well-formed, but the other side's protocol version cannot express it.
        mistake("unsupported: %s", exc)
        return hub_error(UNSUPPORTED, f"Unsupported: {exc}")
    log.exception("! %s: internal error", connection_id)  # a bug of ours
    return internal_error()
