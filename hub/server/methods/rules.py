"""A session's permission rules (``hub.sessions.rules``): ``_hub/rules/list``, ``add``,
``remove``."""

from __future__ import annotations

from typing import Any

from hub.server.methods.caller import Caller, Result, SyncHandler
from hub.sessions import rules


def _hub_rules_list(conn: Caller, params: dict[str, Any]) -> Result:
    session = conn.registry.get(params.get("sessionId"))
    return {"rules": rules.session_rules(session.state)}


def _hub_rules_add(conn: Caller, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    return rules.add(session, conn, params.get("match"), params.get("answer"))


def _hub_rules_remove(conn: Caller, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    return rules.remove(session, conn, params.get("ruleId"))


SYNC: dict[str, SyncHandler] = {
    "_hub/rules/list": _hub_rules_list,
    "_hub/rules/add": _hub_rules_add,
    "_hub/rules/remove": _hub_rules_remove,
}
