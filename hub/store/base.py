"""The store interface the sessions layer talks to, and the records it keeps.

A store keeps, per session: the directory record (``SessionRecord``: agent, cwd, the agent's
own session id, policies, creator), the ordered event log (``hub.store.log.EventLog``: seqs
allocated by the log the store hands out, epochs, a bounded tail) and the latest compacted
snapshot with the seq it covers (``Snapshot``). Three implementations share this contract,
chosen by one setting (``docs/configuration.md``, ``store``):

* ``memory`` (``hub.store.memory``): the in-process log, nothing survives the process;
* ``sqlite:///PATH`` (``hub.store.sqlite``): one durable node;
* ``redis://HOST:PORT/DB`` (``hub.store.redis``): durable across nodes.

Durability is write-behind for the durable stores: the live log (memory) is what clients are
served from; each appended event is queued and written in batches off the event loop's hot
path. The cursor invariant across restarts is kept by epochs, not by waiting for the disk:
a log that was not closed cleanly is continued under a new epoch that remembers how far the
old one is known to be the same (``EventLog.continue_as``). ``docs/design/store.md`` has the
trade-off and what a ``kill -9`` can lose per store.

A store also keeps the hub's share links (their revocations and use counts, checked and
counted in one step) and its audit trail: ``hub.store.links`` and ``hub.store.audit``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from hub.store.log import EpochT, EventLog, Row


class StoreError(Exception):
    """The store cannot do what was asked (unreachable, damaged, misconfigured)."""


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session's entry in the directory: what it takes to bring the session back.

    ``mcp_servers`` are the v2 entries the session was created with (an agent resume needs
    them again); they may name commands and environment values, which is why a store's
    files and keys are the operator's to protect (``docs/deployment.md``). ``status`` is
    ``"open"`` or ``"lost"`` (the agent could not take the session back).
    """

    session_id: str
    agent: str
    cwd: str
    agent_session_id: str
    prompt_policy: str
    permission_policy: str
    creator: str | None = None
    created_at: str = ""
    mcp_servers: tuple[Mapping[str, Any], ...] = ()
    status: str = "open"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["mcp_servers"] = [dict(s) for s in self.mcp_servers]
        return data

    @classmethod
    def from_json(cls, data: Any) -> SessionRecord:
        """The record stored as ``to_json``; ``StoreError`` when it is not one."""
        if not isinstance(data, dict):
            raise StoreError("a stored session record is not an object")
        try:
            servers = data.get("mcp_servers") or []
            return cls(
                session_id=str(data["session_id"]),
                agent=str(data["agent"]),
                cwd=str(data["cwd"]),
                agent_session_id=str(data["agent_session_id"]),
                prompt_policy=str(data["prompt_policy"]),
                permission_policy=str(data["permission_policy"]),
                creator=None if data.get("creator") is None else str(data["creator"]),
                created_at=str(data.get("created_at", "")),
                mcp_servers=tuple(dict(s) for s in servers if isinstance(s, dict)),
                status=str(data.get("status", "open")),
            )
        except KeyError as exc:
            raise StoreError(f"a stored session record lacks {exc.args[0]!r}") from None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The compacted state of a session as of event ``seq`` (of epoch ``epoch``): folding
    ``updates`` and then the events after ``seq`` rebuilds the session's state."""

    seq: int
    epoch: EpochT
    updates: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class Restored:
    """A session read back from a store.

    ``log`` is live and registered with the store (appends continue after its last seq).
    ``updates`` fold, in order, into the session's state as of ``log.last_seq``: the latest
    snapshot's updates, then every stored event after it. ``clean`` says whether the log was
    closed cleanly; when it was not, ``log`` continues under a new epoch (its ``lineage``
    names the old one up to the last stored seq).
    """

    record: SessionRecord
    log: EventLog
    updates: list[dict[str, Any]]
    clean: bool


