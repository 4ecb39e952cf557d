"""Whether a client's role and credential let it make a request, or answer one of the hub's.

The connection asks before a handler runs (``refusal``) and when an answer matches no request
of the hub's still in play (``answer_refusal``); the role a method needs is
``hub.sessions.arbiter.METHOD_ROLES``, the credential's reach ``hub.access.principal``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hub.access.principal import Principal
from hub.protocol.errors import (
    STALE_ANSWER,
    RpcError,
    forbidden,
    forbidden_scope,
    hub_error,
    resource_not_found,
)
from hub.sessions import arbiter
from hub.settings import Role, role_rank

__all__ = ["answer_refusal", "refusal"]


def refusal(access: Principal, method: str, params: dict[str, Any], have: Role) -> RpcError | None:
    """The refusal of ``method`` by a client with the credential ``access`` and the role
    ``have`` for it: ``-32002`` when it names a session outside the credential's ``sessions``
    (as if it did not exist), ``-32040`` when ``have`` is below the role
    ``hub.sessions.arbiter.METHOD_ROLES`` names or the credential's scope is too narrow for it
    (``arbiter.scope_refusal``); else ``None``."""
    session_id = params.get("sessionId")
    if isinstance(session_id, str) and not access.may_see(session_id):
        return resource_not_found(f"no session {session_id!r}")
    lacking = arbiter.scope_refusal(
        method, whole_hub=access.whole_hub, link=access.link_id is not None
    )
    if lacking is not None:
        return forbidden_scope(method, *lacking)
    needed = arbiter.required_role(method)
    return None if arbiter.allows(have, needed) else forbidden(needed, have, method)


def answer_refusal(roles: Iterable[Role], default: Role, request_id: Any) -> RpcError:
    """Why an answer that matches no request of the hub's still in play did not count: the
    client's highest role (``roles`` in its sessions, else ``default``) is below approver, or
    the request was already resolved or withdrawn."""
    held = list(roles)
    have = max(held, key=role_rank) if held else default
    if not arbiter.allows(have, arbiter.ANSWER_ROLE):
        return forbidden(arbiter.ANSWER_ROLE, have, "answering a request of the hub")
    return hub_error(
        STALE_ANSWER, "The request was already resolved or withdrawn", {"id": request_id}
    )
