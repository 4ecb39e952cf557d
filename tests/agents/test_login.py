"""Agents that require login: the configured login after every start, logins and logouts
through ``Agent.login`` / ``Agent.logout``, and the errors that name the agent's methods.

The scripted agent's ``--require-login`` mode advertises an ``agent`` method
(``scripted-login``) and an ``env_var`` method (``scripted-key``, reading
``SCRIPTED_API_KEY``) and answers every ``session/*`` request ``-32000`` until logged in; it
forgets the login when its process ends.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from hub.agents.errors import AgentError
from hub.agents.spec import AgentSpec, ProtocolChoice
from hub.protocol.errors import AUTH_REQUIRED, INVALID_PARAMS, UNSUPPORTED
from tests.agents.harness import RecordingSink, Supervised, scripted_spec, text, wait_stderr


def login_spec(
    home: Path, tmp_path: Path, protocol: ProtocolChoice, **changes: object
) -> AgentSpec:
    """The scripted agent requiring login, keeping its sessions across restarts."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    spec = scripted_spec(home, "--require-login", "--state-dir", str(state), protocol=protocol)
    return replace(spec, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("protocol", [1, 2])
async def test_a_configured_login_serves_the_first_prompt_and_survives_a_restart(
    supervised: Supervised, agent_home: Path, tmp_path: Path, protocol: ProtocolChoice
) -> None:
    spec = login_spec(
        agent_home,
        tmp_path,
        protocol,
        auth_method="scripted-login",
        auth_meta={"team": "blue"},
    )
    async with supervised(spec) as sup:
        agent = sup.get("scripted")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        assert agent.login_status.state == "logged_in"
        await agent.prompt(sid, text("say first"))
        await sink.wait_idle()
        await agent.prompt(sid, text("crash"))
        await sink.wait_for(lambda: "exited" in sink.statuses())
        # The next use restarts the agent, logs it in again, then re-attaches the session.
        await agent.prompt(sid, text("say second"))
        await sink.wait_for(lambda: sink.text() == "firstsecond")
        assert sink.statuses() == ["exited", "restarted"]  # no login change to report
        await wait_stderr(
            agent, lambda tail: 'logged in with scripted-login (_meta {"team": "blue"})' in tail
        )
        assert len(agent.pids) == 2


@pytest.mark.parametrize("protocol", [1, 2])
async def test_without_a_login_session_new_names_the_agent_and_its_methods(
    supervised: Supervised, agent_home: Path, tmp_path: Path, protocol: ProtocolChoice
) -> None:
    async with supervised(login_spec(agent_home, tmp_path, protocol)) as sup:
        agent = sup.get("scripted")
        with pytest.raises(AgentError) as refused:
            await agent.new_session(str(agent_home), [], RecordingSink())
        error = refused.value.error
        assert error.code == AUTH_REQUIRED
        assert "Agent 'scripted' requires login" in error.message
        assert "scripted-login (agent)" in error.message
        assert "scripted-key (env_var: SCRIPTED_API_KEY)" in error.message
        assert "_hub/agent_login" in error.message
        assert isinstance(error.data, dict)
        assert [m["methodId"] for m in error.data["authMethods"]] == [
            "scripted-login",
            "scripted-key",
        ]
        assert error.data["agentError"]["message"] == "Authentication required"
        assert agent.login_status.state == "none"


@pytest.mark.parametrize("protocol", [1, 2])
async def test_an_env_var_login_without_its_variable_is_warned_of_and_the_agent_decides(
    supervised: Supervised,
    agent_home: Path,
    tmp_path: Path,
    protocol: ProtocolChoice,
    caplog: pytest.LogCaptureFixture,
) -> None:
    missing = login_spec(agent_home, tmp_path, protocol, auth_method="scripted-key")
    env = {**missing.env, "SCRIPTED_API_KEY": "k-123"}
    present = replace(missing, name="keyed", env=env)
    async with supervised(missing, present) as sup:
        agent = sup.get("scripted")
        with pytest.raises(AgentError) as refused:
            await agent.new_session(str(agent_home), [], RecordingSink())
        status = agent.login_status
        assert (status.state, status.method_id) == ("failed", "scripted-key")
        assert status.message is not None
        # The agent was asked, and its own refusal is what failed the login; the hub's
        # suspicion rides along as a hint.
        assert "SCRIPTED_API_KEY is not set" in status.message
        assert "[agents.scripted] env does not set" in status.message
        assert "the configured login failed" in refused.value.error.message
        assert "login 'scripted-key' reads SCRIPTED_API_KEY" in caplog.text

        keyed = sup.get("keyed")
        sid = (await keyed.new_session(str(agent_home), [], RecordingSink())).session_id
        assert sid
        # Set up as the test above, for another login method.
        assert keyed.login_status.state == "logged_in"


@pytest.mark.parametrize("protocol", [1, 2])
async def test_a_key_set_by_a_wrapper_command_logs_the_agent_in(
    supervised: Supervised,
    agent_home: Path,
    tmp_path: Path,
    protocol: ProtocolChoice,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # `command = "env"`, `args = ["SCRIPTED_API_KEY=...", agent...]`: the definition's env
    # table does not name the key, the wrapper sets it for the agent.
    direct = login_spec(agent_home, tmp_path, protocol, auth_method="scripted-key")
    wrapped = replace(
        direct,
        command=shutil.which("env") or "/usr/bin/env",
        args=("SCRIPTED_API_KEY=k-wrapped", direct.command, *direct.args),
    )
    async with supervised(wrapped) as sup:
        agent = sup.get("scripted")
        sid = (await agent.new_session(str(agent_home), [], RecordingSink())).session_id
        assert sid
        assert agent.login_status.state == "logged_in"
        assert agent.login_status.method_id == "scripted-key"
        # The pre-check only warned.
        assert "login 'scripted-key' reads SCRIPTED_API_KEY" in caplog.text


async def test_a_configured_method_the_agent_does_not_offer_is_reported(
    supervised: Supervised, agent_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "hub.agents")
    spec = login_spec(agent_home, tmp_path, 2, auth_method="password")
    async with supervised(spec) as sup:
        agent = sup.get("scripted")
        await agent.ensure_started()
        message = agent.login_status.message
        assert message is not None
        assert "auth_method 'password' is not one of its authMethods" in message
        assert "scripted-login (agent)" in message
        assert "login with 'password' failed" in caplog.text


@pytest.mark.parametrize("protocol", [1, 2])
async def test_login_and_logout_reach_every_session_and_gate_new_ones(
    supervised: Supervised, agent_home: Path, tmp_path: Path, protocol: ProtocolChoice
) -> None:
    async with supervised(login_spec(agent_home, tmp_path, protocol)) as sup:
        agent = sup.get("scripted")
        # A wrong method id goes to the agent, whose own answer is passed on.
        with pytest.raises(AgentError) as wrong:
            await agent.login("scripted-password")
        assert wrong.value.code == INVALID_PARAMS
        assert "unknown auth method 'scripted-password'" in wrong.value.error.message
        assert agent.login_status.state == "none"

        await agent.login("scripted-login")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        await agent.logout()
        assert sink.events == [{"status": "logged_out"}]
        with pytest.raises(AgentError) as gated:
            await agent.new_session(str(agent_home), [], RecordingSink())
        assert gated.value.code == AUTH_REQUIRED
        await agent.login("scripted-login", {"who": "owner"})
        assert sink.events[-1] == {"status": "logged_in", "methodId": "scripted-login"}
        await agent.prompt(sid, text("say back"))
        await sink.wait_idle()
        assert sink.text() == "back"


async def test_logout_needs_the_v1_capability(supervised: Supervised, agent_home: Path) -> None:
    async with supervised(scripted_spec(agent_home, protocol=1)) as sup:
        agent = sup.get("scripted")
        with pytest.raises(AgentError) as refused:
            await agent.logout()
        assert refused.value.code == UNSUPPORTED
        assert "agentCapabilities.auth.logout" in refused.value.error.message
