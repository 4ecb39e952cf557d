"""The Streamable HTTP profile of ``/acp`` against a real hub on a loopback port.

The Python SDK's own clients (``acp.http.client.create_http_stream`` and ``acp.ws``, unmodified)
each run a whole turn of the scripted agent; a v2 client on each transport and WebSocket clients
share one session and see the same ordered stream; an SSE stream dropped mid-turn and opened
again with ``Last-Event-ID`` resumes exactly; bad requests get the RFD's status codes.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import orjson
import pytest
from acp import connect_to_agent, text_block
from acp.http.client import create_http_stream
from acp.ws.client import create_websocket_stream

from hub.server.streamable_http import connection as streamable
from hub.settings import Settings
from tests.bridge.harness import EditorClient
from tests.peers import paths
from tests.server.harness import AcpClient, acp_client, running_hub, scripted_agent
from tests.server.http_client import HttpAcp, http_acp
from tests.support import require_binary

pytestmark = pytest.mark.anyio

TURN = "\n".join(["say hello over http", "permission", "tool text", "say all done"])


def _agent() -> Any:
    return scripted_agent("scripted", 2, "--ack-message-id")


def _signature(update: dict[str, Any]) -> tuple[Any, ...]:
    content = update.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    return (update.get("sessionUpdate"), text, update.get("toolCallId"), update.get("status"))


def idle(client: AcpClient | HttpAcp, session_id: str) -> bool:
    """Whether ``client`` saw a turn of ``session_id`` end (v2)."""
    return any(
        u["update"].get("sessionUpdate") == "state_update"
        and u["update"].get("state") == "idle"
        and u["update"].get("stopReason") is not None
        for u in client.session_updates(session_id)
    )


def _ws_texts(client: AcpClient, session_id: str) -> list[str]:
    return [
        str(p["update"]["content"]["text"])
        for p in client.session_updates(session_id)
        if p["update"].get("sessionUpdate") == "agent_message_chunk"
    ]


async def test_the_python_sdk_http_client_runs_a_whole_turn() -> None:
    async with running_hub([_agent()]) as hub:
        editor = EditorClient()
        conn = connect_to_agent(editor, create_http_stream(hub.http_acp))
        try:
            init = await conn.initialize(protocol_version=1)
            assert init.protocol_version == 1
            session = await conn.new_session(cwd="/tmp")
            epoch = (session.field_meta or {})["acp-hub"]["epoch"]
            async with acp_client(hub.url, version=1) as observer:
                after = {"acp-hub": {"after": {"epoch": epoch, "seq": 0}}}
                await observer.call(
                    "session/resume",
                    {"sessionId": session.session_id, "cwd": "/tmp", "_meta": after},
                )
                done = await conn.prompt(session_id=session.session_id, prompt=[text_block(TURN)])
                assert done.stop_reason == "end_turn"
                await observer.wait_for(
                    lambda: "all done" in "".join(_ws_texts(observer, session.session_id))
                )
                # The permission request reached the HTTP client on its session stream, and
                # its answer (a POST) counted; the WebSocket observer's copy was withdrawn.
                assert len(editor.permissions) == 1
                assert "permission: selected allow" in "".join(editor.texts())
                await observer.wait_for(lambda: len(observer.cancelled) == 1)
                seen = [
                    _signature(p["update"])
                    for p in observer.session_updates(session.session_id)
                    if p["update"].get("sessionUpdate") != "user_message_chunk"
                ]
                assert [
                    _signature(u)
                    for u in editor.updates
                    if u["sessionUpdate"] != "user_message_chunk"
                ] == seen
            (http_conn,) = hub.app.http.connections.values()
            assert http_conn.conn.version == 1
        finally:
            await conn.close()
        # close() DELETEd the connection: it ended (1000) and the hub forgot it.
        with anyio.fail_after(10):
            await http_conn.ended.wait()
        assert http_conn.conn.outbox.close_code == 1000
        assert not hub.app.http.connections


async def test_the_sdk_default_http2_client_falls_back_to_http11_against_uvicorn() -> None:
    # The SDK's client is httpx.AsyncClient(http2=True): HTTP/2 is only negotiated through
    # TLS ALPN (or with prior knowledge, which it does not ask for); uvicorn offers HTTP/1.1.
    async with running_hub([_agent()]) as hub, httpx.AsyncClient(http2=True) as http:
        response = await http.get(hub.http + "/healthz")
        assert response.http_version == "HTTP/1.1"


async def test_the_python_sdk_websocket_client_runs_a_whole_turn() -> None:
    async with running_hub([_agent()]) as hub:
        editor = EditorClient()
        conn = connect_to_agent(editor, await create_websocket_stream(hub.url))
        try:
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd="/tmp")
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block(TURN)])
            assert done.stop_reason == "end_turn"
            assert editor.texts() == ["hello over http", "permission: selected allow", "all done"]
            assert len(editor.permissions) == 1
        finally:
            await conn.close()


async def test_v2_clients_on_both_transports_see_the_same_ordered_stream() -> None:
    async with (
        running_hub([_agent()]) as hub,
        http_acp(hub.http_acp) as driver,
        acp_client(hub.url) as ws_v2,
        acp_client(hub.url, version=1, events=True) as ws_v1,
    ):
        created = await driver.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        session_id = created["sessionId"]
        driver.open_stream(session_id)
        start = {"type": "_hub_after", "epoch": created["_meta"]["acp-hub"]["epoch"], "seq": 0}
        await ws_v2.call(
            "session/resume", {"sessionId": session_id, "cwd": "/", "replayFrom": start}
        )
        async with http_acp(hub.http_acp) as http_v2:
            http_v2.open_stream(session_id)
            await http_v2.call(
                "session/resume", {"sessionId": session_id, "cwd": "/", "replayFrom": start}
            )
            after = {"acp-hub": {"after": {"epoch": start["epoch"], "seq": 0}}}
            await ws_v1.call(
                "session/resume", {"sessionId": session_id, "cwd": "/", "_meta": after}
            )
            answer = await driver.call(
                "session/prompt",
                {
                    "sessionId": session_id,
                    "prompt": [{"type": "text", "text": "say one\nslow 20 5\nsay two"}],
                },
            )
            assert answer["messageId"]

            await driver.wait_for(lambda: idle(driver, session_id))
            await http_v2.wait_for(lambda: idle(http_v2, session_id))
            await ws_v2.wait_for(lambda: idle(ws_v2, session_id))
            # Events may still follow the turn's end (presence): compare everything up to the
            # session's last seq now, once every client has it.
            last = hub.app.registry.sessions[session_id].log.last_seq  # type: ignore[union-attr]
            await driver.wait_for(lambda: max(driver.seqs(session_id)) >= last)
            await http_v2.wait_for(lambda: max(http_v2.seqs(session_id)) >= last)
            await ws_v2.wait_for(lambda: max(ws_v2.seqs(session_id)) >= last)
            await ws_v1.wait_for(lambda: max(ws_v1.seqs(session_id)) >= last)

            def stream(client: Any) -> list[tuple[int, Any]]:
                return [
                    (u["_meta"]["acp-hub"]["seq"], u["update"])
                    for u in client.session_updates(session_id)
                    if u["_meta"]["acp-hub"].get("seq", last + 1) <= last
                ]

            reference = stream(ws_v2)
            assert [s for s, _ in reference] == list(range(1, last + 1))
            assert stream(driver) == reference
            assert stream(http_v2) == reference
            # The v1 WebSocket client sees the same seqs in the same order (in v1 shapes).
            v1_seqs = [s for s in ws_v1.seqs(session_id) if s <= last]
            assert v1_seqs == sorted(v1_seqs)
            assert set(v1_seqs) == set(range(1, last + 1))
            # Every SSE event of a session stream carries the cursor as its id.
            ids = [
                e.id
                for e in http_v2.events
                if e.stream == session_id and e.data.get("method") == "session/update"
            ]
            assert f"{start['epoch']}:{last}" in ids


async def test_an_sse_stream_dropped_mid_turn_resumes_exactly_with_last_event_id() -> None:
    async with (
        running_hub([_agent()]) as hub,
        http_acp(hub.http_acp) as client,
        acp_client(hub.url) as observer,
    ):
        created = await client.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        session_id = created["sessionId"]
        client.open_stream(session_id)
        await observer.call("session/resume", {"sessionId": session_id, "cwd": "/"})
        await client.call(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "slow 60 20\nsay end"}]},
        )

        def chunks(c: Any) -> list[str]:
            return [
                str(u["update"]["content"]["text"])
                for u in c.session_updates(session_id)
                if u["update"].get("sessionUpdate") == "agent_message_chunk"
            ]

        await client.wait_for(lambda: "slow 10\n" in chunks(client))
        last_id = client.last_event_id(session_id)
        assert last_id is not None
        client.drop_stream(session_id)
        # The turn goes on while the stream is away; then the stream comes back.
        await observer.wait_for(lambda: "slow 30\n" in chunks(observer))
        client.open_stream(session_id, last_event_id=last_id)
        await client.wait_for(lambda: "end" in chunks(client))
        await observer.wait_for(lambda: "end" in chunks(observer))
        assert chunks(client) == chunks(observer)
        assert chunks(client) == [f"slow {i}\n" for i in range(60)] + ["end"]
        seqs = client.seqs(session_id)
        assert seqs == sorted(set(seqs))  # no duplicate, in order
        ids = [e.id for e in client.events if e.stream == session_id]
        assert len(ids) == len(set(ids))


async def test_a_last_event_id_the_stream_no_longer_keeps_resumes_from_the_cursor() -> None:
    # A stream keeps the last quarter of outbox_bytes of what it wrote: 64 KiB here, and the
    # turn writes about 100 KiB, so its first events are no longer kept when it comes back.
    settings = Settings(outbox_bytes=256 * 1024)
    async with (
        running_hub([_agent()], settings) as hub,
        http_acp(hub.http_acp) as client,
    ):
        created = await client.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        session_id = created["sessionId"]
        epoch = created["_meta"]["acp-hub"]["epoch"]
        client.open_stream(session_id)
        text = "say first\nstream 400 256"
        await client.call(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )
        await client.wait_for(lambda: idle(client, session_id))
        seqs = client.seqs(session_id)
        last = seqs[-1]
        assert seqs == list(range(seqs[0], last + 1))
        client.drop_stream(session_id)
        cursor = seqs[2]
        assert (
            not hub.app.http.connections[client.connection_id or ""]
            .outbox.writers[session_id]
            .keeps(f"{epoch}:{cursor}")
        )
        # The id names a cursor the stream no longer keeps: the session's events after it
        # come again from the session's log, exactly once, in order.
        before = len(seqs)
        client.open_stream(session_id, last_event_id=f"{epoch}:{cursor}")
        await client.wait_for(lambda: len(client.seqs(session_id)) >= before + last - cursor)
        assert client.seqs(session_id)[before:] == list(range(cursor + 1, last + 1))


# Set up like the tests around it: each test spells out its own scenario.
async def test_a_sse_reader_that_does_not_read_is_a_slow_consumer() -> None:
    settings = Settings(outbox_bytes=32 * 1024)
    async with (
        running_hub([_agent()], settings) as hub,
        http_acp(hub.http_acp) as client,
    ):
        created = await client.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        session_id = created["sessionId"]
        http_conn = hub.app.http.connections[client.connection_id or ""]
        # A GET of the session's stream that never reads a byte (a small receive buffer, so
        # the kernel's buffers fill early), on a raw socket.
        port = int(hub.http.rsplit(":", 1)[1])
        stalled = await anyio.connect_tcp("127.0.0.1", port)
        try:
            stalled.extra(anyio.abc.SocketAttribute.raw_socket).setsockopt(
                socket.SOL_SOCKET, socket.SO_RCVBUF, 4096
            )
            await stalled.send(
                (
                    "GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                    f"Acp-Connection-Id: {client.connection_id}\r\n"
                    f"Acp-Session-Id: {session_id}\r\n\r\n"
                ).encode()
            )
            text = "stream 4000 256"  # about 1 MiB
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
            # Its answer comes on the session's stream, which nobody reads: only the POST.
            posted = await client.post(
                {"jsonrpc": "2.0", "id": 9, "method": "session/prompt", "params": prompt},
                session_id,
            )
            assert posted.status_code == 202
            with anyio.fail_after(30):
                await http_conn.ended.wait()
            # Closed as a WebSocket client would be (1013): the hub forgot the connection,
            # and the session went on without it.
            assert http_conn.conn.outbox.close_code == 1013
            assert client.connection_id not in hub.app.http.connections
            assert session_id in hub.app.registry.sessions  # type: ignore[union-attr]
        finally:
            await stalled.aclose()


async def test_bad_requests_get_the_rfds_status_codes() -> None:
    async with running_hub([_agent()]) as hub, httpx.AsyncClient() as http:
        url = hub.http_acp
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 2}}
        json = {"Content-Type": "application/json"}
        assert (await http.post(url, content=orjson.dumps(init))).status_code == 415
        batch = orjson.dumps([init])
        assert (await http.post(url, content=batch, headers=json)).status_code == 501
        assert (await http.post(url, content=b"{nope", headers=json)).status_code == 400
        list_req = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}
        no_conn = await http.post(url, content=orjson.dumps(list_req), headers=json)
        assert no_conn.status_code == 400
        unknown = {**json, "Acp-Connection-Id": "c-nope"}
        assert (
            await http.post(url, content=orjson.dumps(list_req), headers=unknown)
        ).status_code == 404
        big = b'{"jsonrpc":"2.0","method":"x","params":{"p":"' + b"x" * (17 * 1024 * 1024) + b'"}}'
        assert (await http.post(url, content=big, headers=unknown)).status_code == 413
        assert (await http.get(url, headers={"Accept": "text/event-stream"})).status_code == 400
        assert (await http.get(url, headers={"Acp-Connection-Id": "c-nope"})).status_code == 406

        answered = await http.post(url, content=orjson.dumps(init), headers=json)
        assert answered.status_code == 200
        connection_id = answered.headers["acp-connection-id"]
        assert answered.json()["result"]["protocolVersion"] == 2
        # The cookie stands for the header.
        assert answered.cookies.get("acp-connection") == connection_id
        # httpx keeps the cookie: a POST without the header is the connection's all the same.
        listed = await http.post(url, content=orjson.dumps(list_req), headers=json)
        assert listed.status_code == 202
        conn = {**json, "Acp-Connection-Id": connection_id}
        prompt = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": "s-x", "prompt": []},
        }
        assert (await http.post(url, content=orjson.dumps(prompt), headers=conn)).status_code == 400
        sse = {
            "Accept": "text/event-stream",
            "Acp-Connection-Id": connection_id,
            "Acp-Session-Id": "s-nope",
        }
        assert (await http.get(url, headers=sse)).status_code == 404
        # A page of another site may not use it.
        foreign = {**conn, "Origin": "https://evil.example"}
        assert (
            await http.post(url, content=orjson.dumps(list_req), headers=foreign)
        ).status_code == 403
        deleted = hub.app.http.connections[connection_id]
        assert (
            await http.delete(url, headers={"Acp-Connection-Id": connection_id})
        ).status_code == 202
        with anyio.fail_after(10):
            await deleted.ended.wait()
        assert (
            await http.post(url, content=orjson.dumps(list_req), headers=conn)
        ).status_code == 404
        http.cookies.clear()  # without the cookie either, the connection is not named at all
        assert (await http.delete(url)).status_code == 400


async def test_a_connection_that_never_opens_a_stream_is_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streamable, "FIRST_GET_TIMEOUT", 2.0)
    async with running_hub([_agent()]) as hub, http_acp(hub.http_acp) as reader:
        async with httpx.AsyncClient() as http:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": 2},
            }
            answered = await http.post(
                hub.http_acp,
                content=orjson.dumps(init),
                headers={"Content-Type": "application/json"},
            )
        silent = hub.app.http.connections[answered.headers["acp-connection-id"]]
        with anyio.fail_after(10):
            await silent.ended.wait()
        assert silent.conn.outbox.close_code == 1001
        # The client that reads its stream is still there.
        assert reader.connection_id in hub.app.http.connections
        listed = await reader.call("session/list", {})
        assert listed["sessions"] == []


async def test_an_idle_stream_gets_keepalives() -> None:
    settings = Settings(ping_interval=0.2)
    async with (
        running_hub([_agent()], settings) as hub,
        http_acp(hub.http_acp) as client,
        httpx.AsyncClient(timeout=httpx.Timeout(10, read=None)) as http,
    ):
        headers = {"Accept": "text/event-stream", "Acp-Connection-Id": client.connection_id or ""}
        async with http.stream("GET", hub.http_acp, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["x-accel-buffering"] == "no"
            comments = 0
            with anyio.fail_after(10):
                async for line in response.aiter_lines():
                    if line == ": keepalive":
                        comments += 1
                        if comments == 2:
                            break
        assert comments == 2


TS_HTTP_DRIVER = """
import * as acp from "{sdk}/acp.js";
import {{ MemoryAcpCookieStore, createHttpStream }} from "{sdk}/http-stream.js";
const stream = createHttpStream(process.argv[2], {{ cookieStore: new MemoryAcpCookieStore() }});
const said = [];
const {{ result }} = await acp
  .client({{ name: "ts-http-client" }})
  .onRequest(acp.methods.client.session.requestPermission, (ctx) => ({{
    outcome: {{ outcome: "selected", optionId: ctx.params.options[0].optionId }},
  }}))
  .onNotification(acp.methods.client.session.update, (ctx) => {{
    const u = ctx.params.update;
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") {{
      said.push(u.content.text);
    }}
  }})
  .connectWith(stream, async (ctx) => {{
    const m = acp.methods.agent;
    await ctx.request(m.initialize, {{ protocolVersion: 1, clientCapabilities: {{}} }});
    const session = await ctx.request(m.session.new, {{ cwd: "/tmp", mcpServers: [] }});
    return {{ result: await ctx.request(m.session.prompt, {{
      sessionId: session.sessionId, prompt: [{{ type: "text", text: process.argv[3] }}],
    }}) }};
  }});
