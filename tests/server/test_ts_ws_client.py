"""The TypeScript SDK's WebSocket clients against a real hub.

``tests/peers/hub_client.mjs`` runs the SDK 2.4.0 client (``experimental/ws-client``, whose zod
schemas validate every frame) in v1 or v2 and reports whether the SDK accepted, unaltered,
every frame it got. It is driven here against hubs running the scripted agent (v1 and v2) and
the SDK 1.9.0 example agents, and first proven to notice bad frames against a small
misbehaving WebSocket server. SDK 1.9.0's own ``ws-client.js`` example runs against the hub too.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from websockets.asyncio.server import ServerConnection, serve

from hub.agents.spec import AgentSpec
from tests.peers import paths
from tests.server.harness import acp_client, running_hub, scripted_agent
from tests.support import require_binary

pytestmark = pytest.mark.anyio

Summary = dict[str, Any]

# One scripted turn with each kind of update, a permission request and hub title/config.
SCRIPTED_TURN = "\n".join(
    [
        "say hello there from the scripted agent",
        "think about it",
        "tool diff",
        "plan",
        "tool terminal",
        "usage",
        "permission",
        "config",
        "title A title",
    ]
)
SDK_RUN_TIMEOUT = 60.0


def _node() -> str:
    return require_binary("node")


def hub_client_script() -> Path:
    script = paths.ts_ws_client_module_dir() / "hub_client.mjs"
    assert script.exists(), script
    return script


async def run_sdk_client(url: str, protocol: int, *args: str) -> tuple[int, Summary, str]:
    """One run of ``hub_client.mjs``: exit status, its JSON summary, its stderr."""
    node = _node()
    command = [node, str(hub_client_script()), url, "--protocol", str(protocol), *args]
    with anyio.fail_after(SDK_RUN_TIMEOUT):
        done = await anyio.run_process(command, cwd=paths.ts_ws_client_module_dir(), check=False)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    lines = stdout.strip().splitlines()
    assert lines, f"no summary (exit {done.returncode}): {stderr}"
    summary: Summary = orjson.loads(lines[-1])
    assert (done.returncode == 0) == summary["ok"], (done.returncode, summary)
    return done.returncode, summary, stderr


def variants(summary: Summary) -> list[str]:
    return [str(p["update"]["sessionUpdate"]) for p in summary["updates"]]


def text_of(summary: Summary) -> str:
    """Every text the agent said, whatever the update shape (v1 chunks or v2 messages)."""
    out: list[str] = []
    for params in summary["updates"]:
        update = params["update"]
        if update["sessionUpdate"] not in ("agent_message_chunk", "agent_message"):
            continue
        content = update.get("content")
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, dict) and block.get("type") == "text":
                out.append(str(block["text"]))
    return "".join(out)


def assert_accepted(summary: Summary, stderr: str) -> None:
    """The SDK accepted every frame the hub sent, and lost nothing of any update."""
    assert summary["ok"], (summary["error"], summary["sdkErrors"], summary["errorsSent"], stderr)
    assert summary["error"] is None
    assert summary["sdkErrors"] == []
    assert summary["errorsSent"] == []
    assert summary["altered"] == []
    assert summary["frames"]["batches"] == 0
    assert summary["frames"]["updates"] == len(summary["updates"]) > 0


# -- the client notices bad frames --------------------------------------------------------------

RUNNING = {"sessionUpdate": "state_update", "state": "running"}
IDLE = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
GOOD_V2 = {
    "sessionUpdate": "agent_message_chunk",
    "messageId": "m-1",
    "content": {"type": "text", "text": "hi"},
}
GOOD_V1 = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}


@dataclass(frozen=True)
class BadServer:
    """What the misbehaving server does with the prompt: frames sent before the answer."""

    protocol: int
    frames: list[Any]
    answer: dict[str, Any]


def _update(update: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s-1", "update": update},
    }


BAD_CASES: dict[str, BadServer] = {
    # v2 agent_message_chunk without content, numeric messageId.
    "v2-invalid-update": BadServer(
        2,
        [
            _update({"sessionUpdate": "agent_message_chunk", "messageId": 7}),
            _update(GOOD_V2),
            _update(RUNNING),
            _update(IDLE),
        ],
        {"messageId": "m-0"},
    ),
    # v1 tool_call without toolCallId and title.
    "v1-invalid-update": BadServer(
        1,
        [_update({"sessionUpdate": "tool_call", "status": "pending"}), _update(GOOD_V1)],
        {"stopReason": "end_turn"},
    ),
    # v2 session/prompt answered without the messageId the SDK requires.
    "v2-prompt-answer-without-message-id": BadServer(
        2, [_update(GOOD_V2), _update(RUNNING), _update(IDLE)], {}
    ),
    # Valid updates, but in one batch frame, which the SDK drops.
    "v2-batch": BadServer(
        2, [[_update(GOOD_V2), _update(RUNNING), _update(IDLE)]], {"messageId": "m-0"}
    ),
    # A malformed optional field the SDK silently replaces (cost) is still noticed.
    "v2-salvaged-field": BadServer(
        2,
        [
            _update({"sessionUpdate": "usage_update", "used": 1, "size": 10, "cost": "free"}),
            _update(RUNNING),
            _update(IDLE),
        ],
        {"messageId": "m-0"},
    ),
}


@asynccontextmanager
async def bad_server(case: BadServer) -> AsyncIterator[str]:
    """A tiny ACP 'agent' over WebSocket on loopback that misbehaves at the prompt."""

    async def send(ws: ServerConnection, message: Any) -> None:
        await ws.send(orjson.dumps(message).decode())

    async def handler(ws: ServerConnection) -> None:
        async for raw in ws:
            message = orjson.loads(raw)
            if not isinstance(message, dict) or "method" not in message:
                continue  # the client's answers and complaints
            method, request_id = message["method"], message.get("id")
            if method == "initialize":
                if case.protocol == 2:
                    result: dict[str, Any] = {
                        "protocolVersion": 2,
                        "info": {"name": "bad", "version": "0"},
                        "capabilities": {},
                    }
                else:
                    result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
            elif method == "session/new":
                result = {"sessionId": "s-1"}
            elif method == "session/prompt":
                for frame in case.frames:
                    await send(ws, frame)
                result = case.answer
            else:
                continue
            await send(ws, {"jsonrpc": "2.0", "id": request_id, "result": result})

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}/acp"


@pytest.mark.parametrize("name", list(BAD_CASES))
async def test_the_sdk_client_run_fails_on_a_bad_frame(name: str) -> None:
    case = BAD_CASES[name]
    async with bad_server(case) as url:
        code, summary, _ = await run_sdk_client(url, case.protocol, "--timeout", "3000")
    assert code == 1
    assert not summary["ok"]
    if name.endswith("invalid-update"):
        assert any("Error handling notification" in e for e in summary["sdkErrors"])
        assert summary["frames"]["updates"] == len(summary["updates"]) + 1
    elif name == "v2-prompt-answer-without-message-id":
        assert "messageId" in summary["error"]["message"]
    elif name == "v2-batch":
        assert summary["frames"]["batches"] == 1
        assert [e["error"]["code"] for e in summary["errorsSent"]] == [-32600]
        assert summary["updates"] == []
    else:
        assert [a["paths"] for a in summary["altered"]] == [["$.update.cost"]]


async def test_the_sdk_client_run_passes_against_a_good_server() -> None:
    """The control case: the same server without the bad frame gives ``ok``."""
    case = BadServer(2, [_update(GOOD_V2), _update(RUNNING), _update(IDLE)], {"messageId": "m-0"})
    async with bad_server(case) as url:
        code, summary, stderr = await run_sdk_client(url, 2)
    assert code == 0
    assert_accepted(summary, stderr)
    assert summary["stopReason"] == "end_turn"


# -- against the hub ---------------------------------------------------------------------------


def ts_agent(name: str, script: Path, home: Path) -> AgentSpec:
    return AgentSpec(name=name, command=_node(), args=(str(script),), env={"HOME": str(home)})


AgentFactory = Callable[[Path], AgentSpec]

AGENTS: Mapping[str, AgentFactory] = {
    # The SDK's v2 client needs the user message id in the prompt answer, so the v2 scripted
    # agent gives it, as real v2 agents do.
    "scripted-v2": lambda home: scripted_agent("scripted", 2, "--ack-message-id"),
    "scripted-v1": lambda home: scripted_agent("scripted", 1),
    "ts-agent": lambda home: ts_agent("scripted", paths.ts_agent_js(), home),
    "ts-dual-agent": lambda home: ts_agent("scripted", paths.ts_dual_agent_js(), home),
}


# agent.js waits a second between its steps.
AGENT_PARAMS = [
    pytest.param(name, marks=[pytest.mark.slow] if name == "ts-agent" else []) for name in AGENTS
]


def expected_text(agent: str) -> str:
    return "hello there from the scripted agent" if agent.startswith("scripted") else ""


def check_turn(summary: Summary, agent: str, protocol: int) -> None:
    seen = set(variants(summary))
    assert summary["stopReason"] == "end_turn"
    assert expected_text(agent) in text_of(summary)
    assert text_of(summary)
    if protocol == 2:
        assert "state_update" in seen
        assert "_hub_presence" in seen  # the hub's own variants pass the SDK's schemas too
        assert summary["prompt"]["messageId"]
    else:
        assert not any(v.startswith("_hub_") or v == "state_update" for v in seen)
    if agent.startswith("scripted"):
        expect = {"tool_call_update", "usage_update", "config_option_update"}
        expect |= {"plan_update"} if protocol == 2 else {"plan", "tool_call"}
        assert expect <= seen, seen
    if agent in ("scripted-v2", "scripted-v1", "ts-agent"):
        # The permission request reached the SDK client (in its version's shape), was
        # answered, and the agent saw the answer.
        assert len(summary["permissions"]) == 1
        request = summary["permissions"][0]["params"]
        assert request["sessionId"] == summary["sessionId"]
        assert ("subject" in request) if protocol == 2 else ("toolCall" in request)
    if agent.startswith("scripted"):
        assert "permission: selected allow" in text_of(summary)


@pytest.mark.parametrize("protocol", [2, 1])
@pytest.mark.parametrize("agent", AGENT_PARAMS)
async def test_sdk_client_new_session_and_prompt(tmp_path: Path, agent: str, protocol: int) -> None:
    spec = AGENTS[agent](tmp_path)
    async with running_hub([spec]) as hub:
        code, summary, stderr = await run_sdk_client(
            hub.url,
            protocol,
            "--agent",
            spec.name,
            "--cwd",
            str(tmp_path),
            "--prompt",
            SCRIPTED_TURN,
        )
    assert_accepted(summary, stderr)
    assert code == 0
    assert summary["initialize"]["protocolVersion"] == protocol
    assert summary["opened"]["_meta"]["acp-hub"]["agent"] == spec.name
    check_turn(summary, agent, protocol)


@pytest.mark.parametrize("protocol", [2, 1])
@pytest.mark.parametrize("agent", AGENT_PARAMS)
async def test_sdk_client_resumes_with_replay_and_prompts(
    tmp_path: Path, agent: str, protocol: int
) -> None:
    spec = AGENTS[agent](tmp_path)
    async with running_hub([spec]) as hub:
        # The session is made and used by a client of the other version, then resumed.
        other = 1 if protocol == 2 else 2
        _, first, stderr = await run_sdk_client(
            hub.url, other, "--cwd", str(tmp_path), "--prompt", SCRIPTED_TURN
        )
        assert_accepted(first, stderr)
        session_id = first["sessionId"]
        code, summary, stderr = await run_sdk_client(
            hub.url,
            protocol,
            "--session",
            session_id,
            "--cwd",
            str(tmp_path),
            "--prompt",
            "say again",
        )
    assert_accepted(summary, stderr)
    assert code == 0
    assert summary["opened"]["_meta"]["acp-hub"]["seq"] > 0
    assert {p["sessionId"] for p in summary["updates"]} == {session_id}
    if protocol == 2:
        # v2: session/resume with replayFrom start; the replay is marked and comes first.
        replayed = [p for p in summary["updates"] if p["_meta"]["acp-hub"].get("replay")]
        assert replayed
        assert summary["updates"][: len(replayed)] == replayed
    # The earlier turn (made by a client of the other version) reached this client too.
    assert text_of(first)
    assert text_of(first)[:20] in text_of(summary)
    assert summary["stopReason"] == "end_turn"
    if agent.startswith("scripted"):
        assert "again" in text_of(summary)


async def test_sdk_client_accepts_the_answer_to_a_queued_prompt(tmp_path: Path) -> None:
    """ACP v2 requires ``messageId`` in every prompt answer (the SDK's schema refuses one
    without it): a prompt queued behind another is answered with the id the hub minted, and
    its user message reaches the clients under that id when it runs."""
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        await owner.prompt(sid, "sleep 600000")  # v2: answered at once; the turn runs on
        runs: list[tuple[int, Summary, str]] = []

        async def sdk_client() -> None:
            args = ("--session", sid, "--cwd", str(tmp_path), "--prompt", "say queued")
            runs.append(await run_sdk_client(hub.url, 2, *args, "--timeout", "40000"))

        def queued() -> bool:
            queue = owner.fold(sid).hub("_hub_queue") or {}
            return bool(queue.get("entries"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(sdk_client)
            await owner.wait_for(queued, timeout=SDK_RUN_TIMEOUT)
            await owner.notify("session/cancel", {"sessionId": sid})
    (code, summary, stderr) = runs[0]
    assert_accepted(summary, stderr)
    assert code == 0
    answer = summary["prompt"]
    assert answer["_meta"]["acp-hub"]["queued"] is True
    assert answer["messageId"] == answer["_meta"]["acp-hub"]["messageId"]
    users = {
        p["update"]["messageId"]
        for p in summary["updates"]
        if p["update"]["sessionUpdate"] in ("user_message", "user_message_chunk")
    }
    assert answer["messageId"] in users
    assert summary["stopReason"] == "end_turn"
    assert "queued" in text_of(summary)


# -- SDK 1.9.0's ws-client.js example ------------------------------------------------------------


async def test_sdk_1_9_ws_client_example(tmp_path: Path) -> None:
    node = _node()
    client = paths.ts_ws_client_js()
    async with running_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as hub:
        env = {**os.environ, "ACP_WS_URL": hub.url, "HOME": str(tmp_path)}
        with anyio.fail_after(SDK_RUN_TIMEOUT):
            done = await anyio.run_process([node, str(client)], cwd=tmp_path, env=env, check=False)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stdout + stderr
    assert "Hello over WebSocket" in stdout  # the scripted agent says a plain prompt back
    assert "Done: end_turn" in stdout
    assert "loadSession=true" in stdout
    assert "Error handling notification" not in stderr
    assert "Invalid message" not in stderr
