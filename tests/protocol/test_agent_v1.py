"""The v1 agent side (``AgentV1Translator``): golden streams, malformed input, the prompt
turn, permissions, modes and config options."""

from __future__ import annotations

from typing import Any

import pytest

from hub.protocol.agent_v1 import AgentV1Translator
from hub.protocol.config_options import (
    config_options_v1_to_v2,
)
from hub.protocol.errors import InvalidParams, RpcError, TranslationError, internal_error
from tests.protocol.translation import (
    AGENT_CASES,
    Json,
    Schema,
    check_v2_update,
    run_agent,
    text,
)


@pytest.mark.parametrize("case", AGENT_CASES, ids=[c["name"] for c in AGENT_CASES])
def test_agent_v1_to_v2_golden(case: Json) -> None:
    assert run_agent(case) == case["v2"]


# ---------------------------------------------------------------------------------------
# Malformed known payloads


BAD_V1 = [
    ("not an object", ["x"]),
    ("no variant", {"content": text("a")}),
    ("variant not a string", {"sessionUpdate": 3}),
    ("chunk without content", {"sessionUpdate": "agent_message_chunk"}),
    ("chunk content not a block", {"sessionUpdate": "agent_message_chunk", "content": "hi"}),
    ("chunk block without type", {"sessionUpdate": "user_message_chunk", "content": {"text": "a"}}),
    (
        "chunk id not a string",
        {"sessionUpdate": "agent_thought_chunk", "messageId": 7, "content": text("a")},
    ),
    ("tool_call without title", {"sessionUpdate": "tool_call", "toolCallId": "c"}),
    ("tool_call without id", {"sessionUpdate": "tool_call", "title": "T"}),
    ("tool_call_update without id", {"sessionUpdate": "tool_call_update", "status": "failed"}),
    ("status not a string", {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": 1}),
    ("content not a list", {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": {}}),
    (
        "content item not an object",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [1]},
    ),
    (
        "content item without type",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{}]},
    ),
    (
        "content block missing",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{"type": "content"}]},
    ),
    (
        "diff without newText",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "diff", "path": "/p"}],
        },
    ),
    (
        "diff oldText not a string",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "diff", "path": "/p", "newText": "", "oldText": 1}],
        },
    ),
    (
        "client terminal content",
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "title": "T",
            "content": [{"type": "terminal", "terminalId": "t1"}],
        },
    ),
    (
        "locations not a list",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "locations": "x"},
    ),
    ("plan without entries", {"sessionUpdate": "plan"}),
    (
        "plan entry without priority",
        {"sessionUpdate": "plan", "entries": [{"content": "a", "status": "pending"}]},
    ),
    (
        "commands not a list",
        {"sessionUpdate": "available_commands_update", "availableCommands": None},
    ),
    (
        "command without description",
        {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "a"}]},
    ),
    (
        "command input without hint",
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "a", "description": "b", "input": {}}],
        },
    ),
    ("mode update without id", {"sessionUpdate": "current_mode_update"}),
    ("config options missing", {"sessionUpdate": "config_option_update"}),
    (
        "config option without id",
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [{"name": "n", "type": "boolean"}],
        },
    ),
    (
        "config option without type",
        {"sessionUpdate": "config_option_update", "configOptions": [{"id": "i", "name": "n"}]},
    ),
    (
        "select without current value",
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [{"id": "i", "name": "n", "type": "select", "options": []}],
        },
    ),
    (
        "select options not a list",
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {"id": "i", "name": "n", "type": "select", "currentValue": "a", "options": {}}
            ],
        },
    ),
    ("title not a string", {"sessionUpdate": "session_info_update", "title": 1}),
    ("updatedAt not a string", {"sessionUpdate": "session_info_update", "updatedAt": 1}),
    ("usage negative", {"sessionUpdate": "usage_update", "used": -1, "size": 10}),
    ("usage bool", {"sessionUpdate": "usage_update", "used": 1, "size": True}),
    ("usage missing size", {"sessionUpdate": "usage_update", "used": 1}),
    ("v2-only state", {"sessionUpdate": "state_update", "state": "running"}),
    ("v2-only message", {"sessionUpdate": "agent_message", "messageId": "m", "content": []}),
    (
        "v2-only plan",
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p", "entries": []}},
    ),
]


@pytest.mark.parametrize(("why", "update"), BAD_V1, ids=[w for w, _ in BAD_V1])
def test_malformed_v1_updates_are_rejected(why: str, update: Any) -> None:
    with pytest.raises(InvalidParams):
        AgentV1Translator().update(update)


