"""What a client may hand an agent and how much it may use, over real sockets (docs/limits.md):
workspace roots, the MCP server policy, session caps, prompt and state bytes, idle sessions."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hub.sessions.ops import SessionOps
from hub.settings import Settings
from tests.server.harness import (
    AcpClient,
    RpcFailure,
    acp_client,
    running_hub,
    scripted_agent,
)

FORBIDDEN = -32040
LIMIT_REACHED = -32050
INVALID_PARAMS = -32602


async def refused(client: AcpClient, method: str, params: dict[str, object]) -> RpcFailure:
    with pytest.raises(RpcFailure) as caught:
        await client.call(method, params)
    return caught.value


async def test_session_cwd_must_lie_under_a_workspace_root(tmp_path: Path) -> None:
    root = tmp_path / "work"
    (root / "proj").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (root / "escape").symlink_to(tmp_path / "secret")
    settings = Settings(workspace_roots=(str(root),))
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as client:
        session_id = await client.new_session(cwd=str(root / "proj"))
        assert session_id.startswith("s-")
        for cwd in (str(tmp_path / "secret"), str(root / "escape"), "/etc", "/"):
            failure = await refused(client, "session/new", {"cwd": cwd, "mcpServers": []})
            assert failure.code == FORBIDDEN, cwd
            assert "workspace roots" in failure.error["message"]
        for cwd in ("relative", str(root / "missing"), "/tmp/a\nb", "/" + "x" * 100_000):
            failure = await refused(client, "session/new", {"cwd": cwd, "mcpServers": []})
            assert failure.code == INVALID_PARAMS, cwd[:40]
        # The hub is still fine: the refused requests started nothing.
        listed = await client.call("session/list", {})
        assert [s["sessionId"] for s in listed["sessions"]] == [session_id]


async def test_owners_pass_mcp_servers_under_the_default_policy() -> None:
    # (Who else may start sessions is the access layer's; the policy's refusal of non-owners
    # is tested in tests/sessions/test_workspace.py.)
    server = {"type": "stdio", "name": "sh", "command": "/bin/sh", "args": ["-c", "id"], "env": []}
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        result = await owner.call("session/new", {"cwd": "/tmp", "mcpServers": [server]})
        assert result["sessionId"]


async def test_mcp_policy_none_and_the_command_allow_list() -> None:
    server = {"type": "stdio", "name": "x", "command": "/bin/sh", "args": [], "env": []}
    async with (
        running_hub([scripted_agent()], Settings(mcp_servers="none")) as hub,
        acp_client(hub.url) as owner,
    ):
        failure = await refused(owner, "session/new", {"cwd": "/tmp", "mcpServers": [server]})
        assert failure.code == FORBIDDEN
    settings = Settings(mcp_servers="any", mcp_commands=("true",))
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as owner:
        failure = await refused(owner, "session/new", {"cwd": "/tmp", "mcpServers": [server]})
        assert failure.code == FORBIDDEN
        assert "mcp_commands" in failure.error["message"]
        allowed = {**server, "command": "true"}
        assert await owner.call("session/new", {"cwd": "/tmp", "mcpServers": [allowed]})


async def test_sessions_are_capped_in_total_and_per_principal() -> None:
    settings = Settings(max_sessions=3, max_sessions_per_principal=2)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as client:
        first = await client.new_session()
        await client.new_session()
        failure = await refused(client, "session/new", {"cwd": "/tmp", "mcpServers": []})
        assert failure.code == LIMIT_REACHED
        assert failure.error["data"]["limit"] == "max_sessions_per_principal"
        # Closing one gives the place back.
        await client.call("session/close", {"sessionId": first})
        await client.new_session()


async def test_the_hub_wide_session_cap() -> None:
    settings = Settings(max_sessions=1)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as client:
        await client.new_session()
        failure = await refused(client, "session/new", {"cwd": "/tmp", "mcpServers": []})
        assert failure.code == LIMIT_REACHED
        assert failure.error["data"]["limit"] == "max_sessions"


async def test_a_prompt_over_max_prompt_bytes_is_refused_and_the_session_goes_on() -> None:
    settings = Settings(max_prompt_bytes=1000)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as client:
        session_id = await client.new_session()
        big = [{"type": "text", "text": "say " + "x" * 2000}]
        failure = await refused(client, "session/prompt", {"sessionId": session_id, "prompt": big})
        assert failure.code == INVALID_PARAMS
        assert failure.error["data"] == {"limit": "max_prompt_bytes", "max": 1000}
        await client.prompt(session_id, "say small enough")
        await client.wait_for(lambda: client.idle_count(session_id) >= 1)


async def test_a_full_session_state_refuses_new_prompts_but_keeps_what_it_has() -> None:
    settings = Settings(max_state_bytes=20_000)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as client:
        session_id = await client.new_session()
        # 200 chunks of 200 bytes: the turn runs past the bound and is not cut short.
        await client.prompt(session_id, "stream 200 200")
        await client.wait_for(lambda: client.idle_count(session_id) >= 1)
        state = client.fold(session_id)
        streamed = [state.message(m) for m in state.message_ids]
        assert any("000199" in str(message) for message in streamed)
        failure = await refused(
            client,
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "say more"}]},
        )
        assert failure.code == LIMIT_REACHED
        assert failure.error["data"]["limit"] == "max_state_bytes"
        # A new session is the way on.
        other = await client.new_session()
        await client.prompt(other, "say fresh")
        await client.wait_for(lambda: client.idle_count(other) >= 1)


async def test_an_idle_session_without_clients_is_closed_after_the_timeout() -> None:
    settings = Settings(idle_session_timeout=0.2)
    async with running_hub([scripted_agent()], settings) as hub:
        registry = hub.app.registry
        assert registry is not None
        closed = anyio.Event()
        gone: list[str] = []

        def on_change(session: SessionOps) -> None:
            if session.closed:
                gone.append(session.id)
                closed.set()

        registry.listeners.append(on_change)
        async with acp_client(hub.url) as client:
            kept = await client.new_session()
            # A session with a client attached is kept however long it is idle.
            async with acp_client(hub.url) as other:
                reaped = await other.new_session()
            with anyio.fail_after(20):
                await closed.wait()
            assert gone == [reaped]
            listed = await client.call("session/list", {})
            assert [s["sessionId"] for s in listed["sessions"]] == [kept]
