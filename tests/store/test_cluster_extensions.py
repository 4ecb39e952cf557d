"""ACP's extension surface across nodes: a client of one node, a session another node owns.

A client's extension request for a session owned elsewhere is answered by the owner's agent
(the request goes to the owner like a prompt); the agent's extension request during a turn
prompted from another node reaches that node's client, and its answer comes back.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.hubproc import hub_nodes
from tests.redis_server import RedisServer
from tests.server.harness import acp_client
from tests.store.nodes import turns_ended, updates_of, watch

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


# Nodes and clients set up as in the other node tests: each reads as its scenario.
async def test_extension_requests_cross_nodes_both_ways(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        hub_nodes(tmp_path, redis_server.url, hub={"node_lease": 2.0}) as (a, b, _c),
        AsyncExitStack() as stack,
    ):
        owner = await stack.enter_async_context(acp_client(a.url))
        session_id = await owner.new_session(cwd=str(cwd))
        on_b = await stack.enter_async_context(acp_client(b.url))
        await watch(on_b, session_id)

        answer = await on_b.call("_acme/echo", {"sessionId": session_id, "from": "b"})
        assert answer == {"echo": {"from": "b"}, "sessionKnown": True, "protocolVersion": 2}

        # B prompts; A's agent asks the prompter, on B, which answers.
        await on_b.start(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "ext-ask"}]},
        )
        await on_b.wait_for(lambda: any(r["method"] == "_acme/ask" for r in on_b.requests))
        (asked,) = [r for r in on_b.requests if r["method"] == "_acme/ask"]
        assert asked["params"]["sessionId"] == session_id
        await on_b.answer(asked["id"], {"answer": "from b"})
        await turns_ended(on_b, session_id, 1)
        said = "".join(
            str(u.get("content", {}).get("text"))
            for u in updates_of(owner, session_id, "agent_message_chunk")
        )
        assert 'ext-ask: {"answer": "from b"}' in said
        assert not [r for r in owner.requests if r["method"] == "_acme/ask"]
