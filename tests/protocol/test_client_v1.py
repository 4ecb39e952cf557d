"""The v1 client side (``ClientV1Renderer``): golden streams, malformed input, state,
replay and terminals."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from hub.protocol.client_v1 import ClientV1Renderer
from hub.protocol.errors import InvalidParams
from hub.protocol.tool_calls import TOOL_TITLE

# The shared harness's names, imported by every test module that uses them.
from tests.protocol.translation import (
    CLIENT_CASES,
    V2_OPTIONS,
    Json,
    render,
    run_client,
    text,
)


@pytest.mark.parametrize("case", CLIENT_CASES, ids=[c["name"] for c in CLIENT_CASES])
def test_client_v2_to_v1_golden(case: Json) -> None:
    assert run_client(case) == case["v1"]


BAD_V2 = [
    ("not an object", None),
    ("variant missing", {}),
    ("chunk without id", {"sessionUpdate": "agent_message_chunk", "content": text("a")}),
    (
        "chunk block not an object",
        {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": 1},
    ),
    ("message id missing", {"sessionUpdate": "agent_message", "content": []}),
    (
        "message content not a list",
        {"sessionUpdate": "user_message", "messageId": "m", "content": "x"},
    ),
    (
        "message block without type",
        {"sessionUpdate": "user_message", "messageId": "m", "content": [{}]},
    ),
    ("tool call without id", {"sessionUpdate": "tool_call_update", "title": "T"}),
    (
        "tool title not a string",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": 1},
    ),
    (
        "tool content not a list",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": {}},
    ),
    (
        "tool item without type",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{}]},
    ),
    (
        "diff without changes",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{"type": "diff"}]},
    ),
    (
        "diff change without path",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "diff", "changes": [{"operation": "add"}]}],
        },
    ),
    (
        "diff patch without text",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "diff", "changes": [], "patch": {"format": "git_patch"}}],
        },
    ),
    (
        "terminal ref without id",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{"type": "terminal"}]},
    ),
    (
        "locations not a list",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "locations": 1},
    ),
    (
        "content chunk without id",
        {"sessionUpdate": "tool_call_content_chunk", "content": {"type": "content"}},
    ),
    ("content chunk item missing", {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c"}),
    ("terminal without id", {"sessionUpdate": "terminal_update"}),
    (
        "terminal command not a string",
        {"sessionUpdate": "terminal_update", "terminalId": "t", "command": 1},
    ),
    (
        "terminal output not an object",
        {"sessionUpdate": "terminal_update", "terminalId": "t", "output": "x"},
    ),
    (
        "terminal output not base64",
        {"sessionUpdate": "terminal_update", "terminalId": "t", "output": {"data": "!!"}},
    ),
    (
        "exit status not an object",
        {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": 0},
    ),
    ("output chunk without data", {"sessionUpdate": "terminal_output_chunk", "terminalId": "t"}),
    (
        "output chunk bad base64",
        {"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": "a"},
    ),
    ("plan missing", {"sessionUpdate": "plan_update"}),
    ("plan without id", {"sessionUpdate": "plan_update", "plan": {"type": "items", "entries": []}}),
    (
        "plan entries missing",
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p"}},
    ),
    (
        "plan entry without status",
        {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": "p",
                "entries": [{"content": "a", "priority": "low"}],
            },
        },
    ),
    ("commands missing", {"sessionUpdate": "available_commands_update"}),
    (
        "command input not an object",
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "a", "input": 1}],
        },
    ),
    (
        "text input without hint",
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "a", "input": {"type": "text"}}],
        },
    ),
    ("config options missing", {"sessionUpdate": "config_option_update"}),
    (
        "config option without configId",
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [{"name": "n", "type": "boolean"}],
        },
    ),
    ("info title not a string", {"sessionUpdate": "session_info_update", "title": 1}),
    ("usage missing", {"sessionUpdate": "usage_update", "size": 1}),
]


@pytest.mark.parametrize(("why", "update"), BAD_V2, ids=[w for w, _ in BAD_V2])
def test_malformed_v2_updates_are_rejected_by_the_renderer(why: str, update: Any) -> None:
    with pytest.raises(InvalidParams):
        ClientV1Renderer().update(update)


def test_a_rejected_update_leaves_the_renderer_state_unchanged() -> None:
    renderer = ClientV1Renderer()
    with pytest.raises(InvalidParams):
        renderer.update({"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{}]})
    (out,) = renderer.update({"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": "T"})
    assert out["sessionUpdate"] == "tool_call"


# ---------------------------------------------------------------------------------------
# ClientV1Renderer: state, replay, terminals


def test_render_replay_uses_fresh_state_and_leaves_the_live_renderer_alone() -> None:
    live = ClientV1Renderer()
    call = {"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": "T"}
    message = {"sessionUpdate": "agent_message", "messageId": "m", "content": [text("a")]}
    live.update(call)
    live.update(message)
    replay = live.render_replay([call, message])
    assert replay[0]["sessionUpdate"] == "tool_call"
    assert "_meta" not in replay[1]  # not a replacement for the joiner
    assert live.update(call)[0]["sessionUpdate"] == "tool_call_update"
    assert live.update(message)[0]["_meta"] == {"acp-hub": {"replaces": "m"}}


def test_reset_forgets_everything() -> None:
    renderer = ClientV1Renderer()
    mode = {
        "sessionUpdate": "config_option_update",
        "configOptions": [
            {
                "configId": "m",
                "name": "M",
                "category": "mode",
                "type": "select",
                "currentValue": "a",
                "options": [],
            }
        ],
    }
    renderer.update({"sessionUpdate": "tool_call_update", "toolCallId": "c"})
    renderer.update(mode)
    renderer.reset()
    assert (
        renderer.update({"sessionUpdate": "tool_call_update", "toolCallId": "c"})[0][
            "sessionUpdate"
        ]
        == "tool_call"
    )
    assert len(renderer.update(mode)) == 2  # the mode is announced again


def test_mode_option_removed_then_back_announces_the_mode_again() -> None:
    renderer = ClientV1Renderer()
    option = {
        "configId": "m",
        "name": "M",
        "category": "mode",
        "type": "select",
        "currentValue": "a",
        "options": [],
    }
    assert (
        len(renderer.update({"sessionUpdate": "config_option_update", "configOptions": [option]}))
        == 2
    )
    assert len(renderer.update({"sessionUpdate": "config_option_update", "configOptions": []})) == 1
    assert (
        len(renderer.update({"sessionUpdate": "config_option_update", "configOptions": [option]}))
        == 2
    )


def terminal_text(renderer: ClientV1Renderer, update: Json) -> str:
    (out,) = renderer.update(update)
    value: str = out["content"][0]["content"]["text"]
    return value


def test_terminal_bytes_are_bounded_cleared_and_exit_rendered() -> None:
    renderer = ClientV1Renderer(max_terminal_bytes=4)
    renderer.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "terminal", "terminalId": "t"}],
        }
    )
    chunk = {
        "sessionUpdate": "terminal_output_chunk",
        "terminalId": "t",
        "data": base64.b64encode(b"abcdef").decode(),
    }
    assert terminal_text(renderer, chunk) == "cdef"
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "output": None}
        )
        == ""
    )
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": {}}
        )
        == "\n[exited]"
    )
    # One assertion per terminal update shape: alike in shape only.
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": None}
        )
        == ""
    )
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "command": "ls"}
        )
        == "$ ls\n"
    )
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "command": None}
        )
        == ""
    )


def test_a_terminal_known_before_its_reference_is_shown_at_once() -> None:
    renderer = ClientV1Renderer()
    data = base64.b64encode(b"early\n").decode()
    assert (
        renderer.update({"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": data})
        == []
    )
    (out,) = renderer.update(
        {
            "sessionUpdate": "tool_call_content_chunk",
            "toolCallId": "c",
            "content": {"type": "terminal", "terminalId": "t"},
        }
    )
    assert out["sessionUpdate"] == "tool_call"
    assert out["content"][0]["content"] == text("early\n")


def test_placeholder_title_is_used_for_unnamed_tool_calls() -> None:
    (out,) = render({"sessionUpdate": "tool_call_update", "toolCallId": "c"})
    assert out["title"] == TOOL_TITLE


def test_renderer_without_boolean_options_leaves_them_out() -> None:
    update = {"sessionUpdate": "config_option_update", "configOptions": V2_OPTIONS}
    renderer = ClientV1Renderer(boolean_options=False)
    (options, mode) = renderer.update(update)
    assert [o["id"] for o in options["configOptions"]] == ["mode"]
    assert mode == {"sessionUpdate": "current_mode_update", "currentModeId": "ask"}
    (replayed, _) = renderer.render_replay([update])
    assert replayed == options


def test_terminal_text_does_not_repeat_a_command_the_output_already_shows() -> None:
    renderer = ClientV1Renderer()
    renderer.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "title": "run",
            "content": [{"type": "terminal", "terminalId": "t"}],
        }
    )
    out = renderer.update(
        {
            "sessionUpdate": "terminal_update",
            "terminalId": "t",
            "command": "pytest -q",
            "output": {"data": base64.b64encode(b"$ pytest -q\n3 passed\n").decode()},
        }
    )
    text = json.dumps(out)
    assert text.count("$ pytest -q") == 1
    plain = renderer.update(
        {
            "sessionUpdate": "terminal_update",
            "terminalId": "t",
            "output": {"data": base64.b64encode(b"3 passed\n").decode()},
        }
    )
    assert json.dumps(plain).count("$ pytest -q") == 1
