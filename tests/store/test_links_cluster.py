"""Share links and the audit trail in the store, on real hub processes.

Two nodes (real ``acp-hub serve`` processes, each with its own state directory, so that no
``links.json`` is shared) on one real redis-server: a link minted on one node admits on the
other, a revocation on either closes the link's connections on both with 1008 and is refused
by both afterwards, ``maxUses`` holds across the nodes, and either node reads the audit
entries both wrote. On SQLite and on Redis, links and revocations outlive a hub killed right
after the revocation was answered. A share link manages no links on any node, a revocation
takes the links a link minted along on every node, and a link no node knows is ``503`` while
the store is down.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from hub.store import open_store
from tests.credentials import AUTHORITY, admission
from tests.hubproc import HubProcess, hub_nodes, hub_process, scripted
from tests.redis_server import RedisServer
from tests.server.harness import AcpClient, RpcFailure, acp_client

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WAIT = 10.0


def with_token(node: HubProcess, token: str) -> str:
    return f"ws://127.0.0.1:{node.port}/acp?token={token}"


async def eventually(
    client: AcpClient, method: str, params: dict[str, Any], check: Callable[[Any], bool]
) -> Any:
    """Call ``method`` until its result passes ``check`` (another node's write arrives)."""
    with anyio.fail_after(WAIT):
        while True:
            result = await client.call(method, params)
            if check(result):
                return result
            await anyio.sleep(0.05)


async def closed(client: AcpClient) -> None:
    await client.wait_for(lambda: client.close_code is not None, timeout=WAIT)


def events(page: dict[str, Any]) -> set[tuple[str, str | None]]:
    return {(e["event"], e.get("node")) for e in page["entries"]}


async def new_session(owner: AcpClient, tmp_path: Path) -> str:
    cwd = tmp_path / "project"
    cwd.mkdir(exist_ok=True)
    return await owner.new_session(cwd=str(cwd))


async def share(owner: AcpClient, session_id: str, **params: Any) -> dict[str, Any]:
    link: dict[str, Any] = await owner.call(
        "_hub/share/create", {"sessionId": session_id, "role": "viewer", "expiresIn": 600, **params}
    )
    return link


async def test_a_link_works_on_every_node_and_is_revoked_on_every_node(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with (
        hub_nodes(tmp_path, redis_server.url, "ab", agent=scripted()) as (a, b),
        AsyncExitStack() as stack,
    ):
        owner_a = await stack.enter_async_context(acp_client(a.url))
        sid = await new_session(owner_a, tmp_path)
        link = await share(owner_a, sid, label="for bob")
        # Minted on A, admitted on B (and on A).
        guest_b = await stack.enter_async_context(acp_client(with_token(b, link["token"])))
        guest_a = await stack.enter_async_context(acp_client(with_token(a, link["token"])))
        for guest in (guest_a, guest_b):
            assert guest.init_result["_meta"]["acp-hub"]["principal"] == f"link:{link['linkId']}"
            await guest.call("session/resume", {"sessionId": sid, "cwd": "/"})
        owner_b = await stack.enter_async_context(acp_client(b.url))
        # Each node counts its admission where both see it.
        await eventually(
            owner_b,
            "_hub/share/list",
            {"sessionId": sid},
            lambda r: [x["uses"] for x in r["links"]] == [2],
        )

        # Revoked on B: its client on B closes at once, the one on A as soon as A reads the
        # change; both with 1008.
        revoked = await owner_b.call("_hub/share/revoke", {"linkId": link["linkId"]})
        assert revoked == {"linkId": link["linkId"], "revoked": True, "closed": 1}
        await closed(guest_a)
        await closed(guest_b)
        assert (guest_a.close_code, guest_b.close_code) == (1008, 1008)
        for node in (a, b):
            assert await admission(with_token(node, link["token"])) == "revoked"
        listed = await owner_a.call("_hub/share/list", {"sessionId": sid})
        assert listed["links"][0]["revoked"] is True
        assert listed["links"][0]["revokedBy"] == "test-owner"

        # The audit trail: entries written on both nodes, read from either.
        wanted = {("share_created", "node-a"), ("share_revoked", "node-b")}
        for owner in (owner_a, owner_b):
            page = await eventually(owner, "_hub/audit/list", {}, lambda p: wanted <= events(p))
            assert ("session_created", "node-a") in events(page)


async def test_max_uses_holds_across_nodes(tmp_path: Path, redis_server: RedisServer) -> None:
    async with (
        hub_nodes(tmp_path, redis_server.url, "ab", agent=scripted()) as (a, b),
        acp_client(a.url) as owner,
    ):
        sid = await new_session(owner, tmp_path)
        link = await share(owner, sid, maxUses=1)
        results: list[str] = []

        async def attempt(node: HubProcess) -> None:
            results.append(await admission(with_token(node, link["token"])))

        async with anyio.create_task_group() as tg:  # both at once, one on each node
            tg.start_soon(attempt, a)
            tg.start_soon(attempt, b)
        assert sorted(results) == ["ok", "used_up"]
        for node in (a, b):
            assert await admission(with_token(node, link["token"])) == "used_up"


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_links_and_revocations_outlive_a_killed_hub(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "sqlite":
        store = f"sqlite:///{tmp_path}/data/hub.db"
    else:
        redis: RedisServer = request.getfixturevalue("redis_server")
        store = redis.url
    async with hub_process(tmp_path / "first", store, scripted(), name="first") as first:
        async with acp_client(first.url) as owner:
            sid = await new_session(owner, tmp_path)
            gone = await share(owner, sid)
            once = await share(owner, sid, maxUses=1, role="approver")
            kept = await share(owner, sid)
            assert await admission(with_token(first, once["token"])) == "ok"
            await owner.call("_hub/share/revoke", {"linkId": gone["linkId"]})
            wanted = {"share_created", "share_revoked", "session_created"}
            await eventually(
                owner,
                "_hub/audit/list",
                {},
                lambda p: wanted <= {e["event"] for e in p["entries"]},
            )
        await first.kill()  # nothing flushed at exit: what was answered is stored
    # Another state directory: nothing comes from a links.json.
    async with (
        hub_process(tmp_path / "second", store, scripted(), name="second") as second,
        acp_client(second.url) as owner,
    ):
        assert await admission(with_token(second, gone["token"])) == "revoked"
        assert await admission(with_token(second, once["token"])) == "used_up"
        async with acp_client(with_token(second, kept["token"])) as guest:
            assert guest.init_result["_meta"]["acp-hub"]["role"] == "viewer"
        page = await owner.call("_hub/audit/list", {"limit": 500})
        revocations = [e for e in page["entries"] if e["event"] == "share_revoked"]
        assert [e["linkId"] for e in revocations] == [gone["linkId"]]


def legacy_child(parent_id: str, session_id: str) -> tuple[dict[str, Any], str]:
    """The record and token of a link as a link minted it before links stopped minting
    links (its ``created_by`` names the parent link's principal), signed with the nodes' key."""
    link_id = f"l-{secrets.token_hex(8)}"
    now = time.time()
    record = {
        "link_id": link_id,
        "session_id": session_id,
        "role": "viewer",
        "created_by": f"link:{parent_id}",
        "created_at": now,
        "expires_at": now + 30 * 86400,
        "label": "",
        "max_uses": None,
        "uses": 0,
        "revoked_at": None,
        "revoked_by": None,
    }
    minted = AUTHORITY.mint(
        sub=f"link:{link_id}",
        name="guest",
        role="viewer",
        ttl=30 * 86400,
        sessions=[session_id],
        agents=(),
        jti=link_id,
        link_id=link_id,
        now=now,
    )
    return record, minted


# Nodes and clients set up as in the other node tests: each reads as its scenario.
async def test_a_link_manages_no_links_on_any_node_and_takes_its_children_along(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with (
        hub_nodes(tmp_path, redis_server.url, "ab", agent=scripted()) as (a, b),
        AsyncExitStack() as stack,
    ):
        owner_a = await stack.enter_async_context(acp_client(a.url))
        sid = await new_session(owner_a, tmp_path)
        parent = await share(owner_a, sid, role="owner", expiresIn=120, maxUses=3)
        viewer = await share(owner_a, sid)
        # An owner link on B, which does not serve the session: it mints, lists and revokes
        # nothing, and reaches no agent.
        guest = await stack.enter_async_context(acp_client(with_token(b, parent["token"])))
        calls: list[tuple[str, dict[str, Any]]] = [
            ("_hub/share/create", {"sessionId": sid, "role": "owner", "expiresIn": 2592000}),
            ("_hub/share/list", {"sessionId": sid}),
            ("_hub/share/revoke", {"linkId": viewer["linkId"]}),
            ("_hub/agent_stderr", {}),
            ("_hub/agent_logout", {}),
        ]
        for method, params in calls:
            with pytest.raises(RpcFailure) as refused:
                await guest.call(method, params)
            assert refused.value.code == -32040, method
        assert await admission(with_token(a, viewer["token"])) == "ok"

        # A link the owner link minted before links stopped minting, written to the store.
        record, child_token = legacy_child(parent["linkId"], sid)
        store = open_store(redis_server.url)
        async with store.running():
            await store.add_link(record)
        child_b = await stack.enter_async_context(acp_client(with_token(b, child_token)))
        await eventually(
            owner_a,
            "_hub/share/list",
            {"sessionId": sid},
            lambda r: record["link_id"] in {x["linkId"] for x in r["links"]},
        )
        # Revoked on A: the child's connection on B closes with it, and both refuse the child.
        await owner_a.call("_hub/share/revoke", {"linkId": parent["linkId"]})
        await closed(child_b)
        await closed(guest)
        assert (child_b.close_code, guest.close_code) == (1008, 1008)
        for node in (a, b):
            assert await admission(with_token(node, child_token)) == "revoked"

        # A link neither node knows, checked while the store is down: unavailable, not revoked.
        _, unknown = legacy_child(parent["linkId"], sid)
        redis_server.stop()
        assert await admission(with_token(b, unknown)) == "unavailable"
