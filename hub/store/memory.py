"""The memory store: the in-process log, and nothing survives the process.

The default. ``open_log`` hands out a plain ``EventLog`` (the fan-out's hot path pays nothing
for the store); the directory and snapshots are dictionaries. Every restart gives every
session a new epoch, so old cursors get a ``_hub_reset``, never a wrong continuation.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from hub.store.base import (
    LINK_KEEP,
    Restored,
    SessionRecord,
    Snapshot,
    SoleOwner,
    audit_number,
    link_status,
)
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
        self._links: dict[str, dict[str, Any]] = {}
        self._audit: list[tuple[int, dict[str, Any]]] = []
        self._audit_ids = 0

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

    # -- share links and the audit trail -------------------------------------------------------
    # The hub keeps a memory store's links in ``links.json`` (``hub.access.links``); these
    # exist for the store contract, and the audit trail for ``_hub/audit/list``.

    async def links(self) -> list[dict[str, Any]]:
        horizon = time.time() - LINK_KEEP
        self._links = {k: v for k, v in self._links.items() if v["expires_at"] >= horizon}
        return [dict(v) for v in self._links.values()]

    async def link(self, link_id: str) -> dict[str, Any] | None:
        record = self._links.get(link_id)
        return None if record is None else dict(record)

    async def add_link(self, record: dict[str, Any]) -> None:
        self._links.setdefault(record["link_id"], dict(record))

    async def revoke_link(self, link_id: str, at: float, by: str) -> dict[str, Any] | None:
        record = self._links.get(link_id)
        if record is None:
            return None
        if record.get("revoked_at") is None:
            record.update(revoked_at=at, revoked_by=by)
        return dict(record)

    async def use_link(self, link_id: str) -> tuple[str, dict[str, Any] | None]:
        record = self._links.get(link_id)
        if record is None:
            return "unknown", None
        status = link_status(record)
        if status == "ok":
            record["uses"] = int(record.get("uses") or 0) + 1
        return status, dict(record)

    async def append_audit(self, entries: list[dict[str, Any]], keep: int) -> None:
        for entry in entries:
            self._audit_ids += 1
            self._audit.append((self._audit_ids, entry))
        del self._audit[: max(0, len(self._audit) - keep)]

    async def read_audit(self, before: str | None, limit: int) -> list[tuple[str, dict[str, Any]]]:
        bound = self._audit_ids + 1 if before is None else audit_number(before)
        older = [(str(n), entry) for n, entry in reversed(self._audit) if n < bound]
        return older[:limit]


__all__ = ["MemoryStore"]
