"""``WriteBehind``: changes queued at once and written to the store by one task, in batches.

The hub's durable records that are changed on the event loop and written later (the audit
trail, share links) share this bookkeeping: ``put`` queues an item and wakes the writer; the
writer takes everything queued so far as one batch and hands it to ``write``; ``flush``
returns once every item put before the call is written (a batch taken counts as written
when ``write`` returns). ``write`` owns its retry policy (``retry``: a doubling pause, logged
once per outage), so a store that fails holds the writer, never the caller of ``put``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

import anyio
import anyio.abc

__all__ = ["CLOSE_TIMEOUT", "RETRY_MAX", "Retry", "WriteBehind"]

T = TypeVar("T")

RETRY_MAX = 2.0
"""The longest pause between two attempts at a failed write (it doubles from 50 ms)."""
CLOSE_TIMEOUT = 5.0
"""How long stopping waits for the queued items to be written."""


class Retry:
    """The pause between attempts at a write that fails: 50 ms, doubling up to ``RETRY_MAX``;
    the first failure of an outage and the recovery get one log line each."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log = log
        self._what = what
        self._pause = 0.05
        self.healthy = True
        """Whether the last attempt went through."""

    async def failed(self, exc: BaseException) -> None:
        """An attempt failed with ``exc``: log it (once per outage), then pause."""
        if self.healthy:
            self._log.warning("! %s: writing to the store failed, retrying: %s", self._what, exc)
        self.healthy = False
        await anyio.sleep(self._pause)
        self._pause = min(self._pause * 2, RETRY_MAX)

    def succeeded(self) -> None:
        """An attempt went through."""
        if not self.healthy:
            self._log.warning("= %s: writing to the store again", self._what)
        self.healthy = True
        self._pause = 0.05


class WriteBehind(Generic[T]):
    """See the module docstring. ``write`` takes one batch; ``name`` names the writer task."""

    def __init__(self, write: Callable[[list[T]], Awaitable[None]], name: str) -> None:
        self._write = write
        self._name = name
        self.queue: list[T] = []
        """What is queued and not yet taken by the writer (``write`` may take more of it)."""
        self._wake = anyio.Event()
        self._progress = anyio.Event()
        self._taken = 0
        self._done = 0
        self._running = False

    def put(self, item: T) -> None:
        """Queue ``item`` for the writer."""
        self.queue.append(item)
        self._wake.set()

    async def flush(self) -> None:
        """Return once every item put before the call is written."""
        target = self._taken + 1 if self.queue else self._taken
        while self._done < target:
            if not self._running:
                raise RuntimeError(f"the {self._name} is not running")
            await self._progress.wait()

    @asynccontextmanager
    async def running(
        self,
        tg: anyio.abc.TaskGroup,
        timeout: float = CLOSE_TIMEOUT,
        written: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[None]:
        """Run the writer in ``tg`` until the block ends; leaving it writes what is queued
        and then awaits ``written``, if given, both within ``timeout`` seconds (``written``
        is not awaited when the queue could not be written in time)."""
        tg.start_soon(self._writer, name=self._name)
        self._running = True
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(timeout):
                await self.flush()
                if written is not None:
                    await written()
            self._running = False

    async def _writer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            batch, self.queue = self.queue, []
            self._taken += 1
            await self._write(batch)
            self._done = self._taken
            self._progress.set()
            self._progress = anyio.Event()
