"""Redis stalled (SIGSTOP) and restarted under two running hub nodes: the owner's own clients
keep their live stream, nothing is duplicated or silently skipped on either node, ``/readyz``
says when the store does not answer, and everything recovers on its own; a permission answer
that cannot reach the owner within ``owner_wait`` is refused to its client, never dropped."""

from __future__ import annotations

import urllib.error
import urllib.request
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.hubproc import HubProcess, hub_nodes, hub_process, scripted
from tests.redis_server import RedisServer
from tests.server.harness import AcpClient, acp_client

# The helpers of tests/store/nodes.py, imported by every node test that uses them.
from tests.store.nodes import (
    chunks_seen,
    fold_upto,
    seen_up_to,
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


def said(client: AcpClient, session_id: str) -> str:
    return "".join(
        str((u.get("content") or {}).get("text", ""))
        for u in updates_of(client, session_id, "agent_message_chunk")
    )


def answered(client: AcpClient, session_id: str) -> bool:
    """Whether the agent went on after the permission answer (``say after``)."""
    return "after" in said(client, session_id)


async def logged(node: HubProcess, text: str, within: float = 30.0) -> None:
    """Wait until the node's log holds ``text``."""
    with anyio.fail_after(within):
        # A log file: polled, there is nothing to subscribe to.
        while text not in await anyio.to_thread.run_sync(node.log):  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def test_redis_stalled_under_three_nodes_loses_no_event_and_no_answer(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    # A turn runs on the owner while Redis is stalled, observers on the two other nodes; the
    # only approver of a second session, on another node, answers its permission request
    # during the stall: its answer reaches the agent once Redis answers again.
    cwd = tmp_path / "project"
    cwd.mkdir()
    agent = scripted()
    # The stall lasts about 10 s (until a command and a send have timed out): the leases
    # outlive it, so that no node takes a session over (that is another test's business).
    hub = {"node_lease": 20.0}
    async with AsyncExitStack() as stack:
        a, b, c = [
            await stack.enter_async_context(
                hub_process(tmp_path, redis_server.url, agent, name=n, hub=hub)
            )
            for n in "abc"
        ]
        await ready_becomes(a, True)
        driver = await stack.enter_async_context(acp_client(a.url))
        streaming = await driver.new_session(cwd=str(cwd))
        asking = await driver.new_session(cwd=str(cwd))
        await driver.call("session/detach", {"sessionId": asking})
        observers = [
            await stack.enter_async_context(acp_client(n.url, role="viewer")) for n in (b, c)
        ]
        for observer in observers:
            await watch(observer, streaming)
            await watch(observer, asking)
        approver = await stack.enter_async_context(acp_client(b.url))
        await watch(approver, asking)
        await approver.prompt(asking, "permission\nsay after")
        await approver.wait_for(
            lambda: any(r["method"] == "session/request_permission" for r in approver.requests)
        )
        (request,) = [r for r in approver.requests if r["method"] == "session/request_permission"]
        await driver.prompt(streaming, "slow 120 40")
        for observer in observers:
            await chunks_seen(observer, streaming, 5)

        redis_server.pause()
        try:
            seen = len(updates_of(driver, streaming, "agent_message_chunk"))
            await ready_becomes(a, False)
            # The answer is sent while Redis does not answer: node B keeps it and tries again.
            await approver.answer(
                request["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}
            )
            await logged(b, "cannot be told yet")
            # The owner's own client keeps its live stream meanwhile.
            await chunks_seen(driver, streaming, seen + 10)
        finally:
            redis_server.resume()
        for observer in observers:
            await turns_ended(observer, streaming, 1)
            await observer.wait_for(partial(answered, observer, asking), timeout=30)
            assert said(observer, asking) == "permission: selected allowafter"
        assert not [n for n in approver.notifications if n["method"] == "_hub/answer_refused"]

        for session_id in (streaming, asking):
            last = max(o.last_seq(session_id) for o in observers)
            for observer in observers:
                await seen_up_to(observer, session_id, last)
                seqs_contiguous(observer, session_id)  # no gap, no duplicate
                assert resets(observer, session_id) == 0
            assert fold_upto(observers[0], session_id, last) == fold_upto(
                observers[1], session_id, last
            )
            statuses = [u.get("status") for u in updates_of(observers[0], session_id, "_hub_agent")]
            assert "restarted" not in statuses  # nobody took a session over
        for node in (a, b, c):
            assert "Traceback" not in node.log(), node.log()


async def test_an_answer_redis_stalls_longer_than_owner_wait_is_refused_visibly(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    # The only approver, on node B, answers while Redis is stalled; node B tries to deliver the
    # answer to the owner for ``owner_wait`` (2 s), which the stall outlasts (one store command
    # times out after 5 s): the approver is told its answer did not count, never left to think
    # it did.
    cwd = tmp_path / "project"
    cwd.mkdir()
    # The leases outlive the stall: no node takes the session over.
    hub = {"node_lease": 20.0, "owner_wait": 2.0}
    nodes = hub_nodes(tmp_path, redis_server.url, "ab", agent=scripted(), hub=hub)
    async with AsyncExitStack() as stack:
        a, b = await stack.enter_async_context(nodes)
        await ready_becomes(a, True)
        driver = await stack.enter_async_context(acp_client(a.url))
        session_id = await driver.new_session(cwd=str(cwd))
        await driver.call("session/detach", {"sessionId": session_id})
        approver = await stack.enter_async_context(acp_client(b.url))
        await watch(approver, session_id)
        await approver.prompt(session_id, "permission\nsay after")
        await approver.wait_for(
            lambda: any(r["method"] == "session/request_permission" for r in approver.requests)
        )
        (request,) = [r for r in approver.requests if r["method"] == "session/request_permission"]

        def refusals() -> list[dict[str, Any]]:
            return [
                n["params"] for n in approver.notifications if n["method"] == "_hub/answer_refused"
            ]

        redis_server.pause()
        try:
            await ready_becomes(b, False)
            await approver.answer(
                request["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}
            )
            await approver.wait_for(lambda: bool(refusals()), timeout=30)
        finally:
            redis_server.resume()
        (refused,) = refusals()
        assert refused["sessionId"] == session_id
        assert refused["requestId"] == request["id"]
        assert refused["error"]["code"] == -32051
        assert "could not reach the node owning the session" in refused["error"]["message"]
        await logged(b, "was not sent in 2 s")
        # The agent never got the answer: its turn still waits for one.
        assert "after" not in said(approver, session_id)
        for node in (a, b):
            assert "Traceback" not in node.log(), node.log()
