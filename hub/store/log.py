"""A session's ordered event log: ``seq`` from 1 without holes, an ``epoch``, a bounded tail.

Theory of operation
-------------------
Every update a session emits becomes an ``Event`` with the next ``seq``. The event keeps its
wire frames, encoded once per protocol version at append time, so fan-out and cursor resumes
reuse the same bytes for every client of that version. The log retains a tail of events bounded
by count and by bytes; a cursor older than the tail cannot be served from it (the caller sends a
``_hub_reset`` and a compacted replay instead). ``epoch`` names one continuous history: it
changes when a session's log is lost (a fresh log for a session id that existed before) and
when a durable store continues a history it may not hold whole (after an unclean restart or a
takeover): the new epoch then remembers, in ``lineage``, up to which seq each earlier epoch's
events are the same as this one's, so that a cursor of an earlier epoch within that range is
still served exactly (``serves``).

This log is the memory store: the in-process tail every store keeps for fan-out and cursor
resumes. A durable store hands out a subclass that also queues each appended row for writing
(``hub.store.writer``); the plain class adds nothing to the fan-out's hot path.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise

EpochT = int


def new_epoch() -> EpochT:
    """A fresh epoch: milliseconds since the Unix epoch (unique enough across restarts)."""
    return time.time_ns() // 1_000_000


Frames = tuple[bytes, ...]
"""An event's frames for v1 clients: none, one or several encoded notifications."""

Row = tuple[int, str | None, bytes, Frames | None, Frames | None, str | None, int]
"""An event as the log keeps it: (seq, message_id, v2, v1, v1_hub, origin, size).

``v1`` is ``None`` for the common case ``(v2,)`` (the update renders to v1 unchanged) and
``v1_hub`` is ``None`` when it is ``v1``: the row then holds no inner tuple, only bytes,
strings and ints, and the garbage collector stops tracking it at its first collection (see
``EventLog``). Read the frames with ``row_frames``, never from the fields.
"""

MAX_LINEAGE = 8
"""How many earlier epochs a log remembers (older cursors get a reset, which is always safe)."""


def _size(v2: bytes, v1_hub: tuple[bytes, ...]) -> int:
    """What an event counts against ``retained_bytes``. ``v1`` is either empty or the same
    frames as ``v1_hub``; a v1 frame may be the v2 frame itself (an update that renders to v1
    unchanged), counted once."""
    if len(v1_hub) == 1 and v1_hub[0] is v2:
        return len(v2) + 64  # the common case, without a generator
    return len(v2) + sum(len(f) for f in v1_hub if f is not v2) + 64


# The parameters are a row's fields, as `EventLog.append_row` takes them (no `Event` built).
def make_row(
    seq: int,
    message_id: str | None,
    v2: bytes,
    v1: Frames,
    v1_hub: Frames,
    origin: str | None,
) -> Row:
    """The row the log keeps for an event with these fields (a stored event, read back)."""
    return (
        seq,
        message_id,
        v2,
        None if len(v1) == 1 and v1[0] is v2 else v1,
        None if v1_hub is v1 else v1_hub,
        origin,
        _size(v2, v1_hub),
    )


def row_frames(row: Row) -> tuple[Frames, Frames]:
    """``row``'s ``(v1, v1_hub)`` frames, whole (``v1_hub is v1`` when they are the same)."""
    v1 = row[3]
    if v1 is None:
        v1 = (row[2],)
    v1_hub = row[4]
    return v1, v1 if v1_hub is None else v1_hub


def v1_frames(rows: Iterable[Row], client_id: str, hub_events: bool) -> list[bytes]:
    """The frames a v1 client receives of ``rows``, in order (``Event.for_v1`` of each)."""
    frames: list[bytes] = []
    for row in rows:
        if row[5] != client_id:  # a v1 client renders its own prompt itself
            v1, v1_hub = row_frames(row)
            frames.extend(v1_hub if hub_events else v1)
    return frames


@dataclass(slots=True)
class Event:
    """One entry of the log.

    ``v2`` is the encoded ``session/update`` notification for v2 clients. v1 clients get
    ``v1_hub`` when they opted in to the hub's events, else ``v1`` (none, one or several
    frames: a v2 update may need several v1 updates, or none). The two differ in two cases:
    the hub's own ``_hub_*`` events (only in ``v1_hub``), and updates that have no v1
    rendering, which ``v1_hub`` carries wrapped as ``_hub_v2`` so that the seqs a client
    sees stay contiguous. All frames of one event carry the event's ``seq``. ``origin`` is
    the client id of the connection that caused the event, when there is one (used to spare
    a v1 client the echo of its own prompt). ``message_id`` is the update's ``messageId``
    (replay from a message, ``session/attach`` with ``history: "message"``).
    """

    seq: int
    message_id: str | None
    v2: bytes
    v1: tuple[bytes, ...]
    v1_hub: tuple[bytes, ...]
    origin: str | None = None
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = _size(self.v2, self.v1_hub)

    def for_v1(self, client_id: str, hub_events: bool) -> tuple[bytes, ...]:
        """The frames a v1 client receives of this event."""
        if self.origin == client_id:
            return ()  # a v1 client renders its own prompt itself
        return self.v1_hub if hub_events else self.v1

    @classmethod
    def of(cls, row: Row) -> Event:
        v1, v1_hub = row_frames(row)
        return cls(row[0], row[1], row[2], v1, v1_hub, row[5])