console.log(JSON.stringify({{ stopReason: result.stopReason, said }}));
process.exit(0);
"""


async def test_the_typescript_sdk_http_client_runs_a_whole_turn(tmp_path: Path) -> None:
    # The TypeScript SDK found as in test_late_join.py: each test skips on its own.
    # The TypeScript SDK 1.9.0's Streamable HTTP client (dist/http-stream.js, the transport of
    # its examples/http-client.js) as a second, independent implementation of the RFD.
    node = require_binary("node")
    sdk = paths.TS_SDK_V1 / "dist"
    if not (sdk / "http-stream.js").exists():
        paths.ts_agent_js()  # skips (or fails in CI) with the install hint
    driver = tmp_path / "driver.mjs"
    driver.write_text(TS_HTTP_DRIVER.format(sdk=sdk))
    async with running_hub([_agent()]) as hub:
        url = hub.url.replace("ws://", "http://", 1)
        with anyio.fail_after(60):
            done = await anyio.run_process([node, str(driver), url, TURN], check=False)
        assert done.returncode == 0, (done.stdout, done.stderr)
        summary = orjson.loads(done.stdout.decode().strip().splitlines()[-1])
        assert summary == {
            "stopReason": "end_turn",
            "said": ["hello over http", "permission: selected allow", "all done"],
        }
