"""Share links: ``_hub/share/create``, ``list`` and ``revoke`` (``hub.access.links``)."""

from __future__ import annotations

import re
import time
from typing import Any

import anyio

from hub.access.gate import Gate
from hub.access.principal import Refusal
from hub.access.qr import qr_svg
from hub.protocol.errors import (
    STORE_UNAVAILABLE,
    forbidden,
    forbidden_scope,
    hub_error,
    invalid_params,
    resource_not_found,
)
from hub.server.methods.caller import AsyncHandler, Caller, Result, SyncHandler
from hub.server.methods.params import string
from hub.sessions import arbiter
from hub.sessions.errors import SessionFailure
from hub.settings import ROLES

MAX_LINK_SECONDS = 30 * 86400.0
LINK_ID = re.compile(r"l-[0-9a-f]{16}")
"""The form of the ids ``Gate.create_link`` mints."""
STORE_WAIT = 10.0
"""Seconds ``_hub/share/create`` and ``_hub/share/revoke`` wait for the store."""


def _gate(conn: Caller) -> Gate:
    gate = conn.gate
    if gate is None or not gate.enabled:
        raise SessionFailure(invalid_params('share links need credentials (auth = "token")'))
    return gate


async def _stored(gate: Gate, what: str) -> None:
    """Wait until the link store holds every change made so far (``STORE_WAIT`` at most)."""
    try:
        with anyio.fail_after(STORE_WAIT):
            await gate.links.flush()
    except TimeoutError:
        raise SessionFailure(
            hub_error(STORE_UNAVAILABLE, f"the store did not take {what} in time; try again")
        ) from None


async def _hub_share_create(conn: Caller, params: dict[str, Any]) -> Result:
    """``{sessionId, role, expiresIn, maxUses?, label?}`` -> ``{linkId, url, token,
    expiresAt, ...}``: a link to one session with at most the caller's role there, answered
    once the link is stored (every node then admits it). A credential for some sessions only
    hands on no more time than it has: the link expires with it at the latest."""
    gate = _gate(conn)
    session = conn.registry.get(params.get("sessionId"))
    role = params.get("role", "viewer")
    if role not in ROLES:
        raise SessionFailure(invalid_params(f"role must be one of {', '.join(ROLES)}"))
    have = conn.role_for(params)
    if not arbiter.allows(have, role):
        raise SessionFailure(forbidden(role, have, "sharing a link with this role"))
    expires_in = params.get("expiresIn")
    if (
        not isinstance(expires_in, int | float)
        or isinstance(expires_in, bool)
        or not 0 < expires_in <= MAX_LINK_SECONDS
    ):
        raise SessionFailure(invalid_params("expiresIn must be seconds, from 1 to 30 days"))
    max_uses = params.get("maxUses")
    if max_uses is not None and (
        not isinstance(max_uses, int) or isinstance(max_uses, bool) or max_uses < 1
    ):
        raise SessionFailure(invalid_params("maxUses must be a positive integer"))
    label = params.get("label", "")
    if not isinstance(label, str) or len(label) > 80:
        raise SessionFailure(invalid_params("label must be a string of at most 80 characters"))
    ttl = float(expires_in)
    if not conn.access.whole_hub and conn.access.expires_at is not None:
        ttl = min(ttl, conn.access.expires_at - time.time())
        if ttl <= 0:
            raise SessionFailure(
                forbidden_scope("_hub/share/create", "expired", "a credential that has not expired")
            )
    link, token = gate.create_link(
        session_id=session.id,
        role=role,
        ttl=ttl,
        created_by=conn.principal,
        label=label.strip(),
        max_uses=max_uses,
    )
    await _stored(gate, "the new link")
    base = conn.settings.public_url.rstrip("/") or conn.base_url or ""
    url = f"{base}/s/{session.id}#token={token}"
    return {**link.public(), "token": token, "url": url, "qrSvg": qr_svg(url)}


def _hub_share_list(conn: Caller, params: dict[str, Any]) -> Result:
    gate = _gate(conn)
    session = conn.registry.get(params.get("sessionId"))
    return {"links": [link.public() for link in gate.links.for_session(session.id)]}


async def _hub_share_revoke(conn: Caller, params: dict[str, Any]) -> Result:
    """Revoke a link: every connection it admitted here closes with 1008 at once, on other
    nodes as soon as they read the change; answered once the revocation is stored."""
    gate = _gate(conn)
    link_id = string(params, "linkId", "linkId is required")
    link = gate.links.get(link_id)
    if link is None and LINK_ID.fullmatch(link_id):
        # Minted on another node a moment ago: not in this node's copy yet.
        try:
            link = await gate.links.fetch(link_id)
        except Refusal as refusal:
            raise SessionFailure(hub_error(STORE_UNAVAILABLE, refusal.message)) from None
    if link is None or not conn.access.may_see(link.session_id):
        raise SessionFailure(resource_not_found(f"no share link {link_id!r}"))
    # The caller's role on the link's session, whether or not this node serves the session
    # (closed, deleted, or owned by another node): the role it attached with, else its
    # credential's.
    session_role = conn.role_for({"sessionId": link.session_id})
    if not arbiter.allows(session_role, "owner"):
        raise SessionFailure(forbidden("owner", session_role, "_hub/share/revoke"))
    try:
        with anyio.fail_after(STORE_WAIT):
            closed = await gate.revoke_link(link_id, by=conn.principal)
    except TimeoutError:
        raise SessionFailure(
            hub_error(
                STORE_UNAVAILABLE,
                "the link is revoked on this node, but the store did not take the revocation "
                "in time (it is retried); try again",
            )
        ) from None
    return {"linkId": link_id, "revoked": True, "closed": closed}


SYNC: dict[str, SyncHandler] = {"_hub/share/list": _hub_share_list}

ASYNC: dict[str, AsyncHandler] = {
    "_hub/share/create": _hub_share_create,
    "_hub/share/revoke": _hub_share_revoke,
}
