"""The outbox's ordering and its lazy replay pages, against a writer that records frames.

The transport itself is exercised over real sockets in ``test_hub.py`` (slow consumers, 1013,
replay before the response); here the writer is an in-memory recorder, so that the order in
which the outbox takes frames from a lazy source can be observed exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator

import anyio
import anyio.lowlevel
import pytest

from hub.server import transport
from hub.server.outbox import CATCH_UP_BURST, Outbox


class Recorder:
    """A ``FrameWriter`` that accepts a frame only when ``open`` is set, and records it."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.open = True
        self.drained = anyio.Event()
        self.grew = anyio.Event()

    def record(self, frame: bytes) -> None:
        self.frames.append(frame)
        self.grew.set()

    async def wait_frames(self, count: int) -> None:
        with anyio.fail_after(5):
            while len(self.frames) < count:
                self.grew = anyio.Event()
                await self.grew.wait()

    def try_write(self, frame: bytes) -> bool:
        if not self.open:
            return False
        self.record(frame)
        return True

    async def writable(self) -> None:
        while not self.open:
            await self.drained.wait()
            self.drained = anyio.Event()

    async def send(self, frame: bytes) -> None:
        await self.writable()
        self.record(frame)

    def close_now(self, code: int, reason: str) -> bool:
        self.record(f"close {code}".encode())
        return True

    def unread_bytes(self) -> int:
        return 0

    def on_unanswered_ping(self, callback: Callable[[], None]) -> None:
        pass

    async def aclose(self, code: int, reason: str) -> None:
        self.record(f"close {code}".encode())


async def test_pages_keep_their_place_and_are_built_only_as_they_are_sent() -> None:
    writer = Recorder()
    outbox = Outbox(writer, limit=1 << 20)
    built: list[int] = []

    def pages() -> Iterator[bytes]:
        for n in range(3):
            built.append(n)
            yield f"page {n}".encode()

    assert outbox.push(b"before")
    assert outbox.push_pages(pages())
    # Nothing of the replay is built at push time; a live frame pushed now waits behind it.
    assert built == []
    assert outbox.push(b"live 1")
    assert writer.frames == [b"before"]
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        await writer.wait_frames(5)
        assert outbox.push(b"live 2")
        await writer.wait_frames(6)
        outbox.finish()
    assert writer.frames == [
        b"before",
        b"page 0",
        b"page 1",
        b"page 2",
        b"live 1",
        b"live 2",
    ]
    assert built == [0, 1, 2]


# Set up like the tests around it: each test spells out its own scenario.
async def test_a_blocked_transport_stops_the_building_of_pages() -> None:
    writer = Recorder()
    outbox = Outbox(writer, limit=1 << 20)
    built: list[int] = []

    def pages() -> Iterator[bytes]:
        for n in range(100):
            built.append(n)
            yield b"p"

    writer.open = False
    outbox.push_pages(pages())
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        await anyio.sleep(0.05)
        # The transport takes nothing: no page is built ahead of it.
        assert built == []
        writer.open = True
        writer.drained.set()
        await writer.wait_frames(100)
        outbox.close(1013, "slow")
    assert built == list(range(100))
    assert writer.frames[-1] == b"close 1013"


async def test_a_slow_consumer_line_names_its_client(caplog: pytest.LogCaptureFixture) -> None:
    # The fan-out that overfills an outbox runs in the agent's task, not the client's: the
    # line must name the client itself (hub.server.logs), for the JSON log's `connection`.
    recorder = Recorder()
    recorder.open = False
    outbox = Outbox(recorder, 10, name="c-slow")
    with caplog.at_level(logging.WARNING, logger="hub.server"):
        assert outbox.push(b"x" * 20) is False
    (record,) = [r for r in caplog.records if "slow consumer" in r.getMessage()]
    assert record.connection == "c-slow"  # type: ignore[attr-defined]
    assert recorder.frames == [b"close 1013"]


