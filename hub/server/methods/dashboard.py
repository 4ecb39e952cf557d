"""The dashboard's subscription to the hub's sessions (``hub.server.watch``)."""

from __future__ import annotations

from typing import Any

from hub.server import listing
from hub.server.methods.caller import Caller, Result, SyncHandler
from hub.server.watch import watch_of


def _hub_subscribe_sessions(conn: Caller, params: dict[str, Any]) -> Result:
    """The dashboard's one subscription: a page of cards now (``cursor``: the next page),
    ``_hub/sessions_changed`` notifications after (``hub.server.watch``)."""
    # A credential scoped to some sessions is told of those only.
    visible = None if conn.access.sessions is None else conn.access.may_see
    watch = watch_of(conn.registry)
    after = listing.after_cursor(params.get("cursor"))
    cards, more = watch.subscribe(conn, visible, after=after, limit=watch.page_size)
    result: dict[str, Any] = {"sessions": cards}
    if more:
        result["nextCursor"] = listing.cursor_after(cards[-1]["sessionId"])
    return result


def _hub_unsubscribe_sessions(conn: Caller, params: dict[str, Any]) -> Result:
    watch_of(conn.registry).unsubscribe(conn)
    return {}


SYNC: dict[str, SyncHandler] = {
    "_hub/subscribe_sessions": _hub_subscribe_sessions,
    "_hub/unsubscribe_sessions": _hub_unsubscribe_sessions,
}