class EventLog:
    """The retained tail of a session's events; see the module docstring.

    The log keeps each event as a plain tuple of bytes, strings and ints (``Row``),
    not as an object: Python's garbage collector stops tracking such tuples, so a full
    collection does not walk every retained event. With a few hundred sessions holding
    thousands of events each, tracked events made every full collection pause the hub for a
    tenth of a second and more, growing with the log. ``after`` builds ``Event`` objects on
    demand.

    A common row holds no inner tuple either (``Row``): the collector untracks a tuple only
    once every tuple inside it is untracked, and it reaches an inner tuple after the row that
    holds it, so such rows stayed tracked through their first collection and were walked
    again by the next generation's: at a few thousand events a second, a pause of one to two
    milliseconds twice a second, which the fan-out then had to catch up on.
    """

    def __init__(
        self,
        *,
        max_events: int,
        max_bytes: int,
        epoch: EpochT | None = None,
        lineage: dict[EpochT, int] | None = None,
    ) -> None:
        self.epoch: EpochT = new_epoch() if epoch is None else epoch
        self.lineage: dict[EpochT, int] = dict(lineage or {})
        """Earlier epochs of this history and the last seq each shares with this epoch."""
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._events: list[Row] = []
        self._head = 0  # index of the oldest retained event in _events
        self._bytes = 0
        self._last_seq = 0

    def restore(self, rows: list[Row], last_seq: int) -> None:
        """Fill an empty log with stored ``rows`` (consecutive seqs, ending at ``last_seq``)
        so that it continues after ``last_seq``; the tail bounds apply."""
        if self._events or self._last_seq:
            raise ValueError("restore into a log that is not empty")
        if rows and (rows[-1][0] != last_seq or any(b[0] != a[0] + 1 for a, b in pairwise(rows))):
            raise ValueError("restored rows must be consecutive and end at last_seq")
        self._events = list(rows)
        self._bytes = sum(row[6] for row in rows)
        self._last_seq = last_seq
        self._trim()

    def continue_as(self, epoch: EpochT) -> None:
        """Continue this history under a new ``epoch``: cursors of the current epoch (and of
        the remembered earlier ones) up to ``last_seq`` stay valid; later events get
        ``epoch``. Used when the log may hold less than some client saw (unclean restart,
        takeover): a cursor past ``last_seq`` in the old epoch then gets a reset."""
        lineage = {**self.lineage, self.epoch: self._last_seq}
        while len(lineage) > MAX_LINEAGE:
            del lineage[min(lineage)]
        self.lineage = lineage
        self.epoch = epoch

    def serves(self, epoch: EpochT, seq: int) -> bool:
        """Whether the cursor ``(epoch, seq)`` names a point of this log's history: its own
        epoch, or an earlier epoch of its lineage up to the seq both share."""
        if epoch == self.epoch:
            return True
        shared = self.lineage.get(epoch)
        return shared is not None and seq <= shared

    def rows_after(self, after: int) -> list[Row]:
        """The retained rows with ``seq > after`` (all retained when ``after`` is older)."""
        start = self._head + max(0, after + 1 - self.first_retained)
        return self._events[start:]

    @property
    def last_seq(self) -> int:
        """The seq of the newest event (0 before the first)."""
        return self._last_seq

    @property
    def first_retained(self) -> int:
        """The seq of the oldest retained event (``last_seq + 1`` when none is retained)."""
        if self._head < len(self._events):
            return self._events[self._head][0]
        return self._last_seq + 1

    @property
    def retained(self) -> int:
        return len(self._events) - self._head

    @property
    def retained_bytes(self) -> int:
        return self._bytes

    def next_seq(self) -> int:
        """The seq the next appended event will get."""
        return self._last_seq + 1

    def append(self, event: Event) -> None:
        """Append ``event``, whose seq must be ``next_seq()``, and trim the tail."""
        self.append_row(event.seq, event.message_id, event.v2, event.v1, event.v1_hub, event.origin)

    def append_row(
        self,
        seq: int,
        message_id: str | None,
        v2: bytes,
        v1: Frames,
        v1_hub: Frames,
        origin: str | None,
    ) -> None:
        """``append`` of the event with these fields, without building an ``Event``."""
        if seq != self._last_seq + 1:
            raise ValueError(f"seq {seq} appended after {self._last_seq}")
        row = make_row(seq, message_id, v2, v1, v1_hub, origin)
        self._events.append(row)
        self._last_seq = seq
        self._bytes += row[6]
        self._trim()

    def _trim(self) -> None:
        if len(self._events) - self._head <= self._max_events and self._bytes <= self._max_bytes:
            return
        while self.retained > 1 and (
            self.retained > self._max_events or self._bytes > self._max_bytes
        ):
            self._bytes -= self._events[self._head][6]
            self._head += 1
        if self._head > 1024 and self._head * 2 > len(self._events):
            del self._events[: self._head]
            self._head = 0

    def covers(self, after: int) -> bool:
        """Whether every event after ``after`` is still retained."""
        return 0 <= after <= self._last_seq and after + 1 >= self.first_retained

    def after(self, after: int) -> list[Event] | None:
        """The events with ``seq > after`` in order; ``None`` when some are no longer retained."""
        rows = self.rows_covered(after)
        return None if rows is None else [Event.of(row) for row in rows]

    def rows_covered(self, after: int) -> list[Row] | None:
        """The rows with ``seq > after`` in order; ``None`` when some are no longer retained.

        A catch-up reads these rather than ``after``'s events: a resume a thousand events
        behind built a thousand ``Event`` objects to read one field of each (about a
        millisecond of the event loop per resume)."""
        if not self.covers(after):
            return None
        return self._events[self._head + (after + 1 - self.first_retained) :]

    def last_of_message(self, message_id: str) -> int | None:
        """The seq of the newest retained event of message ``message_id``."""
        for index in range(len(self._events) - 1, self._head - 1, -1):
            row = self._events[index]
            if row[1] == message_id:
                return row[0]
        return None
