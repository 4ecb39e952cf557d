"""``acp-hub demo`` and ``acp-hub serve`` as a user runs them: the console script in a real process.

The demo hub is started on an ephemeral port, a WebSocket client plays a whole turn of the demo
agent (answering its permission request) in v2 and in v1, and the folded result is checked for
every piece of the turn. SIGINT then stops the hub cleanly: exit status 0, open clients closed
with 1001, the agent's process group gone. ``acp-hub serve`` without agents, or with a bad
config file, exits 2 with a message naming the problem.
"""

from __future__ import annotations

import base64
import os
import signal
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
import pytest

from hub.protocol.agent_v1 import AgentV1Translator
from hub.protocol.state import SessionState
from tests.hubproc import ACP_HUB, START_TIMEOUT, HubProcess, hub_command, hub_environment
from tests.server.harness import AcpClient, acp_client

pytestmark = pytest.mark.anyio

PROMPT = "How do I sort a list of names?"
STOP_TIMEOUT = 20.0


def _env(tmp_path: Path) -> dict[str, str]:
    return hub_environment(tmp_path, {"ACP_HUB_DEMO_FAST": "1"})


def demo_hub(tmp_path: Path, *args: str) -> AbstractAsyncContextManager[HubProcess]:
    """``acp-hub demo --port 0 ARGS`` in ``tmp_path`` (the demo's workspace root: the directory
    it was started in), until its banner names the port; killed if still running."""
    return hub_command(tmp_path, "demo", "--port", "0", *args, env={"ACP_HUB_DEMO_FAST": "1"})


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, process group) of a live process, from /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[2])


