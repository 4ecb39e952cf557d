"""What a Streamable HTTP client can make a connection hold, and the ``acp-connection`` cookie.

Against a real hub on a loopback port: a session's stream exists only for a session the
connection is attached to (or one a GET opened), at most ``max_streams_per_connection`` of
them; every stream's queued bytes together stay under ``outbox_bytes``; ids JSON-RPC does not
allow are refused at once and leave no answer route (an ``initialize`` with one included, which
once held a connection slot for ten seconds); the answer routes are bounded; an ``initialize``
without ``Acp-Connection-Id`` always starts a new connection, whatever cookie a cookie jar
kept, and the cookie has a lifetime, is ``Secure`` over https and is cleared when its
connection is gone.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import orjson
import pytest

from hub.protocol.errors import RATE_LIMITED
from hub.server.streamable_http import router as streams
from hub.server.streamable_http.connection import HttpConnection
from hub.server.streamable_http.router import StreamOutbox
from hub.settings import Settings
from tests.credentials import token
from tests.server.harness import HubHandle, RpcFailure, running_hub, scripted_agent
from tests.server.http_client import HttpAcp, http_acp

pytestmark = pytest.mark.anyio

JSON = {"Content-Type": "application/json"}
INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 2, "info": {"name": "bounds", "version": "1"}},
}


def _agent() -> Any:
    return scripted_agent("scripted", 2)


def _held(hub: HubHandle, client: HttpAcp) -> HttpConnection:
    return hub.app.http.connections[client.connection_id or ""]


def _answers(client: HttpAcp, stream: str | None) -> list[dict[str, Any]]:
    return [
        e.data
        for e in client.events
        if e.stream == stream and isinstance(e.data, dict) and "method" not in e.data
    ]


async def _wait_until(predicate: Any) -> None:
    """Wait for a condition of the hub's own state (no event to wait on from a test)."""
    with anyio.fail_after(10):
        while not predicate():  # noqa: ASYNC110 - the hub's state, polled
            await anyio.sleep(0.01)


# -- streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "owner"])
@pytest.mark.parametrize("rate", [0.0, 1.0])
async def test_posts_naming_sessions_the_connection_is_not_attached_to_make_no_stream(
    role: str, rate: float
) -> None:
    settings = Settings(request_rate=rate, request_burst=5)
    async with running_hub([_agent()], settings) as hub:
        url = hub.url_with(token(role, sub=f"a-{role}"))  # type: ignore[arg-type]
        async with http_acp(url) as client:
            held = _held(hub, client)
            count = 60
            for n in range(count):
                session_id = f"s-nobody-{n}"
                prompt = {
                    "jsonrpc": "2.0",
                    "id": 100 + n,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]},
                }
                posted = await client.post(prompt, session_id)
                assert posted.status_code == 202, posted.text
            # Every one is answered (not found, refused by role or over the rate) on the
            # connection's stream; none made a stream of its own, none left a route.
            await client.wait_for(lambda: len(_answers(client, None)) >= count)
            assert all("error" in answer for answer in _answers(client, None))
            assert set(held.outbox.streams) == {None}
            assert held.outbox.routes == 0


