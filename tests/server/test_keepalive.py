"""``hub.server.keepalive``: every connection's pings on one timer, on a clock the test turns.

Over real sockets the keepalive is in the hub's tests (``test_lifecycle``: a peer that stops
answering is dropped; ``test_hub``: a silent reader is closed with 1011, a stuck one with
1013) and in the S12 quick benchmark (a thousand connections pinged every second stay open).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from websockets.protocol import State

from hub.server.keepalive import Keepalive


class Clock:
    """The loop as ``Keepalive`` uses it: a clock and ``call_at``, run by ``advance``."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> object:
        self.timers.append((when, callback))
        return object()  # a handle: the keepalive never cancels its timer

    def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while self.timers and min(t for t, _ in self.timers) <= end:
            self.timers.sort(key=lambda timer: timer[0])
            when, callback = self.timers.pop(0)
            self.now = max(self.now, when)
            callback()
        self.now = end


class Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing


class Conn:
    state = State.OPEN


class Proto:
    """The uvicorn protocol's fields the keepalive reads and writes."""

    def __init__(self) -> None:
        self.transport = Transport()
        self.conn = Conn()
        self.close_sent = False
        self.pending_ping_payload: bytes | None = None
        self.ping_sent_at = 0.0
        self.timeouts = 0

    def keepalive_timeout(self) -> None:
        self.timeouts += 1
        self.pending_ping_payload = None
        self.close_sent = True

    def pings(self) -> list[bytes]:
        return [data for data in self.transport.written if data[0] == 0x89]

    def pong(self) -> None:
        """Answer the ping in flight (what ``FairWebSocketProtocol.handle_pong`` does)."""
        self.pending_ping_payload = None


def keepalive(interval: float = 20.0, timeout: float | None = 20.0) -> tuple[Keepalive, Clock]:
    clock = Clock()
    return Keepalive(cast(asyncio.AbstractEventLoop, clock), interval, timeout), clock


def test_each_connection_is_pinged_once_an_interval_while_it_answers() -> None:
    ka, clock = keepalive()
    early, late = Proto(), Proto()
    ka.add(early)
    clock.advance(7.5)
    ka.add(late)
    clock.advance(19.0)
    assert len(early.pings()) == 1
    assert late.pings() == []
    clock.advance(1.0)  # 20 s after it came
    assert len(late.pings()) == 1
    for _ in range(3):
        early.pong()
        late.pong()
        clock.advance(20.0)
    assert (len(early.pings()), len(late.pings())) == (4, 4)
    assert early.timeouts == late.timeouts == 0
    # A ping frame: unmasked, its payload the one the pong must carry.
    frame = early.pings()[-1]
    assert frame[:2] == b"\x89\x04"
    assert frame[2:] == early.pending_ping_payload


def test_a_connection_that_does_not_answer_times_out_once_and_is_not_pinged_meanwhile() -> None:
    ka, clock = keepalive(interval=10.0, timeout=25.0)
    silent, fine = Proto(), Proto()
    ka.add(silent)
    ka.add(fine)
    clock.advance(10.0)
    for _ in range(24):  # to 34 s: `fine` answers each ping, `silent` none (sent at 10 s)
        fine.pong()
        clock.advance(1.0)
    assert (len(silent.pings()), silent.timeouts) == (1, 0)
    assert len(fine.pings()) == 3
    clock.advance(1.0)
    assert (silent.timeouts, fine.timeouts) == (1, 0)
    ka.discard(fine)
    clock.advance(60.0)
    assert (len(silent.pings()), silent.timeouts) == (1, 1)  # closing: no more pings


def test_nothing_is_pinged_or_timed_after_a_connection_leaves_and_the_timer_stops() -> None:
    ka, clock = keepalive(interval=1.0, timeout=1.0)
    proto = Proto()
    ka.add(proto)
    clock.advance(1.0)
    assert len(proto.pings()) == 1
    ka.discard(proto)
    clock.advance(5.0)
    assert (len(proto.pings()), proto.timeouts) == (1, 0)
    assert len(ka) == 0
    assert clock.timers == []  # an idle server does not wake up


def test_a_closing_connection_is_not_pinged() -> None:
    ka, clock = keepalive(interval=1.0, timeout=None)
    closing, sent, ended = Proto(), Proto(), Proto()
    closing.transport.closing = True
    sent.close_sent = True
    ended.conn.state = State.CLOSING
    for proto in (closing, sent, ended):
        ka.add(proto)
    clock.advance(3.0)
    assert closing.pings() == sent.pings() == ended.pings() == []
