"""The demo agent (``python -m hub.demo.agent``) driven over stdio in v1 and v2.

Every ``session/update`` it sends is validated against the v1/v2 JSON schemas.
"""

from __future__ import annotations

import base64
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agents import schemas
from tests.agents.stdio_client import AgentProcess, Json, is_idle, is_update, text_of, updates

Spawn = Callable[..., AgentProcess]
PROMPT = "How do I sort a list of names?"


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    started: list[AgentProcess] = []

    def start(version: int, *, fast: bool = True) -> AgentProcess:
        env = {**os.environ, "HOME": str(tmp_path)}
        env["ACP_HUB_DEMO_FAST"] = "1" if fast else "0"
        agent = AgentProcess(
            [sys.executable, "-m", "hub.demo.agent"],
            env=env,
            validate=schemas.update_validator(version),
        )
        started.append(agent)
        result = agent.initialize(version)
        assert result["protocolVersion"] == version
        definition = "InitializeResponse"
        assert not schemas.errors(version, definition, result)
        return agent

    yield start
    for agent in started:
        agent.close()


def finish_turn(agent: AgentProcess, version: int, prompt_id: int) -> tuple[list[Json], str]:
    """Messages after the permission answer up to the end of the turn, and the stop reason."""
    if version == 1:
        response, messages = agent.until_response(prompt_id)
        return messages, response["result"]["stopReason"]
    messages = agent.until(is_idle)
    return messages[:-1], messages[-1]["params"]["update"]["stopReason"]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("option", ["allow_once", "reject_once"])
def test_full_turn(spawn: Spawn, tmp_path: Path, version: int, option: str) -> None:
    agent = spawn(version)
    created = agent.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    assert not schemas.errors(version, "NewSessionResponse", created)
    session_id = created["sessionId"]
    prompt_id = agent.prompt(session_id, PROMPT)
    if version == 2:
        ack, _ = agent.until_response(prompt_id)
        assert set(ack["result"]) == {"messageId"}
    before = agent.until(lambda m: m.get("method") == "session/request_permission")
    if version == 2:
        user_message = updates(before)[0]
        assert user_message["sessionUpdate"] == "user_message"
        assert user_message["messageId"] == ack["result"]["messageId"]
        assert user_message["content"] == [{"type": "text", "text": PROMPT}]
    request = before[-1]
    assert not schemas.errors(version, "RequestPermissionRequest", request["params"])
    assert [o["optionId"] for o in request["params"]["options"]] == ["allow_once", "reject_once"]
    agent.respond(request["id"], {"outcome": {"outcome": "selected", "optionId": option}})
    after, stop = finish_turn(agent, version, prompt_id)
    assert stop == "end_turn"
    everything = before + after
    kinds = [u["sessionUpdate"] for u in updates(everything)]

    # Thoughts come first, then the plan, the tools, the answer.
    first_thought = kinds.index("agent_thought_chunk")
    plan_kind = "plan" if version == 1 else "plan_update"
    assert first_thought < kinds.index(plan_kind) < kinds.index("agent_message_chunk")
    plans = updates(everything, plan_kind)
    statuses = [
        [e["status"] for e in (p["entries"] if version == 1 else p["plan"]["entries"])]
        for p in plans
    ]
    assert statuses[0][0] == "in_progress"
    assert statuses[-1] == ["completed"] * len(statuses[-1])
    assert len(statuses) >= 4

    # The edit, as a diff.
    diffs = [
        c
        for u in updates(everything)
        if u["sessionUpdate"] in {"tool_call", "tool_call_update"}
        for c in u.get("content") or []
        if c["type"] == "diff"
    ]
    [diff] = diffs
    if version == 1:
        assert diff["newText"].startswith("def how_do_i(")
    else:
        assert diff["patch"]["format"] == "git_patch"
        assert diff["changes"][0]["path"] == str(tmp_path / "src" / "how_do_i.py")

    # The test run: an agent-owned terminal with ANSI colours (v2) or its text (v1).
    if version == 2:
        data = b"".join(
            base64.b64decode(u["data"]) for u in updates(everything, "terminal_output_chunk")
        )
        assert b"\x1b[32m" in data
        assert "3 passed" in data.decode()
        assert updates(everything, "terminal_update")[-1]["exitStatus"] == {"exitCode": 0}
        states = [u["state"] for u in updates(everything, "state_update")]
        assert states == ["running", "requires_action", "running"]
    else:
        texts = [
            c["content"]["text"]
            for u in updates(everything, "tool_call_update")
            for c in u.get("content") or []
            if c["type"] == "content"
        ]
        assert any("3 passed" in t for t in texts)

    # The permission answer is honoured.
    edit_id = next(u["toolCallId"] for u in updates(everything) if u.get("kind") == "edit")
    final = [u for u in updates(after, "tool_call_update") if u["toolCallId"] == edit_id]
    assert final[-1]["status"] == ("completed" if option == "allow_once" else "failed")

    # The streamed markdown answer.
    answer = text_of(updates(after, "agent_message_chunk"))
    assert answer.startswith("## How do I sort a list of names?")
    assert "```python" in answer
    assert "|---|---|" in answer
    assert re.search(r"\[[^]]+\]\(https://", answer)
    assert re.search(r"^1\. ", answer, re.MULTILINE)
    assert ("applied the edit" in answer) == (option == "allow_once")
    assert len(updates(after, "agent_message_chunk")) > 20  # streamed, not one blob

    used = [u["used"] for u in updates(everything, "usage_update")]
    assert len(used) >= 2
    assert used == sorted(used)


