"""Logging agents in over the wire: v1 ``authenticate`` / ``logout``, v2 ``auth/login`` /
``auth/logout`` and ``_hub/agent_login`` / ``_hub/agent_logout``, owners only.

The agent is the scripted agent in its ``--require-login`` mode (see ``tests/agents/README.md``):
it answers ``session/*`` with ``-32000`` until logged in with ``scripted-login``.
"""

from __future__ import annotations

from typing import Any

import pytest

from hub.protocol.errors import AUTH_REQUIRED, FORBIDDEN, INVALID_PARAMS
from tests.server.harness import AcpClient, RpcFailure, acp_client, running_hub, scripted_agent


def _agent_events(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    updates = [p["update"] for p in client.session_updates(sid)]
    return [u for u in updates if u.get("sessionUpdate") == "_hub_agent"]


@pytest.mark.parametrize("client_version", [1, 2])
@pytest.mark.parametrize("agent_protocol", [1, 2])
async def test_an_owner_logs_the_agent_in_and_out_in_its_own_version(
    client_version: int, agent_protocol: int
) -> None:
    agent = scripted_agent("scripted", agent_protocol, "--require-login")
    login, logout = (
        ("auth/login", "auth/logout") if client_version >= 2 else ("authenticate", "logout")
    )
    async with (
        running_hub([agent]) as hub,
        acp_client(hub.url, client_version) as owner,
        acp_client(hub.url, 2, role="viewer") as viewer,
    ):
        # An owner is offered the agent's methods the hub can log it in with: the agent one,
        # and the env_var one (the definition does not set SCRIPTED_API_KEY, but a wrapper
        # might: the agent's answer decides), never a terminal one.
        methods = owner.init_result["authMethods"]
        key = "methodId" if client_version >= 2 else "id"
        assert [m[key] for m in methods] == ["scripted-login", "scripted-key"]
        if client_version < 2:
            assert owner.init_result["agentCapabilities"]["auth"] == {"logout": {}}
        assert viewer.init_result["authMethods"] == []

        with pytest.raises(RpcFailure) as gated:
            await owner.new_session()
        assert gated.value.code == AUTH_REQUIRED
        assert "Agent 'scripted' requires login" in gated.value.error["message"]
        assert "scripted-login (agent)" in gated.value.error["message"]

        assert await owner.call(login, {"methodId": "scripted-login"}) == {}
        sid = await owner.new_session()
        await viewer.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        assert await owner.call(logout, {}) == {}
        # Everyone attached to the agent's sessions sees it (a v1 client that asked for
        # the hub's events too).
        await viewer.wait_for(lambda: bool(_agent_events(viewer, sid)))
        event = _agent_events(viewer, sid)[-1]
        assert (event["agent"], event["status"]) == ("scripted", "logged_out")
        with pytest.raises(RpcFailure) as again:
            await owner.new_session()
        assert again.value.code == AUTH_REQUIRED

        # The hub's own method names the agent and answers with the login state.
        result = await owner.call(
            "_hub/agent_login", {"agent": "scripted", "methodId": "scripted-login"}
        )
        assert result == {
            "agent": "scripted",
            "login": {"state": "logged_in", "methodId": "scripted-login"},
        }
        await viewer.wait_for(lambda: _agent_events(viewer, sid)[-1]["status"] == "logged_in")
        assert await owner.new_session()


@pytest.mark.parametrize("role", ["driver", "viewer"])
async def test_a_non_owner_login_never_reaches_the_agent(role: str) -> None:
    agent = scripted_agent("scripted", 2, "--require-login")
    async with running_hub([agent]) as hub, acp_client(hub.url, 1, role=role) as client:
        assert client.init_result["authMethods"] == []
        for method, params in [
            ("authenticate", {"methodId": "scripted-login"}),
            ("auth/login", {"methodId": "scripted-login"}),
            ("_hub/agent_login", {"agent": "scripted", "methodId": "scripted-login"}),
            ("auth/logout", {}),
            ("_hub/agent_logout", {"agent": "scripted"}),
        ]:
            with pytest.raises(RpcFailure) as refused:
                await client.call(method, params)
            assert refused.value.code == FORBIDDEN
            assert "needs role 'owner'" in refused.value.error["message"]
        scripted = hub.app.supervisor
        assert scripted is not None
        assert "logged in" not in scripted.get("scripted").stderr_tail()
        assert scripted.get("scripted").login_status.state == "none"


async def test_a_wrong_method_id_is_refused_with_the_agents_message() -> None:
    agent = scripted_agent("scripted", 2, "--require-login")
    async with running_hub([agent]) as hub, acp_client(hub.url, 2) as owner:
        with pytest.raises(RpcFailure) as wrong:
            await owner.call("_hub/agent_login", {"agent": "scripted", "methodId": "nope"})
        assert wrong.value.code == INVALID_PARAMS
        assert "unknown auth method 'nope'" in wrong.value.error["message"]
        with pytest.raises(RpcFailure) as unknown:
            await owner.call("_hub/agent_login", {"agent": "other", "methodId": "x"})
        assert unknown.value.code == INVALID_PARAMS
        assert "unknown agent 'other'" in str(unknown.value.error)
