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

log = logging.getLogger("hub.store")

QUEUE_LIMIT = 10_000
"""Entries waiting for the store at most (older ones are dropped from the store's copy)."""
RETRY_MAX = 2.0
"""The longest pause between two attempts at a failed write (it doubles from 50 ms)."""
CLOSE_TIMEOUT = 5.0
"""How long stopping waits for the queued entries to be written."""


class StoredAudit:
    """See the module docstring; enter ``running()`` inside the store's own."""

    def __init__(self, store: Store, *, keep: int, also: AuditSink | None = None) -> None:
        self.store = store
        self.keep = keep
        self.also = also
        """The file sink every entry also goes to (``None``: the store only)."""
        self.node = store.node if store.shared else None
        self._queue: list[dict[str, Any]] = []
        self._wake = anyio.Event()
        self._progress = anyio.Event()
        self._taken = 0
        self._done = 0
        self._running = False
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
        self._queue.append(entry)
        if len(self._queue) > QUEUE_LIMIT:
            if not self.dropped:
                log.error("! audit: the store does not take entries; dropping the oldest")
            self.dropped += len(self._queue) - QUEUE_LIMIT
            del self._queue[: len(self._queue) - QUEUE_LIMIT]
        self._wake.set()

    async def read(self, before: str | None, limit: int) -> list[tuple[str, dict[str, Any]]]:
        """Up to ``limit`` stored entries older than ``before``, newest first (see
        ``Store.read_audit``); entries still queued are not among them yet."""
        return await self.store.read_audit(before, limit)

    async def flush(self) -> None:
        """Return once every entry recorded before the call is in the store."""
        target = self._taken + 1 if self._queue else self._taken
        while self._done < target:
            if not self._running:
                raise RuntimeError("the audit trail is not being written")
            await self._progress.wait()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[StoredAudit]:
        """Write the queue until the block ends; leaving it writes what is queued (for up
        to ``CLOSE_TIMEOUT``)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._writer, name="audit writer")
            self._running = True
            try:
                yield self
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                    await self.flush()
                self._running = False
                tg.cancel_scope.cancel()

    async def _writer(self) -> None:
        pause = 0.05
        failing = False
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            batch, self._queue = self._queue, []
            self._taken += 1
            while batch:
                try:
                    await self.store.append_audit(batch, self.keep)
                except Exception as exc:  # the store's and its client's errors alike
                    if not failing:
                        log.warning("! audit: writing to the store failed, retrying: %s", exc)
                    failing = True
                    await anyio.sleep(pause)
                    pause = min(pause * 2, RETRY_MAX)
                    # Entries recorded meanwhile join the batch (it stays bounded).
                    batch = (batch + self._queue)[-QUEUE_LIMIT:]
                    self._queue = []
                    continue
                if failing:
                    log.warning("= audit: writing to the store again")
                failing = False
                pause = 0.05
                batch = []
            self._done = self._taken
            self._progress.set()
            self._progress = anyio.Event()


__all__ = ["StoredAudit"]
