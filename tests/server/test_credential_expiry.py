"""A connection ends when its credential does: a WebSocket is closed with 1008 ``expired``, a
Streamable HTTP connection's streams end and its later requests are refused ``401 expired``,
whether the token is a share link or any other token with an ``exp``; a Streamable HTTP client
renews by presenting a fresh token of the same grant. Real hubs with ``token_leeway = 0`` and
tokens of six seconds (long enough for a busy machine to connect before they lapse); every wait
is on an event (the close), never a sleep."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from hub.access.principal import Principal
from hub.server.expiry import Expiries, same_grant
from hub.settings import Settings
from tests.credentials import AUTHORITY
from tests.server.harness import HubHandle, acp_client, running_hub, scripted_agent
from tests.server.http_client import http_acp
from tests.server.test_access_sessions import presence_left
from tests.server.test_arbitration import resume

pytestmark = pytest.mark.anyio
NO_LEEWAY = Settings(token_leeway=0.0)


def short_token(
    ttl: float = 6, *, sub: str = "brief", role: Any = "driver", now: float | None = None
) -> str:
    return AUTHORITY.mint(sub=sub, name=sub, role=role, ttl=ttl, agents=None, now=now)


def http_url(hub: HubHandle, token: str) -> str:
    return hub.url_with(token).replace("ws://", "http://", 1)


async def test_a_websocket_closes_when_its_token_expires() -> None:
    async with (
        running_hub([scripted_agent()], NO_LEEWAY) as hub,
        acp_client(hub.url) as owner,
    ):
        sid = await owner.new_session()
        async with acp_client(hub.url_with(short_token())) as brief:
            await resume(brief, sid)
            expires_at = brief.init_result["_meta"]["acp-hub"]["expiresAt"]
            await brief.wait_for(lambda: brief.close_code is not None, timeout=30)
            assert (brief.close_code, brief.close_reason) == (1008, "expired")
            assert time.time() >= expires_at
        await owner.wait_for(
            lambda: any(u.get("reason") == "expired" for u in presence_left(owner, sid))
        )
        # The owner's week-long token is untouched.
        assert owner.close_code is None
        assert len(hub.app.expiries) == 1


async def test_a_share_link_that_expires_closes_its_connection_and_admits_no_more() -> None:
    async with (
        running_hub([scripted_agent()], NO_LEEWAY) as hub,
        acp_client(hub.url) as owner,
    ):
        sid = await owner.new_session()
        link = await owner.call(
            "_hub/share/create", {"sessionId": sid, "role": "driver", "expiresIn": 6}
        )
        async with acp_client(hub.url_with(link["token"])) as guest:
            await resume(guest, sid)
            await guest.wait_for(lambda: guest.close_code is not None, timeout=30)
            assert (guest.close_code, guest.close_reason) == (1008, "expired")
        with pytest.raises(InvalidStatus) as refused:
            async with connect(hub.url_with(link["token"])):
                pass
        assert refused.value.response.status_code == 401


async def test_a_streamable_http_connection_ends_when_its_token_expires() -> None:
    async with running_hub([scripted_agent()], NO_LEEWAY) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        token = short_token()
        async with http_acp(http_url(hub, token)) as client:
            await client.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
            client.open_stream(sid)
            await client.wait_for(lambda: {None, sid} <= set(client.finished), timeout=30)
            assert [c["reason"] for c in client.closes] == ["expired", "expired"]
            late = await client.post(
                {"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": {}}
            )
            assert late.status_code == 401
            assert late.json()["error"] == "expired"


async def test_a_fresh_token_of_the_same_grant_renews_an_http_connection() -> None:
    async with running_hub([scripted_agent()], NO_LEEWAY) as hub:
        now = time.time()
        # Two connections whose tokens expire in the same second; one renews.
        async with (
            http_acp(http_url(hub, short_token(now=now))) as kept,
            http_acp(http_url(hub, short_token(now=now))) as lapsed,
        ):
            renewal = short_token(60, now=now)
            async with httpx.AsyncClient() as http:
                # Another grant (another role) does not renew; the same grant does.
                other = short_token(60, role="viewer", now=now)
                for fresh in (other, renewal):
                    answer = await http.post(
                        http_url(hub, fresh),
                        json={"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {}},
                        headers=kept.headers(),
                    )
                    assert answer.status_code == 202, answer.text
            assert len(hub.app.expiries) == 2
            await lapsed.wait_for(lambda: None in lapsed.finished, timeout=30)
            assert [c["reason"] for c in lapsed.closes] == ["expired"]
            # Past the first token's expiry: the renewed connection is open, and answers.
            assert None not in kept.finished
            kept.url = http_url(hub, renewal)
            assert "sessions" in await kept.call("session/list", {})


class FakeConnection:
    def __init__(self, name: str) -> None:
        self.connection_id = name
        self.expired = 0

    def expire(self) -> None:
        self.expired += 1


def principal(exp: int | None, **fields: Any) -> Principal:
    return Principal(**{"sub": "p", "name": "p", "role": "driver", **fields}, expires_at=exp)


def test_expiries_close_each_connection_once_at_its_deadline_and_forget_ended_ones() -> None:
    clock = [1000.0]
    expiries = Expiries(lambda p: 5.0, clock=lambda: clock[0])
    early, late, ended, forever = (FakeConnection(n) for n in ("early", "late", "ended", "forever"))
    expiries.watch(early, principal(1000))
    expiries.watch(late, principal(2000))
    expiries.watch(ended, principal(1001))
    expiries.watch(forever, principal(None))
    expiries.forget(ended)
    assert expiries.expire_due() == 1005.0  # exp + leeway
    clock[0] = 1005.0
    assert expiries.expire_due() == 2005.0
    assert (early.expired, late.expired, ended.expired, forever.expired) == (1, 0, 0, 0)
    # Renewal: only a longer token of the same grant moves the deadline.
    assert not expiries.renew(late, principal(2000), principal(1500))
    assert not expiries.renew(late, principal(2000), principal(3000, role="owner"))
    assert expiries.renew(late, principal(2000), principal(3000, jti="new"))
    clock[0] = 2500.0
    assert expiries.expire_due() == 3005.0
    assert late.expired == 0
    # Connections that end long before their tokens do not pile up.
    for n in range(1000):
        conn = FakeConnection(f"c{n}")
        expiries.watch(conn, principal(10**6))
        expiries.forget(conn)
    assert len(expiries) == 1
    assert len(expiries._heap) < 200


def test_the_same_grant_differs_only_in_its_id_and_expiry() -> None:
    base = principal(10, jti="a", sessions=frozenset({"s"}))
    assert same_grant(base, principal(20, jti="b", sessions=frozenset({"s"})))
    assert not same_grant(base, principal(20, jti="b", sessions=None))
    assert not same_grant(base, principal(20, jti="b", sessions=frozenset({"s"}), link_id="l"))
