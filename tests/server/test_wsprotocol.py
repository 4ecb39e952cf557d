"""``hub.server.wsprotocol``: a client's input parsed a slice at a time, over real sockets.

How much this spares other clients is measured by benchmark S9 (docs/benchmarks.md); these
tests check that nothing is lost or reordered on the way: thousands of requests that reach
the hub in a few socket reads are all answered, in order, and the connection goes on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
import orjson
from websockets.asyncio.client import ClientConnection, connect

from hub.server.wsprotocol import READ_SLICE, Inbox, Writable
from tests.server.harness import acp_client, running_hub, scripted_agent

INITIALIZE = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}'


@asynccontextmanager
async def _initialized_client() -> AsyncIterator[ClientConnection]:
    """A raw client of a hub of its own, initialized (its frames are the test's to shape)."""
    async with (
        running_hub([scripted_agent()]) as hub,
        connect(hub.url, max_size=None, ping_interval=None) as ws,
    ):
        await ws.send(INITIALIZE)
        assert "result" in orjson.loads(await ws.recv())
        yield ws


async def test_requests_sent_in_one_burst_are_all_answered_in_order() -> None:
    count = 3000
    # Far more than one slice, and each request's id padded so that frames straddle slices.
    frames = [
        f'{{"jsonrpc":"2.0","id":{i},"method":"session/list","params":{{}}}}'
        for i in range(1, count + 1)
    ]
    assert sum(len(f) for f in frames) > 10 * READ_SLICE
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        await owner.new_session()
        async with connect(hub.url, max_size=None, ping_interval=None) as ws:
            await ws.send(INITIALIZE)
            assert "result" in orjson.loads(await ws.recv())
            # One write of them all: the hub reads them in a few large reads.
            for text in frames:
                ws.protocol.send_text(text.encode())
            ws.transport.write(b"".join(ws.protocol.data_to_send()))
            ids: list[int] = []
            with anyio.fail_after(60):
                while len(ids) < count:
                    reply = orjson.loads(await ws.recv())
                    # Answered, or refused by the request rate limit; never dropped.
                    assert "result" in reply or reply["error"]["code"] == -32044, reply
                    ids.append(reply["id"])
            assert ids == list(range(1, count + 1))
            # The connection goes on: a request after the burst is answered.
            await ws.send('{"jsonrpc":"2.0","id":"after","method":"initialize","params":{}}')
            with anyio.fail_after(10):
                assert orjson.loads(await ws.recv())["id"] == "after"
        # And the hub serves everyone else.
        assert await owner.call("session/list", {})


async def test_a_frame_split_over_reads_and_pings_between_messages_are_read() -> None:
    # A read that completes no message (half a frame, a pong) must not leave reading paused:
    # the rest of the frame, and the next requests, still arrive.
    async with _initialized_client() as ws:
        ws.protocol.send_text(b'{"jsonrpc":"2.0","id":1,"method":"session/list"}')
        data = b"".join(ws.protocol.data_to_send())
        for i in range(len(data)):
            ws.transport.write(data[i : i + 1])  # one byte per write
            await anyio.lowlevel.checkpoint()
        with anyio.fail_after(10):
            assert orjson.loads(await ws.recv())["id"] == 1
        for i in range(2, 5):
            pong = await ws.ping()
            with anyio.fail_after(10):
                await pong
            await ws.send(f'{{"jsonrpc":"2.0","id":{i},"method":"session/list"}}')
            with anyio.fail_after(10):
                assert orjson.loads(await ws.recv())["id"] == i


async def test_a_message_whose_end_is_not_read_yet_does_not_stop_the_reading() -> None:
    # One read holds a whole request and more than a slice of a large one, whose end comes
    # in a later read. The first is answered; the rest of that read, parsed when the handler
    # asks for the next message, completes nothing: reading must go on, or the connection
    # waits for ever for the end of a frame it no longer reads (found by the wire fuzzer).
    async with _initialized_client() as ws:
        large = '{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"_meta":{"pad":"%s"}}}'
        ws.protocol.send_text(b'{"jsonrpc":"2.0","id":1,"method":"session/list"}')
        small = b"".join(ws.protocol.data_to_send())
        ws.protocol.send_text((large % ("x" * (3 * READ_SLICE))).encode())
        data = small + b"".join(ws.protocol.data_to_send())
        first = len(small) + READ_SLICE + READ_SLICE // 2  # past the first slice, not the end
        ws.transport.write(data[:first])
        with anyio.fail_after(10):
            assert orjson.loads(await ws.recv())["id"] == 1  # that read is the hub's
        ws.transport.write(data[first:])
        await ws.send('{"jsonrpc":"2.0","id":3,"method":"session/list"}')
        with anyio.fail_after(10):
            assert orjson.loads(await ws.recv())["id"] == 2
            assert orjson.loads(await ws.recv())["id"] == 3


async def test_the_inbox_hands_messages_to_its_reader_in_order_and_loses_none() -> None:
    inbox = Inbox()
    inbox.put_nowait("one")
    inbox.put_nowait("two")
    assert await inbox.get() == "one"
    assert await inbox.get() == "two"
    assert inbox.empty()

    async def put_later() -> None:
        await anyio.lowlevel.checkpoint()
        inbox.put_nowait("three")

    # A reader that waits gets the next message as it comes.
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(put_later)
            assert await inbox.get() == "three"
    # A wait that is cancelled takes nothing: the next message is there for the next read.
    with anyio.move_on_after(0.01):
        await inbox.get()
    inbox.put_nowait("four")
    assert inbox.qsize() == 1
    assert await inbox.get() == "four"


async def test_the_writable_flag_wakes_every_waiter_when_set() -> None:
    flag = Writable()
    assert not flag.is_set()
    woken: list[int] = []

    async def wait(n: int) -> None:
        await flag.wait()
        woken.append(n)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, 1)
            tg.start_soon(wait, 2)
            await anyio.wait_all_tasks_blocked()
            assert woken == []
            flag.set()
    assert sorted(woken) == [1, 2]
    # Cleared, a wait blocks again until the next set; a cancelled wait leaves nothing behind.
    flag.clear()
    with anyio.move_on_after(0.01) as scope:
        await flag.wait()
    assert scope.cancelled_caught
    flag.set()
    assert flag.is_set()
    assert await flag.wait()
