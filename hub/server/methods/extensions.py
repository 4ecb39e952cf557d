"""The method table's last resort: methods the hub has no handler for go to an agent.

ACP's extension surface (``_vendor/...`` methods, session methods the hub does not know such
as ``session/set_model``) passes through the hub, which sits between clients and agents as a
proxy (``hub.sessions.extensions``, ``docs/protocol.md``):

* with a ``sessionId`` naming a session the connection is attached to, the session's agent
  answers, for a client with the method's role there (``extension_roles``, default
  ``driver``); the session may be owned by another node, whose agent then answers;
* without a ``sessionId``, only a method named in ``[hub] extension_roles`` is passed on, to
  the default agent, for a credential whose role is at least the configured one and that
  covers every session and that agent (the agent process serves everyone's sessions);
  anything else is ``-32601``, as before.
"""

from __future__ import annotations

from typing import Any, cast

from hub.protocol.errors import FORBIDDEN, forbidden, hub_error, method_not_found
from hub.server.methods.caller import AsyncHandler, Caller, Result
from hub.sessions import arbiter
from hub.sessions.errors import SessionFailure
from hub.sessions.extensions import extension_role, is_extension_method

__all__ = ["extension_handler"]


def extension_handler(method: str) -> AsyncHandler | None:
    """The handler of ``method`` when the hub has none of its own, or ``None`` (``-32601``)."""
    if not is_extension_method(method):
        return None

    async def handler(conn: Caller, params: dict[str, Any]) -> Result:
        session_id = params.get("sessionId")
        if session_id is None:
            return cast("Result", await _without_session(conn, method, params))
        session = conn.attached_session(session_id)
        return cast("Result", await session.extension(conn, method, params))

    return handler


async def _without_session(conn: Caller, method: str, params: dict[str, Any]) -> Any:
    configured = conn.registry.settings.extension_roles
    supervisor = conn.registry.supervisor
    name = supervisor.default_name
    if method not in configured or name is None:
        raise SessionFailure(method_not_found(method))
    needed = extension_role(method, configured)
    if not arbiter.allows(conn.role, needed):
        raise SessionFailure(forbidden(needed, conn.role, method))
    if conn.access.sessions is not None or not conn.access.may_start(name):
        # The agent process serves every session: a credential for some of them only does
        # not speak to it on its own.
        message = (
            f"Forbidden: {method} without a sessionId needs a credential for every session "
            f"and for agent '{name}'"
        )
        raise SessionFailure(hub_error(FORBIDDEN, message, {"action": method, "agent": name}))
    return await supervisor.get(name).extension(None, method, params)
