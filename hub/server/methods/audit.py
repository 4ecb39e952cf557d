"""The audit trail, read page by page: ``_hub/audit/list``."""

from __future__ import annotations

from typing import Any

from hub.protocol.errors import invalid_params
from hub.server.methods.caller import AsyncHandler, Caller, Result
from hub.sessions.errors import SessionFailure
from hub.store.audit import StoredAudit

AUDIT_PAGE = 100
AUDIT_PAGE_MAX = 500


async def _hub_audit_list(conn: Caller, params: dict[str, Any]) -> Result:
    """``{before?, limit?}`` -> ``{entries, next}``: the audit trail as the store keeps it,
    newest first, for an owner of the whole hub only (a credential for every session: not a
    share link, not a token scoped to some sessions; ``arbiter.HUB_METHODS``)."""
    gate = conn.gate
    audit = gate.audit if gate is not None and isinstance(gate.audit, StoredAudit) else None
    before = params.get("before")
    if before is not None and (not isinstance(before, str) or not 0 < len(before) <= 64):
        raise SessionFailure(invalid_params("before must be the next cursor of an earlier page"))
    limit = params.get("limit", AUDIT_PAGE)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= AUDIT_PAGE_MAX:
        raise SessionFailure(invalid_params(f"limit must be from 1 to {AUDIT_PAGE_MAX}"))
    if audit is None:  # audit_log = "off"
        return {"entries": [], "next": None}
    try:
        page = await audit.read(before, limit)
    except ValueError:
        raise SessionFailure(
            invalid_params("before must be the next cursor of an earlier page")
        ) from None
    entries = [{**entry, "id": entry_id} for entry_id, entry in page]
    return {"entries": entries, "next": page[-1][0] if len(page) == limit else None}


ASYNC: dict[str, AsyncHandler] = {"_hub/audit/list": _hub_audit_list}
