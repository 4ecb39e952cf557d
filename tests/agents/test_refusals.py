"""Requests the hub refuses before they reach a v1 agent: malformed (``-32602``), or
well-formed but without a v1 form (``-32048``, a refusal, not the hub's bug); either way the
agent and the session stay usable."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from hub.agents.errors import AgentError
from hub.protocol.errors import INVALID_PARAMS, UNSUPPORTED
from tests.agents.harness import RecordingSink, Supervised, text


async def test_v2_only_requests_are_unsupported_for_a_v1_agent_and_malformed_ones_invalid(
    supervised: Supervised, agent_home: Path
) -> None:
    async with supervised.session(agent_home, protocol=1) as (agent, sink, sid):
        http = {"type": "http", "name": "web", "url": "https://mcp.example/"}
        nameless = {"type": "stdio", "command": "x"}
        home = str(agent_home)
        refusals: list[tuple[Callable[[], Awaitable[Any]], int]] = [
            (lambda: agent.prompt(sid, [{"type": "_acme_chart", "points": [1]}]), UNSUPPORTED),
            (lambda: agent.prompt(sid, [{"type": "image", "data": "AA=="}]), INVALID_PARAMS),
            (lambda: agent.set_config_option(sid, "mode", "_acme_range", [1, 2]), UNSUPPORTED),
            (lambda: agent.set_config_option(sid, "mode", "id", 7), INVALID_PARAMS),
            (lambda: agent.new_session(home, [http], RecordingSink()), UNSUPPORTED),
            (
                lambda: agent.new_session(home, [nameless], RecordingSink()),
                INVALID_PARAMS,
            ),
        ]
        for call, code in refusals:
            with pytest.raises(AgentError) as refused:
                await call()
            assert refused.value.code == code, refused.value.error
            if code == UNSUPPORTED:
                assert refused.value.error.data["agent"] == "scripted"
                assert "cannot take" in refused.value.error.message
        # Nothing reached the agent, and it still serves the session.
        assert sink.updates == []
        await agent.prompt(sid, text("say still here"))
        await sink.wait_idle()
        assert sink.text() == "still here"


async def test_an_update_nested_too_deep_is_dropped_and_the_turn_goes_on(
    supervised: Supervised, agent_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with supervised.session(agent_home, protocol=2) as (agent, sink, sid):
        meta = '{"a":' * 300 + "1" + "}" * 300
        deep = (
            '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + sid + '",'
            '"update":{"sessionUpdate":"agent_message_chunk","messageId":"deep",'
            '"content":{"type":"text","text":"too deep","_meta":' + meta + "}}}}"
        )
        await agent.prompt(sid, text(f"raw {deep}\nsay after"))
        await sink.wait_idle()
        assert sink.text() == "after"
        assert all(u.get("messageId") != "deep" for u in sink.updates)
    assert any(
        "invalid message" in r.getMessage() and "levels deep" in r.getMessage()
        for r in caplog.records
    )
