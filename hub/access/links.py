"""Share links: tokens the hub minted for one session, which an owner can list and revoke.

A link is a hub token whose ``lnk`` claim (and ``jti``) is the link's id; the record here is
what makes it revocable: a token whose link is unknown or revoked is refused, whatever its
signature says. ``LinkStore`` is the interface. ``FileLinkStore`` keeps the records in one
JSON file (``links.json`` next to the hub's key, mode 0600, replaced atomically on every
change), so links and revocations survive a restart of a hub on the memory store; a hub on a
durable store keeps them there (``hub.store.links.StoredLinks``), shared by its nodes. The
token itself is never stored.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from hub.access.keys import write_private
from hub.access.principal import Refusal

log = logging.getLogger("hub.access")


@dataclass(frozen=True, slots=True)
class ShareLink:
    """One share link. Times are Unix seconds; ``uses`` counts admitted connections."""

    link_id: str
    session_id: str
    role: str
    created_by: str
    created_at: float
    expires_at: float
    label: str = ""
    max_uses: int | None = None
    uses: int = 0
    revoked_at: float | None = None
    revoked_by: str | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.expires_at

    def used_up(self) -> bool:
        return self.max_uses is not None and self.uses >= self.max_uses

    def public(self) -> dict[str, Any]:
        """The record as ``_hub/share/list`` shows it (no token: it is shown once)."""
        return {
            "linkId": self.link_id,
            "sessionId": self.session_id,
            "role": self.role,
            "label": self.label,
            "createdBy": self.created_by,
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
            "maxUses": self.max_uses,
            "uses": self.uses,
            "revoked": self.revoked,
            "revokedAt": self.revoked_at,
            "revokedBy": self.revoked_by,
        }


class LinkStore(Protocol):
    """Where share links live. Reads and changes are synchronous and cheap (called on the
    event loop): a store that needs the network answers from a local copy and writes its
    changes behind, and ``flush`` waits for them. Counting a use is asynchronous: where
    several nodes share the links, the count is kept (and checked) where they all see it."""

    def add(self, link: ShareLink) -> None: ...

    def get(self, link_id: str) -> ShareLink | None: ...

    def for_session(self, session_id: str) -> list[ShareLink]: ...

    def revoke(self, link_id: str, by: str) -> ShareLink | None:
        """Mark the link revoked (idempotent); ``None`` when it is unknown."""
        ...

    async def use(self, link_id: str) -> ShareLink:
        """Count one admission and return the link as counted; ``Refusal`` (``revoked``,
        ``used_up``; ``unavailable`` when the count cannot be kept) instead when the link
        may not admit anyone, checked and counted atomically."""
        ...

    async def fetch(self, link_id: str) -> ShareLink | None:
        """The link as the store holds it now (one minted on another node a moment ago);
        ``Refusal`` (``unavailable``, 503) when the store cannot be asked: an unknown link
        is not a revoked one while the store is down."""
        ...

    async def flush(self) -> None:
        """Return once every change made before the call is durable (and seen by every
        node that shares the links)."""
        ...


LINK_PRINCIPAL = "link:"
"""The prefix of a share link's principal (``link:ID``), as ``created_by`` records it too."""


def refusal_of(link: ShareLink | None) -> Refusal | None:
    """Why ``link`` (``None``: unknown) may not admit anyone, or ``None`` when it may."""
    if link is None or link.revoked:
        return Refusal("revoked", "this link was revoked")
    if link.used_up():
        return Refusal("used_up", "this link has been used as many times as allowed")
    return None


def parent_of(link: ShareLink) -> str | None:
    """The id of the share link that minted ``link``, or ``None`` when a credential that is
    not a link did. Links no longer mint links (``hub.sessions.arbiter.LINK_METHODS``); the
    records of links minted by links before that stay bound to their parent."""
    if link.created_by.startswith(LINK_PRINCIPAL):
        return link.created_by[len(LINK_PRINCIPAL) :]
    return None


