"""compact(): the fewest updates that rebuild a folded state."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.protocol.compact import compact
from hub.protocol.state import SessionState
from tests.protocol import strategies as sts

FIXTURES = Path(__file__).parent / "fixtures"
V2: dict[str, dict[str, Any]] = json.loads((FIXTURES / "v2_updates.json").read_text())
HUB: dict[str, dict[str, Any]] = json.loads((FIXTURES / "hub_updates.json").read_text())


def fold(updates: list[dict[str, Any]]) -> SessionState:
    return SessionState().apply_all(updates)


def replayed(state: SessionState) -> SessionState:
    return fold(compact(state))


# --- the invariant --------------------------------------------------------------------------


STREAM_EXAMPLES = 100
"""Examples of the three properties over whole update streams, in every profile: each example
folds, compacts and checks a stream of up to a few hundred updates, and at the CI profile's 200
they were the three longest tests of the suite (38-55 s each, under coverage), the whole
protocol run waiting on them."""


@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(max_examples=STREAM_EXAMPLES)
@given(stream=sts.update_streams(min_size=10))
def test_fold_of_compaction_equals_fold_of_stream(stream: list[dict[str, Any]]) -> None:
    live = fold(stream)
    assert replayed(live).snapshot() == live.snapshot()


@settings(max_examples=50)
@given(stream=sts.update_streams(max_size=200, single=sts.v2_updates))
def test_long_v2_streams_compact_exactly(stream: list[dict[str, Any]]) -> None:
    live = fold(stream)
    assert replayed(live).snapshot() == live.snapshot()


@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(max_examples=STREAM_EXAMPLES)
@given(stream=sts.update_streams(min_size=5), more=sts.update_streams(max_size=10))
def test_a_replayed_client_keeps_up_with_the_live_stream(
    stream: list[dict[str, Any]], more: list[dict[str, Any]]
) -> None:
    """A late joiner that replays and then folds the live tail ends equal to a live watcher."""
    live = fold(stream)
    late = replayed(live)
    live.apply_all(more)
    late.apply_all(more)
    assert late.snapshot() == live.snapshot()


@given(stream=sts.update_streams())
def test_compaction_is_a_fixed_point(stream: list[dict[str, Any]]) -> None:
    once = compact(fold(stream))
    assert compact(fold(once)) == once


@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(max_examples=STREAM_EXAMPLES)
@given(stream=sts.update_streams(single=sts.v2_updates))
def test_compacted_v2_updates_are_schema_valid(stream: list[dict[str, Any]]) -> None:
    validator = sts.session_update_validator()
    for update in compact(fold(stream)):
        errors = [e.message for e in validator.iter_errors(update)]
        assert errors == [], update


@settings(max_examples=50)
@given(
    update=st.one_of(
        sts.v2_updates(), sts.update_streams(max_size=1).filter(bool).map(lambda s: s[0])
    )
)
def test_strategies_draw_schema_valid_v2_updates(update: dict[str, Any]) -> None:
    if update["sessionUpdate"].startswith("_hub_"):
        return
    assert sts.session_update_validator().is_valid(update), update


# --- shape of the compaction ----------------------------------------------------------------


def test_empty_state_compacts_to_nothing() -> None:
    assert compact(SessionState()) == []


def test_order_of_a_full_compaction() -> None:
    state = fold([*V2.values(), *(u for k, u in HUB.items() if k != "_hub_reset")])
    state.apply(
        {"sessionUpdate": "_hub_prompt", "messageId": "gone", "clientId": "c9", "name": "x"}
    )
    kinds = [u["sessionUpdate"] for u in compact(state)]
    assert kinds == [
        "session_info_update",
        "config_option_update",
        "available_commands_update",
        "usage_update",
        "_hub_policy",
        "_hub_lease",
        "_hub_presence",
        "_hub_queue",
        "_hub_agent",
        "_hub_prompt",
        "user_message",
        "agent_message",
        "agent_thought",
        "tool_call_update",
        "_hub_prompt",
        "terminal_update",
        "plan_update",
        "_hub_permission",
        "_vendor_heartbeat",
        "state_update",
    ]


def test_messages_become_whole_message_upserts() -> None:
    chunks = [
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": t},
        }
        for t in ("Hel", "lo ", "world")
    ]
    assert compact(fold(chunks)) == [
        {
            "sessionUpdate": "agent_message",
            "messageId": "m",
            "content": [{"type": "text", "text": "Hello world"}],
        }
    ]


def test_prompt_attribution_precedes_its_user_message() -> None:
    state = fold(
        [
            {
                "sessionUpdate": "user_message",
                "messageId": "u1",
                "content": [{"type": "text", "text": "hi"}],
            },
            {"sessionUpdate": "_hub_prompt", "messageId": "u1", "clientId": "c1", "name": "alice"},
        ]
    )
    assert compact(state) == [
        {"sessionUpdate": "_hub_prompt", "messageId": "u1", "clientId": "c1", "name": "alice"},
        {
            "sessionUpdate": "user_message",
            "messageId": "u1",
            "content": [{"type": "text", "text": "hi"}],
        },
    ]


def test_terminal_becomes_one_snapshot() -> None:
    data = "€ \x1b[31mred\x1b[0m\n".encode()
    state = fold(
        [
            {"sessionUpdate": "terminal_update", "terminalId": "t", "command": "ls", "cwd": "/w"},
            *sts.terminal_chunks("t", data, [1, 2, 5, 7]),
            {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": {"exitCode": 0}},
        ]
    )
    assert compact(state) == [
        {
            "sessionUpdate": "terminal_update",
            "terminalId": "t",
            "command": "ls",
            "cwd": "/w",
            "exitStatus": {"exitCode": 0},
            "output": {"data": base64.b64encode(data).decode()},
        }
    ]


def test_tool_call_becomes_one_full_update() -> None:
    state = fold(
        [
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t",
                "title": "Run",
                "status": "pending",
            },
            {
                "sessionUpdate": "tool_call_content_chunk",
                "toolCallId": "t",
                "content": {"type": "terminal", "terminalId": "x"},
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t",
                "status": "completed",
                "rawOutput": {"ok": True},
            },
        ]
    )
    assert compact(state) == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t",
            "title": "Run",
            "status": "completed",
            "content": [{"type": "terminal", "terminalId": "x"}],
            "rawOutput": {"ok": True},
        }
    ]


def test_permission_record_is_replayed_in_its_final_form() -> None:
    resolved = {
        "sessionUpdate": "_hub_permission",
        "permissionId": "perm_1",
        "status": "resolved",
        "resolvedBy": {"clientId": "c1", "name": "alice"},
        "outcome": {"outcome": "selected", "optionId": "allow"},
    }
    (record,) = compact(fold([HUB["_hub_permission"], resolved]))
    assert record == {**HUB["_hub_permission"], **resolved}


def test_compaction_size_follows_the_state_not_the_history() -> None:
    stream: list[dict[str, Any]] = []
    for i in range(10_000):
        entity = i % 10
        if entity < 5:
            stream.append(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": f"m{entity}",
                    "content": {"type": "text", "text": f"{i} "},
                }
            )
        elif entity < 8:
            stream.append(
                {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": f"t{entity}",
                    "data": "eA==",
                }
            )
        else:
            stream.append(
                {
                    "sessionUpdate": "tool_call_content_chunk",
                    "toolCallId": "c",
                    "content": {"type": "terminal", "terminalId": "t5"},
                }
            )
    state = fold(stream)
    updates = compact(state)
    # Five messages, three terminals, one tool call.
    assert len(updates) == 9
    assert replayed(state).snapshot() == state.snapshot()
    # The text is carried whole: one block per message.
    first = updates[0]
    assert first["content"] == [
        {"type": "text", "text": "".join(f"{i} " for i in range(0, 10_000, 10))}
    ]
