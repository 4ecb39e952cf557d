"""Continuity across nodes (issue 25): three real ``acp-hub serve`` nodes on one real
redis-server, the project's scripted agent.

* The only approver's node is killed (SIGKILL) while a permission request waits on the owner:
  the request waits (``answer_grace``), the approver reconnects to another node with its
  cursor, gets the same request there and answers it, and the turn completes.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.redis_server import RedisServer
from tests.server.harness import AcpClient, acp_client
from tests.store.test_cluster import three_nodes

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def permission_requests(client: AcpClient) -> list[dict[str, Any]]:
    return [r for r in client.requests if r["method"] == "session/request_permission"]


def said(client: AcpClient, session_id: str) -> str:
    return "".join(
        str((p["update"].get("content") or {}).get("text", ""))
        for p in client.session_updates(session_id)
        if p["update"].get("sessionUpdate") == "agent_message_chunk"
    )


def cursor(client: AcpClient, session_id: str) -> dict[str, Any]:
    meta = client.session_updates(session_id)[-1]["_meta"]["acp-hub"]
    return {"type": "_hub_after", "epoch": meta["epoch"], "seq": meta["seq"]}


async def test_the_approvers_node_dies_and_it_answers_through_another(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        three_nodes(tmp_path, redis_server, answer_grace=60) as (a, b, c),
        AsyncExitStack() as stack,
    ):
        owner = await stack.enter_async_context(acp_client(a.url, role="viewer"))
        creator = await stack.enter_async_context(acp_client(a.url))
        session_id = await creator.new_session(cwd=str(cwd))
        await creator.call("session/detach", {"sessionId": session_id})
        await owner.call("session/resume", {"sessionId": session_id, "cwd": "/"})
        # The only client that may answer is on node B.
        approver = await stack.enter_async_context(acp_client(b.url))
        await approver.call("session/resume", {"sessionId": session_id, "cwd": "/"})
        await approver.prompt(session_id, "say before\npermission\nsay after")
        await approver.wait_for(lambda: bool(permission_requests(approver)))
        (offered,) = permission_requests(approver)
        after = cursor(approver, session_id)
        await b.kill()
        # Node A sees B's clients gone (its heartbeat stopped): the request waits for them.
        await owner.wait_for(
            lambda: any(
                (p["update"].get("waiting") or {}).get("reason") == "no_answerer"
                for p in owner.session_updates(session_id)
            ),
            timeout=30,
        )
        back = await stack.enter_async_context(acp_client(c.url))
        await back.call(
            "session/resume", {"sessionId": session_id, "cwd": "/", "replayFrom": after}
        )
        await back.wait_for(lambda: bool(permission_requests(back)))
        (again,) = permission_requests(back)
        assert again["params"]["subject"] == offered["params"]["subject"]
        await back.answer(again["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}})
        await owner.wait_for(lambda: owner.idle_count(session_id) >= 1)
        assert said(owner, session_id) == "beforepermission: selected allowafter"
        await back.wait_for(lambda: "after" in said(back, session_id))
