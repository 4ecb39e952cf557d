"""Streamable HTTP clients behind a round-robin load balancer: three hub nodes on one Redis.

Each node is a real ``acp-hub serve`` process on one real redis-server. An HTTP-profile client
initializes on one node; its later POSTs and GETs go to each node in turn, as a load balancer
without affinity would send them, and the node that holds the connection serves them all
(the others relay them): the client sees every update of a turn exactly once and in order,
through streams dropped and opened again on other nodes with ``Last-Event-ID``, and answers a
permission request through yet another node. A connection id presented on another node with
another principal's token is refused there; a connection whose node was killed is answered
``404`` by the others at once, and the client initializes again and resumes with its cursor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
import redis.asyncio as aioredis

from tests.credentials import owner_token, token
from tests.hubproc import HubProcess, hub_nodes
from tests.redis_server import RedisServer
from tests.server.harness import acp_client
from tests.server.http_client import HttpAcp, http_acp

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LEASE = 2.0


def acp(node: HubProcess, credential: str | None = None) -> str:
    """The node's ``/acp`` with a credential (the owner's by default)."""
    return f"{node.http}/acp?token={credential or owner_token()}"


def chunks(client: Any, session_id: str) -> list[str]:
    return [
        str(u["update"]["content"]["text"])
        for u in client.session_updates(session_id)
        if u["update"].get("sessionUpdate") == "agent_message_chunk"
    ]


def turn_ended(client: Any, session_id: str) -> bool:
    return any(
        u["update"].get("sessionUpdate") == "state_update"
        and u["update"].get("state") == "idle"
        and u["update"].get("stopReason") is not None
        for u in client.session_updates(session_id)
    )


async def new_session(client: HttpAcp, cwd: Path) -> tuple[str, int]:
    """A new session's id and epoch, its stream open."""
    created = await client.call("session/new", {"cwd": str(cwd), "mcpServers": []})
    session_id = str(created["sessionId"])
    client.open_stream(session_id)
    return session_id, int(created["_meta"]["acp-hub"]["epoch"])


