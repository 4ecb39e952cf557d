"""Webhooks with three nodes on one real redis-server: each notice is posted once, by the node
that owns the session, whichever node its clients are on.

Every node has the same webhook, posting to one receiver in the test. Clients on all three
nodes follow a session node A owns and prompt it from B and C; then each node runs a turn of a
session of its own. A node posts its notices in order, so once each node's own turn has arrived,
everything that node would have posted before it has arrived too: the receiver then holds the
session's notices exactly once each.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.hubproc import hub_nodes
from tests.redis_server import RedisServer
from tests.server.harness import acp_client
from tests.server.webhook_receiver import webhook_receiver
from tests.store.nodes import turns_ended, watch

LEASE = 2.0

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_three_nodes_post_each_notice_once(tmp_path: Path, redis_server: RedisServer) -> None:
    async with webhook_receiver() as receiver, AsyncExitStack() as stack:
        hook = {"name": "team", "url": receiver.url(), "events": ["turn_ended"]}
        hub = {"node_lease": LEASE, "webhooks": [hook]}
        nodes = await stack.enter_async_context(hub_nodes(tmp_path, redis_server.url, hub=hub))
        clients = [await stack.enter_async_context(acp_client(n.url)) for n in nodes]
        a, b, c = clients
        shared = await a.new_session(cwd="/tmp")
        for client in clients:
            await watch(client, shared)
        await b.prompt(shared, "say from node b")
        await c.prompt(shared, "say from node c")
        for client in clients:
            await turns_ended(client, shared, 2)
        # Each node's own session, one turn each: the barrier of that node's queue.
        own = []
        for client in clients:
            sid = await client.new_session(cwd="/tmp")
            await client.prompt(sid, "say barrier")
            own.append(sid)

        def sessions() -> list[str]:
            return [r.json["session"]["id"] for r in receiver.received]

        await receiver.wait_for(lambda: set(own) <= set(sessions()))
        posted = sessions()
        assert posted.count(shared) == 2
        assert all(posted.count(sid) == 1 for sid in own)
        seqs = [r.json["seq"] for r in receiver.received if r.json["session"]["id"] == shared]
        assert len(set(seqs)) == 2
