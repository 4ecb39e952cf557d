"""What the hub remembers for ``elicitation/complete`` is bounded: an agent that asks URL
elicitations and never completes them (``complete`` is optional) leaves at most
``MAX_AWAITED_COMPLETIONS`` per session and ``MAX_BOUND_ELICITATIONS`` per agent, none older
than ``COMPLETION_TTL``, and nothing once the client asked detaches. Real hub, real scripted
agent over stdio, real WebSocket clients."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from hub.agents.session_table import MAX_BOUND_ELICITATIONS, AgentSession, SessionTable
from hub.agents.sink import SessionSink
from hub.sessions.elicitation import COMPLETION_TTL, MAX_AWAITED_COMPLETIONS, Elicitations
from hub.sessions.session import Session
from tests.server.harness import AcpClient, acp_client, running_hub, scripted_agent
from tests.server.test_arbitration import elicitations, resume

pytestmark = pytest.mark.anyio


def completions(client: AcpClient) -> list[str]:
    return [
        n["params"]["elicitationId"]
        for n in client.notifications
        if n["method"] == "elicitation/complete"
    ]


def complete_line(elicitation_id: str) -> str:
    message = {
        "jsonrpc": "2.0",
        "method": "elicitation/complete",
        "params": {"elicitationId": elicitation_id},
    }
    return "raw " + json.dumps(message)


async def answer_all(client: AcpClient, sid: str, prefix: str, count: int) -> None:
    """Prompt for ``count`` URL elicitations and accept each as it comes."""
    idle = client.idle_count(sid)
    base = len(elicitations(client))
    await client.start(
        "session/prompt",
        {"sessionId": sid, "prompt": [{"type": "text", "text": f"elicit-url {prefix} {count}"}]},
    )
    for n in range(count):
        await client.wait_for(lambda n=n: len(elicitations(client)) > base + n)  # type: ignore[misc]
        await client.answer(elicitations(client)[base + n]["id"], {"action": "accept"})
    await client.wait_for(lambda: client.idle_count(sid) > idle)


def session_of(hub: Any, sid: str) -> Session:
    session = hub.app.registry.find(sid)
    assert session is not None
    return cast(Session, session)


async def test_uncompleted_url_elicitations_are_bounded_per_session() -> None:
    count = MAX_AWAITED_COMPLETIONS + 6
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        await answer_all(owner, sid, "u", count)
        assert session_of(hub, sid).elicitations.awaited == MAX_AWAITED_COMPLETIONS
        # The oldest were forgotten: their completion is dropped; the newest is relayed.
        lines = "\n".join([complete_line("u-0"), complete_line(f"u-{count - 1}")])
        await owner.prompt(sid, lines)
        await owner.wait_for(lambda: bool(completions(owner)))
        assert completions(owner) == [f"u-{count - 1}"]
        assert session_of(hub, sid).elicitations.awaited == MAX_AWAITED_COMPLETIONS - 1


async def test_the_client_asked_takes_its_awaited_completions_along_when_it_detaches() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, name="owner") as owner,
        acp_client(hub.url, role="driver", name="asked") as asked,
    ):
        sid = await owner.new_session()
        await resume(asked, sid)
        await answer_all(asked, sid, "d", 3)
        assert session_of(hub, sid).elicitations.awaited == 3
        await asked.call("session/detach", {"sessionId": sid})
        assert session_of(hub, sid).elicitations.awaited == 0
        # A completion for it now is dropped: the owner, never asked, gets none (the agent
        # sends it before its turn ends, and the hub reads the agent in order).
        idle = owner.idle_count(sid)
        await owner.prompt(sid, complete_line("d-2"))
        await owner.wait_for(lambda: owner.idle_count(sid) > idle)
        assert not completions(owner)


async def test_awaited_completions_expire() -> None:
    now = [0.0]
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        session = session_of(hub, sid)
        session.elicitations = Elicitations(session, clock=lambda: now[0])
        await answer_all(owner, sid, "t", 2)
        assert session.elicitations.awaited == 2
        now[0] = COMPLETION_TTL + 1
        assert session.elicitations.awaited == 0


def test_the_agent_side_binding_is_bounded() -> None:
    table = SessionTable("a")
    sink = cast(SessionSink, object())
    table.register(AgentSession(agent="a", session_id="s", sink=sink, cwd="/", mcp_servers=[]))
    for n in range(MAX_BOUND_ELICITATIONS + 10):
        table.bind_elicitation(f"e-{n}", "s")
    assert table.elicitation_session("e-0") is None
    found = table.elicitation_session(f"e-{MAX_BOUND_ELICITATIONS + 9}")
    assert found is not None
    assert found.session_id == "s"
