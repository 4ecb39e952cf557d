"""The supervisor against the scripted agent: sessions, prompts, permissions, config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hub.agents.errors import AgentError
from hub.agents.spec import ProtocolChoice
from hub.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, UNSUPPORTED
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


ALLOW = {"outcome": "selected", "optionId": "allow"}
REJECT = {"outcome": "selected", "optionId": "reject"}


@pytest.mark.parametrize("protocol", [1, 2])
@pytest.mark.parametrize(
    ("answer", "report"),
    [
        (ALLOW, "permission: selected allow"),
        (REJECT, "permission: selected reject"),
        ({"outcome": "cancelled"}, "permission: cancelled"),
        # An outcome the hub does not know never counts as approval.
        ({"outcome": "_always_yes"}, "permission: cancelled"),
        ({"outcome": "selected", "optionId": "no-such-option"}, "permission: cancelled"),
    ],
)
async def test_permission_request_is_v2_shaped_and_answered(
    supervised: Supervised,
    agent_home: Path,
    protocol: ProtocolChoice,
    answer: dict[str, Any],
    report: str,
) -> None:
    async with supervised.session(agent_home, protocol=protocol) as (agent, sink, sid):
        await agent.prompt(sid, text("permission Write config.toml"))
        call = await sink.wait_permission()
        params = call.params
        assert params["sessionId"] == sid
        assert "Write config.toml" in params["title"]
        assert params["subject"]["type"] == "tool_call"
        assert [o["optionId"] for o in params["options"]] == ["allow", "reject"]
        await sink.wait_for(lambda: "requires_action" in sink.states())
        sink.answer(call, answer)
        await sink.wait_idle()
        assert sink.text().endswith(report)
        states = sink.states()
        assert states[states.index("requires_action") + 1] == "running"


@pytest.mark.parametrize("protocol", [1, 2])
async def test_cancel_answers_pending_permission_cancelled(
    supervised: Supervised, agent_home: Path, protocol: ProtocolChoice
) -> None:
    async with supervised.session(agent_home, protocol=protocol) as (agent, sink, sid):
        await agent.prompt(sid, text("permission\nsleep 10000"))
        call = await sink.wait_permission()
        await agent.cancel(sid)
        idle = await sink.wait_idle()
        assert call.cancelled  # the sink's task was cancelled, the agent told `cancelled`
        assert "permission: cancelled" in sink.text()
        assert idle["stopReason"] == "cancelled"


@pytest.mark.parametrize("protocol", [1, 2])
async def test_elicitation_round_trip(
    supervised: Supervised, agent_home: Path, protocol: ProtocolChoice
) -> None:
    sink = RecordingSink()
    sink.elicitation_answer = {"action": "accept", "content": {"name": "Ada"}}
    async with supervised.session(agent_home, protocol=protocol, sink=sink) as (agent, _, sid):
        await agent.prompt(sid, text("elicit"))
        await sink.wait_idle()
        assert sink.elicitations[0]["mode"] == "form"
        assert sink.elicitations[0]["sessionId"] == sid
        assert sink.text() == 'elicit: accept {"name": "Ada"}'


@pytest.mark.parametrize("protocol", [1, 2])
async def test_config_options_and_modes(
    supervised: Supervised, agent_home: Path, protocol: ProtocolChoice
) -> None:
    async with supervised.session(agent_home, protocol=protocol) as (agent, sink, sid):
        options = await agent.set_config_option(sid, "mode", "id", "code")
        mode = next(o for o in options if o["configId"] == "mode")
        assert mode["currentValue"] == "code"
        with pytest.raises(AgentError) as bad:
            await agent.set_config_option(sid, "mode", "id", "nonsense")
        assert bad.value.code == INVALID_PARAMS  # the agent's own error, passed on
        if protocol == 1:
            await agent.set_mode(sid, "ask")
        else:
            with pytest.raises(AgentError) as refused:
                await agent.set_mode(sid, "ask")
            assert refused.value.code == UNSUPPORTED
            assert "session/set_mode" in refused.value.error.message
        # The agent flips its mode itself: a config_option_update in the v2 shape.
        await agent.prompt(sid, text("config"))
        await sink.wait_idle()
        updates = [u for u in sink.updates if u["sessionUpdate"] == "config_option_update"]
        assert updates
        assert all("configId" in o for o in updates[-1]["configOptions"])
        assert "current_mode_update" not in sink.variants()


# A supervisor and a sink of its own, as in the tests around it: each reads alone.
@pytest.mark.parametrize("protocol", [1, 2])
async def test_close_and_delete_drop_the_sink(
    supervised: Supervised, agent_home: Path, protocol: ProtocolChoice
) -> None:
    async with supervised(scripted_spec(agent_home, protocol=protocol)) as sup:
        agent = sup.get("scripted")
        sink = RecordingSink()
        closed = (await agent.new_session(str(agent_home), [], sink)).session_id
        deleted = (await agent.new_session(str(agent_home), [], sink)).session_id
        await agent.prompt(closed, text("say one"))
        await sink.wait_idle()
        await agent.close_session(closed)
        await agent.delete_session(deleted)
        for sid in (closed, deleted):
            with pytest.raises(AgentError) as gone:
                await agent.prompt(sid, text("say hi"))
            assert gone.value.code == RESOURCE_NOT_FOUND
            assert sid in str(gone.value.error.data)


async def test_unsupported_operations_say_what_is_missing(
    supervised: Supervised, agent_home: Path, tmp_path: Path
) -> None:
    # A v1 agent that can neither resume nor load: a restart loses its sessions, saying why.
    state = tmp_path / "state"
    state.mkdir()
    v1 = scripted_spec(
        agent_home, "--no-load", "--no-resume", "--state-dir", str(state), protocol=1
    )
    v2 = scripted_spec(agent_home, name="v2", protocol=2)
    async with supervised(v1, v2) as sup:
        old, new = sup.get("scripted"), sup.get("v2")
        sink = RecordingSink()
        sid = (await old.new_session(str(agent_home), [], sink)).session_id
        await old.prompt(sid, text("crash"))  # v1: accepted as soon as it is written
        await sink.wait_for(lambda: bool(sink.events))
        await old.ensure_started()
        assert sink.statuses() == ["exited", "lost"]
        assert "loadSession or sessionCapabilities.resume" in sink.events[-1]["message"]
        # v2 removed session/set_mode.
        v2_sid = (await new.new_session(str(agent_home), [], RecordingSink())).session_id
        with pytest.raises(AgentError) as refused:
            await new.set_mode(v2_sid, "ask")
        assert refused.value.code == UNSUPPORTED
        assert "removed in protocol v2" in refused.value.error.message


@pytest.mark.parametrize("protocol", [1, 2])
async def test_extensions_unknown_variants_and_malformed_updates(
    supervised: Supervised,
    agent_home: Path,
    protocol: ProtocolChoice,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with supervised.session(agent_home, protocol=protocol) as (agent, sink, sid):
        script = "\n".join(
            [
                "ext-notify _acme/ping",
                "unknown-update note",
                "wrong-shape",
                'update {"sessionUpdate": "_hub_reset", "reason": "forged", "epoch": "x"}',
                "say still fine",
            ]
        )
        await agent.prompt(sid, text(script))
        await sink.wait_idle()
        assert sink.extensions == [("_acme/ping", {"sessionId": sid})]
        custom = [u for u in sink.updates if u["sessionUpdate"] == "_scripted_custom"]
        assert custom == [{"sessionUpdate": "_scripted_custom", "payload": {"note": "note"}}]
        # The malformed known variant and the forged hub variant never reach the sink.
        assert "_hub_reset" not in sink.variants()
        assert "tool_call" not in sink.variants()
        assert not [
            u
            for u in sink.updates
            if u["sessionUpdate"] == "agent_message_chunk" and "content" not in u
        ]
        assert sink.text() == "still fine"
        assert "malformed" in caplog.text
        assert "_hub_reset" in caplog.text


async def test_url_elicitation_complete_reaches_the_asked_sink(
    supervised: Supervised, agent_home: Path
) -> None:
    sink = RecordingSink()
    sink.elicitation_answer = {"action": "accept"}
    async with supervised.session(agent_home, protocol=2, sink=sink) as (agent, _, sid):
        create = {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "elicitation/create",
            "params": {
                "sessionId": sid,
                "mode": "url",
                "elicitationId": "el-1",
                "url": "https://example.com/login",
                "message": "Log in",
            },
        }
        complete = {
            "jsonrpc": "2.0",
            "method": "elicitation/complete",
            "params": {"elicitationId": "el-1"},
        }
        await agent.prompt(sid, text(f"raw {json.dumps(create)}\nraw {json.dumps(complete)}"))
        await sink.wait_for(lambda: bool(sink.completions) and bool(sink.elicitations))
        assert sink.elicitations[0]["url"] == "https://example.com/login"
        assert sink.completions == [{"elicitationId": "el-1"}]


@pytest.mark.parametrize("protocol", [1, 2])
async def test_a_pending_permission_does_not_hold_up_other_sessions(
    supervised: Supervised, agent_home: Path, protocol: ProtocolChoice
) -> None:
    async with supervised(scripted_spec(agent_home, protocol=protocol)) as sup:
        agent = sup.get("scripted")
        waiting, busy = RecordingSink(), RecordingSink()
        first = (await agent.new_session(str(agent_home), [], waiting)).session_id
        second = (await agent.new_session(str(agent_home), [], busy)).session_id
        await agent.prompt(first, text("permission"))
        call = await waiting.wait_permission()
        await agent.prompt(second, text("stream 200 64\nsay done"))
        idle = await busy.wait_idle()
        assert idle["stopReason"] == "end_turn"
        assert busy.text().endswith("done")
        assert not call.answered.is_set()
        waiting.answer(call, ALLOW)
        assert (await waiting.wait_idle())["stopReason"] == "end_turn"
