"""The real codex-acp 0.16.0 behind the hub: it requires login before any session.

Its ``authMethods`` are ``chatgpt``, ``codex-api-key`` and ``openai-api-key`` (both
``env_var``); with ``auth_method = "openai-api-key"`` and a (fake) ``OPENAI_API_KEY`` in the
agent's ``env`` the hub logs it in after ``initialize``. Logging in and creating, listing and
resuming sessions need no network; a prompt would, so there is none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.agents.spec import AgentSpec
from hub.protocol.errors import AUTH_REQUIRED
from tests.peers.paths import codex_acp
from tests.server.harness import RpcFailure, acp_client, running_hub


def codex_spec(tmp_path: Path, auth_method: str | None = "openai-api-key") -> AgentSpec:
    home = tmp_path / "home"
    codex_home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    codex_home.mkdir(exist_ok=True)
    return AgentSpec(
        "codex",
        str(codex_acp()),
        env={
            "HOME": str(home),
            "CODEX_HOME": str(codex_home),
            "OPENAI_API_KEY": "sk-test-not-a-real-key",
        },
        auth_method=auth_method,
    )


async def test_codex_logs_in_and_serves_sessions_through_the_hub(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    async with (
        running_hub([codex_spec(tmp_path)]) as hub,
        acp_client(hub.url, 2) as owner,
        acp_client(hub.url, 1, role="viewer") as viewer,
    ):
        supervisor = hub.app.supervisor
        assert supervisor is not None
        codex = supervisor.get("codex")
        assert codex.version == 1
        assert [m["methodId"] for m in codex.auth_methods] == [
            "chatgpt",
            "codex-api-key",
            "openai-api-key",
        ]
        assert codex.login_status.state == "logged_in"  # the configured login, at start
        # The owner is offered what the hub can log codex in with itself.
        offered = [m["methodId"] for m in owner.init_result["authMethods"]]
        assert "openai-api-key" in offered
        # CODEX_API_KEY is not in its env, but a wrapper may set it: offered, the agent decides.
        assert "codex-api-key" in offered
        assert await owner.call("auth/login", {"methodId": "openai-api-key"}) == {}

        sid = await owner.new_session(cwd=str(work))
        listed = await owner.call("session/list", {})
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]
        resumed = await viewer.call("session/resume", {"sessionId": sid, "cwd": str(work)})
        assert resumed is not None
        await viewer.wait_for(lambda: bool(viewer.session_updates(sid)))


async def test_codex_without_a_login_names_its_methods(tmp_path: Path) -> None:
    async with (
        running_hub([codex_spec(tmp_path, auth_method=None)]) as hub,
        acp_client(hub.url, 2) as owner,
    ):
        with pytest.raises(RpcFailure) as refused:
            await owner.new_session(cwd=str(tmp_path))
        assert refused.value.code == AUTH_REQUIRED
        message = refused.value.error["message"]
        assert "Agent 'codex' requires login" in message
        assert "chatgpt (agent), codex-api-key (env_var: CODEX_API_KEY)" in message
        # An owner logs it in over the wire; the next session/new works.
        login = {"agent": "codex", "methodId": "openai-api-key"}
        assert (await owner.call("_hub/agent_login", login))["login"]["state"] == "logged_in"
        assert await owner.new_session(cwd=str(tmp_path))
