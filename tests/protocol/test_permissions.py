"""Permission requests and answers across versions."""

from __future__ import annotations

from typing import Any

import pytest

from hub.protocol.errors import InvalidParams
from hub.protocol.patch import git_patch
from hub.protocol.permissions import (
    PERMISSION_TITLE,
    permission_outcome_for_agent,
    permission_request_v1_to_v2,
    permission_request_v2_to_v1,
)
from tests.protocol.translation import (
    Json,
    Schema,
    text,
)

# ---------------------------------------------------------------------------------------
# Permission requests and answers


V1_PERMISSION = {
    "sessionId": "s",
    "toolCall": {
        "toolCallId": "c",
        "title": "Allow editing /p/a?",
        "kind": "edit",
        "status": None,
        "content": [{"type": "diff", "path": "/p/a", "newText": "x\n"}],
    },
    "options": [
        {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    ],
    "_meta": {"t": 1},
}


def test_permission_request_v1_to_v2(v1: Schema, v2: Schema) -> None:
    v1.check("RequestPermissionRequest", V1_PERMISSION)
    out = permission_request_v1_to_v2(V1_PERMISSION)
    v2.check("RequestPermissionRequest", out)
    assert out == {
        "sessionId": "s",
        "title": "Allow editing /p/a?",
        "subject": {
            "type": "tool_call",
            "toolCall": {
                "toolCallId": "c",
                "title": "Allow editing /p/a?",
                "kind": "edit",
                "content": [
                    {
                        "type": "diff",
                        "changes": [{"operation": "add", "path": "/p/a", "fileType": "text"}],
                        "patch": {"format": "git_patch", "text": git_patch("/p/a", None, "x\n")},
                    }
                ],
            },
        },
        "options": V1_PERMISSION["options"],
        "_meta": {"t": 1},
    }


def test_permission_request_v1_without_title_or_options() -> None:
    params = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "c"},
        "options": [{"optionId": "a", "name": "A", "kind": "allow_once"}],
    }
    assert permission_request_v1_to_v2(params)["title"] == PERMISSION_TITLE
    with pytest.raises(InvalidParams):
        permission_request_v1_to_v2({**params, "options": []})
    with pytest.raises(InvalidParams):
        permission_request_v1_to_v2({**params, "options": [{"optionId": "a", "name": "A"}]})
    with pytest.raises(InvalidParams):
        permission_request_v1_to_v2({"sessionId": "s", "options": params["options"]})


OPTIONS_V2 = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "sess", "name": "Allow this session", "kind": "_acme_allow_session"},
]


def test_permission_request_v2_tool_call_subject(v1: Schema, v2: Schema) -> None:
    params = {
        "sessionId": "s",
        "title": "Run the tests?",
        "description": "They take a while",
        "subject": {
            "type": "tool_call",
            "toolCall": {
                "toolCallId": "c",
                "status": "cancelled",
                "content": [{"type": "terminal", "terminalId": "t1"}],
                "rawInput": None,
            },
        },
        "options": OPTIONS_V2,
    }
    v2.check("RequestPermissionRequest", params)
    out = permission_request_v2_to_v1(params)
    v1.check("RequestPermissionRequest", out)
    assert out == {
        "sessionId": "s",
        "toolCall": {
            "toolCallId": "c",
            "title": "Run the tests?",
            "status": "failed",
            "content": [
                {
                    "type": "content",
                    "content": text("[terminal t1]"),
                    "_meta": {"acp-hub": {"terminalId": "t1"}},
                }
            ],
            "_meta": {"acp-hub": {"status": "cancelled"}},
        },
        # The option of a kind v1 lacks is left out: a v1 client would label it by a kind
        # that does not say what it does.
        "options": [OPTIONS_V2[0]],
        "_meta": {"acp-hub": {"title": "Run the tests?", "description": "They take a while"}},
    }


def test_permission_request_v2_tool_call_subject_keeps_its_own_title() -> None:
    out = permission_request_v2_to_v1(
        {
            "sessionId": "s",
            "title": "Question?",
            "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c", "title": "Edit a"}},
            "options": OPTIONS_V2[:1],
            "_meta": {"mine": 1},
        }
    )
    assert out["toolCall"] == {"toolCallId": "c", "title": "Edit a"}
    assert out["_meta"] == {"mine": 1, "acp-hub": {"title": "Question?"}}


