"""Three hub nodes on one real redis-server: any node serves any session.

Each node is a real ``acp-hub serve`` process with its own scripted agent (sharing one
``--state-dir``, so that a node taking a session over can resume it at the agent), all on
one Redis. Observers spread over the three nodes see one ordered stream while a real agent
streams; a prompt sent on another node than the owner runs on the owner; the list of every
node shows every session; and when the owner is killed (SIGKILL) another node takes its
sessions over within ``node_lease``, its observers see the ``_hub_agent`` event without a
gap or a duplicate, and the session is promptable again.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.hubproc import hub_nodes
from tests.redis_server import RedisServer
from tests.server.harness import AcpClient, acp_client
from tests.store.nodes import (
    agent_status,
    chunks_seen,
    fold_upto,
    idle,
    seen_up_to,
    seqs_contiguous,
    turns_ended,
    updates_of,
    watch,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LEASE = 2.0


async def test_any_node_lists_follows_and_prompts_every_session(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        hub_nodes(tmp_path, redis_server.url, hub={"node_lease": LEASE}) as (a, b, c),
        AsyncExitStack() as stack,
    ):
        driver = await stack.enter_async_context(acp_client(a.url))
        session_id = await driver.new_session(cwd=str(cwd))
        observers = [await stack.enter_async_context(acp_client(n.url)) for n in (a, b, c)]
        for observer in observers:
            await watch(observer, session_id)
        await driver.prompt(session_id, "stream 300 24")
        for observer in observers:
            await turns_ended(observer, session_id, 1)
        # One stream: every observer saw contiguous seqs up to the same event, and folds the
        # same state, whichever node it is on (presence may still follow the turn: wait).
        top = max(observer.last_seq(session_id) for observer in observers)
        for observer in observers:
            await seen_up_to(observer, session_id, top)
        for observer in observers:
            seqs_contiguous(observer, session_id)
        states = [fold_upto(o, session_id, top) for o in observers]
        assert states[0] == states[1] == states[2]

        # A prompt sent on node B to the session node A owns runs on A.
        remote = observers[1]
        answer = await remote.prompt(session_id, "say hello from node b")
        assert answer["_meta"]["acp-hub"]["queued"] is False
        for observer in observers:
            await turns_ended(observer, session_id, 2)
        top = max(observer.last_seq(session_id) for observer in observers)
        for observer in observers:
            await seen_up_to(observer, session_id, top)
        prompts = updates_of(observers[2], session_id, "_hub_prompt")
        assert prompts[-1]["clientId"] == remote.init_result["_meta"]["acp-hub"]["connectionId"]
        assert fold_upto(observers[0], session_id, top) == fold_upto(observers[2], session_id, top)

        # Every node lists the session.
        for observer in observers:
            listed = await observer.call("session/list", {})
            assert session_id in {s["sessionId"] for s in listed["sessions"]}


async def test_the_owner_killed_another_node_takes_over(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        hub_nodes(tmp_path, redis_server.url, hub={"node_lease": LEASE}) as (a, b, c),
        AsyncExitStack() as stack,
    ):
        driver = await stack.enter_async_context(acp_client(a.url))
        session_id = await driver.new_session(cwd=str(cwd))
        watchers = [await stack.enter_async_context(acp_client(n.url)) for n in (b, c)]
        for watcher in watchers:
            await watch(watcher, session_id)
        await driver.prompt(session_id, "slow 400 20")
        for watcher in watchers:
            await chunks_seen(watcher, session_id, 10)
        await a.kill()
        for watcher in watchers:
            await agent_status(watcher, session_id, "restarted", within=LEASE * 10)
        for watcher in watchers:
            seqs_contiguous(watcher, session_id)  # no gap, no duplicate across the takeover
            # The turn the dead owner ran is over, visibly.
            await idle(watcher, session_id)
        epochs = {
            p["_meta"]["acp-hub"]["epoch"]
            for p in watchers[0].session_updates(session_id)
            if "seq" in p.get("_meta", {}).get("acp-hub", {})
        }
        assert len(epochs) == 2  # the new owner continues the history under a new epoch
        ended = [w.idle_count(session_id) for w in watchers]
        answer = await watchers[0].prompt(session_id, "say hello after the takeover")
        assert answer["_meta"]["acp-hub"]["queued"] is False
        for watcher, before in zip(watchers, ended, strict=True):
            await turns_ended(watcher, session_id, before + 1)
            seqs_contiguous(watcher, session_id)
        top = max(w.last_seq(session_id) for w in watchers)
        for watcher in watchers:
            await seen_up_to(watcher, session_id, top)
        assert fold_upto(watchers[0], session_id, top) == fold_upto(watchers[1], session_id, top)


def connection_id(client: AcpClient) -> str:
    return str(client.init_result["_meta"]["acp-hub"]["connectionId"])


def permission_requests(client: AcpClient) -> list[dict[str, Any]]:
    return [r for r in client.requests if r["method"] == "session/request_permission"]


async def listing(client: AcpClient, session_id: str, ids: set[str]) -> None:
    def listed() -> set[str]:
        presence = client.fold(session_id).hub("_hub_presence") or {}
        return {str(r.get("clientId")) for r in presence.get("clients", [])}

    await client.wait_for(lambda: listed() == ids)


async def asked(client: AcpClient) -> None:
    await client.wait_for(lambda: bool(permission_requests(client)))


async def withdrawn(client: AcpClient, request_id: Any) -> None:
    await client.wait_for(lambda: request_id in client.cancelled)


async def resolved(client: AcpClient, session_id: str, permission_id: str) -> None:
    def status() -> Any:
        return (client.fold(session_id).permission(permission_id) or {}).get("status")

    await client.wait_for(lambda: status() == "resolved")


async def test_permissions_and_presence_span_every_node(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        hub_nodes(tmp_path, redis_server.url, hub={"node_lease": LEASE}) as (a, b, c),
        AsyncExitStack() as stack,
    ):
        driver = await stack.enter_async_context(acp_client(a.url))
        session_id = await driver.new_session(cwd=str(cwd))
        on_b, on_c = [await stack.enter_async_context(acp_client(n.url)) for n in (b, c)]
        for client in (on_b, on_c):
            await watch(client, session_id)
        everyone = {connection_id(x) for x in (driver, on_b, on_c)}

        # Presence lists the clients of every node, on every node, each under its own
        # principal (the join message carries it).
        for client in (driver, on_b, on_c):
            await listing(client, session_id, everyone)
            presence = client.fold(session_id).hub("_hub_presence") or {}
            principals = {str(r["clientId"]): r.get("principal") for r in presence["clients"]}
            assert principals == {
                connection_id(x): x.init_result["_meta"]["acp-hub"]["principal"]
                for x in (driver, on_b, on_c)
            }

        await driver.prompt(session_id, "permission Edit it?")
        for client in (driver, on_b, on_c):
            await asked(client)
        copies = {id(x): permission_requests(x)[0] for x in (driver, on_b, on_c)}
        permission_id = copies[id(on_c)]["params"]["_meta"]["acp-hub"]["permissionId"]
        assert {r["params"]["_meta"]["acp-hub"]["permissionId"] for r in copies.values()} == {
            permission_id
        }
        # Answered on node C: the copies on A and B are withdrawn, C's answer counts.
        await on_c.answer(
            copies[id(on_c)]["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}
        )
        for client in (driver, on_b):
            await withdrawn(client, copies[id(client)]["id"])
        for client in (driver, on_b, on_c):
            await resolved(client, session_id, permission_id)
            record = client.fold(session_id).permission(permission_id) or {}
            assert record["resolvedBy"]["clientId"] == connection_id(on_c)
            await turns_ended(client, session_id, 1)
        said = " ".join(
            str(u.get("content", {}).get("text"))
            for u in updates_of(driver, session_id, "agent_message_chunk")
        )
        assert "permission: selected allow" in said


async def test_a_node_that_lost_its_lease_moves_its_clients(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The owner's lease vanishes (as when Redis did not hear from it for ``node_lease``): the
    session is taken over, the old owner's clients are told it moved, and resume elsewhere
    with their cursors, exactly."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        hub_nodes(tmp_path, redis_server.url, hub={"node_lease": LEASE}) as (a, b, _),
        AsyncExitStack() as stack,
    ):
        client = await stack.enter_async_context(acp_client(a.url))
        session_id = await client.new_session(cwd=str(cwd))
        await client.prompt(session_id, "say before the move")
        await turns_ended(client, session_id, 1)
        seen_before = client.seqs(session_id)
        store = aioredis.Redis.from_url(redis_server.url)
        try:
            await store.delete(f"acp-hub:{{{session_id}}}:owner")
        finally:
            await store.aclose()
        await client.wait_for(
            lambda: any(
                n["method"] == "_hub/session_closed" and n["params"].get("moved") is True
                for n in client.notifications
            ),
            timeout=LEASE * 10,
        )
        epoch, seq = (
            client.session_updates(session_id)[-1]["_meta"]["acp-hub"]["epoch"],
            seen_before[-1],
        )
        again = await stack.enter_async_context(acp_client(b.url))
        await again.call(
            "session/resume",
            {
                "sessionId": session_id,
                "cwd": "/",
                "replayFrom": {"type": "_hub_after", "epoch": epoch, "seq": seq},
            },
        )
        await again.prompt(session_id, "say after the move")
        await turns_ended(again, session_id, 1)
        assert updates_of(again, session_id, "_hub_reset") == []
        seqs = again.seqs(session_id)
        assert seqs[0] > seq
        joined = [s for s in seen_before if s <= seq] + seqs
        assert joined == list(range(joined[0], joined[0] + len(joined)))


# Nodes and clients set up as in the other node tests: each reads as its scenario.
async def test_policies_config_and_close_from_another_node(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        hub_nodes(tmp_path, redis_server.url, hub={"node_lease": LEASE}) as (a, b, c),
        AsyncExitStack() as stack,
    ):
        owner = await stack.enter_async_context(acp_client(a.url))
        session_id = await owner.new_session(cwd=str(cwd))
        on_b, on_c = [await stack.enter_async_context(acp_client(n.url)) for n in (b, c)]
        for client in (on_b, on_c):
            await watch(client, session_id)
        policy = await on_b.call(
            "_hub/set_policy", {"sessionId": session_id, "prompt": "reject", "permission": "owner"}
        )
        assert policy == {"prompt": "reject", "permission": "owner", "quorum": 2}
        for client in (owner, on_b, on_c):
            await policy_seen(client, session_id, "reject")
        lease = await on_c.call("_hub/lease/request", {"sessionId": session_id})
        assert lease == {"holder": connection_id(on_c)}
        options = await on_c.call(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "mode", "value": "code"},
        )
        mode = next(o for o in options["configOptions"] if o["configId"] == "mode")
        assert mode["currentValue"] == "code"
        await on_b.call("session/close", {"sessionId": session_id})
        for client in (owner, on_b, on_c):
            await closed_notice(client, session_id)
        listed = await on_c.call("session/list", {})
        assert session_id not in {s["sessionId"] for s in listed["sessions"]}


async def policy_seen(client: AcpClient, session_id: str, prompt: str) -> None:
    await client.wait_for(
        lambda: (client.fold(session_id).hub("_hub_policy") or {}).get("prompt") == prompt
    )


async def closed_notice(client: AcpClient, session_id: str) -> None:
    await client.wait_for(
        lambda: any(
            n["method"] == "_hub/session_closed" and n["params"].get("sessionId") == session_id
            for n in client.notifications
        ),
        timeout=LEASE * 5,
    )


async def test_a_session_made_on_one_node_is_found_on_another_at_once(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    # The session's log is written behind the events; session/new answers only once another
    # node can read it, so a client told the id may resume it anywhere straight away (a
    # reader of the id on another node found no session while the first write was queued).
    async with (
        hub_nodes(tmp_path, redis_server.url, "ab", hub={"node_lease": LEASE}) as nodes,
        acp_client(nodes[0].url) as a,
        acp_client(nodes[1].url) as b,
    ):
        for _ in range(10):
            sid = await a.new_session(cwd="/tmp")
            assert await watch(b, sid) >= 1