async def test_a_round_robin_client_sees_every_update_once_and_in_order(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with hub_nodes(tmp_path, redis_server.url, hub={"node_lease": LEASE}) as (a, b, c):
        route = [acp(b), acp(a), acp(c)]
        async with (
            http_acp(acp(a), route=route) as client,
            acp_client(a.url) as observer,
        ):
            session_id, epoch = await new_session(client, cwd)
            start = {"type": "_hub_after", "epoch": epoch, "seq": 0}
            await observer.call(
                "session/resume", {"sessionId": session_id, "cwd": "/", "replayFrom": start}
            )
            script = "say hello\nslow 30 10\npermission\nslow 30 10\nsay end"
            answer = await client.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": script}]},
            )
            assert answer["messageId"]
            # The session's stream drops mid-turn and comes back on another node, twice; the
            # connection's stream too.
            await client.wait_for(lambda: "slow 10\n" in chunks(client, session_id))
            last_id = client.last_event_id(session_id)
            client.drop_stream(session_id)
            await observer.wait_for(lambda: "slow 20\n" in chunks(observer, session_id))
            client.open_stream(session_id, last_event_id=last_id)
            client.drop_stream(None)
            client.open_stream(None, last_event_id=client.last_event_id(None))
            # The permission request reaches the client once; its answer goes via a node.
            await client.wait_for(lambda: len(client.requests) == 1)
            request = client.requests[0]
            assert request["method"] == "session/request_permission"
            await client.answer(
                request["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}, session_id
            )
            await client.wait_for(lambda: "slow 5\n" in chunks(client, session_id)[32:])
            last_id = client.last_event_id(session_id)
            client.drop_stream(session_id)
            client.open_stream(session_id, last_event_id=last_id)
            await client.wait_for(lambda: turn_ended(client, session_id))
            await observer.wait_for(lambda: turn_ended(observer, session_id))
            # A connection-level request after all that: answered on the connection's stream.
            listed = await client.call("session/list", {})
            assert session_id in [s["sessionId"] for s in listed["sessions"]]

            slow = [f"slow {i}\n" for i in range(30)]
            expected = ["hello", *slow, "permission: selected allow", *slow, "end"]
            assert chunks(client, session_id) == expected
            assert len(client.requests) == 1
            # Every update exactly once, in order, and the same as a WebSocket client's.
            seqs = client.seqs(session_id)
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
            ids = [e.id for e in client.events if e.stream == session_id]
            assert len(ids) == len(set(ids))
            last = seqs[-1]
            await observer.wait_for(lambda: observer.last_seq(session_id) >= last)
            assert seqs[0] == 1
            theirs = [
                u["update"]
                for u in observer.session_updates(session_id)
                if u["_meta"]["acp-hub"].get("seq", last + 1) <= last
            ]
            assert [u["update"] for u in client.session_updates(session_id)] == theirs
            assert set(client.served_by) == set(route)
        for node in (a, b, c):
            assert "Traceback" not in node.log(), node.log()
        assert "presented by another principal" not in b.log() + c.log()


# Nodes and clients set up as in the other node tests: each reads as its scenario.
async def test_a_session_stream_opens_before_the_resume_on_a_node_not_following_it(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        hub_nodes(tmp_path, redis_server.url, hub={"node_lease": LEASE}) as (a, b, c),
        acp_client(a.url) as driver,
    ):
        session_id = await driver.new_session(cwd=str(cwd))
        await driver.prompt(session_id, "say owned by a")
        await driver.wait_for(lambda: driver.idle_count(session_id) >= 1)
        # A client whose connection lives on B, which does not follow the session yet: its
        # stream opens first (B follows the session from then on), then it resumes.
        async with http_acp(acp(b), route=[acp(c), acp(b)]) as client:
            client.open_stream(session_id)
            await client.wait_for(lambda: session_id in client.statuses)
            assert client.statuses[session_id] == 200
            start = {"type": "start"}
            await client.call(
                "session/resume", {"sessionId": session_id, "cwd": "/", "replayFrom": start}
            )
            # The compacted replay: the turn's answer as one message.
            await client.wait_for(
                lambda: any(
                    u["update"].get("sessionUpdate") == "agent_message"
                    and u["update"]["content"][0]["text"] == "owned by a"
                    for u in client.session_updates(session_id)
                )
            )
        # A credential whose sessions do not include it: as an unknown session.
        other = token("owner", sub="test-owner", sessions=["s-other"])
        async with http_acp(acp(c, other)) as scoped:
            scoped.open_stream(session_id)
            await scoped.wait_for(lambda: session_id in scoped.statuses)
            assert scoped.statuses[session_id] == 404
        # Nor does the store's list of sessions grow a session that does not exist.
        async with http_acp(acp(c)) as stranger:
            stranger.open_stream("s-does-not-exist")
            await stranger.wait_for(lambda: "s-does-not-exist" in stranger.statuses)
            assert stranger.statuses["s-does-not-exist"] == 404


# Nodes and clients set up as in the other node tests: each reads as its scenario.
async def test_another_principal_cannot_use_a_connection_through_any_node(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        hub_nodes(tmp_path, redis_server.url, hub={"node_lease": LEASE}) as (a, b, _),
        http_acp(acp(a)) as client,
        httpx.AsyncClient(timeout=10) as attacker,
    ):
        session_id, _ = await new_session(client, cwd)
        connection_id = client.connection_id or ""
        thief = token("owner", sub="someone-else")
        stolen = {"Acp-Connection-Id": connection_id, "Content-Type": "application/json"}
        prompt = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "say x"}]},
        }
        session = {**stolen, "Acp-Session-Id": session_id}
        for node in (b, a):  # relayed or not, the same refusal
            posted = await attacker.post(
                acp(node, thief), content=orjson.dumps(prompt), headers=session
            )
            assert posted.status_code == 404, posted.text
            sse = {"Accept": "text/event-stream", **session}
            got = await attacker.get(acp(node, thief), headers=sse)
            assert got.status_code == 404, got.text
            deleted = await attacker.delete(acp(node, thief), headers=stolen)
            assert deleted.status_code == 404, deleted.text
        # The connection id without any credential: 401, before anything else.
        bare = await attacker.post(f"{b.http}/acp", content=orjson.dumps(prompt), headers=session)
        assert bare.status_code == 401
        assert "presented by another principal" in b.log()
        # The owner's connection is untouched: nothing of that reached it.
        client.route = [acp(b)]
        await client.call("session/list", {})
        assert not any(
            u["update"].get("sessionUpdate") == "agent_message_chunk"
            for u in client.session_updates(session_id)
        )