class Store(Protocol):
    """Where sessions are kept; see the module docstring.

    Every method may raise ``StoreError``. ``open_log`` and ``snapshot`` are synchronous and
    cheap (they never wait for I/O): they run on the fan-out's path.
    """

    kind: str
    """``"memory"``, ``"sqlite"`` or ``"redis"``."""
    durable: bool
    """Whether sessions survive the process."""

    def running(self) -> AbstractAsyncContextManager[Any]:
        """Connect (creating the schema) and run the writer for the duration of the block;
        ``StoreError`` when the store is unusable. Leaving the block writes everything
        queued, marks the open logs closed cleanly and disconnects."""
        ...

    @property
    def healthy(self) -> bool:
        """Whether writes are going through (``False`` while the backend is unreachable)."""
        ...

    @property
    def backlog(self) -> int:
        """Events appended and not yet written (0 for a store that writes nothing)."""
        ...

    write_failures: int
    """Write attempts that failed (each is retried, nothing is dropped): the metrics'
    ``acp_hub_store_write_failures_total``."""

    def open_log(self, session_id: str, *, max_events: int, max_bytes: int) -> EventLog:
        """A new, empty log for the new session ``session_id`` (a fresh epoch)."""
        ...

    def snapshot(self, log: EventLog, updates: list[dict[str, Any]]) -> None:
        """Keep ``updates`` (a compaction of the state as of ``log.last_seq``) as the
        session's snapshot, written after the events before it."""
        ...

    async def flush(self) -> None:
        """Return once every event appended and snapshot taken before the call is written."""
        ...

    async def save_record(self, record: SessionRecord) -> None:
        """Create or replace the directory entry of ``record.session_id``."""
        ...

    async def records(self) -> list[SessionRecord]:
        """Every session in the directory."""
        ...

    async def remove(self, session_id: str) -> None:
        """Forget a session: its record, log and snapshot."""
        ...

    async def read_after(self, session_id: str, after: int) -> list[Row] | None:
        """The stored events with ``seq > after``, in order; ``None`` when some of them are
        no longer retained (or the session is unknown)."""
        ...

    async def latest_snapshot(self, session_id: str) -> Snapshot | None:
        """The session's latest stored snapshot."""
        ...

    async def restore(self, session_id: str, *, max_events: int, max_bytes: int) -> Restored | None:
        """Bring a stored session back (``None`` when the store does not hold it)."""
        ...

    # -- several nodes (a shared store: Redis) ------------------------------------------------

    shared: bool
    """Whether several hub nodes can share this store (then sessions have owners)."""
    reads_failing: bool
    """Set while this node's reads of a shared store fail (``healthy`` is then ``False``)."""
    node: str
    """This store instance's token: the node's name as owner and writer."""

    async def read_session(
        self, session_id: str, *, max_events: int, max_bytes: int
    ) -> Restored | None:
        """A stored session as it is now, for a node that does not own it: its ``log`` is a
        plain ``EventLog`` (nothing is written, nothing taken over)."""
        ...

    async def claim(self, session_id: str, ttl: float) -> bool:
        """Become (or stay) the owner of ``session_id`` for ``ttl`` seconds; ``False`` when
        another node holds it. A store that is not shared always grants it."""
        ...

    async def renew(self, session_ids: list[str], ttl: float) -> list[str]:
        """Extend this node's ownership of ``session_ids``; the ids it no longer owns."""
        ...

    async def release(self, session_ids: list[str]) -> None:
        """Give up the ownership of ``session_ids`` (a clean shutdown)."""
        ...

    async def owner(self, session_id: str) -> str | None:
        """The node that owns ``session_id`` now, if any."""
        ...

    # -- share links and the audit trail (``hub.store.links``, ``hub.store.audit``) -----------

    async def links(self) -> list[dict[str, Any]]:
        """Every stored share link, as a record (the fields of ``hub.access.links.ShareLink``);
        links expired more than ``LINK_KEEP`` seconds ago are dropped."""
        ...

    async def link(self, link_id: str) -> dict[str, Any] | None:
        """The stored record of one share link."""
        ...

    async def add_link(self, record: dict[str, Any]) -> None:
        """Store a new share link (a link already stored is left as it is)."""
        ...

    async def revoke_link(self, link_id: str, at: float, by: str) -> dict[str, Any] | None:
        """Mark a link revoked (the first revocation stays); the record as stored after, or
        ``None`` when the link is unknown."""
        ...

    async def use_link(self, link_id: str) -> tuple[str, dict[str, Any] | None]:
        """Count one admission by a link unless it is revoked or used up, atomically (across
        every node sharing the store): ``("ok", record)`` counted, ``("revoked", record)``,
        ``("used_up", record)`` not counted, ``("unknown", None)``."""
        ...

    async def append_audit(self, entries: list[dict[str, Any]], keep: int) -> None:
        """Append audit entries, keeping the newest ``keep`` (about, on Redis)."""
        ...

    async def read_audit(self, before: str | None, limit: int) -> list[tuple[str, dict[str, Any]]]:
        """Up to ``limit`` audit entries older than the entry ``before`` (``None``: the newest),
        newest first, each with its id; ``ValueError`` when ``before`` is not an entry id."""
        ...


