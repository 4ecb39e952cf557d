"""The supervisor when agents misbehave: crashes, restarts, bad output, stubborn processes."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from pathlib import Path

import anyio
import pytest

from hub.agents.agent import RestartPolicy
from hub.agents.errors import AgentError
from hub.agents.lifecycle import AgentState
from hub.agents.spec import AgentSpec, ProtocolChoice
from hub.protocol.errors import AGENT_UNAVAILABLE, SESSION_LOST
from tests.agents.harness import (
    TEST_POLICY,
    RecordingSink,
    Supervised,
    live_members,
    scripted_spec,
    text,
    wait_group_gone,
    wait_stderr,
)

# A v2 agent whose sessions survive its process (kept in a file under $HOME), so that a
# restarted process can resume them. `crash` in a prompt makes it exit with status 7.
PERSISTENT_AGENT = r"""
import json, os, sys
store = os.path.join(os.environ["HOME"], "sessions.json")
sessions = json.load(open(store)) if os.path.exists(store) else []
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 2,
              "info": {"name": "persistent", "version": "1"}, "capabilities": {"session": {}}}})
    elif method == "session/new":
        sid = "p-%d" % len(sessions); sessions.append(sid); json.dump(sessions, open(store, "w"))
        send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": sid}})
    elif method == "session/resume":
        if params["sessionId"] in sessions:
            send({"jsonrpc": "2.0", "id": rid, "result": {"configOptions": []}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32002, "message": "unknown"}})
    elif method == "session/prompt":
        if params["prompt"][0]["text"] == "crash":
            os._exit(7)
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId":
              params["sessionId"], "update": {"sessionUpdate": "state_update", "state": "idle",
              "stopReason": "end_turn"}}})
