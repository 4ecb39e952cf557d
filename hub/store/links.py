"""Share links kept in the hub's durable store: ``StoredLinks``, a ``LinkStore`` for the gate.

Theory of operation
-------------------
The gate reads links on the event loop, synchronously (``hub.access.links.LinkStore``):
``StoredLinks`` answers from a local copy of every link, loaded when it starts. A change
made here (``add``, ``revoke``) is applied to the copy at once and queued; the writer task
writes the queue to the store, retrying while the store fails, and ``flush`` returns once
everything queued before it is written: ``_hub/share/create`` and ``_hub/share/revoke``
answer only then, so a link handed out is in the store, and a revocation answered survives
a crash.

An admission by a link is counted in the store itself (``use``: ``Store.use_link``, one
transaction on SQLite, one Lua script on Redis), which refuses a link revoked or used up as
it counts: ``maxUses`` holds across every node sharing the store, and a link revoked on any
node is refused by every node from the moment the revocation is stored, whatever the local
copy says. While the store cannot be reached, links are refused (503): fail closed.

With several nodes (a shared store), every change of a link is also an entry of the store's
stream of link changes, which a follower task reads with one blocking read: the local copy
learns of links created, revoked and used on other nodes within a round trip, and a link
revoked elsewhere closes the connections it admitted here (``on_revoked``). Each change
carries its number; a jump (the stream was trimmed past what this node read, or the read
failed) makes the node reload every link. Changes merge monotonically: a revocation is never
undone, a use count never goes down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, replace
from typing import Any, cast

import anyio

from hub.access.links import ShareLink
from hub.access.principal import Refusal
from hub.store.base import SharedStore, Store

log = logging.getLogger("hub.store")

FOLLOW_BLOCK = 1.0
"""Seconds one read of the link changes waits before it is made again."""
RETRY = 0.5
"""Seconds before a failed read of the link changes is tried again."""
RETRY_MAX = 2.0
"""The longest pause between two attempts at a failed write (it doubles from 50 ms)."""
CLOSE_TIMEOUT = 5.0
"""How long stopping waits for the queued changes to be written."""


def _link(record: dict[str, Any]) -> ShareLink:
    return ShareLink(
        link_id=str(record["link_id"]),
        session_id=str(record["session_id"]),
        role=str(record["role"]),
        created_by=str(record["created_by"]),
        created_at=float(record["created_at"]),
        expires_at=float(record["expires_at"]),
        label=str(record.get("label") or ""),
        max_uses=None if record.get("max_uses") is None else int(record["max_uses"]),
        uses=int(record.get("uses") or 0),
        revoked_at=None if record.get("revoked_at") is None else float(record["revoked_at"]),
        revoked_by=None if record.get("revoked_by") is None else str(record["revoked_by"]),
    )


class StoredLinks:
    """See the module docstring; enter ``running()`` inside the store's own."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.links: dict[str, ShareLink] = {}
        self.on_revoked: Callable[[str], object] | None = None
        """Called with a link id when the copy learns it was revoked on another node."""
        self._queue: list[ShareLink] = []
        self._wake = anyio.Event()
        self._progress = anyio.Event()
        self._taken = 0
        self._done = 0
        self._running = False
        self.healthy = True
        """Whether the last write went through."""

    # -- the LinkStore protocol --------------------------------------------------------------

    def add(self, link: ShareLink) -> None:
        self.links[link.link_id] = link
        self._enqueue(link)

    def get(self, link_id: str) -> ShareLink | None:
        return self.links.get(link_id)

    def for_session(self, session_id: str) -> list[ShareLink]:
        return sorted(
            (link for link in self.links.values() if link.session_id == session_id),
            key=lambda link: link.created_at,
        )

    def revoke(self, link_id: str, by: str) -> ShareLink | None:
        link = self.links.get(link_id)
        if link is None or link.revoked:
            return link
        link = replace(link, revoked_at=time.time(), revoked_by=by)
        self.links[link_id] = link
        self._enqueue(link)
        return link

    async def use(self, link_id: str) -> ShareLink:
        try:
            status, record = await self.store.use_link(link_id)
        except Exception as exc:  # the store's and its client's errors alike
            log.warning("! share link %s: its use cannot be counted: %s", link_id, exc)
            raise Refusal(
                "unavailable", "share links cannot be checked right now; try again shortly", 503
            ) from None
        if record is not None:
            self._merge(record)
        if status == "ok" and record is not None:
            return self.links[link_id]
        if status == "used_up":
            raise Refusal("used_up", "this link has been used as many times as allowed")
        raise Refusal("revoked", "this link was revoked")

    async def fetch(self, link_id: str) -> ShareLink | None:
        try:
            record = await self.store.link(link_id)
        except Exception as exc:
            log.warning("! share link %s: cannot be read: %s", link_id, exc)
            known = self.links.get(link_id)
            if known is None:
                # Unknown here and the store cannot say: unavailable, not revoked.
                raise Refusal(
                    "unavailable", "share links cannot be checked right now; try again shortly", 503
                ) from None
            return known
        if record is not None:
            self._merge(record)
        return self.links.get(link_id)

    async def flush(self) -> None:
        target = self._taken + 1 if self._queue else self._taken
        while self._done < target:
            if not self._running:
                raise RuntimeError("the share links are not being written")
            await self._progress.wait()

    # -- running -----------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[StoredLinks]:
        """Load every link, then write changes (and follow other nodes') until the block
        ends; leaving it writes what is queued (for up to ``CLOSE_TIMEOUT``)."""
        shared = cast(SharedStore, self.store) if self.store.shared else None
        mark = await shared.link_mark() if shared is not None else None
        for record in await self.store.links():
            self._merge(record)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._writer, name="share links writer")
            if shared is not None and mark is not None:
                tg.start_soon(self._follow, shared, *mark, name="share links follower")
            self._running = True
            try:
                yield self
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                    await self.flush()
                self._running = False
                tg.cancel_scope.cancel()

    def _enqueue(self, link: ShareLink) -> None:
        self._queue.append(link)
        self._wake.set()

    async def _writer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            batch, self._queue = self._queue, []
            self._taken += 1
            for link in batch:
                await self._write(link)
            self._done = self._taken
            self._progress.set()
            self._progress = anyio.Event()

    async def _write(self, link: ShareLink) -> None:
        pause = 0.05
        while True:
            try:
                if link.revoked:
                    assert link.revoked_at is not None
                    stored = await self.store.revoke_link(
                        link.link_id, link.revoked_at, link.revoked_by or ""
                    )
                    if stored is None:  # revoked before its creation was written: both
                        await self.store.add_link(asdict(link))
                    else:
                        self._merge(stored)
                else:
                    await self.store.add_link(asdict(link))
            except Exception as exc:
                if self.healthy:
                    log.warning(
                        "! share link %s: writing it failed, retrying: %s", link.link_id, exc
                    )
                self.healthy = False
                await anyio.sleep(pause)
                pause = min(pause * 2, RETRY_MAX)
                continue
            if not self.healthy:
                log.warning("= share links: writing again")
            self.healthy = True
            return

    async def _follow(self, store: SharedStore, after: str, number: int | None) -> None:
        failing = False
        reload = False
        while True:
            try:
                if reload:
                    after, number = await store.link_mark()
                    for record in await store.links():
                        self._merge(record)
                    reload = False
                after, changes = await store.link_changes(after, FOLLOW_BLOCK)
            except Exception as exc:
                if not failing:
                    log.warning("! share links: following other nodes' changes failed: %s", exc)
                failing = reload = True
                await anyio.sleep(RETRY)
                continue
            if failing:
                log.warning("= share links: following other nodes' changes again")
                failing = False
            for n, record in changes:
                if number is not None and n != number + 1:
                    log.warning("! share links: %s changes were missed, reloading", n - number - 1)
                    reload = True
                number = n
                self._merge(record)

    def _merge(self, record: dict[str, Any]) -> None:
        """Take a stored record into the copy: a revocation stays, the use count only grows;
        a link newly known revoked closes the connections it admitted here."""
        try:
            incoming = _link(record)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("! share links: a damaged record, skipped: %s", exc)
            return
        known = self.links.get(incoming.link_id)
        if known is None:
            self.links[incoming.link_id] = incoming
            merged = incoming
        else:
            merged = replace(
                known,
                uses=max(known.uses, incoming.uses),
                revoked_at=known.revoked_at if known.revoked else incoming.revoked_at,
                revoked_by=known.revoked_by if known.revoked else incoming.revoked_by,
            )
            self.links[incoming.link_id] = merged
        newly = merged.revoked and not (known is not None and known.revoked)
        if newly and self.on_revoked is not None:
            self.on_revoked(merged.link_id)


__all__ = ["StoredLinks"]