LINK_KEEP = 7 * 86400.0
"""Seconds a share link's record is kept after the link expired (a later use is told it
expired; then the record goes)."""


def link_status(record: dict[str, Any]) -> str:
    """``"revoked"``, ``"used_up"`` or ``"ok"``: whether a stored link may admit once more."""
    if record.get("revoked_at") is not None:
        return "revoked"
    max_uses = record.get("max_uses")
    if max_uses is not None and int(record.get("uses") or 0) >= int(max_uses):
        return "used_up"
    return "ok"


def audit_number(entry_id: str) -> int:
    """The number an audit entry id of the memory and SQLite stores is; ``ValueError``."""
    if not (entry_id.isascii() and entry_id.isdigit() and len(entry_id) <= 18):
        raise ValueError("not an audit entry id")
    return int(entry_id)


class SoleOwner:
    """Ownership in a store no other node shares: this node owns every session it holds.

    The memory and SQLite stores take these as they are; the Redis store overrides them."""

    node: str
    _logs: Mapping[str, EventLog]

    async def claim(self, session_id: str, ttl: float) -> bool:
        return True

    async def renew(self, session_ids: list[str], ttl: float) -> list[str]:
        return []

    async def release(self, session_ids: list[str]) -> None:
        return None

    async def owner(self, session_id: str) -> str | None:
        return self.node if session_id in self._logs else None


class SharedStore(Store, Protocol):
    """A store several nodes share (Redis): besides ``Store``, the streams other nodes follow,
    each node's inbox for the requests forwarded to it, and where each Streamable HTTP
    connection lives (``hub.server.placement``)."""

    async def owners(self, session_ids: list[str]) -> dict[str, str | None]:
        """The owner of each of ``session_ids`` now."""
        ...

    async def heartbeat(self, ttl: float) -> None:
        """Say this node is alive for ``ttl`` seconds."""
        ...

    async def claim_from(self, session_ids: list[str], node: str, ttl: float) -> list[str]:
        """Own, for ``ttl`` seconds, those of ``session_ids`` that ``node`` (whose heartbeat
        stopped) still owns; the ones now owned here."""
        ...

    async def alive(self, nodes: list[str]) -> set[str]:
        """Which of ``nodes`` are alive."""
        ...

    async def follow(self, positions: dict[str, int], block: float) -> dict[str, list[Row]]:
        """The stored events after ``positions[session_id]``, waiting up to ``block`` s."""
        ...

    async def send(self, node: str, message: dict[str, Any]) -> None:
        """Put ``message`` in the inbox of ``node``."""
        ...

    async def receive(self, after: str, block: float) -> tuple[str, list[dict[str, Any]]]:
        """This node's inbox after entry ``after``, waiting up to ``block`` s."""
        ...

    async def link_mark(self) -> tuple[str, int | None]:
        """Where the stream of share-link changes is now: the id to read after, and the
        number of the last change (``None`` before the first)."""
        ...

    async def link_changes(
        self, after: str, block: float
    ) -> tuple[str, list[tuple[int, dict[str, Any]]]]:
        """The share-link changes after entry ``after``, waiting up to ``block`` s: each with
        its number (one more than the previous change's; a jump means some were trimmed) and
        the link's record as the change left it; the entry id to read after next time."""
        ...

    async def place_connections(self, places: dict[str, bytes], ttl: float) -> None:
        """Record, or renew, ``places`` (connection id -> an opaque record) for ``ttl`` s."""
        ...

    async def connection_place(self, connection_id: str) -> bytes | None:
        """The record of ``connection_id``; ``None`` once dropped or expired."""
        ...

    async def drop_connections(self, connection_ids: list[str]) -> None:
        """Forget the records of ``connection_ids``."""
        ...


__all__ = [
    "LINK_KEEP",
    "Restored",
    "SessionRecord",
    "SharedStore",
    "Snapshot",
    "Store",
    "StoreError",
    "audit_number",
    "link_status",
]