async def test_a_connection_whose_node_was_killed_is_answered_404_elsewhere(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with (
        hub_nodes(tmp_path, redis_server.url, hub={"node_lease": LEASE}) as (a, b, c),
        httpx.AsyncClient() as http,
        aioredis.Redis.from_url(redis_server.url) as store,
    ):
        async with http_acp(acp(a), route=[acp(b)]) as client:
            session_id, _ = await new_session(client, cwd)
            await client.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "say before"}]},
            )
            await client.wait_for(lambda: turn_ended(client, session_id))
            cursor = client.last_event_id(session_id)
            assert cursor is not None
            epoch, seq = (int(part) for part in cursor.split(":")[:2])
            # Everything the client saw is written (a kill loses what is not yet).
            meta = f"acp-hub:{{{session_id}}}:meta"
            with anyio.fail_after(10):
                while int(await store.hget(meta, "last_seq") or 0) < seq:  # noqa: ASYNC110 - in Redis
                    await anyio.sleep(0.05)
            connection_id = client.connection_id or ""
            await a.kill()
            # The streams B relayed from A end with A, at once: the client sees them end.
            await client.wait_for(
                lambda: {None, session_id} <= set(client.finished), timeout=LEASE * 2
            )
            headers = {"Acp-Connection-Id": connection_id, "Content-Type": "application/json"}
            listing = {"jsonrpc": "2.0", "id": 7, "method": "session/list", "params": {}}
            sse = {"Accept": "text/event-stream", "Acp-Connection-Id": connection_id}
            with anyio.fail_after(5):  # at once: no waiting for the record to expire
                posted = await http.post(acp(b), content=orjson.dumps(listing), headers=headers)
                got = await http.get(acp(c), headers={**sse, "Last-Event-ID": "1"})
                deleted = await http.delete(acp(b), headers=headers)
            for answer in (posted, got, deleted):
                assert answer.status_code == 404, answer.text
                assert "initialize again" in answer.json()["error"]
        # The client initializes again (on any node) and resumes the session from the cursor
        # of its last event id: no gap, nothing twice, and the session goes on where another
        # node took it over.
        async with http_acp(acp(c), route=[acp(b), acp(c)]) as again:
            again.open_stream(session_id)  # before the resume, as the protocol has it
            after = {"type": "_hub_after", "epoch": epoch, "seq": seq}
            await again.call(
                "session/resume", {"sessionId": session_id, "cwd": "/", "replayFrom": after}
            )
            await again.wait_for(
                lambda: any(
                    u["update"].get("sessionUpdate") == "_hub_agent"
                    and u["update"].get("status") == "restarted"
                    for u in again.session_updates(session_id)
                ),
                timeout=LEASE * 10,
            )
            await again.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "say after"}]},
            )
            await again.wait_for(lambda: "after" in chunks(again, session_id))
            assert chunks(again, session_id) == ["after"]
            seqs = again.seqs(session_id)
            assert seqs[0] == seq + 1
            assert seqs == list(range(seq + 1, seq + 1 + len(seqs)))
            assert not any(
                u["update"].get("sessionUpdate") == "_hub_reset"
                for u in again.session_updates(session_id)
            )
        for node in (b, c):
            assert "Traceback" not in node.log(), node.log()


async def test_an_initialize_with_another_nodes_cookie_starts_a_connection_where_it_lands(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    # A raw initialize as in test_fuzz_wire.py: these requests go without a client.
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": 2, "info": {"name": "jar", "version": "1"}},
    }
    json = {"Content-Type": "application/json"}
    async with (
        # The nodes trust each other's X-Forwarded-Proto (they are each other's proxies).
        hub_nodes(
            tmp_path,
            redis_server.url,
            hub={"node_lease": LEASE, "trusted_proxies": ["127.0.0.1"]},
        ) as (a, b, _),
        httpx.AsyncClient() as jar,
    ):
        first = await jar.post(acp(a), content=orjson.dumps(init), headers=json)
        assert first.status_code == 200, first.text
        old = first.headers["acp-connection-id"]
        assert jar.cookies.get("acp-connection") == old
        # The jar presents A's cookie to B (cookies ignore the port): B starts a connection of
        # its own instead of relaying the initialize to A, where it was swallowed.
        second = await jar.post(acp(b), content=orjson.dumps(init), headers=json)
        assert second.status_code == 200, second.text
        new = second.headers["acp-connection-id"]
        assert new != old
        assert "result" in second.json()
        assert jar.cookies.get("acp-connection") == new
        listing = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
        for connection_id in (old, new):  # both live, each on its node, reachable from both
            for node in (a, b):
                headers = {**json, "Acp-Connection-Id": connection_id}
                posted = await jar.post(acp(node), content=orjson.dumps(listing), headers=headers)
                assert posted.status_code == 202, posted.text
        # The cookie alone, relayed from A to B (which holds the connection), over https as
        # the proxy in front of A says: B renews it, Secure.
        https = {**json, "X-Forwarded-Proto": "https"}
        posted = await jar.post(acp(a), content=orjson.dumps(listing), headers=https)
        assert posted.status_code == 202, posted.text
        renewed = posted.headers["set-cookie"].lower()
        assert renewed.startswith(f"acp-connection={new}")
        assert "secure" in renewed
        assert "max-age=86400" in renewed
        for connection_id in (old, new):
            deleted = await jar.delete(acp(a), headers={"Acp-Connection-Id": connection_id})
            assert deleted.status_code == 202
