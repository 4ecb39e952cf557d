"""A Streamable HTTP connection that ends before its ``initialize`` is answered is never
placed: a record written after the connection was forgotten would be renewed for as long as
the node lives. Real Redis (``tests/redis_server.py``)."""

from __future__ import annotations

from typing import cast

import pytest

from hub.server.placement import Placements
from hub.store import SharedStore, open_store
from tests.redis_server import RedisServer

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:9"


async def test_a_connection_forgotten_before_it_is_placed_is_never_placed(
    redis_server: RedisServer,
) -> None:
    store = open_store(redis_server.url, node="n-1")
    async with store.running():
        placements = Placements(cast(SharedStore, store), ttl=10.0)
        ended, live = "c-" + "a" * 32, "c-" + "b" * 32
        placements.open(ended)
        placements.open(live)
        placements.forget(ended)  # it ended while its initialize was answered
        await placements.place(ended, URL, "alice")
        await placements.place(live, URL, "alice")
        assert set(placements.local) == {live}
        assert await placements.find(ended) is None
        found = await placements.find(live)
        assert found is not None
        assert (found.node, found.principal) == ("n-1", "alice")
        # A connection never opened on this node is not placed either.
        stranger = "c-" + "c" * 32
        await placements.place(stranger, URL, "alice")
        assert stranger not in placements.local
