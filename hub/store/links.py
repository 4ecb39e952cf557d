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
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, replace
from typing import Any, cast

import anyio

from hub.access.links import MemoryLinkStore, ShareLink
from hub.access.principal import Refusal
from hub.store.base import SharedStore, Store
from hub.store.writebehind import Retry, WriteBehind

log = logging.getLogger("hub.store")

FOLLOW_BLOCK = 1.0
"""Seconds one read of the link changes waits before it is made again."""
RETRY = 0.5
"""Seconds before a failed read of the link changes is tried again."""


# A share link's record, field by field as `SessionRecord.from_json` reads a session's.
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


class StoredLinks(MemoryLinkStore):
    """See the module docstring; enter ``running()`` inside the store's own. The local copy
    is a ``MemoryLinkStore``'s; its changes are queued for the store (``_changed``), and
    ``use`` and ``fetch`` ask the store."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self.on_revoked: Callable[[str], object] | None = None
        """Called with a link id when the copy learns it was revoked on another node."""
        self._writes: WriteBehind[ShareLink] = WriteBehind(self._write, "share links writer")
        self._retry = Retry(log, "share links")

    @property
    def healthy(self) -> bool:
        """Whether the last write went through."""
        return self._retry.healthy

    # -- the LinkStore protocol (add, get, for_session, revoke: MemoryLinkStore's) ------------

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
        await self._writes.flush()

    # -- running -----------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[StoredLinks]:
        """Load every link, then write changes (and follow other nodes') until the block
        ends; leaving it writes what is queued (for up to
        ``hub.store.writebehind.CLOSE_TIMEOUT``)."""
        shared = cast(SharedStore, self.store) if self.store.shared else None
        mark = await shared.link_mark() if shared is not None else None
        for record in await self.store.links():
            self._merge(record)
        async with anyio.create_task_group() as tg:
            if shared is not None and mark is not None:
                tg.start_soon(self._follow, shared, *mark, name="share links follower")
            async with self._writes.running(tg):
                yield self
            tg.cancel_scope.cancel()

    def _changed(self, link: ShareLink) -> None:
        # Added or revoked here (a use is counted in the store itself: ``use``).
        self._writes.put(link)

    async def _write(self, batch: list[ShareLink]) -> None:
        for link in batch:
            while True:
                try:
                    await self._write_one(link)
                except Exception as exc:
                    await self._retry.failed(exc)
                    continue
                self._retry.succeeded()
                break

    async def _write_one(self, link: ShareLink) -> None:
        if not link.revoked:
            await self.store.add_link(asdict(link))
            return
        assert link.revoked_at is not None
        stored = await self.store.revoke_link(link.link_id, link.revoked_at, link.revoked_by or "")
        if stored is None:  # revoked before its creation was written: both
            await self.store.add_link(asdict(link))
        else:
            self._merge(stored)

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
