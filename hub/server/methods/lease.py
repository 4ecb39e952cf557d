"""The prompt lease of a session: ``_hub/lease/request``, ``release`` and ``grant``."""

from __future__ import annotations

from typing import Any

from hub.server.methods.caller import Caller, Result, SyncHandler


def _hub_lease(action: str) -> SyncHandler:
    def handler(conn: Caller, params: dict[str, Any]) -> Result:
        session = conn.attached_session(params.get("sessionId"))
        target = params.get("clientId")
        return session.lease_action(conn, action, target if isinstance(target, str) else None)

    return handler


SYNC: dict[str, SyncHandler] = {
    "_hub/lease/request": _hub_lease("request"),
    "_hub/lease/release": _hub_lease("release"),
    "_hub/lease/grant": _hub_lease("grant"),
}
