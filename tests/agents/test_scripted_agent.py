"""The scripted test agent, driven directly over stdio: its behaviour is pinned here.

Other tests (the supervisor's, the hub's) rely on what tests/agents/README.md says it does.
"""

from __future__ import annotations

import base64
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents import schemas
from tests.agents.scripted_agent import TERMINAL_OUTPUT
from tests.agents.stdio_client import (
    AgentProcess,
    Json,
    NotJson,
    is_idle,
    is_response,
    is_update,
    text_of,
    updates,
)

Spawn = Callable[..., AgentProcess]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start scripted agents (validating every update for ``version``); all closed at the end."""
    started: list[AgentProcess] = []
    env = {**os.environ, "HOME": str(tmp_path)}

    def start(*args: str, version: int | None = None) -> AgentProcess:
        validate = schemas.update_validator(version) if version is not None else None
        agent = AgentProcess.scripted(*args, env=env, cwd=tmp_path, validate=validate)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.close()


def session(spawn: Spawn, version: int, tmp_path: Path, *args: str) -> tuple[AgentProcess, str]:
    agent = spawn(*args, version=version)
    assert agent.initialize(version)["protocolVersion"] == version
    return agent, agent.new_session(tmp_path)


def run_turn(
    agent: AgentProcess, version: int, session_id: str, text: str
) -> tuple[list[Json], str]:
    """Prompt and collect the turn's messages up to its end: (messages, stop reason)."""
    request_id = agent.prompt(session_id, text)
    if version == 1:
        response, messages = agent.until_response(request_id)
        assert "result" in response, response
        return messages, response["result"]["stopReason"]
    ack, before = agent.until_response(request_id)
    assert ack["result"] == {}
    assert before == []  # the ack comes before the turn's first update
    messages = agent.until(is_idle)
    return messages[:-1], messages[-1]["params"]["update"]["stopReason"]


# --------------------------------------------------------------------------- initialize


@pytest.mark.parametrize(
    ("args", "offered", "answered"),
    [
        ((), 1, 1),
        ((), 2, 2),
        ((), 3, 2),
        (("--protocol", "1"), 2, 1),
        (("--protocol", "2"), 1, 2),
    ],
)
def test_initialize_negotiates_the_version(
    spawn: Spawn, args: tuple[str, ...], offered: int, answered: int
) -> None:
    agent = spawn(*args)
    result = agent.initialize(offered)
    assert result["protocolVersion"] == answered
    if answered == 2:
        assert result["info"]["name"] == "scripted-agent"
        assert "session" in result["capabilities"]
        assert not schemas.errors(2, "InitializeResponse", result)
    else:
        assert result["agentCapabilities"]["loadSession"] is True
        assert not schemas.errors(1, "InitializeResponse", result)


