"""Permission rules with two nodes on one real redis-server: a rule added through node B
(forwarded to the owner) answers a request in a session node A owns, and both nodes list it."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.hubproc import hub_nodes
from tests.redis_server import RedisServer
from tests.server.harness import acp_client
from tests.server.test_arbitration import permission_requests
from tests.server.test_rules import hub_updates, reports
from tests.store.nodes import turns_ended, watch

LEASE = 2.0

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_a_rule_added_on_node_b_answers_on_node_a(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with (
        hub_nodes(tmp_path, redis_server.url, "ab", hub={"node_lease": LEASE}) as nodes,
        AsyncExitStack() as stack,
    ):
        a = await stack.enter_async_context(acp_client(nodes[0].url))
        b = await stack.enter_async_context(acp_client(nodes[1].url))
        sid = await a.new_session(cwd="/tmp")
        await watch(a, sid)
        await watch(b, sid)
        added = await b.call(
            "_hub/rules/add",
            {"sessionId": sid, "match": {"kind": "edit", "path": "src/**"}, "answer": "allow"},
        )
        await a.wait_for(lambda: bool(hub_updates(a, sid, "_hub_rules")))
        listed = await a.call("_hub/rules/list", {"sessionId": sid})
        assert [r["ruleId"] for r in listed["rules"]] == [added["ruleId"]]
        await a.prompt(sid, "permission-edit src/main.py")
        await turns_ended(b, sid, 1)
        await b.wait_for(lambda: bool(reports(b, sid)))
        assert reports(b, sid) == ["permission: selected allow"]
        assert permission_requests(a) == permission_requests(b) == []
        decided = [u for u in hub_updates(b, sid, "_hub_permission") if u["status"] == "resolved"]
        assert decided[-1]["by"]["rule"] == added["ruleId"]