def ancestry(links: LinkStore, link_id: str) -> set[str]:
    """``link_id`` and the links above it: the one that minted it, the one that minted that
    one, ... as far as ``links`` knows them. Cheap for a link no link minted (one lookup)."""
    found = {link_id}
    link = links.get(link_id)
    parent_id = parent_of(link) if link is not None else None
    while parent_id is not None and parent_id not in found:
        found.add(parent_id)
        parent = links.get(parent_id)
        parent_id = parent_of(parent) if parent is not None else None
    return found


def lineage_refusal(links: LinkStore, link: ShareLink, now: float | None = None) -> Refusal | None:
    """Why ``link`` may not admit anyone because of the links above it: one that minted it
    (or minted its parent, ...) is revoked, expired or gone. A link never outlives the link
    that minted it."""
    seen = {link.link_id}
    parent_id = parent_of(link)
    while parent_id is not None and parent_id not in seen:
        seen.add(parent_id)
        parent = links.get(parent_id)
        if parent is None or parent.revoked:
            return Refusal("revoked", "the link that shared this link was revoked")
        if parent.expired(now):
            return Refusal("expired", "the link that shared this link has expired")
        parent_id = parent_of(parent)
    return None


def minted_by(links: LinkStore, link: ShareLink) -> list[ShareLink]:
    """Every link ``link`` minted, and every link those minted, ... (all of its session)."""
    found: list[ShareLink] = []
    parents = {link.link_id}
    candidates = links.for_session(link.session_id)
    grew = True
    while grew:
        grew = False
        for candidate in candidates:
            if candidate.link_id not in parents and parent_of(candidate) in parents:
                found.append(candidate)
                parents.add(candidate.link_id)
                grew = True
    return found


class MemoryLinkStore:
    """A ``LinkStore`` that forgets everything at exit (``auth = "none"``, tests). Its
    ``use`` checks and counts without waiting, so no two admissions interleave."""

    def __init__(self) -> None:
        self.links: dict[str, ShareLink] = {}

    def add(self, link: ShareLink) -> None:
        self.links[link.link_id] = link
        self._changed(link)

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
        self._changed(link)
        return link

    async def use(self, link_id: str) -> ShareLink:
        link = self.links.get(link_id)
        refusal = refusal_of(link)
        if refusal is not None:
            raise refusal
        assert link is not None
        link = replace(link, uses=link.uses + 1)
        self.links[link_id] = link
        if link.max_uses is not None:
            self._changed(link)  # only a bounded link's count must survive a restart
        return link

    async def fetch(self, link_id: str) -> ShareLink | None:
        return self.links.get(link_id)

    async def flush(self) -> None:
        """Nothing to wait for: every change is written before the call that made it ends."""

    def _changed(self, link: ShareLink) -> None:
        """``link`` was added, revoked or used (a bounded one): the place to keep it."""


class FileLinkStore(MemoryLinkStore):
    """A ``LinkStore`` in one JSON file, rewritten atomically (0600) on every change.

    Records of links that expired more than ``keep_expired`` seconds ago are dropped when
    the file is written, so it does not grow without bound."""

    def __init__(self, path: Path, *, keep_expired: float = 7 * 86400) -> None:
        super().__init__()
        self.path = path
        self.keep_expired = keep_expired
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            data = {"links": []}
        except (OSError, ValueError) as exc:
            # A damaged file must not silently re-enable revoked links: refuse to start.
            raise ValueError(f"{path}: cannot read the share links: {exc}") from None
        for entry in data.get("links", []):
            try:
                link = ShareLink(**entry)
            except TypeError as exc:
                raise ValueError(f"{path}: a share link record is damaged: {exc}") from None
            self.links[link.link_id] = link

    def _changed(self, link: ShareLink) -> None:
        horizon = time.time() - self.keep_expired
        self.links = {k: v for k, v in self.links.items() if v.expires_at >= horizon}
        body = {"version": 1, "links": [asdict(link) for link in self.links.values()]}
        write_private(self.path, json.dumps(body, indent=1).encode())