def test_permission_request_v2_command_subject(v1: Schema, v2: Schema) -> None:
    params = {
        "sessionId": "s",
        "title": "Run rm?",
        "description": "Deletes build output",
        "subject": {"type": "command", "command": "rm -rf build", "cwd": "/p", "toolCallId": "c9"},
        "options": OPTIONS_V2[:1],
    }
    v2.check("RequestPermissionRequest", params)
    out = permission_request_v2_to_v1(params)
    v1.check("RequestPermissionRequest", out)
    # an existing tool call is not given the description as content (it would replace)
    assert out["toolCall"] == {
        "toolCallId": "c9",
        "title": "Run rm?",
        "kind": "execute",
        "rawInput": {"command": "rm -rf build", "cwd": "/p"},
    }
    fresh = permission_request_v2_to_v1(
        {**params, "subject": {"type": "command", "command": "ls", "cwd": "/p"}}
    )
    assert fresh["toolCall"]["toolCallId"].startswith("hub-permission-")
    assert fresh["toolCall"]["content"] == [
        {"type": "content", "content": text("Deletes build output")}
    ]


def test_permission_request_v2_without_or_with_unknown_subject(v1: Schema) -> None:
    plain = permission_request_v2_to_v1(
        {"sessionId": "s", "title": "Continue?", "options": OPTIONS_V2[:1]}
    )
    v1.check("RequestPermissionRequest", plain)
    assert plain["toolCall"]["title"] == "Continue?"
    assert "content" not in plain["toolCall"]
    subject = {"type": "_acme_budget", "dollars": 5}
    odd = permission_request_v2_to_v1(
        {"sessionId": "s", "title": "Spend?", "subject": subject, "options": OPTIONS_V2[:1]}
    )
    v1.check("RequestPermissionRequest", odd)
    assert odd["_meta"]["acp-hub"]["subject"] == subject
    a = permission_request_v2_to_v1({"sessionId": "s", "title": "A", "options": OPTIONS_V2[:1]})
    assert a["toolCall"]["toolCallId"] != plain["toolCall"]["toolCallId"]


def test_malformed_v2_permission_requests_are_rejected() -> None:
    good = {"sessionId": "s", "title": "T", "options": OPTIONS_V2[:1]}
    for bad in (
        {**good, "title": None},
        {**good, "options": [{"optionId": "a"}]},
        {**good, "subject": {"type": "command", "command": "ls"}},
        {**good, "subject": {"type": "tool_call"}},
        {**good, "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c", "content": {}}}},
        {**good, "subject": "x"},
    ):
        with pytest.raises(InvalidParams):
            permission_request_v2_to_v1(bad)


OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    "not an option",
]


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        ({"outcome": "selected", "optionId": "yes"}, {"outcome": "selected", "optionId": "yes"}),
        (
            {"outcome": "selected", "optionId": "no", "_meta": {"k": 1}},
            {"outcome": "selected", "optionId": "no", "_meta": {"k": 1}},
        ),
        ({"outcome": "cancelled"}, {"outcome": "cancelled"}),
    ],
)
def test_valid_permission_outcomes(outcome: Any, expected: Json, v1: Schema) -> None:
    out = permission_outcome_for_agent(outcome, OPTIONS)
    assert out == expected
    v1.check("RequestPermissionOutcome", out)


@pytest.mark.parametrize(
    "outcome",
    [
        {"outcome": "selected", "optionId": "maybe"},
        {"outcome": "selected"},
        {"outcome": "selected", "optionId": 1},
        {"outcome": "_acme_allow_all"},
        {"outcome": "approved", "optionId": "yes"},
        {"optionId": "yes"},
        "selected",
        None,
    ],
)
def test_unknown_or_malformed_permission_outcomes_never_approve(outcome: Any) -> None:
    with pytest.raises(InvalidParams):
        permission_outcome_for_agent(outcome, OPTIONS)


def test_an_answer_against_malformed_options_is_refused_not_a_crash() -> None:
    options: list[Any] = [{"optionId": ["allow"]}, {"optionId": {"x": 1}}, "junk"]
    with pytest.raises(InvalidParams):
        permission_outcome_for_agent({"outcome": "selected", "optionId": "allow"}, options)
