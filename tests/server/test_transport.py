"""The direct write path: pre-built WebSocket frames, and writes held for a batch."""

from __future__ import annotations

import contextlib
import tomllib
from collections.abc import AsyncIterator
from importlib.metadata import version

import anyio
import pytest
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode

from hub.server.transport import AsgiFrameWriter, held_writes, wire_frame
from tests.support import ROOT


def test_uvicorn_is_pinned_to_the_releases_these_tests_passed_on() -> None:
    # The direct path and hub.server.wsprotocol use uvicorn internals (docs/internals.md, "The
    # uvicorn pin"): a release outside the pin must not install, and the tests run inside it.
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (pin,) = [r for r in map(Requirement, project["dependencies"]) if r.name == "uvicorn"]
    assert any(spec.operator == "<" for spec in pin.specifier), pin
    assert version("uvicorn") in pin.specifier, (version("uvicorn"), pin)


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 200_000])
def test_wire_frames_are_what_websockets_would_send(size: int) -> None:
    payload = b"x" * size
    assert wire_frame(payload) == Frame(Opcode.TEXT, payload).serialize(mask=False, extensions=[])


def test_the_cache_follows_the_payload_object() -> None:
    first = b"a" * 10
    second = b"b" * 10
    assert wire_frame(first).endswith(first)
    assert wire_frame(second).endswith(second)
    assert wire_frame(first) == wire_frame(bytes(first))


@contextlib.asynccontextmanager
async def _serving(app: ASGIApp) -> AsyncIterator[str]:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        ws="websockets-sansio",
        ws_per_message_deflate=False,
        lifespan="off",
        log_level="warning",
    )
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no event for this
                await anyio.sleep(0.005)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"ws://127.0.0.1:{port}/"
        finally:
            server.should_exit = True


async def test_held_writes_go_out_in_order_when_the_batch_ends() -> None:
    # The app writes two frames inside a batch, then one through the general path: the held
    # frames reach the client after it. In a second batch, a close frame drops the frame held
    # before it (the client resumes it with its cursor): the client reads the close next.
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "websocket"
        await receive()
        await send({"type": "websocket.accept"})
        writer = AsgiFrameWriter(send)
        assert writer.direct
        await receive()  # the client's "go"
        with held_writes():
            assert writer.try_write(b"held 1")
            assert writer.try_write(b"held 2")
            await send({"type": "websocket.send", "text": "not held"})
        with held_writes():
            assert writer.try_write(b"before the close")
            assert writer.close_now(4000, "bye")
        await receive()  # the client's answer to the close

    async with _serving(app) as url, connect(url) as ws:
        await ws.send("go")
        got = [await ws.recv() for _ in range(3)]
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert got == ["not held", "held 1", "held 2"]
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4000
