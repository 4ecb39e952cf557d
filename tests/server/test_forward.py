"""``hub.server.forward``: relaying one request to another node, against real loopback sockets.

The "holder" here is a TCP listener of the test's that reads the relayed request with h11 and
answers as the test says (or never, or not at all); the relay's ASGI side is a ``send`` that
records what the client would get and a ``receive`` that says when the client leaves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import h11
import pytest

from hub.server.forward import (
    ANSWER_TIMEOUT,
    POST_ANSWER_TIMEOUT,
    RELAYED_HEADER,
    NodeGone,
    NodeSilent,
    forward,
    relay_timeouts,
)
from tests.redis_server import free_port

pytestmark = pytest.mark.anyio

Holder = Callable[[anyio.abc.SocketStream, h11.Request, bytes], Awaitable[None]]


def scope(method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": "/acp",
        "raw_path": b"/acp",
        "query_string": b"token=t0k3n",
        "client": ("198.51.100.7", 40000),
        "scheme": "https",
        "headers": headers
        or [
            (b"host", b"hub.example:8765"),
            (b"connection", b"keep-alive"),
            (b"content-type", b"application/json"),
            (b"acp-connection-id", b"c-1"),
            (b"content-length", b"2"),
            (b"x-forwarded-for", b"203.0.113.66"),
        ],
    }


class Client:
    """The relay's ASGI side: what was sent to the client, and its leaving."""

    def __init__(self) -> None:
        self.sent: list[MutableMapping[str, Any]] = []
        self.gone = anyio.Event()
        self.more = anyio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)
        self.more.set()
        self.more = anyio.Event()

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    @property
    def ended(self) -> bool:
        return bool(self.sent) and self.sent[-1].get("more_body") is False


@asynccontextmanager
async def holder(answer: Holder) -> AsyncIterator[str]:
    """A listener that reads one relayed request and runs ``answer``; its URL."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def serve(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            conn = h11.Connection(h11.SERVER)
            request: h11.Request | None = None
            body = b""
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive())
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
            assert request is not None
            await answer(stream, request, body)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


async def relay(url: str, client: Client, method: str = "POST", **timeouts: float) -> int:
    return await forward(
        url,
        scope(method),
        b"{}",
        client.receive,
        client.send,
        "node-b",
        timeouts.get("answer", 5.0),
        timeouts.get("idle", 5.0),
    )


async def test_nothing_listening_is_a_node_gone() -> None:
    with pytest.raises(NodeGone), anyio.fail_after(5):
        await relay(f"http://127.0.0.1:{free_port()}", Client())


async def test_a_holder_that_never_answers_is_silent_in_time() -> None:
    async def mute(stream: anyio.abc.SocketStream, request: h11.Request, body: bytes) -> None:
        await anyio.sleep_forever()

    client = Client()
    async with holder(mute) as url:
        with pytest.raises(NodeSilent), anyio.fail_after(5):
            await relay(url, client, answer=0.2)
    assert client.sent == []


async def test_a_holder_that_hangs_up_before_answering_is_gone() -> None:
    async def hang_up(stream: anyio.abc.SocketStream, request: h11.Request, body: bytes) -> None:
        await stream.aclose()

    async with holder(hang_up) as url:
        with pytest.raises(NodeGone), anyio.fail_after(5):
            await relay(url, Client())


async def test_the_request_and_the_answer_are_relayed_as_they_are() -> None:
    seen: list[tuple[h11.Request, bytes]] = []

    async def accept(stream: anyio.abc.SocketStream, request: h11.Request, body: bytes) -> None:
        seen.append((request, body))
        await stream.send(
            b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\ndate: then\r\n"
            b"set-cookie: acp-connection=c-1\r\nconnection: close\r\n\r\n"
        )

    client = Client()
    async with holder(accept) as url:
        assert await relay(url, client) == 202
    request, body = seen[0]
    headers = dict(request.headers)
    assert (request.method, request.target, body) == (b"POST", b"/acp?token=t0k3n", b"{}")
    assert headers[b"host"] == b"hub.example:8765"  # as the client sent it: the holder checks it
    assert headers[RELAYED_HEADER] == b"node-b"
    assert headers[b"acp-connection-id"] == b"c-1"
    assert headers[b"connection"] == b"close"  # the client's keep-alive was about its own hop
    # The client's address as this node saw it, not as the client said it.
    assert headers[b"x-forwarded-for"] == b"198.51.100.7"
    assert headers[b"x-forwarded-proto"] == b"https"
    start = client.sent[0]
    assert start["status"] == 202
    assert dict(start["headers"]) == {
        b"content-length": b"0",
        b"set-cookie": b"acp-connection=c-1",
    }
    assert client.ended


async def test_a_stream_is_relayed_as_it_comes_and_ends_when_the_holder_dies() -> None:
    go_on = anyio.Event()

    async def stream_then_die(
        stream: anyio.abc.SocketStream, request: h11.Request, body: bytes
    ) -> None:
        await stream.send(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        await stream.send(b"c\r\nid: 1\ndata: \r\n")
        await go_on.wait()
        await stream.send(b"3\r\nx\n\n\r\n")
        await stream.aclose()  # without the last chunk: the process died

    client = Client()
    async with holder(stream_then_die) as url, anyio.create_task_group() as tg:
        result: list[int] = []

        async def run() -> None:
            result.append(await relay(url, client, "GET"))

        tg.start_soon(run)
        with anyio.fail_after(5):
            while client.body != b"id: 1\ndata: ":
                await client.more.wait()
        assert not client.ended  # the first chunk came before the holder wrote the second
        go_on.set()
        with anyio.fail_after(5):
            while not client.ended:
                await client.more.wait()
    assert result == [200]
    assert client.body == b"id: 1\ndata: x\n\n"
    assert (b"transfer-encoding", b"chunked") not in client.sent[0]["headers"]


async def test_a_holder_silent_mid_stream_ends_the_response() -> None:
    async def stall(stream: anyio.abc.SocketStream, request: h11.Request, body: bytes) -> None:
        await stream.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await anyio.sleep_forever()

    client = Client()
    async with holder(stall) as url:
        with anyio.fail_after(5):
            assert await relay(url, client, "GET", idle=0.2) == 200
    assert client.ended


async def test_a_client_that_leaves_ends_the_relay() -> None:
    async def stall(stream: anyio.abc.SocketStream, request: h11.Request, body: bytes) -> None:
        await stream.send(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await anyio.sleep_forever()

    client = Client()
    async with holder(stall) as url, anyio.create_task_group() as tg:
        done = anyio.Event()

        async def run() -> None:
            await relay(url, client, "GET", idle=60)
            done.set()

        tg.start_soon(run)
        with anyio.fail_after(5):
            while not client.sent:
                await client.more.wait()
        client.gone.set()
        with anyio.fail_after(5):
            await done.wait()


def test_a_stream_waits_for_keepalives_a_post_for_a_full_inbox() -> None:
    assert relay_timeouts("GET", 20.0) == (ANSWER_TIMEOUT, 40.0 + ANSWER_TIMEOUT)
    assert relay_timeouts("POST", 20.0) == (POST_ANSWER_TIMEOUT, POST_ANSWER_TIMEOUT)
    assert relay_timeouts("DELETE", 20.0) == (ANSWER_TIMEOUT, ANSWER_TIMEOUT)
