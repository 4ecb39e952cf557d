"""The event log: seqs without holes, a bounded tail, and events the garbage collector skips."""

from __future__ import annotations

import gc

import pytest

from hub.store.log import Event, EventLog, v1_frames


def _event(seq: int, message_id: str | None = None, size: int = 10) -> Event:
    return Event(seq, message_id, b"x" * size, (b"v1",), (b"v1",))


def test_append_requires_the_next_seq() -> None:
    log = EventLog(max_events=10, max_bytes=1 << 20)
    log.append(_event(1))
    with pytest.raises(ValueError, match="appended after"):
        log.append(_event(3))
    assert log.last_seq == 1
    assert log.next_seq() == 2


def test_tail_is_bounded_by_count_and_bytes() -> None:
    log = EventLog(max_events=5, max_bytes=1 << 20)
    for seq in range(1, 3001):
        log.append(_event(seq))
    assert log.retained == 5
    assert log.first_retained == 2996
    assert not log.covers(2994)
    assert log.covers(2995)
    assert [e.seq for e in log.after(2995) or []] == [2996, 2997, 2998, 2999, 3000]
    assert log.after(10) is None
    by_bytes = EventLog(max_events=1000, max_bytes=3 * (100 + 2 + 64))
    for seq in range(1, 11):
        by_bytes.append(_event(seq, size=100))
    assert by_bytes.retained == 3
    assert by_bytes.retained_bytes == 3 * (100 + 2 + 64)


def test_after_rebuilds_the_events_it_was_given() -> None:
    log = EventLog(max_events=10, max_bytes=1 << 20)
    first = Event(1, "m1", b"v2", (), (b"hub",), origin="c1")
    log.append(first)
    assert log.after(0) == [first]
    assert first.for_v1("c1", True) == ()
    assert first.for_v1("c2", True) == (b"hub",)


def test_a_catch_up_reads_the_rows_a_client_gets_as_the_events_give_them() -> None:
    log = EventLog(max_events=3, max_bytes=1 << 20)
    events = [
        Event(1, "m1", b"a2", (b"a1",), (b"a1",)),
        Event(2, "m1", b"b2", (), (b"b-hub",)),  # a hub event: for v1 clients that opted in
        Event(3, "m1", b"c2", (b"c1", b"c1'"), (b"c1", b"c1'"), origin="c1"),  # c1's prompt
        Event(4, "m2", b"d2", (b"d2",), (b"d2",)),
    ]
    for event in events:
        log.append(event)
    assert log.rows_covered(0) is None  # event 1 is trimmed away
    rows = log.rows_covered(1)
    assert rows is not None
    assert [row[2] for row in rows] == [b"b2", b"c2", b"d2"]
    for client_id in ("c1", "c2"):
        for hub_events in (False, True):
            expected = [f for e in events[1:] for f in e.for_v1(client_id, hub_events)]
            assert v1_frames(rows, client_id, hub_events) == expected
    assert v1_frames(rows, "c2", True) == [b"b-hub", b"c1", b"c1'", b"d2"]
    assert v1_frames(rows, "c1", False) == [b"d2"]
    assert log.rows_covered(4) == []


def test_last_of_message_finds_the_newest_retained_event() -> None:
    log = EventLog(max_events=4, max_bytes=1 << 20)
    for seq, mid in enumerate(["a", "b", "a", None, "b", "a"], start=1):
        log.append(_event(seq, mid))
    assert log.last_of_message("a") == 6
    assert log.last_of_message("b") == 5
    log.append(_event(7, "c"))
    log.append(_event(8, "c"))
    log.append(_event(9, "c"))
    log.append(_event(10, "c"))
    assert log.last_of_message("b") is None  # trimmed away
    assert log.last_of_message("c") == 10


def test_retained_events_are_not_tracked_by_the_garbage_collector() -> None:
    """A full collection must not walk every retained event (it paused the hub)."""
    log = EventLog(max_events=100_000, max_bytes=1 << 30)
    for seq in range(1, 2001):
        log.append(Event(seq, f"m{seq // 100}", b"{}", (b"{}",), (b"{}",), origin="c1"))
    gc.collect()
    tracked = [seq for seq in range(2000) if gc.is_tracked(log._events[seq])]
    assert tracked == []


def test_common_events_are_untracked_by_their_first_collection() -> None:
    """Rows the session builds for most updates (v1 frames the v2 frame itself, the same for
    v1 clients that take the hub's events) must leave the youngest generation untracked:
    promoted still tracked, each was walked again by the middle generation's collections, a
    pause of milliseconds at a few thousand events a second."""
    log = EventLog(max_events=100_000, max_bytes=1 << 30)
    frames = []
    for seq in range(1, 2001):
        v2 = f'{{"seq":{seq}}}'.encode()
        v1 = (v2,)
        log.append_row(seq, f"m{seq // 100}", v2, v1, v1, None)
        frames.append(v1)
    del frames  # the session holds no other reference to a row's frames
    gc.collect(0)
    tracked = [seq for seq in range(2000) if gc.is_tracked(log._events[seq])]
    assert tracked == []
    event = log.after(0)
    assert event is not None
    assert event[0].v1 == (b'{"seq":1}',)
    assert event[0].v1_hub is event[0].v1


def test_a_v1_frame_that_is_the_v2_frame_is_counted_once() -> None:
    log = EventLog(max_events=100, max_bytes=1 << 20)
    shared = b"x" * 100
    log.append_row(1, None, shared, (shared,), (shared,), None)
    log.append_row(2, None, b"y" * 100, (b"z" * 100,), (b"z" * 100,), None)
    assert log.retained_bytes == (100 + 64) + (200 + 64)
    assert Event(3, None, shared, (shared,), (shared,)).size == 100 + 64
