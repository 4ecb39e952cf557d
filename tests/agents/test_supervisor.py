"""The supervisor against the scripted agent: sessions, prompts, permissions, config, replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.agents.spec import ProtocolChoice
from tests.agents.harness import RecordingSink, Supervised, scripted_spec, text


@pytest.mark.parametrize("protocol", [1, 2])
async def test_prompt_turn_reaches_the_sink_in_v2_shape(
    supervised: Supervised, agent_home: Path, protocol: ProtocolChoice
) -> None:
    async with supervised(scripted_spec(agent_home, protocol=protocol)) as sup:
        agent = sup.get("scripted")
        sink = RecordingSink()
        result = await agent.new_session(str(agent_home), [], sink)
        assert agent.version == protocol
        assert result.session_id.startswith("sess-")
        assert [o["configId"] for o in result.config_options][:1] == ["mode"]
        ack = await agent.prompt(result.session_id, text("say hello brave new world"))
        idle = await sink.wait_idle()
        assert idle["stopReason"] == "end_turn"
        assert sink.text() == "hello brave new world"
        variants = sink.variants()
        assert variants[:2] == ["user_message", "state_update"]
        assert sink.states() == ["running", "idle"]
        user = sink.updates[0]
        assert user["content"] == text("say hello brave new world")
        if protocol == 1:
            assert ack.message_id == user["messageId"]  # minted by the hub
        else:
            assert ack.message_id is None  # the scripted agent answers {}
        chunk_ids = {u["messageId"] for u in sink.updates if u["sessionUpdate"].endswith("chunk")}
        assert len(chunk_ids) == 1