"""


def persistent_spec(home: Path, tmp_path: Path) -> AgentSpec:
    script = tmp_path / "persistent_agent.py"
    script.write_text(PERSISTENT_AGENT)
    return AgentSpec("persistent", sys.executable, (str(script),), env={"HOME": str(home)})


@pytest.mark.parametrize(
    ("protocol", "command", "code", "sig"),
    [
        (1, "crash", 3, None),
        (2, "crash", 3, None),
        (2, "crash-signal", None, "SIGKILL"),
    ],
)
async def test_crash_mid_turn_ends_the_turn_and_reports_exit(
    supervised: Supervised,
    agent_home: Path,
    protocol: ProtocolChoice,
    command: str,
    code: int | None,
    sig: str | None,
) -> None:
    async with supervised.session(agent_home, protocol=protocol) as (agent, sink, sid):
        await agent.prompt(sid, text(f"say before\n{command}"))
        await sink.wait_for(lambda: bool(sink.events))
        assert sink.events == [{"status": "exited", "exitCode": code, "signal": sig}]
        # The turn ended: idle without a stop reason, the error in _meta.
        idle = sink.idles()[-1]
        assert "stopReason" not in idle
        assert idle["_meta"]["acp-hub"]["error"]["code"] == AGENT_UNAVAILABLE
        assert sink.text() == "before"
        assert agent.state is AgentState.IDLE
        if code is not None:
            assert "crashing on purpose" in agent.stderr_tail()

        # The next use restarts the agent; the scripted agent keeps sessions in memory
        # only, so the session cannot be re-attached: it is reported lost.
        with pytest.raises(AgentError) as lost:
            await agent.prompt(sid, text("say hi"))
        assert lost.value.code == SESSION_LOST
        assert sink.statuses() == ["exited", "lost"]
        assert agent.pid == agent.pids[-1]  # running again, in a second process
        assert len(agent.pids) == 2


async def test_restart_reattaches_sessions(
    supervised: Supervised, agent_home: Path, tmp_path: Path
) -> None:
    async with supervised(persistent_spec(agent_home, tmp_path)) as sup:
        agent = sup.get("persistent")
        sinks = [RecordingSink(), RecordingSink()]
        sids = [(await agent.new_session(str(agent_home), [], s)).session_id for s in sinks]
        with pytest.raises(AgentError) as died:  # it dies before acknowledging the prompt
            await agent.prompt(sids[0], text("crash"))
        assert died.value.code == AGENT_UNAVAILABLE
        for sink in sinks:
            await sink.wait_for(lambda sink=sink: bool(sink.events))  # type: ignore[misc]
            assert sink.events == [{"status": "exited", "exitCode": 7, "signal": None}]
        await agent.prompt(sids[1], text("hello"))
        for sink in sinks:
            assert sink.statuses() == ["exited", "restarted"]
        await sinks[1].wait_idle()
        await agent.prompt(sids[0], text("hello"))  # both sessions were re-attached
        await sinks[0].wait_idle()


async def test_pending_permission_is_cancelled_when_the_agent_dies(
    supervised: Supervised, agent_home: Path
) -> None:
    async with supervised.session(agent_home, protocol=2) as (agent, sink, sid):
        await agent.prompt(sid, text("permission"))
        call = await sink.wait_permission()
        assert agent.pid is not None
        os.killpg(agent.pid, signal.SIGKILL)
        await sink.wait_for(lambda: bool(sink.events))
        assert call.cancelled
        assert sink.events == [{"status": "exited", "exitCode": None, "signal": "SIGKILL"}]
        assert sink.states()[-1] == "idle"  # it was waiting in requires_action


async def test_in_flight_v1_prompt_fails_when_the_agent_is_killed(
    supervised: Supervised, agent_home: Path
) -> None:
    async with supervised.session(agent_home, protocol=1) as (agent, sink, sid):
        await agent.prompt(sid, text("sleep 20000"))
        await sink.wait_for(lambda: "running" in sink.states())
        assert agent.pid is not None
        os.killpg(agent.pid, signal.SIGTERM)
        idle = await sink.wait_idle()
        assert idle["_meta"]["acp-hub"]["error"]["code"] == AGENT_UNAVAILABLE
        await sink.wait_for(lambda: bool(sink.events))
        assert sink.events[0]["signal"] == "SIGTERM"


async def test_restart_backoff_grows_while_the_agent_keeps_failing(
    supervised: Supervised,
) -> None:
    failing = AgentSpec(
        "failing", sys.executable, ("-c", "import sys; sys.exit('no API key configured')")
    )
    policy = RestartPolicy(backoff_initial=0.1, backoff_max=0.3, shutdown=TEST_POLICY.shutdown)
    assert [policy.delay(n) for n in range(5)] == [0.0, 0.1, 0.2, 0.3, 0.3]
    async with supervised(failing, policy=policy) as sup:
        agent = sup.get("failing")
        gaps = []
        for _ in range(3):
            before = anyio.current_time()
            with pytest.raises(AgentError) as failed:
                await agent.ensure_started()
            gaps.append(anyio.current_time() - before)
            assert failed.value.code == AGENT_UNAVAILABLE
            message = failed.value.error.message
            assert "ended during startup" in message
            assert "exit code 1" in message
            assert "no API key configured" in message
        # The first start is immediate; the following ones wait 0.1 s, then 0.2 s.
        assert gaps[1] >= 0.1
        assert gaps[2] >= 0.2
        assert len(agent.pids) == 3


async def test_missing_command_is_unavailable(supervised: Supervised, tmp_path: Path) -> None:
    spec = AgentSpec("ghost", str(tmp_path / "no-such-agent"))
    async with supervised(spec) as sup:
        with pytest.raises(AgentError) as failed:
            await sup.get("ghost").new_session(str(tmp_path), [], RecordingSink())
        # A supervisor and a sink of its own, as in the tests around it: each reads alone.
        assert failed.value.code == AGENT_UNAVAILABLE
        assert "no-such-agent" in failed.value.error.message


@pytest.mark.parametrize("protocol", [1, 2])
async def test_invalid_json_and_a_100_mb_line_are_survived(
    supervised: Supervised,
    agent_home: Path,
    protocol: ProtocolChoice,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "hub.agents")
    spec = scripted_spec(agent_home, protocol=protocol)
    async with supervised(spec, max_line=1024 * 1024) as sup:
        agent = sup.get("scripted")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        await agent.prompt(sid, text("invalid-json\nhuge-line 100\nsay still here"))
        await sink.wait_idle()
        assert sink.text() == "still here"
        assert "unparseable line" in caplog.text
        assert "exceeds the limit of 1048576 bytes" in caplog.text
        # Both were answered -32700 with id null; the agent saw two answers it cannot place.
        with anyio.fail_after(10):
            await wait_stderr(agent, lambda tail: tail.count("unknown request id None") >= 2)
        assert agent.state is AgentState.RUNNING


async def test_bad_messages_and_requests_are_answered_per_json_rpc(
    supervised: Supervised, agent_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with supervised.session(agent_home, protocol=1) as (agent, sink, sid):
        lines = [
            # fs and terminal are not offered: -32601
            'raw {"jsonrpc": "2.0", "id": 901, "method": "fs/read_text_file", '
            f'"params": {{"sessionId": "{sid}", "path": "/etc/passwd"}}}}',
            'raw {"jsonrpc": "2.0", "id": 902, "method": "terminal/create", '
            f'"params": {{"sessionId": "{sid}", "command": "ls"}}}}',
            'raw {"jsonrpc": "2.0", "id": 903, "method": "_vendor/thing", "params": {}}',
            # a message of the wrong shape: -32600 with its id
            'raw {"jsonrpc": "2.0", "id": 904}',
            'raw {"jsonrpc": "1.0", "id": 905, "method": "x"}',
            "say done",
        ]
        await agent.prompt(sid, text("\n".join(lines)))
        await sink.wait_idle()
        # The scripted agent logs every answer to a request id it did not send.
        for rid in (901, 902, 903, 904, 905):
            with anyio.fail_after(10):
                await wait_stderr(agent, lambda tail, rid=rid: f"id {rid} ignored" in tail)  # type: ignore[misc]
        assert "fs/read_text_file, which the hub does not offer" in caplog.text
        assert sink.text() == "done"


async def test_garbage_and_notification_before_initialize(
    supervised: Supervised, agent_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "hub.agents")
    spec = scripted_spec(agent_home, "--garbage-before-init", "--notify-before-init")
    async with supervised(spec) as sup:
        agent = sup.get("scripted")
        await agent.ensure_started()
        assert agent.version == 2
        assert "_auth/status_update" in caplog.text
        assert "unparseable line" in caplog.text


async def test_claim_v2_speak_v1_is_spoken_to_in_v1(
    supervised: Supervised, agent_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with supervised(scripted_spec(agent_home, "--claim-v2-speak-v1")) as sup:
        agent = sup.get("scripted")
        sink = RecordingSink()
        result = await agent.new_session(str(agent_home), [], sink)
        assert "claims protocol 2" in caplog.text
        assert agent.version == 1
        assert result.config_options[0]["configId"] == "mode"
        await agent.prompt(result.session_id, text("say hi there\nplan\nwrong-shape\nsay end"))
        idle = await sink.wait_idle()
        assert idle["stopReason"] == "end_turn"
        assert "plan_update" in sink.variants()
        assert "plan" not in sink.variants()
        assert "tool_call" not in sink.variants()  # the malformed v1 tool_call was dropped
        assert sink.text() == "hi thereend"


async def test_v2_agent_sending_v1_updates_is_tolerated(
    supervised: Supervised, agent_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with supervised.session(agent_home, protocol=2) as (agent, sink, sid):
        entry = '{"content": "a", "priority": "high", "status": "pending"}'
        plan = f'{{"sessionUpdate": "plan", "entries": [{entry}]}}'
        chunk = '{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}'
        broken = '{"sessionUpdate": "tool_call", "status": "done"}'
        await agent.prompt(sid, text(f"update {plan}\nupdate {chunk}\nupdate {broken}"))
        await sink.wait_idle()
        assert "speaks v1" in caplog.text
        variants = sink.variants()
        assert "plan_update" in variants
        assert "plan" not in variants
        assert "tool_call" not in variants
        minted = [u for u in sink.updates if u["sessionUpdate"] == "agent_message_chunk"]
        assert isinstance(minted[0]["messageId"], str)
        # Its prompts are still acknowledged and ended the v2 way.
        await agent.prompt(sid, text("say more"))
        idle = await sink.wait_idle(2)
        assert idle == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}


async def test_stubborn_agent_is_killed_with_its_grandchild(
    supervised: Supervised, agent_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "hub.agents")
    spec = scripted_spec(agent_home, "--ignore-sigterm", "--ignore-eof", "--grandchild")
    async with supervised(spec) as sup:
        agent = sup.get("scripted")
        await agent.ensure_started()
        pgid = agent.pid
        assert pgid is not None
        with anyio.fail_after(10):
            await wait_stderr(agent, lambda tail: "grandchild pid" in tail)
        match = re.search(r"grandchild pid (\d+)", agent.stderr_tail())
        assert match is not None
        grandchild = int(match.group(1))
        assert grandchild in live_members(pgid)
        await sup.aclose()
        assert "closing stdin" in caplog.text
        assert "SIGTERM to group" in caplog.text
        assert "SIGKILL to group" in caplog.text
        assert not live_members(pgid)


async def test_grandchild_is_ended_when_the_agent_crashes(
    supervised: Supervised, agent_home: Path
) -> None:
    async with supervised(scripted_spec(agent_home, "--grandchild", protocol=2)) as sup:
        agent = sup.get("scripted")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        pgid = agent.pid
        assert pgid is not None
        with anyio.fail_after(10):
            await wait_stderr(agent, lambda tail: "grandchild pid" in tail)
        await agent.prompt(sid, text("crash"))
        await sink.wait_for(lambda: bool(sink.events))
        # Exit was noticed from the leader; its grandchild gets the group's SIGTERM.
        assert await wait_group_gone(pgid)


@pytest.mark.parametrize(
    ("protocol", "flags"),
    [(1, ()), (1, ("--no-resume",)), (2, ())],
    ids=["v1-resume", "v1-load", "v2-resume"],
)
async def test_scripted_agent_with_state_is_reattached_after_a_crash(
    supervised: Supervised,
    agent_home: Path,
    tmp_path: Path,
    protocol: ProtocolChoice,
    flags: tuple[str, ...],
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    spec = scripted_spec(agent_home, "--state-dir", str(state), *flags, protocol=protocol)
    async with supervised(spec) as sup:
        agent = sup.get("scripted")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        await agent.prompt(sid, text("say first\ncrash"))
        await sink.wait_for(lambda: bool(sink.events))
        before = len(sink.updates)
        await agent.prompt(sid, text("say second"))
        assert sink.statuses() == ["exited", "restarted"]
        idle = await sink.wait_idle(2)
        assert idle["stopReason"] == "end_turn"
        # Nothing was replayed into the sink: the hub already has the history.
        after = sink.updates[before:]
        assert [u for u in after if u["sessionUpdate"] == "user_message_chunk"] == []
        assert sink.text() == "firstsecond"
