"""Per-connection limits over real sockets (docs/limits.md): the ``initialize`` deadline, the
request rate, requests in progress, and the connection caps of the upgrade and of the
Streamable HTTP profile."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from hub.settings import Settings
from tests.credentials import bearer, token
from tests.server.harness import (
    HubHandle,
    RpcFailure,
    acp_client,
    running_hub,
    scripted_agent,
)

RATE_LIMITED = -32044


async def test_a_connection_that_never_initializes_is_closed_with_1008() -> None:
    settings = Settings(initialize_timeout=0.3)
    async with (
        running_hub([scripted_agent()], settings) as hub,
        connect(hub.url, ping_interval=None) as ws,
    ):
        with anyio.fail_after(20), pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.protocol.close_rcvd is not None
        assert ws.protocol.close_rcvd.code == 1008
        # A client that initializes in time is not affected.
        async with acp_client(hub.url) as client:
            assert await client.call("session/list", {}) == {"sessions": []}


async def test_requests_over_the_rate_get_32044_with_the_time_to_wait() -> None:
    settings = Settings(request_rate=0.01, request_burst=4)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as client:
        # `initialize` took one token; three more are left.
        for _ in range(3):
            await client.call("session/list", {})
        with pytest.raises(RpcFailure) as caught:
            await client.call("session/list", {})
        assert caught.value.code == RATE_LIMITED
        data = caught.value.error["data"]
        assert data["limit"] == "request_rate"
        assert 0 < data["retryAfter"] <= 100
        # Other clients have buckets of their own.
        async with acp_client(hub.url) as other:
            assert await other.call("session/list", {}) == {"sessions": []}


async def test_requests_in_progress_are_capped_per_connection() -> None:
    settings = Settings(max_pending_requests=2)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url, 1) as v1:
        session_id = await v1.new_session()
        # A v1 prompt is answered when its turn ends: two long turns stay in progress.
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "sleep 60000"}]}
        first = await v1.start("session/prompt", prompt)
        second = await v1.start("session/prompt", prompt)  # queued behind the first
        with pytest.raises(RpcFailure) as caught:
            await v1.call("session/prompt", prompt)
        assert caught.value.code == RATE_LIMITED
        assert caught.value.error["data"] == {"limit": "max_pending_requests"}
        # Quick requests are answered at once and do not count.
        await v1.call("session/list", {})
        await v1.notify("session/cancel", {"sessionId": session_id})
        assert (await v1.result(first))["stopReason"] == "cancelled"
        await v1.notify("session/cancel", {"sessionId": session_id})
        assert await v1.result(second) is not None


@asynccontextmanager
async def websocket(url: str) -> AsyncIterator[ClientConnection]:
    async with connect(url, ping_interval=None) as ws:
        yield ws


async def refused_status(url: str) -> int:
    with pytest.raises(InvalidStatus) as caught:
        async with connect(url, ping_interval=None):
            pass
    return caught.value.response.status_code


async def wait_open(hub: HubHandle, count: int) -> None:
    with anyio.fail_after(20):
        while hub.app.caps.open != count:  # noqa: ASYNC110 - the hub offers no event for it
            await anyio.sleep(0.01)


async def test_connections_are_capped_per_principal_and_in_total() -> None:
    settings = Settings(max_connections=3, max_connections_per_principal=2)
    async with running_hub([scripted_agent()], settings) as hub, AsyncExitStack() as stack:
        alice = hub.url_with(token("driver", sub="alice"))
        bob = hub.url_with(token("driver", sub="bob"))
        first = await stack.enter_async_context(websocket(alice))
        await stack.enter_async_context(websocket(alice))
        assert await refused_status(alice) == 429
        await stack.enter_async_context(websocket(bob))
        assert await refused_status(bob) == 503  # the hub is full
        await first.close()
        await wait_open(hub, 2)
        await stack.enter_async_context(websocket(alice))


async def test_the_http_profile_counts_against_the_same_caps() -> None:
    settings = Settings(max_connections_per_principal=1)
    async with (
        running_hub([scripted_agent()], settings) as hub,
        acp_client(hub.url_with(token("owner", sub="carol"))) as _ws,
        httpx.AsyncClient(base_url=hub.http) as http,
    ):
        response = await http.post(
            "/acp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": 2},
            },
            headers={
                **bearer(token("owner", sub="carol")),
                "Accept": "application/json, text/event-stream",
            },
        )
        assert response.status_code == 429
        assert response.json()["error"] == "max_connections_per_principal"
