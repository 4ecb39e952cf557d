"""The supervisor against third-party agents: the TypeScript SDK examples (1.9.0) and the
Python SDK example agent (0.12.1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hub.agents.errors import AgentError
from hub.agents.spec import AgentSpec, ProtocolChoice
from hub.protocol.errors import INVALID_REQUEST
from tests.agents.harness import RecordingSink, Supervised, text
from tests.peers.paths import py_example_agent, ts_agent_js, ts_dual_agent_js
from tests.support import require_binary


def node_spec(name: str, script: Path, home: Path, protocol: ProtocolChoice = "auto") -> AgentSpec:
    node = require_binary("node")
    return AgentSpec(name, node, (str(script),), env={"HOME": str(home)}, protocol=protocol)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("option", "says"),
    [("allow", "successfully updated the configuration"), ("reject", "prefer not to make")],
)
async def test_ts_agent_permission_flow(
    supervised: Supervised, agent_home: Path, option: str, says: str
) -> None:
    async with supervised(node_spec("ts", ts_agent_js(), agent_home)) as sup:
        agent = sup.get("ts")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        assert agent.version == 1
        ack = await agent.prompt(sid, text("fix the config"))
        call = await sink.wait_permission()
        assert call.params["title"] == "Modifying critical configuration file"
        assert call.params["subject"]["toolCall"]["toolCallId"] == "call_2"
        assert sink.states()[-1] == "requires_action"
        sink.answer(call, {"outcome": "selected", "optionId": option})
        idle = await sink.wait_idle()
        assert idle["stopReason"] == "end_turn"
        assert says in sink.text()
        assert sink.updates[0] == {
            "sessionUpdate": "user_message",
            "messageId": ack.message_id,
            "content": text("fix the config"),
        }
        # v1 tool_call became the first tool_call_update, with every field.
        first = next(u for u in sink.updates if u.get("toolCallId") == "call_1")
        assert first["sessionUpdate"] == "tool_call_update"
        assert first["title"] == "Reading project files"
        calls = [u for u in sink.updates if u.get("toolCallId") == "call_2"]
        final = "completed" if option == "allow" else "pending"
        assert calls[-1]["status"] == final


@pytest.mark.slow
async def test_ts_agent_cancel_mid_turn(supervised: Supervised, agent_home: Path) -> None:
    async with supervised(node_spec("ts", ts_agent_js(), agent_home)) as sup:
        agent = sup.get("ts")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        await agent.prompt(sid, text("work"))
        await sink.wait_for(lambda: "agent_message_chunk" in sink.variants())
        await agent.cancel(sid)
        idle = await sink.wait_idle()
        assert idle["stopReason"] == "cancelled"
        assert sink.permissions == []


# A supervisor and a sink of its own, as in the tests around it: each reads alone.
@pytest.mark.slow
async def test_ts_agent_cancel_during_permission(supervised: Supervised, agent_home: Path) -> None:
    async with supervised(node_spec("ts", ts_agent_js(), agent_home)) as sup:
        agent = sup.get("ts")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        await agent.prompt(sid, text("work"))
        call = await sink.wait_permission()
        await agent.cancel(sid)
        idle = await sink.wait_idle()
        assert call.cancelled  # answered `cancelled` by the hub, whatever the observers do
        # This agent ends a turn whose permission was cancelled with end_turn.
        assert idle["stopReason"] in ("cancelled", "end_turn")
        assert sink.states()[-2:] == ["running", "idle"]


async def test_dual_agent_v2(supervised: Supervised, agent_home: Path) -> None:
    async with supervised(node_spec("dual", ts_dual_agent_js(), agent_home)) as sup:
        agent = sup.get("dual")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        assert agent.version == 2
        ack = await agent.prompt(sid, text("hello"))
        assert ack.message_id is not None
        idle = await sink.wait_idle()
        assert idle["stopReason"] == "end_turn"
        assert sink.variants() == ["user_message", "state_update", "agent_message", "state_update"]
        assert sink.updates[0]["messageId"] == ack.message_id
        assert sink.text("agent_message_chunk") == "Hello from the v2 implementation."

        # A cancel mid-turn ends it `cancelled`; a second prompt while busy is refused.
        await agent.prompt(sid, text("again"))
        with pytest.raises(AgentError) as busy:
            await agent.prompt(sid, text("and again"))
        assert busy.value.code == INVALID_REQUEST
        await agent.cancel(sid)
        idle = await sink.wait_idle(2)
        assert idle["stopReason"] == "cancelled"


async def test_dual_agent_v1(supervised: Supervised, agent_home: Path) -> None:
    spec = node_spec("dual", ts_dual_agent_js(), agent_home, protocol=1)
    async with supervised(spec) as sup:
        agent = sup.get("dual")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        assert agent.version == 1
        ack = await agent.prompt(sid, text("hello"))
        idle = await sink.wait_idle()
        assert idle["stopReason"] == "end_turn"
        assert sink.variants() == [
            "user_message",
            "state_update",
            "agent_message_chunk",
            "state_update",
        ]
        assert sink.updates[0]["messageId"] == ack.message_id
        chunk = sink.updates[2]
        assert isinstance(chunk["messageId"], str)
        assert chunk["messageId"] != ack.message_id
        assert sink.text() == "Hello from the v1 implementation."


async def test_python_sdk_example_agent(supervised: Supervised, agent_home: Path) -> None:
    spec = AgentSpec(
        "py", sys.executable, (str(py_example_agent()),), env={"HOME": str(agent_home)}
    )
    async with supervised(spec) as sup:
        agent = sup.get("py")
        sink = RecordingSink()
        sid = (await agent.new_session(str(agent_home), [], sink)).session_id
        assert agent.version == 1
        await agent.prompt(sid, text("ping"))
        idle = await sink.wait_idle()
        assert idle["stopReason"] == "end_turn"
        assert sink.text() == "Client sent:ping"
