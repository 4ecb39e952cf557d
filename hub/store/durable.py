"""What the durable stores share: the write-behind log, the writer task, restoring a session.

Theory of operation
-------------------
A durable store hands out ``WrittenLog``s: the live ``EventLog`` (clients are served from it,
exactly as with the memory store) that also queues each appended row. The first append after
a write wakes the store's writer task (a ``hub.store.writebehind.WriteBehind`` of logs, as the
share links and the audit trail have theirs); the writer takes everything queued in all logs
as one batch and writes it in one transaction (SQLite) or one script call per session
(Redis), off the event loop's path. While a batch is written, new rows queue up for the next
one: the batch size follows the load (group commit), and no event waits for the disk before it
is fanned out.

The price is the window between a client seeing an event and that event being written (one
batch: typically a few milliseconds, longer while the backend is slow or unreachable). The
cursor invariant covers it with epochs: every log is marked *open* (``clean = 0``) while a
node writes it and *clean* only after a clean shutdown wrote everything. A log restored
without that mark continues under a new epoch whose ``lineage`` says the old epoch is the same
history up to the last stored seq: cursors up to that seq resume exactly, later ones (events
the crash lost) get a ``_hub_reset``.

Each log has one writer, named in the stored log's metadata (``writer``, a token per store
instance). A write whose stored writer is another (a node that took the session over) or
whose first seq does not follow the stored last seq is refused as a whole, and the log is
*fenced*: it stops writing, and the condition is logged once. The backend's write is atomic
per session (a transaction; a Lua script), so a log is never half-written.

Snapshots go through the same queue, after the events they cover, so a stored snapshot never
covers an event that is not stored. The stored events are trimmed to the live log's retained
tail, but never past the latest snapshot: the snapshot and the events after it rebuild the
state.
"""

from __future__ import annotations

import logging
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from hub.store.base import Restored, SessionRecord, Snapshot, SoleOwner, StoreError
from hub.store.codec import update_of
from hub.store.log import EpochT, EventLog, Row, new_epoch
from hub.store.writebehind import RETRY_MAX, WriteBehind

log = logging.getLogger("hub.store")

CLOSE_TIMEOUT = 10.0
"""How long a clean shutdown waits for the last writes before it gives up (the logs are then
not marked clean, and the next start continues them under new epochs)."""
STALLED = 2.0
"""A write the backend has not answered for this many seconds makes the store unhealthy."""


class WrittenLog(EventLog):
    """An ``EventLog`` whose appended rows are queued for the store's writer."""

    def __init__(
        self,
        store: DurableStore,
        session_id: str,
        *,
        max_events: int,
        max_bytes: int,
        epoch: EpochT | None = None,
        lineage: dict[EpochT, int] | None = None,
    ) -> None:
        super().__init__(max_events=max_events, max_bytes=max_bytes, epoch=epoch, lineage=lineage)
        self.session_id = session_id
        self._store = store
        self.unwritten: list[Row] = []
        self.pending_snapshot: Snapshot | None = None
        self.snapshot_seq: int | None = None
        """The seq of the latest snapshot taken (the stored events are not trimmed past it)."""
        self.queued = False
        self.created = False
        """Whether the stored log exists (its first write creates it)."""
        self.fenced = False
        self.removed = False
        self.written_seq = 0
        """The last seq known to be stored."""

    def append_row(
        self,
        seq: int,
        message_id: str | None,
        v2: bytes,
        v1: tuple[bytes, ...],
        v1_hub: tuple[bytes, ...],
        origin: str | None,
    ) -> None:
        # An override, not a hook in `EventLog.append_row`: the memory store's logs then pay
        # nothing on the fan-out's hot path (the parameter list is repeated for that).
        EventLog.append_row(self, seq, message_id, v2, v1, v1_hub, origin)
        self.unwritten.append(self._events[-1])
        if not self.queued:
            self._store.enqueue(self)

    def continue_as(self, epoch: EpochT) -> None:
        EventLog.continue_as(self, epoch)
        if not self.queued:
            self._store.enqueue(self)


@dataclass(slots=True)
class LogMeta:
    """A stored log's metadata."""

    epoch: EpochT
    lineage: dict[EpochT, int]
    writer: str
    clean: bool
    last_seq: int


@dataclass(slots=True)
class Item:
    """One log's share of a batch: everything to write for it, taken at one instant."""

    session_id: str
    create: bool
    rows: list[Row]
    epoch: EpochT
    lineage: dict[EpochT, int]
    last_seq: int
    trim_below: int
    """Stored events with a lower seq may go (0: keep all)."""
    snapshot: Snapshot | None
    log: WrittenLog = field(repr=False)


