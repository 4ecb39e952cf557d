"""A session's arbitration: its policies (``_hub/set_policy``) and its prompt queue
(``_hub/queue/withdraw``); docs/arbitration.md."""

from __future__ import annotations

from typing import Any

from hub.server.methods.caller import Caller, Result, SyncHandler
from hub.server.methods.params import string


def _hub_queue_withdraw(conn: Caller, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    session.withdraw_prompt(conn, string(params, "queueId", "queueId is required"))
    return {}


def _hub_set_policy(conn: Caller, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    return session.set_policy(
        conn, params.get("prompt"), params.get("permission"), params.get("quorum")
    )


SYNC: dict[str, SyncHandler] = {
    "_hub/queue/withdraw": _hub_queue_withdraw,
    "_hub/set_policy": _hub_set_policy,
}
