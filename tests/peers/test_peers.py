"""The installed third-party peers start and behave as tests/peers/README.md says."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents.stdio_client import AgentProcess, is_idle, is_update, updates
from tests.peers import paths
from tests.support import missing, require_binary


def _python_sdk() -> None:
    if importlib.util.find_spec("acp") is None:
        missing("agent-client-protocol is not installed: run `make peers`")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path)}


def test_ts_agent_v1_cancel(tmp_path: Path) -> None:
    node = require_binary("node")
    with AgentProcess([node, str(paths.ts_agent_js())], env=_env(tmp_path)) as agent:
        assert agent.initialize(1)["protocolVersion"] == 1
        session_id = agent.new_session(tmp_path)
        prompt_id = agent.prompt(session_id, "hello")
        agent.until(lambda m: is_update(m, "agent_message_chunk"))
        agent.notify("session/cancel", {"sessionId": session_id})
        response, _ = agent.until_response(prompt_id)
        assert response["result"]["stopReason"] == "cancelled"


def test_ts_dual_agent_v2(tmp_path: Path) -> None:
    node = require_binary("node")
    with AgentProcess([node, str(paths.ts_dual_agent_js())], env=_env(tmp_path)) as agent:
        assert agent.initialize(2)["protocolVersion"] == 2
        session_id = agent.new_session(tmp_path)
        ack, _ = agent.until_response(agent.prompt(session_id, "hello"))
        message_id = ack["result"]["messageId"]  # real v2 peers name the user message here
        messages = agent.until(is_idle)
        assert updates(messages, "user_message")[0]["messageId"] == message_id
        assert updates(messages, "agent_message")
        assert messages[-1]["params"]["update"]["stopReason"] == "end_turn"


@pytest.mark.parametrize("which", ["agent", "echo"])
def test_python_sdk_examples(tmp_path: Path, which: str) -> None:
    _python_sdk()
    script = paths.py_example_agent() if which == "agent" else paths.py_echo_agent()
    with AgentProcess([sys.executable, str(script)], env=_env(tmp_path)) as agent:
        assert agent.initialize(1)["protocolVersion"] == 1
        session_id = agent.new_session(tmp_path)
        response, messages = agent.until_response(agent.prompt(session_id, "hello"))
        assert response["result"]["stopReason"] == "end_turn"
        assert updates(messages, "agent_message_chunk")


def test_python_echo_agent_echoes_the_offered_version(tmp_path: Path) -> None:
    _python_sdk()
    with AgentProcess([sys.executable, str(paths.py_echo_agent())], env=_env(tmp_path)) as agent:
        assert agent.initialize(2)["protocolVersion"] == 2  # then it speaks v1 anyway


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_ws_client_driver_against_the_reference_server(tmp_path: Path) -> None:
    node = require_binary("node")
    port = _free_port()
    server = subprocess.Popen(
        [node, str(paths.ts_http_server_js())],
        env={**_env(tmp_path), "PORT": str(port)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert "listening" in server.stdout.readline()  # the server is ready
        url = f"ws://127.0.0.1:{port}/acp"
        args = ["--protocol", "1", "--prompt", "hello", "--cwd", str(tmp_path)]
        run = subprocess.run(
            [node, str(paths.ts_ws_client_driver()), url, *args],
            cwd=paths.ts_ws_client_module_dir(),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert run.returncode == 0, run.stdout + run.stderr
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["initialized", "session"]
    assert "update" in kinds
    assert events[-2] == {"event": "prompt", "result": {"stopReason": "end_turn"}}
    assert kinds[-1] == "done"
