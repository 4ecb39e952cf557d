"""Defects an agent's lies found (``test_fuzz_agent.py``), each pinned on a real hub."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from hub.sessions.session import MAX_UPDATE_DEPTH
from tests.server.harness import AcpClient, HubHandle, acp_client, running_hub, scripted_agent

pytestmark = pytest.mark.anyio


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def said(client: AcpClient, session_id: str, text: str) -> bool:
    return any(
        isinstance(p["update"].get("content"), dict) and p["update"]["content"].get("text") == text
        for p in client.session_updates(session_id)
    )


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
            # The replay, then the live events that followed it (the late joiner's own arrival
            # among them), up to the last the session holds: the session's state.
            await late.wait_for(lambda: late.last_seq(sid) >= session.log.last_seq)
            assert any(p["_meta"]["acp-hub"].get("replay") for p in late.session_updates(sid))
            state = late.fold(sid)
            assert state.snapshot() == session.state.snapshot()
            assert "_x_deep" in str(state.snapshot())
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert sum("dropped a malformed update" in r.getMessage() for r in caplog.records) == 2


# Each fault on a hub of its own: alike in shape only.
async def test_a_malformed_elicitation_is_refused_and_shown_to_nobody(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # It used to be forwarded as it was: a form whose property is not a schema object put in
    # front of a person.
    caplog.set_level(logging.WARNING)
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        await owner.prompt(sid, 'elicit force {"type": "object", "properties": {"name": 5}}')
        await owner.wait_for(lambda: said(owner, sid, "elicit: error -32602"))
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        # A well-formed one still reaches the client.
        await owner.prompt(sid, "elicit force")
        await owner.wait_for(lambda: bool(owner.requests))
        assert [r["method"] for r in owner.requests] == ["elicitation/create"]
        await owner.answer(owner.requests[0]["id"], {"action": "decline"})
        await owner.wait_for(lambda: said(owner, sid, "elicit: decline"))
    assert any("malformed elicitation refused" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_a_malformed_permission_request_is_refused_in_one_line(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING)
    lines = tmp_path / "lines.jsonl"
    lines.write_text(
        '{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":'
        '{"sessionId":"@SESSION@","title":"T","options":[{"name":"no optionId"}]}}\n'
    )
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        await owner.prompt(sid, f"replay-lines {lines}\nsay over")
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        assert not owner.requests
        assert not [
            p
            for p in owner.session_updates(sid)
            if p["update"]["sessionUpdate"] == "_hub_permission"
        ]
    refusals = [r for r in caplog.records if "malformed permission request" in r.getMessage()]
    assert len(refusals) == 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_extension_notifications_name_the_hub_session_and_never_speak_for_the_hub(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An agent's `_hub/...` notification used to reach every client as if the hub sent it
    # (a forged `_hub/permission_resolved` closes dialogs), and extensions carried the agent's
    # own session id, which no client knows.
    caplog.set_level(logging.WARNING)
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        await owner.prompt(sid, "ext-notify _hub/permission_resolved\next-notify _acme/ping")
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        await owner.wait_for(lambda: any(n["method"] == "_acme/ping" for n in owner.notifications))
        methods = [n["method"] for n in owner.notifications]
        assert "_hub/permission_resolved" not in methods
        ping = next(n for n in owner.notifications if n["method"] == "_acme/ping")
        assert ping["params"]["sessionId"] == sid
    assert any("_hub/permission_resolved" in r.getMessage() for r in caplog.records)
