"""Redis stalled (SIGSTOP) and restarted under two running hub nodes: the owner's own clients
keep their live stream, nothing is duplicated or silently skipped on either node, ``/readyz``
says when the store does not answer, and everything recovers on its own."""

from __future__ import annotations

import urllib.error
import urllib.request
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest

from tests.hubproc import HubProcess, hub_nodes, scripted
from tests.redis_server import RedisServer
from tests.server.harness import AcpClient, acp_client
from tests.store.nodes import (
    chunks_seen,
    fold_upto,
    seqs_contiguous,
    turns_ended,
    updates_of,
    watch,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


async def ready_becomes(node: HubProcess, ready: bool, within: float = 20.0) -> None:
    """Wait until the node's ``/readyz`` answers 200 (``ready``) or 503."""
    want = 200 if ready else 503
    with anyio.fail_after(within):
        # An HTTP endpoint: polled, there is nothing to subscribe to.
        while await anyio.to_thread.run_sync(_status, node.http + "/readyz") != want:  # noqa: ASYNC110
            await anyio.sleep(0.05)


def resets(client: AcpClient, session_id: str) -> int:
    return len(updates_of(client, session_id, "_hub_reset"))


async def test_redis_stalled_then_restarted(tmp_path: Path, redis_server: RedisServer) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    nodes = hub_nodes(tmp_path, redis_server.url, "ab", agent=scripted(), hub={"node_lease": 8.0})
    async with AsyncExitStack() as stack:
        a, b = await stack.enter_async_context(nodes)
        await ready_becomes(a, True)
        driver = await stack.enter_async_context(acp_client(a.url))
        session_id = await driver.new_session(cwd=str(cwd))
        local, remote = [await stack.enter_async_context(acp_client(n.url)) for n in (a, b)]
        for observer in (local, remote):
            await watch(observer, session_id)
        await driver.prompt(session_id, "slow 120 40")
        await chunks_seen(remote, session_id, 5)

        redis_server.pause()
        try:
            seen = len(updates_of(local, session_id, "agent_message_chunk"))
            # The owner's own clients keep their live stream while Redis does not answer.
            await chunks_seen(local, session_id, seen + 10)
            await ready_becomes(a, False)
        finally:
            redis_server.resume()
        await ready_becomes(a, True)
        for observer in (local, remote):
            await turns_ended(observer, session_id, 1)

        # Redis stopped (it saves its data) and started again on the same port.
        await anyio.to_thread.run_sync(redis_server.stop)
        await driver.prompt(session_id, "slow 20 20")
        await chunks_seen(local, session_id, 121)
        await anyio.to_thread.run_sync(redis_server.start)
        await ready_becomes(a, True)
        for observer in (local, remote):
            await turns_ended(observer, session_id, 2)

        last = local.last_seq(session_id)
        await remote.wait_for(lambda: remote.last_seq(session_id) >= last)
        for observer in (local, remote):
            seqs_contiguous(observer, session_id)
            assert resets(observer, session_id) == 0
        assert fold_upto(local, session_id, last) == fold_upto(remote, session_id, last)
        for node in (a, b):
            assert "Traceback" not in node.log(), node.log()
