"""The audit trail kept in the hub's store: ``StoredAudit``, the ``AuditSink`` of every hub.

``record`` is synchronous and never raises (``hub.access.audit.AuditSink``): it hands the
entry to the JSON-lines file (when there is one, ``hub.access.audit.JsonlAuditLog``) and
queues it for the store; a writer task appends the queue in batches (``Store.append_audit``),
retrying while the store fails. The store keeps about the newest ``audit_retained`` entries
(SQLite: a table; Redis: a stream every node appends to, so that any node reads every node's
entries; memory: this process's entries), and ``read`` pages through them for
``_hub/audit/list``.

Write-behind: an entry is in the file when ``record`` returns, and in the store a batch later;
a crash loses from the store the entries not yet written (milliseconds of them). While the
store fails, at most ``QUEUE_LIMIT`` entries wait; older ones are dropped from the store's copy
(never from the file), with one log line.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import anyio

from hub.access.audit import AuditSink
from hub.store.base import Store
from hub.store.writebehind import Retry, WriteBehind

log = logging.getLogger("hub.store")

QUEUE_LIMIT = 10_000
"""Entries waiting for the store at most (older ones are dropped from the store's copy)."""


class StoredAudit:
    """See the module docstring; enter ``running()`` inside the store's own."""

    def __init__(self, store: Store, *, keep: int, also: AuditSink | None = None) -> None:
        self.store = store
        self.keep = keep
        self.also = also
        """The file sink every entry also goes to (``None``: the store only)."""
        self.node = store.node if store.shared else None
        self._writes: WriteBehind[dict[str, Any]] = WriteBehind(self._write, "audit writer")
        self._retry = Retry(log, "audit")
        self.dropped = 0

    def record(self, event: str, **fields: Any) -> None:
        """Append one entry (see the module docstring); never raises."""
        if self.also is not None:
            self.also.record(event, **fields)
        entry: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "event": event,
        }
        entry.update(fields)
        if self.node is not None:
            entry.setdefault("node", self.node)
        queue = self._writes.queue
        self._writes.put(entry)
        if len(queue) > QUEUE_LIMIT:
            if not self.dropped:
                log.error("! audit: the store does not take entries; dropping the oldest")
            self.dropped += len(queue) - QUEUE_LIMIT
            del queue[: len(queue) - QUEUE_LIMIT]

    async def read(self, before: str | None, limit: int) -> list[tuple[str, dict[str, Any]]]:
        """Up to ``limit`` stored entries older than ``before``, newest first (see
        ``Store.read_audit``); entries still queued are not among them yet."""
        return await self.store.read_audit(before, limit)

    async def flush(self) -> None:
        """Return once every entry recorded before the call is in the store."""
        await self._writes.flush()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[StoredAudit]:
        """Write the queue until the block ends; leaving it writes what is queued (for up
        to ``hub.store.writebehind.CLOSE_TIMEOUT``)."""
        async with anyio.create_task_group() as tg:
            async with self._writes.running(tg):
                yield self
            tg.cancel_scope.cancel()

    async def _write(self, batch: list[dict[str, Any]]) -> None:
        while batch:
            try:
                await self.store.append_audit(batch, self.keep)
            except Exception as exc:  # the store's and its client's errors alike
                await self._retry.failed(exc)
                # Entries recorded meanwhile join the batch (it stays bounded).
                queue = self._writes.queue
                batch = (batch + queue)[-QUEUE_LIMIT:]
                queue.clear()
                continue
            self._retry.succeeded()
            batch = []


__all__ = ["StoredAudit"]