def demo_agent_pids(hub_pid: int) -> list[int]:
    """The hub's child processes running the demo agent."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is None or stat[0] != hub_pid:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hub.demo.agent" in cmdline:
            found.append(int(entry.name))
    return found


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# -- one turn of the demo agent ---------------------------------------------------------------


async def play_turn(client: AcpClient, cwd: Path) -> tuple[str, Any, dict[str, Any]]:
    """Start a session, prompt, allow the edit; the session id, the prompt result and the
    permission request the client was sent."""
    session_id = await client.new_session(cwd=str(cwd))
    prompt_id = await client.start(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": PROMPT}]}
    )
    await client.wait_for(lambda: bool(client.requests))
    request = client.requests[-1]
    assert request["method"] == "session/request_permission"
    await client.answer(
        request["id"], {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    )
    result = await client.result(prompt_id)
    if client.version >= 2:
        await client.wait_for(lambda: client.idle_count(session_id) >= 1)
    return session_id, result, request


def folded(client: AcpClient, session_id: str) -> SessionState:
    """The client's view of the session as a v2 state (v1 updates go through the same
    translation the hub applies to v1 agents)."""
    if client.version >= 2:
        return client.fold(session_id)
    translator = AgentV1Translator()
    state = SessionState()
    for params in client.session_updates(session_id):
        state.apply_all(translator.update(params["update"]))
    return state


def _text(content: Any) -> str:
    return "".join(str(block.get("text", "")) for block in content or [] if isinstance(block, dict))


def check_turn(
    client: AcpClient, session_id: str, cwd: Path, request: dict[str, Any], agent_version: int
) -> None:
    state = folded(client, session_id)
    snapshot = state.snapshot()
    messages = [state.message(m) for m in state.message_ids]
    by_kind = {m["kind"]: m for m in messages if m is not None}

    # The prompt, the thoughts and the streamed markdown answer.
    if client.version >= 2 or "user_message" in by_kind:
        # (A v1 client renders its own prompt; whether the hub echoes it back to it depends
        # on whether the agent's prompt answer or its user message reaches the hub first.)
        assert _text(by_kind["user_message"]["content"]) == PROMPT
    assert "The user asks about" in _text(by_kind["agent_thought"]["content"])
    answer = _text(by_kind["agent_message"]["content"])
    for piece in ("## How do I sort", "### What I did", "```python\n", "| check | result |"):
        assert piece in answer, piece
    assert "[agentclientprotocol.com](https://agentclientprotocol.com)" in answer
    assert "I applied the edit" in answer  # the agent saw the client's answer
    chunks = [
        p
        for p in client.session_updates(session_id)
        if p["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert len(chunks) > 10  # streamed, not sent whole

    # The plan, every step done.
    plans = list(snapshot["plans"].values())
    assert len(plans) == 1
    entries = plans[0]["plan"]["entries"]
    assert len(entries) == 5
    assert {e["status"] for e in entries} == {"completed"}

    # The edit, with its diff, completed after the permission.
    tools = {t: state.tool_call(t) for t in state.tool_call_ids}
    edits = [t for t in tools.values() if t is not None and t.get("kind") == "edit"]
    assert len(edits) == 1
    assert edits[0]["status"] == "completed"
    assert str(cwd / "src") in str(edits[0]["locations"])
    assert (
        "+def how_do_i(items: list[str]) -> list[str]:"
        in orjson.dumps(edits[0]["content"]).decode()
    )

    # The test run in a terminal.
    runs = [t for t in tools.values() if t is not None and t.get("kind") == "execute"]
    assert len(runs) == 1
    assert runs[0]["status"] == "completed"
    if client.version >= 2 and agent_version >= 2:
        (ref,) = runs[0]["content"]
        assert ref["type"] == "terminal"
        output = state.terminal_output(ref["terminalId"])
        assert output is not None
        assert b"3 passed" in output
        assert b"\x1b[" in output  # coloured
        terminal = snapshot["terminals"][ref["terminalId"]]
        assert terminal["fields"]["exitStatus"] == {"exitCode": 0}
        assert base64.b64decode(terminal["output"]) == output
    else:
        # Without a v2 agent and a v2 client there is no terminal: the output is text.
        shown = orjson.dumps(runs[0]["content"]).decode()
        assert "3 passed" in shown
        if agent_version >= 2:
            assert "[exit code 0]" in shown  # the hub's v1 rendering of the terminal

    # The permission request, in the client's version, and (v2) its resolved record.
    options = [o["optionId"] for o in request["params"]["options"]]
    assert options == ["allow_once", "reject_once"]
    assert request["params"]["sessionId"] == session_id
    if client.version >= 2:
        assert request["params"]["subject"]["type"] == "tool_call"
        (record,) = snapshot["permissions"].values()
        assert record["status"] == "resolved"
        assert record["outcome"] == {"outcome": "selected", "optionId": "allow_once"}
    else:
        assert request["params"]["toolCall"]["toolCallId"] in tools

    # Usage and the session title.
    assert snapshot["usage"]["used"] == 2500
    assert snapshot["usage"]["cost"]["currency"] == "USD"
    assert state.title == PROMPT


@pytest.mark.parametrize(
    ("client_version", "agent_protocol"), [(2, "auto"), (1, "auto"), (2, "1"), (1, "2")]
)
async def test_demo_turn_then_sigint(
    tmp_path: Path, client_version: int, agent_protocol: str
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()  # under the demo's workspace root (the directory it was started in)
    async with demo_hub(tmp_path, "--protocol", agent_protocol) as demo:
        async with acp_client(demo.url, client_version) as client, acp_client(demo.url) as watcher:
            assert client.init_result["protocolVersion"] == client_version
            hub_meta = client.init_result["_meta"]["acp-hub"]
            assert hub_meta["defaultAgent"] == "demo"
            session_id, result, request = await play_turn(client, cwd)
            if client_version == 1:
                assert result == {"stopReason": "end_turn"}
            else:
                assert client.fold(session_id).stop_reason == "end_turn"
            check_turn(client, session_id, cwd, request, 1 if agent_protocol == "1" else 2)

            (agent_pid,) = demo_agent_pids(demo.process.pid)
            stat = _stat(agent_pid)
            assert stat is not None
            pgid = stat[1]
            assert pgid == agent_pid  # the agent leads its own process group

            demo.process.send_signal(signal.SIGINT)
            with anyio.fail_after(STOP_TIMEOUT):
                code = await demo.process.wait()
                await client.wait_for(lambda: client.close_code is not None)
                await watcher.wait_for(lambda: watcher.close_code is not None)
            assert client.close_code == 1001
            assert watcher.close_code == 1001
        stderr = demo.stderr.read_text()
        assert code == 0, stderr
        assert "Traceback" not in stderr
        assert not group_alive(pgid)


# -- acp-hub serve: refusals ---------------------------------------------------------------------


async def run_cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    with anyio.fail_after(START_TIMEOUT):
        done = await anyio.run_process(
            [str(ACP_HUB), *args], env=_env(tmp_path), cwd=tmp_path, check=False
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_serve_without_agents_exits_2(tmp_path: Path) -> None:
    code, stdout, stderr = await run_cli(tmp_path, "serve", "--port", "0")
    assert code == 2
    assert stdout == ""
    assert stderr.strip() == "acp-hub: no agents: use --agent NAME=COMMAND or --config FILE"


BAD_CONFIGS = {
    "invalid-toml": ("[agents.a\ncommand = 'x'\n", "invalid TOML"),
    "unknown-agent-key": (
        "[agents.a]\ncommand = 'x'\ncolor = 'red'\n",
        "[agents.a]: unknown key(s) color",
    ),
    "missing-command": (
        "[agents.a]\nargs = ['x']\n",
        "[agents.a]: command must be a non-empty string",
    ),
    "bad-default": (
        "default_agent = 'zz'\n[agents.a]\ncommand = 'x'\n",
        "default_agent 'zz' is not a defined agent",
    ),
    "bad-hub-setting": (
        "[hub]\nport = 'eighty'\n[agents.a]\ncommand = 'x'\n",
        "[hub]: hub setting 'port' must be int",
    ),
    "unknown-hub-setting": (
        "[hub]\nbogus = 1\n[agents.a]\ncommand = 'x'\n",
        "[hub]: unknown hub setting(s): bogus",
    ),
}


@pytest.mark.parametrize("name", list(BAD_CONFIGS))
async def test_serve_reports_a_bad_config_file(tmp_path: Path, name: str) -> None:
    text, expected = BAD_CONFIGS[name]
    config = tmp_path / "hub.toml"
    config.write_text(text)
    code, stdout, stderr = await run_cli(tmp_path, "serve", "--port", "0", "--config", str(config))
    assert code == 2
    assert stdout == ""
    (line,) = stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith(f"acp-hub: {config}: "), line
    assert expected in line


async def test_serve_reports_a_missing_config_file(tmp_path: Path) -> None:
    config = tmp_path / "nowhere.toml"
    code, _, stderr = await run_cli(tmp_path, "serve", "--config", str(config))
    assert code == 2
    assert stderr.strip() == f"acp-hub: {config}: cannot read: No such file or directory"


async def test_serve_without_workspace_roots_exits_2(tmp_path: Path) -> None:
    code, stdout, stderr = await run_cli(tmp_path, "serve", "--port", "0", "--agent", "a=true")
    assert code == 2
    assert stdout == ""
    (line,) = stderr.strip().splitlines()
    assert line.startswith("acp-hub: no workspace roots:"), line
    code, _, stderr = await run_cli(
        tmp_path, "serve", "--agent", "a=true", "--workspace", str(tmp_path / "missing")
    )
    assert code == 2
    assert "is not a directory" in stderr


async def test_serve_takes_workspace_roots_from_the_environment(tmp_path: Path) -> None:
    """``ACP_HUB_WORKSPACE_ROOTS`` (``:``-separated) replaces the config file's roots: a root
    that does not exist is named, as one from the config file would be."""
    roots = f"{tmp_path}{os.pathsep}{tmp_path / 'missing'}"
    env = {**_env(tmp_path), "ACP_HUB_WORKSPACE_ROOTS": roots}
    with anyio.fail_after(START_TIMEOUT):
        done = await anyio.run_process(
            [str(ACP_HUB), "serve", "--agent", "a=true"], env=env, cwd=tmp_path, check=False
        )
    assert done.returncode == 2
    (line,) = done.stderr.decode().strip().splitlines()
    assert line == f"acp-hub: workspace root {str(tmp_path / 'missing')!r} is not a directory"


async def test_serve_reports_a_store_url_with_a_bad_port(tmp_path: Path) -> None:
    code, stdout, stderr = await run_cli(
        tmp_path, "serve", "--agent", "a=true", "--store", "redis://redis:6379:6379/0"
    )
    assert code == 2
    assert stdout == ""
    (line,) = stderr.strip().splitlines()
    assert line == "acp-hub: store: a redis store is redis://HOST:PORT/DB"
