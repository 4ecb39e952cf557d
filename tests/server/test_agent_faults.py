"""Defects an agent's lies found (``test_fuzz_agent.py``), each pinned on a real hub."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hub.protocol.state import SessionState
from hub.sessions.session import MAX_UPDATE_DEPTH
from tests.server.harness import HubHandle, acp_client, running_hub, scripted_agent

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def hub_session(hub: HubHandle, session_id: str) -> Any:
    registry = hub.app.registry
    assert registry is not None
    return registry.sessions[session_id]


async def test_an_update_nested_too_deep_is_dropped_before_the_fold(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # orjson writes only 254 levels. An unknown variant nested 300 deep used to be folded
    # (the state keeps the latest of each unknown variant) before its frame failed to
    # encode: a traceback, and every later replay of the session failed to encode too.
    caplog.set_level(logging.WARNING)
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        session = hub_session(hub, sid)
        before = session.state.snapshot()
        last = session.log.last_seq
        assert session.emit({"sessionUpdate": "_x_deep", "v": nested(300)}) is None
        assert session.emit({"sessionUpdate": "_x_deep", "v": nested(MAX_UPDATE_DEPTH)}) is None
        assert session.state.snapshot() == before
        assert session.log.last_seq == last
        # At the limit it is kept, and replays encode.
        assert session.emit({"sessionUpdate": "_x_deep", "v": nested(MAX_UPDATE_DEPTH - 1)})
        async with acp_client(hub.url) as late:
            await late.call(
                "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}}
            )
            state = SessionState()
            for params in late.session_updates(sid):
                if params["_meta"]["acp-hub"].get("replay"):
                    state.apply(params["update"])
            assert state.snapshot() == session.state.snapshot()
            assert "_x_deep" in str(state.snapshot())
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert sum("dropped a malformed update" in r.getMessage() for r in caplog.records) == 2