# ---------------------------------------------------------------------------------------
# AgentV1Translator: the prompt turn, permissions, modes


def test_prompt_turn_is_synthesized_for_v1_agents(v2: Schema) -> None:
    translator = AgentV1Translator(id_prefix="hub-p-")
    before = translator.update({"sessionUpdate": "agent_message_chunk", "content": text("a")})
    message_id, updates = translator.prompt_started([text("Fix the bug")])
    after = translator.update({"sessionUpdate": "agent_message_chunk", "content": text("b")})
    finished = translator.prompt_finished("end_turn")
    assert message_id == "hub-p-2"
    assert updates == [
        {"sessionUpdate": "user_message", "messageId": "hub-p-2", "content": [text("Fix the bug")]},
        {"sessionUpdate": "state_update", "state": "running"},
    ]
    assert before[0]["messageId"] == "hub-p-1"
    assert after[0]["messageId"] == "hub-p-3"  # the prompt ended the previous message
    assert finished == [
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    ]
    for update in [*updates, *finished]:
        check_v2_update(v2, update)


def test_prompt_failure_is_idle_without_stop_reason_and_the_error_in_meta(v2: Schema) -> None:
    error = RpcError(-32603, "Internal error", {"why": "boom"})
    (update,) = AgentV1Translator().prompt_failed(error)
    assert update == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "_meta": {
            "acp-hub": {
                "error": {"code": -32603, "message": "Internal error", "data": {"why": "boom"}}
            }
        },
    }
    check_v2_update(v2, update)


def test_prompt_inputs_are_checked() -> None:
    translator = AgentV1Translator()
    with pytest.raises(InvalidParams):
        translator.prompt_started(["hi"])
    with pytest.raises(InvalidParams):
        translator.prompt_finished(None)  # type: ignore[arg-type]


def test_default_ids_are_hub_prefixed_and_differ_between_translators() -> None:
    a = AgentV1Translator().mint_id()
    b = AgentV1Translator().mint_id()
    assert a.startswith("hub-")
    assert b.startswith("hub-")
    assert a != b


def test_permission_states_count_pending_requests() -> None:
    translator = AgentV1Translator()
    requires = [{"sessionUpdate": "state_update", "state": "requires_action"}]
    running = [{"sessionUpdate": "state_update", "state": "running"}]
    assert translator.permission_answered() == []
    assert translator.permission_pending() == requires
    assert translator.permission_pending() == requires
    assert translator.permission_answered() == []
    assert translator.permission_answered() == running
    assert translator.permission_answered() == []
    translator.permission_pending()
    translator.prompt_failed(internal_error())
    assert translator.permission_answered() == []  # the turn is over: no "running" after it
    translator.permission_pending()
    translator.prompt_finished("cancelled")
    assert translator.permission_answered() == []


def test_permission_pending_ends_an_id_less_message() -> None:
    translator = AgentV1Translator(id_prefix="m-")
    first = translator.update({"sessionUpdate": "agent_message_chunk", "content": text("a")})
    translator.permission_pending()
    translator.update({"sessionUpdate": "agent_message_chunk", "content": text("b")})
    translator.permission_answered()
    third = translator.update({"sessionUpdate": "agent_message_chunk", "content": text("c")})
    assert first[0]["messageId"] == "m-1"
    assert third[0]["messageId"] == "m-3"


def test_session_setup_without_modes_or_options_says_nothing() -> None:
    translator = AgentV1Translator()
    assert translator.session_setup(None) == []
    assert translator.session_setup({"sessionId": "s"}) == []
    assert translator.config_options == []
    assert translator.mode_option_id is None


def test_agent_mode_option_wins_over_modes() -> None:
    translator = AgentV1Translator()
    option = {
        "id": "m",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": "a",
        "options": [],
    }
    (update,) = translator.session_setup(
        {
            "modes": {"currentModeId": "a", "availableModes": [{"id": "a", "name": "A"}]},
            "configOptions": [option],
        }
    )
    assert update["configOptions"] == config_options_v1_to_v2([option])
    assert translator.mode_option_id is None
    assert translator.update({"sessionUpdate": "current_mode_update", "currentModeId": "a"}) == []


