"""The arbitration rules without sockets: roles, permission eligibility, prompt actions, attach."""

from __future__ import annotations

from typing import Any

import pytest

from hub.protocol.errors import InvalidParams
from hub.server.methods import ASYNC_METHODS, SYNC_METHODS
from hub.sessions import arbiter
from hub.sessions.arbiter import HistoryPolicy
from hub.settings import ROLES, PermissionPolicy, PromptPolicy, Role

READ_ONLY = {
    "initialize",
    "session/list",
    "session/resume",
    "session/load",
    "session/attach",
    "session/detach",
    "_hub/subscribe_sessions",
    "_hub/unsubscribe_sessions",
    "_hub/export",
    "_hub/rules/list",
}


def test_every_method_of_the_connection_has_a_role() -> None:
    methods = set(SYNC_METHODS) | set(ASYNC_METHODS) | {"session/cancel"}
    assert set(arbiter.METHOD_ROLES) <= methods
    for method in methods:
        needed = arbiter.required_role(method)
        if method in READ_ONLY:
            assert needed == "viewer", method
        else:
            assert needed in ("driver", "owner"), method
    assert arbiter.required_role("session/prompt") == "driver"
    assert arbiter.required_role("session/cancel") == "driver"
    assert arbiter.required_role("_hub/set_policy") == "owner"
    assert arbiter.required_role("_hub/lease/grant") == "owner"
    assert arbiter.required_role("session/delete") == "owner"


@pytest.mark.parametrize("have", ROLES)
@pytest.mark.parametrize("needed", ROLES)
def test_roles_include_the_ones_before_them(have: Role, needed: Role) -> None:
    assert arbiter.allows(have, needed) is (ROLES.index(have) >= ROLES.index(needed))


def test_an_unknown_role_allows_nothing() -> None:
    assert not arbiter.allows("root", "viewer")
    assert not arbiter.allows("", "viewer")


def test_a_client_may_ask_for_less_never_for_more() -> None:
    assert arbiter.capped("viewer", "driver") == "viewer"
    assert arbiter.capped("owner", "driver") == "driver"
    assert arbiter.capped(None, "approver") == "approver"


@pytest.mark.parametrize(
    ("policy", "role", "holds", "expected"),
    [
        ("first", "viewer", False, False),
        ("first", "approver", False, True),
        ("first", "driver", False, True),
        ("first", "owner", False, True),
        ("owner", "driver", True, False),
        ("owner", "owner", False, True),
        ("lease", "approver", False, False),
        ("lease", "driver", False, False),
        ("lease", "driver", True, True),
        ("lease", "viewer", True, False),
        ("lease", "owner", False, True),
    ],
)
def test_who_may_answer_a_permission_request(
    policy: PermissionPolicy, role: Role, holds: bool, expected: bool
) -> None:
    assert arbiter.may_answer(policy, role, holds) is expected


@pytest.mark.parametrize(
    ("policy", "busy", "queued", "holds", "expected"),
    [
        ("queue", False, False, False, "start"),
        ("queue", True, False, False, "queue"),
        ("queue", False, True, False, "queue"),  # others wait: no overtaking
        ("reject", False, False, False, "start"),
        ("reject", True, False, False, "busy"),
        ("lease", False, False, False, "not_holder"),
        ("lease", True, False, False, "not_holder"),
        ("lease", False, False, True, "start"),
        ("lease", True, False, True, "busy"),
        ("lease", False, True, True, "start"),  # the lease holder does not queue
    ],
)
def test_what_a_prompt_does(
    policy: PromptPolicy, busy: bool, queued: bool, holds: bool, expected: str
) -> None:
    assert arbiter.prompt_action(policy, busy=busy, queued=queued, holds_lease=holds) == expected


def test_policy_names_are_checked() -> None:
    assert arbiter.check_prompt_policy("lease") == "lease"
    assert arbiter.check_permission_policy("owner") == "owner"
    with pytest.raises(InvalidParams):
        arbiter.check_prompt_policy("fifo")
    with pytest.raises(InvalidParams):
        arbiter.check_permission_policy("any")


def test_attach_roles_of_the_proposal_and_of_the_hub() -> None:
    assert arbiter.attach_role("observer") == "viewer"
    assert arbiter.attach_role("controller") == "driver"
    assert arbiter.attach_role("approver") == "approver"
    assert arbiter.attach_role(None) is None
    for bad in ("admin", 3, ""):
        with pytest.raises(InvalidParams):
            arbiter.attach_role(bad)


def test_history_policies() -> None:
    assert arbiter.history_policy(None) == HistoryPolicy("full")
    assert arbiter.history_policy("full") == HistoryPolicy("full")
    assert arbiter.history_policy("none") == HistoryPolicy("none")
    assert arbiter.history_policy("pending_only") == HistoryPolicy("pending_only")
    assert arbiter.history_policy({"type": "after", "messageId": "m-1"}) == HistoryPolicy(
        "after", "m-1"
    )
    assert arbiter.history_policy({"afterMessageId": "m-2"}) == HistoryPolicy("after", "m-2")
    for bad in ("all", {"type": "after"}, {"type": "before", "messageId": "m"}, 1):
        with pytest.raises(InvalidParams):
            arbiter.history_policy(bad)


def test_pending_only_keeps_what_waits_for_someone() -> None:
    updates: list[dict[str, Any]] = [
        {"sessionUpdate": "agent_message", "messageId": "m", "content": []},
        {"sessionUpdate": "_hub_permission", "permissionId": "p-1", "status": "resolved"},
        {"sessionUpdate": "_hub_permission", "permissionId": "p-2", "status": "pending"},
        {"sessionUpdate": "_hub_queue", "entries": []},
        {"sessionUpdate": "_hub_lease", "holder": None},
        {"sessionUpdate": "_hub_policy", "prompt": "queue", "permission": "first"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t"},
        {"sessionUpdate": "state_update", "state": "requires_action"},
    ]
    kept = arbiter.pending_only(updates)
    assert [u["sessionUpdate"] for u in kept] == [
        "_hub_permission",
        "_hub_queue",
        "_hub_lease",
        "_hub_policy",
        "state_update",
    ]
    assert kept[0]["permissionId"] == "p-2"