async def test_session_streams_are_capped_and_one_nobody_reads_gives_way() -> None:
    settings = Settings(max_streams_per_connection=1)
    async with running_hub([_agent()], settings) as hub, http_acp(hub.http_acp) as client:
        held = _held(hub, client)
        first = (await client.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
        second = (await client.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
        assert held.outbox.session_streams == 1
        # The cap is reached by a session still attached: a GET for another one is refused,
        # and that session's frames travel on the connection's stream meanwhile.
        client.open_stream(second)
        await client.wait_for(lambda: second in client.statuses)
        assert client.statuses[second] == 429
        assert set(held.outbox.streams) == {None, first}
        # The first session's stream read out, its GET gone and the session left: it gives
        # way to the next session's stream.
        client.open_stream(first)
        await client.wait_for(lambda: client.statuses.get(first) == 200)
        await _wait_until(lambda: held.outbox.streams[first].queued_bytes == 0)
        client.drop_stream(first)
        await _wait_until(lambda: not held.outbox.writers[first].attached)
        await client.call("session/detach", {"sessionId": first})
        del client.statuses[second]
        client.open_stream(second)
        await client.wait_for(lambda: client.statuses.get(second) == 200)
        assert set(held.outbox.streams) == {None, second}
        await client.call(
            "session/prompt",
            {"sessionId": second, "prompt": [{"type": "text", "text": "say on its stream"}]},
        )
        assert any("on its stream" in str(e.data) for e in client.events if e.stream == second)


async def test_the_streams_of_a_connection_share_one_outbox_bound() -> None:
    settings = Settings(outbox_bytes=1000, max_streams_per_connection=8)
    outbox = StreamOutbox(settings, "c-test")
    outbox.attached = lambda session_id: True
    frame = b'{"jsonrpc":"2.0","method":"_x","params":{"sessionId":"%s","pad":"' + b"x" * 300
    for n in range(2):
        assert outbox.push(frame.replace(b"%s", f"s-{n}".encode()) + b'"}}')
    assert not outbox.closed
    # A third stream's frame takes the connection past outbox_bytes: 1013, as one outbox.
    assert not outbox.push(frame.replace(b"%s", b"s-2") + b'"}}')
    assert outbox.close_code == 1013


# -- ids and routes ------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", [True, 1.5, {"a": 1}, [1]])
async def test_an_initialize_with_an_id_json_rpc_does_not_allow_is_refused_at_once(
    bad_id: Any,
) -> None:
    async with running_hub([_agent()]) as hub, httpx.AsyncClient() as http:
        with anyio.fail_after(3):
            answered = await http.post(
                hub.http_acp, content=orjson.dumps({**INIT, "id": bad_id}), headers=JSON
            )
        assert answered.status_code == 400
        body = answered.json()
        assert body["id"] is None
        assert body["error"]["code"] == -32600
        assert not hub.app.http.connections


@pytest.mark.parametrize("bad_id", [True, 1.5, {"a": 1}, [1]])
async def test_messages_with_ids_json_rpc_does_not_allow_leave_no_route(bad_id: Any) -> None:
    async with running_hub([_agent()]) as hub, http_acp(hub.http_acp) as client:
        held = _held(hub, client)
        for message in (
            {"jsonrpc": "2.0", "id": bad_id, "method": "session/list", "params": {}},
            {"jsonrpc": "2.0", "id": bad_id, "result": {}},
        ):
            answered = await client.post(message)
            assert answered.status_code == 400
            assert answered.json()["error"]["code"] == -32600
        assert held.outbox.routes == 0
        assert set(held.outbox.streams) == {None}
        assert (await client.call("session/list", {}))["sessions"] == []


@pytest.mark.parametrize("bad_id", [True, 1.5, {"a": 1}])
async def test_messages_with_ids_json_rpc_does_not_allow_count_against_the_request_rate(
    bad_id: Any,
) -> None:
    settings = Settings(request_rate=0.001, request_burst=4)
    async with running_hub([_agent()], settings) as hub, http_acp(hub.http_acp) as client:
        message = {"jsonrpc": "2.0", "id": bad_id, "method": "session/list", "params": {}}
        answers = [await client.post(message) for _ in range(5)]
        statuses = [answer.status_code for answer in answers]
        # Refused, each taking its share of the rate, until the rate refuses them.
        assert statuses[:3] == [400] * 3
        assert statuses[-1] == 429
        assert statuses == sorted(statuses)
        refused = answers[-1].json()["error"]
        assert (refused["code"], refused["data"]["limit"]) == (RATE_LIMITED, "request_rate")
        assert "retry-after" in answers[-1].headers
        # A good request after them is over the rate too.
        with pytest.raises(RpcFailure) as over:
            await client.call("session/list", {})
        assert over.value.error["data"]["limit"] == "request_rate"
        assert _held(hub, client).outbox.routes == 0


async def test_the_answer_routes_of_a_connection_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streams, "ROUTE_SLACK", 0)
    settings = Settings(max_pending_requests=2)
    async with (
        running_hub([_agent()], settings) as hub,
        http_acp(hub.http_acp, version=1) as client,
    ):
        held = _held(hub, client)
        # Two v1 prompts (answered when their turns end), the second queued behind the first:
        # their routes stay.
        session_id = (await client.call("session/new", {"cwd": "/tmp", "mcpServers": []}))[
            "sessionId"
        ]
        client.open_stream(session_id)
        for n in range(2):
            text = "sleep 20000" if n == 0 else "say later"
            prompt = {
                "jsonrpc": "2.0",
                "id": f"p-{n}",
                "method": "session/prompt",
                "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
            }
            assert (await client.post(prompt, session_id)).status_code == 202
        await _wait_until(lambda: held.outbox.routes == 2)
        listing = {"jsonrpc": "2.0", "id": "over", "method": "session/list", "params": {}}
        refused = await client.post(listing)
        assert refused.status_code == 429
        body = refused.json()
        assert body["id"] == "over"
        assert body["error"]["code"] == -32044
        assert body["error"]["data"] == {"limit": "max_pending_requests"}
        assert held.outbox.routes == 2


# -- the cookie ----------------------------------------------------------------------------


def _set_cookies(response: httpx.Response) -> list[str]:
    return [v for k, v in response.headers.multi_items() if k == "set-cookie"]


async def test_a_cookie_jar_client_initializes_again_after_delete() -> None:
    async with running_hub([_agent()]) as hub, httpx.AsyncClient() as http:
        first = await http.post(hub.http_acp, content=orjson.dumps(INIT), headers=JSON)
        assert first.status_code == 200
        old = first.headers["acp-connection-id"]
        (cookie,) = _set_cookies(first)
        assert f"acp-connection={old}" in cookie
        lowered = cookie.lower()
        assert "max-age=86400" in lowered
        assert "httponly" in lowered
        assert "samesite=strict" in lowered
        assert "secure" not in lowered
        ended = hub.app.http.connections[old]
        stale = httpx.Cookies(http.cookies)
        deleted = await http.delete(hub.http_acp, headers={"Acp-Connection-Id": old})
        assert deleted.status_code == 202
        assert "max-age=0" in _set_cookies(deleted)[0].lower()
        assert http.cookies.get("acp-connection") is None  # the jar dropped it
        with anyio.fail_after(10):
            await ended.ended.wait()
        # A stale cookie, as a jar that missed the clearing keeps it: an initialize without
        # the header starts a new connection all the same.
        http.cookies = stale
        again = await http.post(hub.http_acp, content=orjson.dumps(INIT), headers=JSON)
        assert again.status_code == 200, again.text
        assert again.headers["acp-connection-id"] != old
        assert "result" in again.json()
        assert http.cookies.get("acp-connection") == again.headers["acp-connection-id"]
        await http.delete(hub.http_acp)


async def test_a_404_clears_the_cookie_that_named_the_connection() -> None:
    async with running_hub([_agent()]) as hub, httpx.AsyncClient() as http:
        http.cookies.set("acp-connection", "c-gone", path="/acp")
        listing = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
        answered = await http.post(hub.http_acp, content=orjson.dumps(listing), headers=JSON)
        assert answered.status_code == 404
        (cleared,) = _set_cookies(answered)
        assert cleared.lower().startswith('acp-connection=""')
        assert "max-age=0" in cleared.lower()
        # A header naming another connection than the cookie: the cookie stays.
        http.cookies.set("acp-connection", "c-other", path="/acp")
        header = {**JSON, "Acp-Connection-Id": "c-gone"}
        answered = await http.post(hub.http_acp, content=orjson.dumps(listing), headers=header)
        assert answered.status_code == 404
        assert not _set_cookies(answered)


async def test_a_second_initialize_on_a_live_connection_is_refused_not_swallowed() -> None:
    async with running_hub([_agent()]) as hub, http_acp(hub.http_acp) as client:
        answered = await client.post({**INIT, "id": "again"})
        assert answered.status_code == 400
        body = answered.json()
        assert body["id"] == "again"
        assert body["error"]["code"] == -32600
        assert "already initialized" in body["error"]["data"]
        assert (await client.call("session/list", {}))["sessions"] == []


async def test_the_cookie_is_secure_when_the_client_came_over_https() -> None:
    # uvicorn takes X-Forwarded-Proto only from the hub's trusted proxies (none by default).
    trusted = Settings(trusted_proxies=("127.0.0.1",))
    async with running_hub([_agent()], trusted) as hub, httpx.AsyncClient() as http:
        headers = {**JSON, "X-Forwarded-Proto": "https"}
        answered = await http.post(hub.http_acp, content=orjson.dumps(INIT), headers=headers)
        assert answered.status_code == 200
        assert "secure" in _set_cookies(answered)[0].lower()
        connection_id = answered.headers["acp-connection-id"]
        await http.delete(hub.http_acp, headers={"Acp-Connection-Id": connection_id})
    # Without a trusted proxy the header is only a client's claim: no Secure.
    async with running_hub([_agent()]) as hub, httpx.AsyncClient() as http:
        headers = {**JSON, "X-Forwarded-Proto": "https"}
        answered = await http.post(hub.http_acp, content=orjson.dumps(INIT), headers=headers)
        assert answered.status_code == 200
        assert "secure" not in _set_cookies(answered)[0].lower()
        connection_id = answered.headers["acp-connection-id"]
        await http.delete(hub.http_acp, headers={"Acp-Connection-Id": connection_id})


async def test_a_method_that_is_not_a_string_is_the_connections_to_refuse() -> None:
    # An unhashable method once met the session-scoped methods' set: a 500 and a traceback.
    async with running_hub([_agent()]) as hub, http_acp(hub.http_acp) as client:
        methods: list[Any] = [[], {"a": 1}, 7]
        for method in methods:
            message = {"jsonrpc": "2.0", "id": f"m-{method!r}", "method": method}
            assert (await client.post(message)).status_code == 202
        await client.wait_for(lambda: len(_answers(client, None)) >= 3)
        assert all(a["error"]["code"] == -32600 for a in _answers(client, None))