def _updates(
    session_id: str, meta: LogMeta, snapshot: Snapshot | None, rows: list[Row]
) -> list[dict[str, Any]]:
    """The updates that rebuild a stored session's state: the snapshot's, then the events'
    after it; ``StoreError`` when they do not continue each other."""
    base = 0 if snapshot is None else snapshot.seq
    tail = [row for row in rows if row[0] > base]
    if (tail and tail[0][0] != base + 1) or (not tail and meta.last_seq != base):
        raise StoreError(
            f"session {session_id}: stored events do not continue its snapshot "
            f"(snapshot {base}, events {rows[0][0] if rows else '-'}..{meta.last_seq})"
        )
    try:
        updates = [] if snapshot is None else list(snapshot.updates)
        updates.extend(update_of(row) for row in tail)
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"session {session_id}: a stored event is damaged: {exc}") from None
    return updates


def lineage_of(data: Any) -> dict[EpochT, int]:
    """A stored lineage (``{"epoch": seq}``, keys as text) as a dict of ints."""
    if not isinstance(data, dict):
        return {}
    return {int(k): int(v) for k, v in data.items()}


class DurableStore(SoleOwner, ABC):
    """The part of the SQLite and Redis stores that does not depend on the backend."""

    kind = "durable"
    durable = True
    shared = False

    def __init__(self) -> None:
        self.node = secrets.token_hex(8)
        """This store instance's writer token."""
        self._logs: dict[str, WrittenLog] = {}
        self._writes: WriteBehind[WrittenLog] = WriteBehind(
            self._write_batch, f"{self.kind} store writer"
        )
        self._healthy = True
        self._writing_since: float | None = None
        self.reads_failing = False
        """Set by the node's readers of a shared store (``hub.sessions.cluster``) while their
        reads fail: a node that cannot follow the others is not ready either."""
        self.write_failures = 0

    # -- the backend -------------------------------------------------------------------------

    @abstractmethod
    async def _connect(self) -> None: ...

    @abstractmethod
    async def _disconnect(self) -> None: ...

    @abstractmethod
    async def _write(self, items: list[Item]) -> list[str]:
        """Write ``items`` (one atomic write per session); return the ids of the sessions
        whose write was refused (another writer, or a seq that does not follow)."""

    @abstractmethod
    async def _load(
        self, session_id: str
    ) -> tuple[SessionRecord, LogMeta, Snapshot | None, list[Row]] | None:
        """The stored record, log metadata, latest snapshot and events of a session."""

    @abstractmethod
    async def _take_over(self, session_id: str, log: WrittenLog) -> None:
        """Make this store the writer of the stored log, with ``log``'s epoch and lineage,
        marked open."""

    @abstractmethod
    async def _mark_clean(self, logs: list[WrittenLog]) -> None:
        """Mark these stored logs closed cleanly (where this store is still the writer)."""

    # -- the contract ------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[DurableStore]:
        await self._connect()
        try:
            async with anyio.create_task_group() as tg:
                try:
                    async with self._writes.running(tg, CLOSE_TIMEOUT, self._close_cleanly):
                        yield self
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._disconnect()

    async def _close_cleanly(self) -> None:
        """Mark closed cleanly the logs this store wrote everything of (at the end of
        ``running``, once the queue is written)."""
        logs = self._logs.values()
        for _ in range(3):
            # Events appended while the queue was written (a presence change as the last
            # clients go) are written too before the logs are looked at.
            if not any(lg.unwritten for lg in logs if not lg.fenced and not lg.removed):
                break
            await self._writes.flush()
        clean = [lg for lg in logs if not lg.fenced and not lg.removed and not lg.unwritten]
        try:
            await self._mark_clean(clean)
        except Exception as exc:
            log.warning("! %s store: could not mark logs clean: %s", self.kind, exc)

    @property
    def healthy(self) -> bool:
        """Writes go through: the last one did not fail, and none has been waiting for the
        backend for more than ``STALLED`` seconds (a stalled backend fails no call for a
        while: it just does not answer)."""
        started = self._writing_since
        stalled = started is not None and time.monotonic() - started > STALLED
        return self._healthy and not stalled and not self.reads_failing

    @property
    def backlog(self) -> int:
        """Events appended and not yet written."""
        return sum(len(lg.unwritten) for lg in self._writes.queue)

    def open_log(self, session_id: str, *, max_events: int, max_bytes: int) -> EventLog:
        written = WrittenLog(self, session_id, max_events=max_events, max_bytes=max_bytes)
        self._logs[session_id] = written
        self.enqueue(written)  # the first write creates the stored log, even before an event
        return written

    def snapshot(self, log: EventLog, updates: list[dict[str, Any]]) -> None:
        if not isinstance(log, WrittenLog) or log._store is not self:
            raise StoreError("snapshot of a log this store did not open")
        log.pending_snapshot = Snapshot(log.last_seq, log.epoch, updates)
        if not log.queued:
            self.enqueue(log)

    def enqueue(self, written: WrittenLog) -> None:
        """Queue ``written`` for the next batch (called on its first change after a batch)."""
        written.queued = True
        self._writes.put(written)

    async def flush(self) -> None:
        try:
            await self._writes.flush()
        except RuntimeError:  # the writer is not running
            raise StoreError(f"the {self.kind} store is not running") from None

    async def _read(
        self, session_id: str
    ) -> tuple[SessionRecord, LogMeta, Snapshot | None, list[Row], list[dict[str, Any]]] | None:
        """``_load``, and the updates that rebuild the session's state (``_updates``)."""
        loaded = await self._load(session_id)
        if loaded is None:
            return None
        record, meta, snapshot, rows = loaded
        return record, meta, snapshot, rows, _updates(session_id, meta, snapshot, rows)

    async def read_session(
        self, session_id: str, *, max_events: int, max_bytes: int
    ) -> Restored | None:
        read = await self._read(session_id)
        if read is None:
            return None
        record, meta, _, rows, updates = read
        plain = EventLog(
            max_events=max_events, max_bytes=max_bytes, epoch=meta.epoch, lineage=meta.lineage
        )
        plain.restore(rows, meta.last_seq)
        return Restored(record, plain, updates, meta.clean)

    async def restore(self, session_id: str, *, max_events: int, max_bytes: int) -> Restored | None:
        read = await self._read(session_id)
        if read is None:
            return None
        record, meta, snapshot, rows, updates = read
        written = WrittenLog(
            self,
            session_id,
            max_events=max_events,
            max_bytes=max_bytes,
            epoch=meta.epoch,
            lineage=meta.lineage,
        )
        written.restore(rows, meta.last_seq)
        written.snapshot_seq = None if snapshot is None else snapshot.seq
        written.written_seq = meta.last_seq
        written.created = True
        if not meta.clean:
            written.continue_as(max(new_epoch(), meta.epoch + 1))
            written.queued = False  # taking over writes the new epoch itself
            self._writes.queue = [q for q in self._writes.queue if q is not written]
            log.info(
                "= %s: its log was not closed cleanly: epoch %s continues as %s after seq %s",
                session_id,
                meta.epoch,
                written.epoch,
                meta.last_seq,
            )
        await self._take_over(session_id, written)
        self._logs[session_id] = written
        return Restored(record, written, updates, meta.clean)

    def forget(self, session_id: str) -> None:
        """Stop writing the log of ``session_id`` (it is being removed)."""
        written = self._logs.pop(session_id, None)
        if written is not None:
            written.removed = True

    # -- the writer --------------------------------------------------------------------------

    def _take(self, queue: list[WrittenLog]) -> list[Item]:
        """The items to write for the logs of ``queue``."""
        items = []
        for written in queue:
            written.queued = False
            if written.fenced or written.removed:
                written.unwritten = []
                written.pending_snapshot = None
                continue
            rows, written.unwritten = written.unwritten, []
            snapshot, written.pending_snapshot = written.pending_snapshot, None
            if snapshot is not None:
                written.snapshot_seq = snapshot.seq
            snap_seq = written.snapshot_seq
            trim_below = 0 if snap_seq is None else min(written.first_retained, snap_seq + 1)
            items.append(
                Item(
                    written.session_id,
                    not written.created,
                    rows,
                    written.epoch,
                    dict(written.lineage),
                    rows[-1][0] if rows else written.written_seq,
                    trim_below,
                    snapshot,
                    written,
                )
            )
            written.created = True
        return items

    async def _write_batch(self, queue: list[WrittenLog]) -> None:
        """Write what the logs of ``queue`` hold, retrying until it goes through (the
        ``WriteBehind``'s ``write``; its retry and log lines are the store's own)."""
        items = self._take(queue)
        pause = 0.05
        while True:
            try:
                self._writing_since = time.monotonic()
                fenced = await self._write(items) if items else []
            except Exception as exc:
                # Unreachable or failing: keep the batch and try again; nothing is dropped.
                self.write_failures += 1
                if self._healthy:
                    log.warning(
                        "! %s store: writing %d event(s) failed, retrying: %s",
                        self.kind,
                        sum(len(i.rows) for i in items),
                        exc,
                    )
                self._healthy = False
                await anyio.sleep(pause)
                pause = min(pause * 2, RETRY_MAX)
                continue
            finally:
                self._writing_since = None
            break
        if not self._healthy:
            log.warning("= %s store: writing again", self.kind)
            self._healthy = True
        refused = set(fenced)
        for item in items:
            if item.session_id in refused:
                if not item.log.fenced:
                    item.log.fenced = True
                    log.warning(
                        "! %s: the stored log has another writer; this node stops writing it",
                        item.session_id,
                    )
            else:
                item.log.written_seq = item.last_seq


__all__ = ["DurableStore", "Item", "LogMeta", "WrittenLog", "lineage_of"]
