"""The memory store: the in-process log, and nothing survives the process.

The default. ``open_log`` hands out a plain ``EventLog`` (the fan-out's hot path pays nothing
for the store); the directory and snapshots are dictionaries. Every restart gives every
session a new epoch, so old cursors get a ``_hub_reset``, never a wrong continuation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from hub.store.base import Restored, SessionRecord, Snapshot, SoleOwner
from hub.store.log import EventLog, Row


class MemoryStore(SoleOwner):
    """See the module docstring and ``hub.store.base.Store``."""

    kind = "memory"
    durable = False
    shared = False
    reads_failing = False
    write_failures = 0

    def __init__(self) -> None:
        self.node = "local"
        self._records: dict[str, SessionRecord] = {}
        self._logs: dict[str, EventLog] = {}
        self._snapshots: dict[str, tuple[EventLog, Snapshot]] = {}

    @asynccontextmanager
    async def running(self) -> AsyncIterator[MemoryStore]:
        yield self

    @property
    def healthy(self) -> bool:
        return True

    @property
    def backlog(self) -> int:
        return 0

    def open_log(self, session_id: str, *, max_events: int, max_bytes: int) -> EventLog:
        log = EventLog(max_events=max_events, max_bytes=max_bytes)
        self._logs[session_id] = log
        return log

    def snapshot(self, log: EventLog, updates: list[dict[str, Any]]) -> None:
        for session_id, known in self._logs.items():
            if known is log:
                self._snapshots[session_id] = (log, Snapshot(log.last_seq, log.epoch, updates))
                return

    async def flush(self) -> None:
        return None

    async def save_record(self, record: SessionRecord) -> None:
        self._records[record.session_id] = record

    async def records(self) -> list[SessionRecord]:
        return list(self._records.values())

    async def remove(self, session_id: str) -> None:
        self._records.pop(session_id, None)
        self._logs.pop(session_id, None)
        self._snapshots.pop(session_id, None)

    async def read_after(self, session_id: str, after: int) -> list[Row] | None:
        log = self._logs.get(session_id)
        if log is None or not log.covers(after):
            return None
        return list(log.rows_after(after))

    async def latest_snapshot(self, session_id: str) -> Snapshot | None:
        entry = self._snapshots.get(session_id)
        return None if entry is None else entry[1]

    async def restore(self, session_id: str, *, max_events: int, max_bytes: int) -> Restored | None:
        """Nothing to bring back: a memory store's sessions end with its process."""
        return None

    async def read_session(
        self, session_id: str, *, max_events: int, max_bytes: int
    ) -> Restored | None:
        return None


__all__ = ["MemoryStore"]