async def test_a_replay_is_written_in_bursts_between_which_the_others_run() -> None:
    # A resume's events, one frame each: the writer takes up to CATCH_UP_BURST bytes of them
    # before it lets another task run, not one (a task switch per event made a reconnect
    # storm's catch-ups most of its work).
    writer = Recorder()
    outbox = Outbox(writer, limit=1 << 20)
    ticks = 0
    built_at: list[int] = []
    page = 1024
    count = 4 * CATCH_UP_BURST // page

    def pages() -> Iterator[bytes]:
        for n in range(count):
            built_at.append(ticks)
            yield str(n).encode().ljust(page)

    async def ticker() -> None:
        nonlocal ticks
        while len(writer.frames) < count:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    outbox.push_pages(pages())
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        tg.start_soon(ticker)
        await writer.wait_frames(count)
        outbox.finish()
    assert [int(f) for f in writer.frames] == list(range(count))
    bursts = [built_at.count(t) for t in sorted(set(built_at))]
    assert max(bursts) == CATCH_UP_BURST // page, bursts
    assert len(bursts) <= 5, bursts


async def test_a_page_the_transport_refuses_in_a_burst_keeps_its_place() -> None:
    writer = Recorder()
    outbox = Outbox(writer, limit=1 << 20)

    def pages() -> Iterator[bytes]:
        for n in range(10):
            if n == 4:
                writer.open = False  # the transport's buffer is full from here
            yield f"page {n}".encode()

    outbox.push_pages(pages())
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        await writer.wait_frames(4)
        await anyio.sleep(0.02)
        assert writer.frames == [f"page {n}".encode() for n in range(4)]
        assert outbox.push(b"live")
        writer.open = True
        writer.drained.set()
        await writer.wait_frames(11)
        outbox.finish()
    assert writer.frames == [*(f"page {n}".encode() for n in range(10)), b"live"]


def test_held_writes_to_one_transport_in_a_row_go_out_as_one_write() -> None:
    class Transport:
        def __init__(self) -> None:
            self.writes: list[bytes] = []

        def is_closing(self) -> bool:
            return False

        def write(self, data: bytes) -> None:
            self.writes.append(data)

    one, two = Transport(), Transport()
    with transport.held_writes():
        held = transport._held
        assert held is not None
        held += [(one, b"a"), (one, b"b"), (two, b"c"), (one, b"d"), (one, b"e"), (two, b"f")]
    # Each client's frames stay in order; the clients' turns too.
    assert one.writes == [b"ab", b"de"]
    assert two.writes == [b"c", b"f"]


async def test_a_started_outbox_has_a_writer_only_while_frames_wait() -> None:
    writer = Recorder()
    outbox = Outbox(writer, limit=1 << 20)
    started = 0
    ended: list[bool] = []
    writer_ended = anyio.Event()

    async with anyio.create_task_group() as tg:

        async def write_out(write: Callable[[], Awaitable[bool]]) -> None:
            ended.append(await write())
            writer_ended.set()

        def spawn(write: Callable[[], Awaitable[bool]]) -> None:
            nonlocal started
            started += 1
            tg.start_soon(write_out, write)

        outbox.start(spawn)
        # A frame the transport takes at once needs no writer.
        assert outbox.push(b"direct")
        assert started == 0
        # Frames that must wait start one writer between them, which ends once they are out.
        writer.open = False
        assert outbox.push(b"queued 1")
        assert outbox.push(b"queued 2")
        assert started == 1
        writer.open = True
        writer.drained.set()
        await writer.wait_frames(3)
        with anyio.fail_after(5):
            await writer_ended.wait()
        assert ended == [False]
        assert outbox.push(b"direct again")
        assert started == 1
        # A close starts one more, which tells the connection that the outbox ended.
        outbox.close(1013, "slow")
        assert started == 2
    assert ended == [False, True]
    assert writer.frames == [b"direct", b"queued 1", b"queued 2", b"direct again", b"close 1013"]
