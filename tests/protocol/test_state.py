"""SessionState: the fold of v2 session updates and the hub's ``_hub_*`` variants."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.protocol.checks import check
from hub.protocol.compact import compact
from hub.protocol.errors import InvalidParams
from hub.protocol.state import SessionState
from tests.protocol import strategies as sts

FIXTURES = Path(__file__).parent / "fixtures"
V2: dict[str, dict[str, Any]] = json.loads((FIXTURES / "v2_updates.json").read_text())
HUB: dict[str, dict[str, Any]] = json.loads((FIXTURES / "hub_updates.json").read_text())


def fold(*updates: dict[str, Any]) -> SessionState:
    return SessionState().apply_all(updates)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# --- golden fixtures against the schema ------------------------------------------------------


def test_golden_fixtures_are_valid_v2_and_cover_every_named_variant() -> None:
    validator = sts.session_update_validator()
    for name, update in V2.items():
        errors = [e.message for e in validator.iter_errors(update)]
        assert errors == [], name
    named = {
        branch["properties"]["sessionUpdate"]["const"]
        for branch in sts.v2_schema()["$defs"]["SessionUpdate"]["anyOf"]
        if "const" in branch["properties"]["sessionUpdate"]
    }
    assert len(named) == 16
    assert named <= set(V2), sorted(named - set(V2))
    # The validator is not vacuous: a chunk without its content fails.
    assert not validator.is_valid({"sessionUpdate": "agent_message_chunk", "messageId": "m"})


def test_every_golden_fixture_folds() -> None:
    state = fold(*V2.values(), *(u for k, u in HUB.items() if k != "_hub_reset"))
    snap = state.snapshot()
    assert [e["id"] for e in snap["timeline"]] == [
        "msg_user_1",
        "msg_agent_1",
        "msg_thought_1",
        "call_001",
    ]
    assert set(snap["hub"]) == {
        "_hub_presence",
        "_hub_queue",
        "_hub_agent",
        "_hub_lease",
        "_hub_policy",
    }
    assert state.pending_permissions.keys() == {"perm_1"}


# --- messages -------------------------------------------------------------------------------


def test_message_chunks_append_and_merge_plain_text() -> None:
    state = fold(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": "Hel"},
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": "lo"},
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": "!"},
        },
    )
    assert state.message("m") == {
        "kind": "agent_message",
        "content": [
            {"type": "text", "text": "Hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "!"},
        ],
    }


def test_text_with_annotations_or_meta_is_not_merged() -> None:
    annotated = {"type": "text", "text": "b", "annotations": {"priority": 0.5}}
    state = fold(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": "a"},
        },
        {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": annotated},
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": "c"},
        },
    )
    message = state.message("m")
    assert message is not None
    assert message["content"] == [
        {"type": "text", "text": "a"},
        annotated,
        {"type": "text", "text": "c"},
    ]


def test_many_text_chunks_fold_into_one_block() -> None:
    state = SessionState()
    for i in range(1000):
        state.apply(
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": "m",
                "content": {"type": "text", "text": str(i % 10)},
            }
        )
    message = state.message("m")
    assert message is not None
    assert message["content"] == [{"type": "text", "text": "0123456789" * 100}]


# Another variant's fold: alike in shape, each test spells out its updates.
def test_message_update_replaces_clears_and_patches() -> None:
    """The RFD examples: content replaces chunks, chunks append after, omitted is unchanged."""
    state = fold(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m1",
            "content": {"type": "text", "text": "A"},
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m1",
            "content": {"type": "text", "text": "B"},
        },
        {
            "sessionUpdate": "agent_message",
            "messageId": "m1",
            "content": [{"type": "text", "text": "C"}],
        },
    )
    assert state.snapshot()["timeline"][0]["content"] == [{"type": "text", "text": "C"}]
    state.apply(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m1",
            "content": {"type": "text", "text": "D"},
        }
    )
    state.apply(
        {"sessionUpdate": "agent_message", "messageId": "m1", "_meta": {"source": "replay"}}
    )
    assert state.message("m1") == {
        "kind": "agent_message",
        "content": [{"type": "text", "text": "CD"}],
        "_meta": {"source": "replay"},
    }
    state.apply({"sessionUpdate": "agent_message", "messageId": "m1", "content": [], "_meta": None})
    assert state.message("m1") == {"kind": "agent_message", "content": []}
    state.apply(
        {
            "sessionUpdate": "agent_message",
            "messageId": "m1",
            "content": [{"type": "text", "text": "E"}],
        }
    )
    state.apply({"sessionUpdate": "agent_message", "messageId": "m1", "content": None})
    assert state.message("m1") == {"kind": "agent_message", "content": []}


def test_golden_message_variants() -> None:
    state = fold(V2["user_message_chunk"], V2["user_message"])
    assert state.message("msg_user_1") == {
        "kind": "user_message",
        "content": V2["user_message"]["content"],
        "_meta": {"source": "prompt"},
    }
    state = fold(V2["agent_message_chunk"], V2["agent_message"])
    assert state.message("msg_agent_1") == {
        "kind": "agent_message",
        "content": V2["agent_message"]["content"],
    }
    state = fold(V2["agent_thought_chunk"])
    # The chunk's `_meta` is scoped to the chunk: the message gets no `_meta`.
    assert state.message("msg_thought_1") == {
        "kind": "agent_thought",
        "content": [V2["agent_thought_chunk"]["content"]],
    }
    state.apply(V2["agent_thought"])
    assert state.message("msg_thought_1") == {"kind": "agent_thought", "content": []}
    assert state.message("nope") is None


def test_timeline_keeps_first_appearance_order() -> None:
    state = fold(
        {"sessionUpdate": "user_message", "messageId": "u", "content": []},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t", "title": "x"},
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "a",
            "content": {"type": "text", "text": "x"},
        },
        {
            "sessionUpdate": "user_message",
            "messageId": "u",
            "content": [{"type": "text", "text": "y"}],
        },
        {"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "completed"},
    )
    assert [(e["type"], e["id"]) for e in state.snapshot()["timeline"]] == [
        ("message", "u"),
        ("toolCall", "t"),
        ("message", "a"),
    ]
    assert state.message_ids == ["u", "a"]
    assert state.tool_call_ids == ["t"]


# --- tool calls -----------------------------------------------------------------------------


def test_tool_call_update_patch_semantics() -> None:
    state = fold(V2["tool_call_update"])
    expected = {
        k: v for k, v in V2["tool_call_update"].items() if k not in ("sessionUpdate", "toolCallId")
    }
    assert state.tool_call("call_001") == expected
    state.apply(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_001",
            "status": "completed",
            "rawInput": None,
            "locations": [],
        }
    )
    tool_call = state.tool_call("call_001")
    assert tool_call is not None
    assert tool_call["status"] == "completed"
    assert "rawInput" not in tool_call
    assert "locations" not in tool_call
    assert tool_call["title"] == "Reading parser.py"
    assert state.tool_call("other") is None


def test_tool_call_content_chunk_appends_and_update_replaces() -> None:
    state = fold(V2["tool_call_update"], V2["tool_call_content_chunk"])
    tool_call = state.tool_call("call_001")
    assert tool_call is not None
    assert tool_call["content"] == [
        *V2["tool_call_update"]["content"],
        V2["tool_call_content_chunk"]["content"],
    ]
    # The input update was not mutated by the append.
    assert len(V2["tool_call_update"]["content"]) == 2
    state.apply({"sessionUpdate": "tool_call_update", "toolCallId": "call_001", "content": None})
    state.apply(
        {
            "sessionUpdate": "tool_call_content_chunk",
            "toolCallId": "call_001",
            "content": {"type": "terminal", "terminalId": "x"},
        }
    )
    tool_call = state.tool_call("call_001")
    assert tool_call is not None
    assert tool_call["content"] == [{"type": "terminal", "terminalId": "x"}]


def test_tool_call_content_chunk_creates_the_tool_call() -> None:
    state = fold(V2["tool_call_content_chunk"])
    assert state.tool_call("call_001") == {"content": [V2["tool_call_content_chunk"]["content"]]}


# --- terminals ------------------------------------------------------------------------------


def test_terminal_update_is_a_replacement_snapshot() -> None:
    state = fold(V2["terminal_update"], V2["terminal_output_chunk"])
    assert state.terminal_output("term_1") == b"\x1b[32m...\x1b[0m\n3 passed\n"
    snap = state.snapshot()["terminals"]["term_1"]
    assert snap["fields"] == {
        "command": "pytest -q",
        "cwd": "/home/u/proj",
        "exitStatus": {"exitCode": 0},
    }
    state.apply(
        {
            "sessionUpdate": "terminal_update",
            "terminalId": "term_1",
            "output": {"data": b64(b"new")},
            "exitStatus": None,
        }
    )
    assert state.terminal_output("term_1") == b"new"
    assert state.snapshot()["terminals"]["term_1"]["fields"] == {
        "command": "pytest -q",
        "cwd": "/home/u/proj",
    }
    state.apply({"sessionUpdate": "terminal_update", "terminalId": "term_1", "output": None})
    assert state.terminal_output("term_1") == b""
    assert state.terminal_output("unknown") is None


def test_terminal_output_chunk_creates_the_terminal() -> None:
    state = fold({"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": b64(b"hi")})
    assert state.terminal_output("t") == b"hi"


SPLIT_PAYLOAD = "naïve € 🙂 \x1b[1;31mred\x1b[0m done\r\n".encode()


@pytest.mark.parametrize("cut", range(len(SPLIT_PAYLOAD) + 1))
def test_terminal_chunk_boundaries_inside_code_points_and_escapes(cut: int) -> None:
    state = SessionState().apply_all(sts.terminal_chunks("t", SPLIT_PAYLOAD, [cut]))
    assert state.terminal_output("t") == SPLIT_PAYLOAD


@given(data=sts.terminal_bytes, cuts=st.lists(st.integers(min_value=0, max_value=64), max_size=8))
def test_any_chunking_gives_the_same_bytes(data: bytes, cuts: list[int]) -> None:
    chunks = sts.terminal_chunks("t", data, cuts)
    live = SessionState().apply_all(chunks)
    whole = fold(
        {"sessionUpdate": "terminal_update", "terminalId": "t", "output": {"data": b64(data)}}
    )
    assert live.terminal_output("t") == data
    assert live.snapshot()["terminals"] == whole.snapshot()["terminals"]


# --- session-wide snapshots -----------------------------------------------------------------


def test_plans_are_kept_per_plan_id() -> None:
    side = {
        "sessionUpdate": "plan_update",
        "plan": {"type": "_x_canvas", "planId": "side", "svg": "<svg/>"},
    }
    state = fold(V2["plan_update"], side)
    replaced = {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": "plan_main", "entries": []},
    }
    state.apply(replaced)
    assert state.snapshot()["plans"] == {
        "plan_main": {"plan": replaced["plan"]},
        "side": {"plan": side["plan"]},
    }


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("available_commands_update", "commands"),
        ("config_option_update", "configOptions"),
        ("usage_update", "usage"),
    ],
)
def test_snapshot_variants_replace(name: str, key: str) -> None:
    state = fold(V2[name])
    assert state.snapshot()[key] == {k: v for k, v in V2[name].items() if k != "sessionUpdate"}
    emptied = {k: ([] if isinstance(v, list) else v) for k, v in V2[name].items()}
    emptied.pop("cost", None)
    state.apply(emptied)
    assert state.snapshot()[key] == {k: v for k, v in emptied.items() if k != "sessionUpdate"}


def test_config_options_accessor() -> None:
    assert SessionState().config_options == []
    assert (
        fold(V2["config_option_update"]).config_options
        == V2["config_option_update"]["configOptions"]
    )


def test_session_info_update_patches() -> None:
    state = fold(V2["session_info_update"])
    assert state.title == "Parser refactor"
    state.apply({"sessionUpdate": "session_info_update", "title": None, "_meta": {"k": 1}})
    assert state.title is None
    assert state.snapshot()["info"] == {"updatedAt": "2026-06-10T12:00:00Z", "_meta": {"k": 1}}


def test_state_update_sets_foreground_and_stop_reason() -> None:
    state = SessionState()
    assert (state.foreground, state.stop_reason) == ("idle", None)
    state.apply({"sessionUpdate": "state_update", "state": "running"})
    assert (state.foreground, state.stop_reason) == ("running", None)
    state.apply(V2["state_update"])
    assert (state.foreground, state.stop_reason) == ("idle", "end_turn")
    state.apply({"sessionUpdate": "state_update", "state": "_x_paused", "_meta": {"why": "user"}})
    assert (state.foreground, state.stop_reason) == ("_x_paused", None)
    assert state.snapshot()["state"] == {"state": "_x_paused", "_meta": {"why": "user"}}


def test_unknown_variants_keep_the_latest_per_name() -> None:
    state = fold(
        V2["other"],
        {"sessionUpdate": "_vendor_heartbeat", "beat": 8},
        {"sessionUpdate": "future", "x": 1},
    )
    assert state.snapshot()["extras"] == {
        "_vendor_heartbeat": {"sessionUpdate": "_vendor_heartbeat", "beat": 8},
        "future": {"sessionUpdate": "future", "x": 1},
    }


# --- hub variants ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["_hub_presence", "_hub_queue", "_hub_agent", "_hub_lease", "_hub_policy"]
)
def test_hub_snapshots_replace(name: str) -> None:
    state = fold(HUB[name])
    assert state.hub(name) == {k: v for k, v in HUB[name].items() if k != "sessionUpdate"}
    assert state.hub("_hub_other") is None


def test_presence_deltas_fold_into_the_full_list() -> None:
    def rec(cid: str, role: str = "viewer") -> dict[str, str]:
        return {"clientId": cid, "name": cid, "role": role}

    def delta(added: list[Any], removed: list[str], **cause: Any) -> dict[str, Any]:
        n = len(added)
        return {"sessionUpdate": "_hub_presence", "added": added, "removed": removed,
                "count": n, "viewers": n, **cause}  # fmt: skip

    state = fold(
        delta([rec("a"), rec("b")], [], changes=[{"joined": "a"}, {"joined": "b"}]),
        delta([rec("c")], [], joined="c"),
        delta([rec("a", "driver")], ["b"], left="b", reason="detached"),
        delta([], ["nobody"]),
    )
    presence = state.hub("_hub_presence")
    assert presence is not None
    # `a` keeps its place with its new record, `b` is gone, unknown ids are ignored, and
    # only the latest change's cause is kept.
    assert presence["clients"] == [rec("a", "driver"), rec("c")]
    assert "left" not in presence
    assert "changes" not in presence
    # The full form replaces the list, and compaction sends the full form.
    replaced = fold(delta([rec("x")], []), {"sessionUpdate": "_hub_presence", "clients": []})
    assert replaced.hub("_hub_presence") == {"clients": []}
    compacted = [u for u in compact(state) if u["sessionUpdate"] == "_hub_presence"]
    assert compacted == [{"sessionUpdate": "_hub_presence", **presence}]


def test_lease_can_be_released() -> None:
    state = fold(HUB["_hub_lease"], {"sessionUpdate": "_hub_lease", "holder": None})
    assert state.hub("_hub_lease") == {"holder": None}


def test_hub_prompt_records_attribution() -> None:
    state = fold(HUB["_hub_prompt"])
    assert state.snapshot()["prompts"] == {
        "msg_user_1": {"messageId": "msg_user_1", "clientId": "c1", "name": "alice"}
    }
    assert state.message_ids == []  # an attribution does not create a message


def test_permission_record_lifecycle() -> None:
    state = fold(HUB["_hub_permission"])
    assert state.pending_permissions == {
        "perm_1": {k: v for k, v in HUB["_hub_permission"].items() if k != "sessionUpdate"}
    }
    # A resolved permission as in test_compact.py: each module spells out its updates.
    resolved = {
        "sessionUpdate": "_hub_permission",
        "permissionId": "perm_1",
        "status": "resolved",
        "resolvedBy": {"clientId": "c2", "name": "bob"},
        "outcome": {"outcome": "selected", "optionId": "allow"},
    }
    state.apply(resolved)
    assert state.pending_permissions == {}
    record = state.permission("perm_1")
    assert record is not None
    assert record["status"] == "resolved"
    assert record["request"] == HUB["_hub_permission"]["request"]  # fields merge
    assert record["outcome"] == {"outcome": "selected", "optionId": "allow"}
    assert state.permission("perm_2") is None


def test_reset_clears_everything() -> None:
    state = fold(*V2.values(), *HUB.values())
    assert state.is_empty
    assert state.snapshot() == SessionState().snapshot()
    state.apply(V2["usage_update"])
    assert not state.is_empty


@pytest.mark.parametrize("name", sorted(V2))
def test_each_variant_makes_the_state_non_empty(name: str) -> None:
    assert SessionState().is_empty
    assert not fold(V2[name]).is_empty


# --- rejection ------------------------------------------------------------------------------

MALFORMED: list[Any] = [
    "not an object",
    {"no": "discriminator"},
    {"sessionUpdate": 3},
    {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "removed in v2"},
    {"sessionUpdate": "plan", "entries": []},
    {"sessionUpdate": "current_mode_update", "currentModeId": "code"},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "no id"}},
    {"sessionUpdate": "agent_message_chunk", "messageId": "m"},
    {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": {"text": "no type"}},
    {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": {"type": "text"}},
    {
        "sessionUpdate": "user_message_chunk",
        "messageId": "m",
        "content": {"type": "image", "data": "AA"},
    },
    {"sessionUpdate": "user_message_chunk", "messageId": "m", "content": {"type": "resource"}},
    {
        "sessionUpdate": "agent_thought_chunk",
        "messageId": "m",
        "content": {"type": "text", "text": "x"},
        "_meta": 1,
    },
    {"sessionUpdate": "user_message", "messageId": 1},
    {
        "sessionUpdate": "agent_message",
        "messageId": "m",
        "content": {"type": "text", "text": "not an array"},
    },
    {
        "sessionUpdate": "agent_thought",
        "messageId": "m",
        "content": [{"type": "text", "text": "ok"}, "bad"],
    },
    {"sessionUpdate": "tool_call_update"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t", "title": 5},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": ["x"]},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t", "content": [{"type": "content"}]},
    {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t",
        "content": [{"type": "diff", "changes": [{}]}],
    },
    {"sessionUpdate": "tool_call_update", "toolCallId": "t", "content": [{"type": "diff"}]},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t", "content": [{"type": "terminal"}]},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t", "content": [7]},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t", "locations": [{"line": 1}]},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t", "_meta": "x"},
    {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "t"},
    {"sessionUpdate": "terminal_update", "terminalId": "t", "output": {"data": "not base64!"}},
    {"sessionUpdate": "terminal_update", "terminalId": "t", "output": "AAAA"},
    {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": {"exitCode": -1}},
    {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": {"exitCode": True}},
    {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": {"signal": 9}},
    {"sessionUpdate": "terminal_update", "terminalId": "t", "cwd": 1},
    {"sessionUpdate": "terminal_output_chunk", "terminalId": "t"},
    {"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": "QUJ"},
    {"sessionUpdate": "plan_update"},
    {"sessionUpdate": "plan_update", "plan": {"type": "items", "entries": []}},
    {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p"}},
    {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": "p", "entries": [{"content": "x"}]},
    },
    {
        "sessionUpdate": "plan_update",
        "plan": {"type": "markdown", "planId": "p", "markdown": "# x"},
    },
    {"sessionUpdate": "available_commands_update"},
    {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "x"}]},
    {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [{"name": "x", "description": "d", "input": "hint"}],
    },
    {"sessionUpdate": "config_option_update", "configOptions": [{"configId": "x", "name": "X"}]},
    {"sessionUpdate": "session_info_update", "title": 3},
    {"sessionUpdate": "session_info_update", "_meta": []},
    {"sessionUpdate": "usage_update", "used": 1},
    {"sessionUpdate": "usage_update", "used": -1, "size": 2},
    {"sessionUpdate": "usage_update", "used": True, "size": 2},
    {"sessionUpdate": "usage_update", "used": 1, "size": 2, "cost": 5},
    {
        "sessionUpdate": "usage_update",
        "used": 1,
        "size": 2,
        "cost": {"amount": "1", "currency": "USD"},
    },
    {"sessionUpdate": "usage_update", "used": 1, "size": 2, "cost": {"amount": 1}},
    {"sessionUpdate": "state_update"},
    {"sessionUpdate": "state_update", "state": "idle", "stopReason": 1},
    {"sessionUpdate": "_hub_presence", "clients": [{"name": "no id"}]},
    {"sessionUpdate": "_hub_presence"},
    {"sessionUpdate": "_hub_presence", "added": [{"clientId": "c"}]},
    {"sessionUpdate": "_hub_presence", "added": [{"name": "no id"}], "removed": []},
    {"sessionUpdate": "_hub_presence", "added": [], "removed": [1]},
    {"sessionUpdate": "_hub_presence", "clients": [], "count": "2"},
    {"sessionUpdate": "_hub_queue", "entries": [{}]},
    {"sessionUpdate": "_hub_prompt", "messageId": "m"},
    {"sessionUpdate": "_hub_prompt", "messageId": "m", "clientId": "c", "name": 1},
    {"sessionUpdate": "_hub_permission", "permissionId": "p", "status": "approved"},
    {"sessionUpdate": "_hub_permission", "permissionId": "p", "status": "pending"},
    {
        "sessionUpdate": "_hub_permission",
        "permissionId": "p",
        "status": "resolved",
        "outcome": "allow",
    },
    {"sessionUpdate": "_hub_agent", "agent": "a", "status": "sleeping"},
    {"sessionUpdate": "_hub_agent", "agent": "a", "status": "exited", "exitCode": "1"},
    {"sessionUpdate": "_hub_agent", "status": "exited"},
    {"sessionUpdate": "_hub_lease"},
    {"sessionUpdate": "_hub_lease", "holder": {"name": "no id"}},
    {"sessionUpdate": "_hub_lease", "holder": None, "expiresAt": 5},
    {"sessionUpdate": "_hub_policy", "prompt": "queue"},
    {"sessionUpdate": "_hub_policy", "prompt": "anarchy", "permission": "first"},
    {"sessionUpdate": "_hub_reset", "reason": "x"},
    {"sessionUpdate": "_hub_reset", "epoch": 1},
]


@pytest.mark.parametrize("update", MALFORMED, ids=[json.dumps(u)[:60] for u in MALFORMED])
def test_malformed_known_variants_are_rejected_without_change(update: Any) -> None:
    state = fold(*V2.values(), *(u for k, u in HUB.items() if k != "_hub_reset"))
    before = copy.deepcopy(state.snapshot())
    with pytest.raises(InvalidParams):
        state.apply(update)
    assert state.snapshot() == before


# `check` leaves the one state-dependent rule to `apply` (see its docstring).
STATELESS = [
    u
    for u in MALFORMED
    if not (isinstance(u, dict) and u.get("status") == "pending" and "request" not in u)
]


@pytest.mark.parametrize("update", STATELESS, ids=[json.dumps(u)[:60] for u in STATELESS])
def test_check_refuses_what_apply_refuses(update: Any) -> None:
    with pytest.raises(InvalidParams):
        check(update)


def test_check_accepts_unknown_variants_as_apply_keeps_them() -> None:
    update = {"sessionUpdate": "_vendor_thing", "x": 1}
    check(update)
    assert SessionState().apply_all([update]).snapshot() != SessionState().snapshot()


def test_pending_permission_may_omit_request_when_the_record_has_one() -> None:
    state = fold(HUB["_hub_permission"])
    state.apply({"sessionUpdate": "_hub_permission", "permissionId": "perm_1", "status": "pending"})
    assert "perm_1" in state.pending_permissions


def test_apply_all_stops_at_the_first_invalid_update() -> None:
    state = SessionState()
    with pytest.raises(InvalidParams, match="plan"):
        state.apply_all(
            [V2["usage_update"], {"sessionUpdate": "plan", "entries": []}, V2["state_update"]]
        )
    assert state.snapshot()["usage"] is not None
    assert state.snapshot()["state"] is None


# --- cost -----------------------------------------------------------------------------------


def test_state_size_follows_the_text_not_the_chunk_count() -> None:
    count = 20_000
    chunk = {
        "sessionUpdate": "agent_message_chunk",
        "messageId": "m",
        "content": {"type": "text", "text": "word "},
    }
    state = SessionState()
    for _ in range(count):
        state.apply(chunk)
    assert state.snapshot()["timeline"][0]["content"] == [{"type": "text", "text": "word " * count}]


def test_every_known_variant_has_one_check_and_one_fold() -> None:
    from hub.protocol import state
    from hub.protocol.checks import CHECKS
    from hub.protocol.variants import (
        HUB_UPDATES,
        REMOVED_VARIANTS,
        V1_UPDATES,
        V2_UPDATES,
    )

    assert set(state._VARIANTS) == set(CHECKS) == V2_UPDATES | HUB_UPDATES
    assert {"tool_call", "plan", "current_mode_update"} == REMOVED_VARIANTS
    assert not REMOVED_VARIANTS & (V2_UPDATES | HUB_UPDATES)
    assert len(V1_UPDATES) == 11
    assert len(V2_UPDATES) == 16


@pytest.mark.parametrize("value", [["queue"], {"q": 1}, None, 3])
def test_a_policy_that_is_not_a_string_is_refused_not_a_crash(value: Any) -> None:
    for update in (
        {"sessionUpdate": "_hub_policy", "prompt": value, "permission": "first"},
        {"sessionUpdate": "_hub_policy", "prompt": "queue", "permission": value},
    ):
        with pytest.raises(InvalidParams):
            SessionState().apply(update)


def test_latest_message_of_a_kind_is_found_from_the_end() -> None:
    state = SessionState()
    assert state.latest_message("agent_message") is None
    for update in (
        {"sessionUpdate": "agent_message", "messageId": "a1", "content": [_text("first")]},
        {"sessionUpdate": "user_message", "messageId": "u1", "content": [_text("ask")]},
        {"sessionUpdate": "agent_message", "messageId": "a2", "content": [_text("second")]},
        {"sessionUpdate": "agent_thought", "messageId": "t1", "content": [_text("hm")]},
    ):
        state.apply(update)
    latest = state.latest_message("agent_message")
    assert latest is not None
    assert (latest["messageId"], latest["kind"]) == ("a2", "agent_message")
    assert latest["content"] == [_text("second")]
    user = state.latest_message("user_message")
    assert user is not None
    assert user["messageId"] == "u1"
    assert state.latest_message("nothing") is None


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}