@pytest.mark.parametrize("version", [1, 2])
def test_cancel_a_slow_turn(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent = spawn(version, fast=False)
    session_id = agent.new_session(tmp_path)
    prompt_id = agent.prompt(session_id, "/slow")
    agent.until(lambda m: is_update(m, "agent_message_chunk"), timeout=10)
    agent.notify("session/cancel", {"sessionId": session_id})
    _, stop = finish_turn(agent, version, prompt_id)
    assert stop == "cancelled"


@pytest.mark.parametrize("version", [1, 2])
def test_cancel_while_asking_permission(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent = spawn(version)
    session_id = agent.new_session(tmp_path)
    prompt_id = agent.prompt(session_id, "refactor the parser")
    request = agent.until(lambda m: m.get("method") == "session/request_permission")[-1]
    agent.notify("session/cancel", {"sessionId": session_id})
    agent.respond(request["id"], {"outcome": {"outcome": "cancelled"}})
    after, stop = finish_turn(agent, version, prompt_id)
    assert stop == "cancelled"
    assert not updates(after, "agent_message_chunk")  # no answer after a cancel
    statuses = [u["status"] for u in updates(after, "tool_call_update")]
    assert statuses
    assert set(statuses) == {"cancelled" if version == 2 else "failed"}


@pytest.mark.parametrize("version", [1, 2])
def test_config_options_and_ask_mode(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent = spawn(version)
    created = agent.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    key = "configId" if version == 2 else "id"
    assert [(o[key], o["category"]) for o in created["configOptions"]] == [
        ("mode", "mode"),
        ("model", "model"),
    ]
    session_id = created["sessionId"]
    params: Json = {"sessionId": session_id, "configId": "mode", "value": "ask"}
    if version == 2:
        params["type"] = "id"
    result = agent.call("session/set_config_option", params)
    assert result["configOptions"][0]["currentValue"] == "ask"
    prompt_id = agent.prompt(session_id, "explain closures")
    messages, stop = finish_turn(agent, version, prompt_id)
    assert stop == "end_turn"
    assert not any(m.get("method") == "session/request_permission" for m in messages)
    assert not updates(messages, "tool_call_update")
    assert "mode **Ask**" in text_of(updates(messages, "agent_message_chunk"))


# As the test above, cancelling at another point of the turn.
@pytest.mark.parametrize("version", [1, 2])
def test_history_is_replayed(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent = spawn(version)
    session_id = agent.new_session(tmp_path)
    prompt_id = agent.prompt(session_id, "explain closures")
    request = agent.until(lambda m: m.get("method") == "session/request_permission")[-1]
    agent.respond(request["id"], {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    finish_turn(agent, version, prompt_id)
    listed = agent.call("session/list", {})["sessions"]
    assert listed[0]["sessionId"] == session_id
    assert listed[0]["title"] == "explain closures"
    if version == 1:
        params: Json = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        response, replayed = agent.until_response(agent.request("session/load", params))
        first = updates(replayed)[0]
        assert first["sessionUpdate"] == "user_message_chunk"
    else:
        params = {"sessionId": session_id, "cwd": str(tmp_path), "replayFrom": {"type": "start"}}
        response, replayed = agent.until_response(agent.request("session/resume", params))
        first = updates(replayed)[0]
        assert first["sessionUpdate"] == "user_message"
    assert "result" in response
    assert "applied the edit" in text_of(updates(replayed, "agent_message_chunk"))
    assert not updates(replayed, "state_update")
