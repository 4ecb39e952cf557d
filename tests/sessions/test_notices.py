"""Which session updates are notices (``hub.sessions.notices.notice_of``), without a hub."""

from __future__ import annotations

from hub.sessions.notices import MAX_TEXT, NOTICE_VARIANTS, notice_of


def test_a_new_permission_request_is_waiting_and_later_records_are_not() -> None:
    request = {
        "title": "Allow: Edit main.py?",
        "subject": {"type": "tool_call", "toolCall": {"toolCallId": "t1", "kind": "edit"}},
        "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}],
    }
    update = {"sessionUpdate": "_hub_permission", "permissionId": "perm-1", "status": "pending"}
    assert notice_of({**update, "request": request}) == (
        "permission_waiting",
        {
            "permissionId": "perm-1",
            "title": "Allow: Edit main.py?",
            "kind": "edit",
            "options": ["Allow"],
        },
    )
    assert notice_of({**update, "approvals": [], "needed": 2}) is None  # consensus progress
    assert notice_of({**update, "status": "resolved", "request": request}) is None


def test_turn_ends_agent_exits_and_lost_sessions() -> None:
    idle = {"sessionUpdate": "state_update", "state": "idle"}
    assert notice_of({**idle, "stopReason": "end_turn"}) == (
        "turn_ended",
        {"stopReason": "end_turn"},
    )
    assert notice_of(idle) is None  # no turn ended
    failed = {**idle, "_meta": {"acp-hub": {"error": {"code": -32042, "message": "gone"}}}}
    assert notice_of(failed) == ("turn_ended", {"stopReason": None, "error": "gone"})
    assert notice_of({"sessionUpdate": "state_update", "state": "running"}) is None
    agent = {"sessionUpdate": "_hub_agent", "agent": "a"}
    assert notice_of({**agent, "status": "exited", "message": "x" * 500}) == (
        "agent_exited",
        {"message": "x" * (MAX_TEXT - 1) + "\u2026"},
    )
    assert notice_of({**agent, "status": "lost"}) == ("session_lost", {"message": ""})
    assert notice_of({**agent, "status": "started"}) is None


def test_only_the_listed_variants_can_be_notices() -> None:
    assert notice_of({"sessionUpdate": "agent_message_chunk"}) is None
    assert {"_hub_permission", "state_update", "_hub_agent"} == NOTICE_VARIANTS
