"""Share links and the audit trail in each store (memory, SQLite, a real redis-server).

The records are the ones ``hub.store.links`` and ``hub.store.audit`` hand the store; the
durable stores are read back by a second store instance on the same file or server (for
Redis, while the first still runs: two nodes).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from hub.store import Store, open_store
from hub.store.redis import RedisStore
from tests.redis_server import RedisServer
from tests.store.test_contract import store_url

pytestmark = pytest.mark.anyio
__all__ = ["store_url"]  # the fixture, run against every store


@asynccontextmanager
async def two(url: str) -> AsyncIterator[tuple[Store, Store]]:
    """Two instances of the store ``url`` names, both running (the memory store: one)."""
    first = open_store(url)
    second = first if url == "memory" else open_store(url)
    async with first.running():
        if second is first:
            yield first, second
        else:
            async with second.running():
                yield first, second


def link(link_id: str, *, max_uses: int | None = None, expires_in: float = 600) -> dict[str, Any]:
    now = time.time()
    return {
        "link_id": link_id,
        "session_id": "s-1",
        "role": "viewer",
        "created_by": "owner",
        "created_at": now,
        "expires_at": now + expires_in,
        "label": "for ann",
        "max_uses": max_uses,
        "uses": 0,
        "revoked_at": None,
        "revoked_by": None,
    }


async def test_links_are_shared_revoked_once_and_counted_atomically(store_url: str) -> None:
    async with two(store_url) as (a, b):
        one = link("l-1")
        await a.add_link(one)
        await a.add_link(link("l-2", max_uses=3))
        await a.add_link({**one, "label": "again"})  # a second add changes nothing
        assert await b.link("l-1") == one
        assert {r["link_id"] for r in await b.links()} == {"l-1", "l-2"}
        assert await b.link("l-nope") is None
        assert await b.use_link("l-nope") == ("unknown", None)
        assert await b.revoke_link("l-nope", time.time(), "owner") is None

        # Three uses allowed, asked for six times at once from two instances: three counted.
        results: list[str] = []

        async def use(store: Store) -> None:
            status, record = await store.use_link("l-2")
            assert record is not None
            results.append(status)

        async with anyio.create_task_group() as tg:
            for n in range(6):
                tg.start_soon(use, (a, b)[n % 2])
        assert sorted(results) == ["ok"] * 3 + ["used_up"] * 3
        assert (await a.link("l-2") or {})["uses"] == 3

        first = await b.revoke_link("l-1", 1000.5, "alice")
        assert first is not None
        assert (first["revoked_at"], first["revoked_by"]) == (1000.5, "alice")
        again = await a.revoke_link("l-1", 2000.0, "bob")
        assert again is not None
        assert (again["revoked_at"], again["revoked_by"]) == (1000.5, "alice")
        status, record = await a.use_link("l-1")
        assert status == "revoked"
        assert record is not None
        assert record["uses"] == 0

    if store_url != "memory":  # a new instance on the same file or server
        async with two(store_url) as (c, _):
            stored = {r["link_id"]: r for r in await c.links()}
            assert stored["l-1"]["revoked_by"] == "alice"
            assert stored["l-2"]["uses"] == 3
            assert stored["l-2"]["label"] == "for ann"


async def test_long_expired_links_are_dropped(store_url: str) -> None:
    async with two(store_url) as (a, b):
        await a.add_link(link("l-old", expires_in=-8 * 86400))
        await a.add_link(link("l-new"))
        assert [r["link_id"] for r in await b.links()] == ["l-new"]


async def test_the_audit_trail_pages_newest_first_and_is_bounded(store_url: str) -> None:
    async with two(store_url) as (a, b):
        await a.append_audit([{"event": "e", "n": n} for n in range(5)], keep=1000)
        await b.append_audit([{"event": "e", "n": n} for n in range(5, 8)], keep=1000)
        first = await a.read_audit(None, 3)
        assert [e["n"] for _, e in first] == [7, 6, 5]
        rest = await b.read_audit(first[-1][0], 10)
        assert [e["n"] for _, e in rest] == [4, 3, 2, 1, 0]
        assert await a.read_audit(rest[-1][0], 10) == []
        for bad in ("x", "1-", "", "9" * 40, "-1-1"):
            with pytest.raises(ValueError, match="audit entry id"):
                await a.read_audit(bad, 10)
        # The store keeps about the newest `keep` (Redis trims whole nodes of its stream).
        await a.append_audit([{"event": "e", "n": n} for n in range(8, 400)], keep=50)
        kept = await b.read_audit(None, 1000)
        assert kept[0][1]["n"] == 399
        assert 50 <= len(kept) < 300


async def test_every_node_reads_the_link_changes_in_order(redis_server: RedisServer) -> None:
    a, b = RedisStore(redis_server.url), RedisStore(redis_server.url)
    async with a.running(), b.running():
        after, number = await b.link_mark()
        assert (after, number) == ("0-0", None)
        await a.add_link(link("l-1", max_uses=2))
        await a.use_link("l-1")
        await a.revoke_link("l-1", 5.0, "owner")
        await a.use_link("l-1")  # refused: no change
        after, changes = await b.link_changes(after, 0.1)
        assert [n for n, _ in changes] == [1, 2, 3]
        assert [(r["uses"], r["revoked_by"]) for _, r in changes] == [
            (0, None),
            (1, None),
            (1, "owner"),
        ]
        assert await b.link_mark() == (after, 3)
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                got: list[tuple[int, dict[str, Any]]] = []

                async def read() -> None:
                    got.extend((await b.link_changes(after, 5))[1])

                tg.start_soon(read)  # blocks until the change below wakes it
                await a.add_link(link("l-2"))
        assert [(n, r["link_id"]) for n, r in got] == [(4, "l-2")]