def test_synthetic_mode_option_avoids_taken_ids_and_routes_to_set_mode(v2: Schema) -> None:
    translator = AgentV1Translator()
    taken = {"id": "mode", "name": "Other", "type": "boolean", "currentValue": True}
    (update,) = translator.session_setup(
        {
            "configOptions": [taken],
            "modes": {"currentModeId": "a", "availableModes": [{"id": "a", "name": "A"}]},
        }
    )
    check_v2_update(v2, update)
    assert translator.mode_option_id == "_hub_mode_2"
    assert [o["configId"] for o in update["configOptions"]] == ["_hub_mode_2", "mode"]
    params = {
        "sessionId": "s",
        "configId": "_hub_mode_2",
        "type": "id",
        "value": "a",
        "_meta": {"k": 1},
    }
    v2.check("SetSessionConfigOptionRequest", params)
    assert translator.set_config_option(params) == (
        "session/set_mode",
        {"sessionId": "s", "modeId": "a", "_meta": {"k": 1}},
    )
    with pytest.raises(InvalidParams):
        translator.set_config_option({**params, "type": "boolean", "value": True})
    # the agent's own option named "mode" is still routed as a config option
    assert translator.set_config_option(
        {"sessionId": "s", "configId": "mode", "type": "boolean", "value": False}
    ) == (
        "session/set_config_option",
        {"sessionId": "s", "configId": "mode", "type": "boolean", "value": False},
    )


def test_mode_updates_without_setup_and_unknown_modes_extend_the_option() -> None:
    translator = AgentV1Translator()
    (update,) = translator.update({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    (option,) = update["configOptions"]
    assert option["currentValue"] == "plan"
    assert option["options"] == [{"value": "plan", "name": "plan"}]
    (again,) = translator.mode_set("code")
    assert [c["value"] for c in again["configOptions"][0]["options"]] == ["plan", "code"]
    assert translator.config_options == again["configOptions"]


def test_set_config_option_for_a_v1_agent(v1: Schema) -> None:
    translator = AgentV1Translator()
    method, params = translator.set_config_option(
        {"sessionId": "s", "configId": "model", "type": "id", "value": "fast"}
    )
    assert (method, params) == (
        "session/set_config_option",
        {"sessionId": "s", "configId": "model", "value": "fast"},
    )
    v1.check("SetSessionConfigOptionRequest", params)
    with pytest.raises(TranslationError):
        translator.set_config_option(
            {"sessionId": "s", "configId": "x", "type": "_acme_range", "value": 3}
        )
    for bad in (
        {"sessionId": "s", "configId": "x", "type": "id", "value": 3},
        {"sessionId": "s", "configId": "x", "type": "boolean", "value": "yes"},
        {"sessionId": "s", "configId": "x", "value": "a"},
        {"configId": "x", "type": "id", "value": "a"},
    ):
        with pytest.raises(InvalidParams):
            translator.set_config_option(bad)


def test_set_config_option_result_keeps_the_synthetic_mode_option() -> None:
    translator = AgentV1Translator()
    translator.session_setup(
        {"modes": {"currentModeId": "a", "availableModes": [{"id": "a", "name": "A"}]}}
    )
    result = translator.set_config_option_result(
        {"configOptions": [{"id": "b", "name": "B", "type": "boolean", "currentValue": True}]}
    )
    assert [o["configId"] for o in result["configOptions"]] == ["mode", "b"]
    with pytest.raises(InvalidParams):
        translator.set_config_option_result({"configOptions": None})


def test_malformed_session_setup_is_rejected() -> None:
    bad: Any
    for bad in (
        {"modes": {"availableModes": []}},
        {"modes": {"currentModeId": "a", "availableModes": [{"id": "a"}]}},
        {"modes": {"currentModeId": "a"}},
        {"configOptions": "x"},
        [],
    ):
        with pytest.raises(InvalidParams):
            AgentV1Translator().session_setup(bad)


def test_session_setup_result_is_schema_valid(v1: Schema, v2: Schema) -> None:
    result = AGENT_CASES[8]["setup"]
    v1.check("NewSessionResponse", result)
    translator = AgentV1Translator()
    (update,) = translator.session_setup(result)
    check_v2_update(v2, update)
    v2.check("NewSessionResponse", {"sessionId": "s1", "configOptions": translator.config_options})


def test_unknown_v1_tool_content_items_are_kept_for_v2() -> None:
    item = {"type": "_acme_chart", "points": [1]}
    (out,) = AgentV1Translator().update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [item]}
    )
    assert out["content"] == [item]