def test_claim_v2_speak_v1(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn("--claim-v2-speak-v1")
    result = agent.initialize(2)
    assert result["protocolVersion"] == 2
    assert "agentCapabilities" in result  # v1 shape
    session_id = agent.new_session(tmp_path)
    request_id = agent.prompt(session_id, "say hi")
    response, messages = agent.until_response(request_id)
    assert response["result"] == {"stopReason": "end_turn"}  # a v1 prompt response
    assert "messageId" not in updates(messages)[0]


def test_requests_before_initialize_are_refused(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    response, _ = agent.until_response(agent.request("session/new", {"cwd": str(tmp_path)}))
    assert response["error"]["code"] == -32600


def test_parse_error_and_unknown_method(spawn: Spawn) -> None:
    agent = spawn()
    agent.send_raw(b"{not json\n")
    error = agent.next()
    assert error == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    agent.initialize(1)
    response, _ = agent.until_response(agent.request("_x/whatever", {}))
    assert response["error"]["code"] == -32601


# --------------------------------------------------------------------------- turns


@pytest.mark.parametrize("version", [1, 2])
def test_say_streams_chunks(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent, session_id = session(spawn, version, tmp_path)
    text = "the quick brown fox jumps over the lazy dog"
    messages, stop = run_turn(agent, version, session_id, f"say {text}\nthink hmm")
    assert stop == "end_turn"
    chunks = updates(messages, "agent_message_chunk")
    assert len(chunks) == 3
    assert text_of(chunks) == text
    assert text_of(updates(messages, "agent_thought_chunk")) == "hmm"
    if version == 2:
        kinds = [u["sessionUpdate"] for u in updates(messages)]
        assert kinds[:2] == ["user_message", "state_update"]
        assert updates(messages)[0]["content"] == [
            {"type": "text", "text": f"say {text}\nthink hmm"}
        ]
        assert len({c["messageId"] for c in chunks}) == 1
    else:
        assert all("messageId" not in c for c in chunks)


@pytest.mark.parametrize("version", [1, 2])
def test_stream_is_numbered_and_fast(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent, session_id = session(spawn, version, tmp_path)
    agent.validate = None  # the schema check is slower than the agent
    count = 5000
    started = time.monotonic()
    messages, stop = run_turn(agent, version, session_id, f"stream {count} 40")
    elapsed = time.monotonic() - started
    assert stop == "end_turn"
    chunks = [u["content"]["text"] for u in updates(messages, "agent_message_chunk")]
    assert len(chunks) == count
    assert [int(c[:6]) for c in chunks] == list(range(count))
    assert all(len(c) == 40 and c.endswith("\n") for c in chunks)
    assert elapsed < 10, f"{count} chunks took {elapsed:.1f}s"


def test_plain_text_is_said_back_and_empty_prompt_says_ok(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 1, tmp_path)
    messages, _ = run_turn(agent, 1, session_id, "hello there\n# a comment")
    assert text_of(updates(messages, "agent_message_chunk")) == "hello there"
    messages, _ = run_turn(agent, 1, session_id, "")
    assert text_of(updates(messages, "agent_message_chunk")) == "ok"


def test_whole_message_v2(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 2, tmp_path)
    messages, _ = run_turn(agent, 2, session_id, "whole all at once")
    [whole] = updates(messages, "agent_message")
    assert whole["content"] == [{"type": "text", "text": "all at once"}]


@pytest.mark.parametrize("version", [1, 2])
def test_tool_diff_and_text(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent, session_id = session(spawn, version, tmp_path)
    messages, _ = run_turn(agent, version, session_id, "tool diff src/x.py\ntool text")
    tools = updates(messages, "tool_call_update")
    path = str(tmp_path / "src" / "x.py")
    if version == 1:
        [first, _second] = updates(messages, "tool_call")
        assert first["kind"] == "edit"
        diff = tools[0]["content"][0]
        assert diff["path"] == path
        assert "greet(name" in diff["newText"]
    else:
        assert tools[0]["title"] == "Edit x.py"
        diff = tools[1]["content"][0]
        assert diff["changes"] == [{"operation": "modify", "path": path, "fileType": "text"}]
        assert diff["patch"]["format"] == "git_patch"
        assert f"+++ b{path}" in diff["patch"]["text"]
    assert tools[-1]["content"][0]["content"]["text"] == "notes: all good"
    assert tools[-1]["status"] == "completed"


def test_tool_terminal_v2_splits_utf8_and_escapes(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 2, tmp_path)
    messages, _ = run_turn(agent, 2, session_id, "tool terminal")
    first = updates(messages, "tool_call_update")[0]
    terminal_id = first["content"][0]["terminalId"]
    pieces = [base64.b64decode(u["data"]) for u in updates(messages, "terminal_output_chunk")]
    assert len(pieces) >= 4
    assert b"".join(pieces) == TERMINAL_OUTPUT
    undecodable = 0
    for piece in pieces:
        try:
            piece.decode()
        except UnicodeDecodeError:
            undecodable += 1
    assert undecodable >= 2  # chunks cut inside multi-byte characters
    assert any(p.endswith(b"\x1b[") for p in pieces)  # and inside an escape sequence
    terminals = updates(messages, "terminal_update")
    assert terminals[0] == {
        "sessionUpdate": "terminal_update",
        "terminalId": terminal_id,
        "command": "pytest -q",
        "cwd": str(tmp_path),
    }
    assert terminals[-1]["exitStatus"] == {"exitCode": 0}


def test_tool_terminal_v1_is_text(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 1, tmp_path)
    messages, _ = run_turn(agent, 1, session_id, "tool terminal")
    text = updates(messages, "tool_call_update")[-1]["content"][0]["content"]["text"]
    assert "2 passed" in text
    assert "\x1b" not in text


@pytest.mark.parametrize("version", [1, 2])
def test_plan_config_usage_title(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent, session_id = session(spawn, version, tmp_path)
    messages, _ = run_turn(agent, version, session_id, "plan\nconfig\nusage\nusage\ntitle Fixing")
    plans = updates(messages, "plan" if version == 1 else "plan_update")
    assert len(plans) == 4
    last = plans[-1] if version == 1 else plans[-1]["plan"]
    assert [e["status"] for e in last["entries"]] == ["completed"] * 3
    [config] = updates(messages, "config_option_update")
    assert config["configOptions"][0]["currentValue"] == "code"
    if version == 1:
        assert updates(messages, "current_mode_update")[0]["currentModeId"] == "code"
    assert [u["used"] for u in updates(messages, "usage_update")] == [1000, 2000]
    assert updates(messages, "session_info_update")[0]["title"] == "Fixing"
    listed = agent.call("session/list", {})["sessions"]
    assert listed[0]["title"] == "Fixing"


# --------------------------------------------------------------------------- permission, cancel


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("option", ["allow", "reject"])
def test_permission_reports_the_answer(
    spawn: Spawn, tmp_path: Path, version: int, option: str
) -> None:
    agent, session_id = session(spawn, version, tmp_path)
    prompt_id = agent.prompt(session_id, "permission\nsay after")
    before = agent.until(lambda m: m.get("method") == "session/request_permission")
    request = before[-1]
    assert request["id"] == 0  # agents number their requests from 0
    params = request["params"]
    assert [o["optionId"] for o in params["options"]] == ["allow", "reject"]
    schema_def = "RequestPermissionRequest"
    assert not schemas.errors(version, schema_def, params)
    if version == 2:
        assert updates(before, "state_update")[-1]["state"] == "requires_action"
        assert params["subject"]["type"] == "tool_call"
    else:
        assert updates(before, "tool_call")[0]["status"] == "pending"
    agent.respond(request["id"], {"outcome": {"outcome": "selected", "optionId": option}})
    if version == 1:
        response, after = agent.until_response(prompt_id)
        stop = response["result"]["stopReason"]
    else:
        after = agent.until(is_idle)
        stop = after[-1]["params"]["update"]["stopReason"]
        assert updates(after, "state_update")[0]["state"] == "running"
    assert stop == "end_turn"
    status = updates(after, "tool_call_update")[0]["status"]
    assert status == ("completed" if option == "allow" else "failed")
    said = [c["content"]["text"] for c in updates(after, "agent_message_chunk")]
    assert said == [f"permission: selected {option}", "after"]


@pytest.mark.parametrize("version", [1, 2])
def test_cancel_during_permission(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent, session_id = session(spawn, version, tmp_path)
    prompt_id = agent.prompt(session_id, "permission\nsay never")
    request = agent.until(lambda m: m.get("method") == "session/request_permission")[-1]
    agent.notify("session/cancel", {"sessionId": session_id})
    # The client owes the agent a `cancelled` outcome for the pending request.
    agent.respond(request["id"], {"outcome": {"outcome": "cancelled"}})
    if version == 1:
        response, after = agent.until_response(prompt_id)
        assert response["result"]["stopReason"] == "cancelled"
    else:
        after = agent.until(is_idle)
        assert after[-1]["params"]["update"]["stopReason"] == "cancelled"
    said = text_of(updates(after, "agent_message_chunk"))
    assert said == "permission: cancelled"


def test_cancel_requests_cascade(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 2, tmp_path, "--cancel-requests")
    agent.prompt(session_id, "permission")
    request = agent.until(lambda m: m.get("method") == "session/request_permission")[-1]
    agent.notify("session/cancel", {"sessionId": session_id})
    retraction = agent.next()
    assert retraction == {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": request["id"]},
    }
    error = {"code": -32800, "message": "Request cancelled"}
    agent.send({"jsonrpc": "2.0", "id": request["id"], "error": error})
    messages = agent.until(is_idle)
    assert messages[-1]["params"]["update"]["stopReason"] == "cancelled"
    assert text_of(updates(messages, "agent_message_chunk")) == "permission: error -32800"


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("script", ["sleep 20000", "slow 1000 50"])
def test_cancel_ends_a_waiting_turn(
    spawn: Spawn, tmp_path: Path, version: int, script: str
) -> None:
    agent, session_id = session(spawn, version, tmp_path)
    prompt_id = agent.prompt(session_id, f"say started\n{script}\nsay never")
    agent.until(lambda m: is_update(m, "agent_message_chunk"))
    started = time.monotonic()
    agent.notify("session/cancel", {"sessionId": session_id})
    if version == 1:
        response, messages = agent.until_response(prompt_id)
        assert response["result"]["stopReason"] == "cancelled"
    else:
        messages = agent.until(is_idle)
        assert messages[-1]["params"]["update"]["stopReason"] == "cancelled"
    assert time.monotonic() - started < 5
    assert "never" not in text_of(updates(messages, "agent_message_chunk"))


def test_cancel_request_cancels_a_v1_prompt(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 1, tmp_path)
    prompt_id = agent.prompt(session_id, "say go\nsleep 20000")
    agent.until(lambda m: is_update(m, "agent_message_chunk"))
    agent.notify("$/cancel_request", {"requestId": prompt_id})
    response, _ = agent.until_response(prompt_id)
    assert response["result"]["stopReason"] == "cancelled"


def test_hang_ignores_cancel(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 1, tmp_path)
    prompt_id = agent.prompt(session_id, "hang 100\nsay go\nsleep 200\nsay done")
    agent.until(lambda m: is_update(m, "agent_message_chunk"))
    agent.notify("session/cancel", {"sessionId": session_id})
    response, messages = agent.until_response(prompt_id)
    assert response["result"]["stopReason"] == "end_turn"
    assert text_of(updates(messages, "agent_message_chunk")) == "done"


@pytest.mark.parametrize("version", [1, 2])
def test_ignore_cancel(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent, session_id = session(spawn, version, tmp_path)
    prompt_id = agent.prompt(session_id, "ignore-cancel\nsay go\nsleep 200\nsay done")
    agent.until(lambda m: is_update(m, "agent_message_chunk"))
    # As above, at another point of the turn: each case spells out its exchange.
    agent.notify("session/cancel", {"sessionId": session_id})
    if version == 1:
        response, messages = agent.until_response(prompt_id)
        assert response["result"]["stopReason"] == "end_turn"
    else:
        messages = agent.until(is_idle)
        assert messages[-1]["params"]["update"]["stopReason"] == "end_turn"
    assert text_of(updates(messages, "agent_message_chunk")) == "done"


def test_second_prompt_while_running_is_refused(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 2, tmp_path)
    first = agent.prompt(session_id, "sleep 20000")
    agent.until_response(first)
    response, _ = agent.until_response(agent.prompt(session_id, "say hi"))
    assert response["error"]["code"] == -32600
    agent.notify("session/cancel", {"sessionId": session_id})
    assert agent.until(is_idle)[-1]["params"]["update"]["stopReason"] == "cancelled"


def test_stop_reason(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 2, tmp_path)
    messages, stop = run_turn(agent, 2, session_id, "say a\nstop max_tokens\nsay b")
    assert stop == "max_tokens"
    assert text_of(updates(messages, "agent_message_chunk")) == "a"


def test_elicit_form(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn(version=2)
    agent.initialize(2, elicitation={"form": {}})
    session_id = agent.new_session(tmp_path)
    agent.prompt(session_id, "elicit")
    request = agent.until(lambda m: m.get("method") == "elicitation/create")[-1]
    assert request["params"]["mode"] == "form"
    assert not schemas.errors(2, "CreateElicitationRequest", request["params"])
    agent.respond(request["id"], {"action": "accept", "content": {"name": "Ada"}})
    messages = agent.until(is_idle)
    assert text_of(updates(messages, "agent_message_chunk")) == 'elicit: accept {"name": "Ada"}'


def test_elicit_needs_the_capability(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 1, tmp_path)
    messages, _ = run_turn(agent, 1, session_id, "elicit")
    assert (
        text_of(updates(messages, "agent_message_chunk")) == "elicit: not supported by the client"
    )


# --------------------------------------------------------------------------- misbehaviour


@pytest.mark.parametrize(("command", "code"), [("crash", 3), ("crash-signal", -signal.SIGKILL)])
def test_crash(spawn: Spawn, tmp_path: Path, command: str, code: int) -> None:
    agent, session_id = session(spawn, 1, tmp_path)
    agent.prompt(session_id, f"say before\n{command}")
    assert agent.at_eof()
    assert agent.wait() == code


def test_invalid_json_then_the_turn_goes_on(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 1, tmp_path)
    prompt_id = agent.prompt(session_id, "invalid-json\nsay still here")
    assert isinstance(agent.next_raw(), NotJson)
    response, messages = agent.until_response(prompt_id)
    assert text_of(updates(messages, "agent_message_chunk")) == "still here"
    assert response["result"]["stopReason"] == "end_turn"


def test_huge_line(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 2, tmp_path)
    messages, _ = run_turn(agent, 2, session_id, "huge-line 2.5")
    [chunk] = updates(messages, "agent_message_chunk")
    assert chunk["content"]["text"] == "x" * int(2.5 * 1024 * 1024)


@pytest.mark.parametrize("version", [1, 2])
def test_wrong_shape_unknown_update_and_extension_notification(
    spawn: Spawn, tmp_path: Path, version: int
) -> None:
    agent, session_id = session(spawn, version, tmp_path)
    agent.validate = None
    messages, _ = run_turn(agent, version, session_id, "wrong-shape\nunknown-update\next-notify")
    wrong, custom = updates(messages)[-2:] if version == 1 else updates(messages)[2:4]
    notification = {"sessionId": session_id, "update": wrong}
    definition = "SessionNotification" if version == 1 else "UpdateSessionNotification"
    assert schemas.errors(version, definition, notification)  # really malformed
    assert custom == {"sessionUpdate": "_scripted_custom", "payload": {"note": "custom"}}
    if version == 2:
        assert not schemas.errors(2, definition, {"sessionId": session_id, "update": custom})
    assert any(m.get("method") == "_acp/something" for m in messages)


def test_garbage_and_notification_before_init(spawn: Spawn) -> None:
    agent = spawn("--garbage-before-init", "--notify-before-init")
    assert isinstance(agent.next_raw(), NotJson)
    assert agent.next()["method"] == "_auth/status_update"
    assert agent.initialize(1)["protocolVersion"] == 1


def test_eof_exits_unless_ignored(spawn: Spawn) -> None:
    agent = spawn()
    agent.initialize(1)
    assert agent.proc.stdin is not None
    agent.proc.stdin.close()
    assert agent.wait() == 0
    stubborn = spawn("--ignore-eof")
    stubborn.initialize(1)
    assert stubborn.proc.stdin is not None
    stubborn.proc.stdin.close()
    assert "ignoring it" in stubborn.stderr_line()
    assert stubborn.proc.poll() is None
    stubborn.kill_group()
    assert stubborn.wait() == -signal.SIGKILL


def test_ignore_sigterm(spawn: Spawn) -> None:
    agent = spawn("--ignore-sigterm")
    agent.initialize(1)  # the handler is installed before initialize is answered
    agent.proc.send_signal(signal.SIGTERM)
    agent.initialize(1)  # still answering after SIGTERM
    agent.proc.kill()
    assert agent.wait() == -signal.SIGKILL


def test_grandchild_stays_in_the_process_group(spawn: Spawn) -> None:
    agent = spawn("--grandchild")
    line = agent.stderr_line()
    assert line.startswith("grandchild pid ")
    pid = int(line.split()[-1])
    assert os.getpgid(pid) == agent.proc.pid
    agent.close()  # kills the whole group
    deadline = time.monotonic() + 5
    while _alive(pid):
        assert time.monotonic() < deadline, "grandchild survived the group kill"
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child (re-parented): probe it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return _not_zombie(pid)
    return waited == 0


def _not_zombie(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return status != "Z"


# --------------------------------------------------------------------------- sessions


def test_v1_load_replays_history(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 1, tmp_path)
    live, _ = run_turn(agent, 1, session_id, "say one two\ntool diff a.py")
    response, replayed = agent.until_response(
        agent.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        )
    )
    assert response["result"]["modes"]["currentModeId"] == "ask"
    user = updates(replayed)[0]
    assert user == {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "say one two\ntool diff a.py"},
    }
    assert updates(replayed)[1:] == updates(live)


def test_v1_resume_does_not_replay_and_flags_remove_capabilities(
    spawn: Spawn, tmp_path: Path
) -> None:
    agent, session_id = session(spawn, 1, tmp_path)
    run_turn(agent, 1, session_id, "say hi")
    response, before = agent.until_response(
        agent.request("session/resume", {"sessionId": session_id, "cwd": str(tmp_path)})
    )
    assert "result" in response
    assert before == []
    bare = spawn("--no-load", "--no-resume", "--no-list")
    caps = bare.initialize(1)["agentCapabilities"]
    assert caps["loadSession"] is False
    assert "list" not in caps["sessionCapabilities"]
    assert "resume" not in caps["sessionCapabilities"]
    for method in ("session/load", "session/resume", "session/list"):
        response, _ = bare.until_response(
            bare.request(method, {"sessionId": "x", "cwd": str(tmp_path), "mcpServers": []})
        )
        assert response["error"]["code"] == -32601


def test_v2_resume_with_and_without_replay(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 2, tmp_path)
    live, _ = run_turn(agent, 2, session_id, "say one two\nplan")
    params: Json = {"sessionId": session_id, "cwd": str(tmp_path)}
    response, before = agent.until_response(agent.request("session/resume", params))
    assert before == []
    assert response["result"]["configOptions"][0]["configId"] == "mode"
    response, replayed = agent.until_response(
        agent.request("session/resume", {**params, "replayFrom": {"type": "start"}})
    )
    assert "result" in response
    expected = [u for u in updates(live) if u["sessionUpdate"] != "state_update"]
    assert updates(replayed) == expected
    assert expected[0]["sessionUpdate"] == "user_message"
    response, _ = agent.until_response(
        agent.request("session/resume", {**params, "replayFrom": {"type": "message"}})
    )
    assert response["error"]["code"] == -32602
    response, _ = agent.until_response(
        agent.request("session/resume", {**params, "sessionId": "sess-nope"})
    )
    assert response["error"]["code"] == -32002


@pytest.mark.parametrize("version", [1, 2])
def test_list_close_delete(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent, first = session(spawn, version, tmp_path)
    other = tmp_path / "other"
    second = agent.new_session(other)
    listed = agent.call("session/list", {})["sessions"]
    assert [s["sessionId"] for s in listed] == [first, second]
    assert not schemas.errors(version, "ListSessionsResponse", {"sessions": listed})
    only = agent.call("session/list", {"cwd": str(other)})["sessions"]
    assert [s["sessionId"] for s in only] == [second]
    prompt_id = agent.prompt(second, "sleep 20000")
    close_id = agent.request("session/close", {"sessionId": second})

    def turn_end(m: Json) -> bool:
        return is_idle(m) if version == 2 else is_response(m, prompt_id)

    # The close answer and the end of the cancelled turn may come in either order.
    seen: list[Json] = []

    def both(message: Json) -> bool:
        seen.append(message)
        closed = any(is_response(m, close_id) for m in seen)
        return closed and any(turn_end(m) for m in seen)

    agent.until(both)
    [end] = [m for m in seen if turn_end(m)]
    stop = end["result"] if version == 1 else end["params"]["update"]
    assert stop["stopReason"] == "cancelled"
    [closed] = [m for m in seen if is_response(m, close_id)]
    assert closed["result"] == {}
    assert agent.call("session/delete", {"sessionId": second}) == {}
    assert agent.call("session/delete", {"sessionId": second}) == {}  # idempotent
    listed = agent.call("session/list", {})["sessions"]
    assert [s["sessionId"] for s in listed] == [first]


@pytest.mark.parametrize("version", [1, 2])
def test_config_options(spawn: Spawn, tmp_path: Path, version: int) -> None:
    agent = spawn(version=version)
    if version == 1:
        agent.initialize(1, session={"configOptions": {"boolean": {}}})
    else:
        agent.initialize(2)
    created = agent.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    assert not schemas.errors(version, "NewSessionResponse", created)
    session_id = created["sessionId"]
    key = "configId" if version == 2 else "id"
    assert [o[key] for o in created["configOptions"]] == ["mode", "verbose"]
    mode: Json = {"sessionId": session_id, "configId": "mode", "value": "code"}
    verbose: Json = {"sessionId": session_id, "configId": "verbose", "value": True}
    verbose["type"] = "boolean"
    if version == 2:
        mode["type"] = "id"
    result = agent.call("session/set_config_option", mode)
    assert result["configOptions"][0]["currentValue"] == "code"
    result = agent.call("session/set_config_option", verbose)
    assert result["configOptions"][1]["currentValue"] is True
    response, _ = agent.until_response(
        agent.request("session/set_config_option", {**mode, "value": "nope"})
    )
    assert response["error"]["code"] == -32602
    if version == 1:
        assert created["modes"]["currentModeId"] == "ask"
        assert agent.call("session/set_mode", {"sessionId": session_id, "modeId": "ask"}) == {}
        options = agent.call("session/set_config_option", {**verbose, "value": False})
        assert options["configOptions"][0]["currentValue"] == "ask"


def test_v1_without_boolean_capability_has_no_boolean_option(spawn: Spawn, tmp_path: Path) -> None:
    agent, _ = session(spawn, 1, tmp_path)
    created = agent.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    assert [o["id"] for o in created["configOptions"]] == ["mode"]


def test_v2_batch(spawn: Spawn, tmp_path: Path) -> None:
    agent = spawn()
    agent.initialize(2)
    agent.send(
        [
            {"jsonrpc": "2.0", "id": "a", "method": "session/list", "params": {}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}},
            {"jsonrpc": "2.0", "id": "b", "method": "nope", "params": {}},
        ]
    )
    reply: Any = agent.next_raw()
    assert isinstance(reply, list)
    assert [r["id"] for r in reply] == ["a", "b"]
    assert reply[0]["result"] == {"sessions": []}
    assert reply[1]["error"]["code"] == -32601
    assert not any(is_response(r, None) for r in reply)


def test_v2_ack_with_message_id(spawn: Spawn, tmp_path: Path) -> None:
    agent, session_id = session(spawn, 2, tmp_path, "--ack-message-id")
    ack, _ = agent.until_response(agent.prompt(session_id, "say hi"))
    user_message = agent.next()["params"]["update"]
    assert user_message["sessionUpdate"] == "user_message"
    assert ack["result"] == {"messageId": user_message["messageId"]}
    assert agent.until(is_idle)[-1]["params"]["update"]["stopReason"] == "end_turn"
