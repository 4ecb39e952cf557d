"""The SQLite store: sessions survive a restart of one node.

One database file (``sqlite:///PATH``, created with its directory, mode 0600) in WAL mode.
Every write runs in the store's own worker thread, one at a time, on one connection: the event
loop never waits for the disk. A batch of the write-behind queue is one transaction, so a crash
leaves each session's log as of some batch, never half of one.

On Linux the worker thread runs at a lower priority than the event loop (``WORKER_NICE``), so
that when the hub's cores are busy the fan-out comes first and the writer takes what is left:
the write-behind absorbs the delay (its batches grow), and no client waits for it. Sharing one
core, a batch's transaction used to take half of the core from the fan-out while it ran: in
the many-sessions benchmark (S2-store) the p99 with SQLite was 127-293 ms against memory's
33-43 in back-to-back runs, and 36-41 ms (1.0-1.1x) with the lower priority.

``synchronous`` is ``NORMAL`` by default: a committed batch survives the death of the process
(``kill -9``) but the last ones may be lost with the machine (power loss); add
``?synchronous=full`` to the URL to fsync every batch (slower commits, bigger batches, the
same event-loop cost). ``docs/design/store.md`` has the figures.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import orjson

from hub.store.base import (
    LINK_KEEP,
    SessionRecord,
    Snapshot,
    StoreError,
    audit_number,
    link_status,
)
from hub.store.codec import pack_v1, unpack_row
from hub.store.durable import DurableStore, Item, LogMeta, WrittenLog, lineage_of
from hub.store.log import Row

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS logs (
    id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, lineage BLOB NOT NULL, writer TEXT NOT NULL,
    clean INTEGER NOT NULL, last_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    session TEXT NOT NULL, seq INTEGER NOT NULL, message_id TEXT, origin TEXT,
    v2 BLOB NOT NULL, v1 BLOB NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    session TEXT PRIMARY KEY, seq INTEGER NOT NULL, epoch INTEGER NOT NULL, updates BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS links (
    id TEXT PRIMARY KEY, record BLOB NOT NULL, expires_at REAL NOT NULL, max_uses INTEGER,
    uses INTEGER NOT NULL DEFAULT 0, revoked_at REAL, revoked_by TEXT);
CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY AUTOINCREMENT, entry BLOB NOT NULL);
"""

SYNCHRONOUS = ("off", "normal", "full", "extra")

WORKER_NICE = 10
"""How much nicer (``nice``, Linux) the store's worker thread is than the rest of the hub: at
10 the scheduler gives the event loop about nine tenths of a core both want."""

log = logging.getLogger("hub.store")


def _lower_priority() -> None:
    """Run the calling thread ``WORKER_NICE`` lower (Linux: a thread's own nice value; a
    refusal is logged and ignored). Elsewhere ``setpriority`` would take a thread id for a
    process id, so nothing is done."""
    if sys.platform != "linux":  # pragma: no cover - the hub is tested on Linux
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + WORKER_NICE)
    except OSError as exc:  # pragma: no cover - raising one's own nice value is always allowed
        log.warning("! sqlite store: the writer keeps the hub's priority: %s", exc)


class SqliteStore(DurableStore):
    """See the module docstring and ``hub.store.base.Store``."""

    kind = "sqlite"

    def __init__(self, path: str, *, synchronous: str = "normal") -> None:
        super().__init__()
        if synchronous.lower() not in SYNCHRONOUS:
            raise StoreError(f"sqlite synchronous must be one of {', '.join(SYNCHRONOUS)}")
        self.path = path
        self.synchronous = synchronous.lower()
        self._db: sqlite3.Connection | None = None
        self._worker: ThreadPoolExecutor | None = None

    # -- the connection ----------------------------------------------------------------------

    async def _run(self, fn: Any, *args: Any) -> Any:
        """``fn(db, *args)`` in the worker thread, one call at a time."""
        db = self._db
        if db is None:
            raise StoreError("the sqlite store is not open")
        return await self._in_worker(fn, db, *args)

    async def _in_worker(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in the worker thread. A call, once started, is waited for even if the
        caller is cancelled meanwhile (the cancellation follows), as ``anyio.to_thread`` does:
        a transaction is never left running behind a caller that went away."""
        worker = self._worker
        if worker is None:
            raise StoreError("the sqlite store is not open")
        future = worker.submit(fn, *args)
        with anyio.CancelScope(shield=True):
            result = await asyncio.wrap_future(future)
        await anyio.lowlevel.checkpoint_if_cancelled()
        return result

    async def _connect(self) -> None:
        def connect() -> sqlite3.Connection:
            path = Path(self.path)
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                # The file holds agents' MCP server settings and everything sessions said.
                fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
                os.close(fd)
            db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
            db.executescript(SCHEMA)
            return db

        self._worker = ThreadPoolExecutor(
            1, thread_name_prefix="acp-hub-sqlite", initializer=_lower_priority
        )
        try:
            self._db = await self._in_worker(connect)
        except (sqlite3.Error, OSError) as exc:
            self._stop_worker()
            raise StoreError(f"cannot open the sqlite store {self.path}: {exc}") from None

    async def _disconnect(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await self._in_worker(db.close)
        self._stop_worker()

    def _stop_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=False)  # idle: every call into it was awaited

    # -- writes ------------------------------------------------------------------------------

    async def _write(self, items: list[Item]) -> list[str]:
        return list(await self._run(_write_batch, self.node, items))

    async def _take_over(self, session_id: str, log: WrittenLog) -> None:
        def take(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.execute(
                    "UPDATE logs SET writer = ?, epoch = ?, lineage = ?, clean = 0 WHERE id = ?",
                    (self.node, log.epoch, _lineage(log.lineage), session_id),
                )

        await self._run(take)

    async def _mark_clean(self, logs: list[WrittenLog]) -> None:
        def mark(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.executemany(
                    "UPDATE logs SET clean = 1, writer = '' WHERE id = ? AND writer = ?",
                    [(lg.session_id, self.node) for lg in logs],
                )

        await self._run(mark)

    async def save_record(self, record: SessionRecord) -> None:
        data = orjson.dumps(record.to_json())

        def save(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.execute(
                    "INSERT INTO sessions (id, record) VALUES (?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET record = excluded.record",
                    (record.session_id, data),
                )

        await self._run(save)

    async def remove(self, session_id: str) -> None:
        self.forget(session_id)

        def remove(db: sqlite3.Connection) -> None:
            with _transaction(db):
                for table, column in (
                    ("sessions", "id"),
                    ("logs", "id"),
                    ("events", "session"),
                    ("snapshots", "session"),
                ):
                    db.execute(f"DELETE FROM {table} WHERE {column} = ?", (session_id,))

        await self._run(remove)

    # -- reads -------------------------------------------------------------------------------

    async def records(self) -> list[SessionRecord]:
        def read(db: sqlite3.Connection) -> list[Any]:
            return db.execute("SELECT record FROM sessions ORDER BY rowid").fetchall()

        return [SessionRecord.from_json(orjson.loads(r[0])) for r in await self._run(read)]

    async def read_after(self, session_id: str, after: int) -> list[Row] | None:
        def read(db: sqlite3.Connection) -> tuple[Any, list[Any]]:
            meta = db.execute("SELECT last_seq FROM logs WHERE id = ?", (session_id,)).fetchone()
            rows = db.execute(
                "SELECT seq, message_id, origin, v2, v1 FROM events "
                "WHERE session = ? AND seq > ? ORDER BY seq",
                (session_id, after),
            ).fetchall()
            return meta, rows

        meta, rows = await self._run(read)
        if meta is None or after < 0 or after > meta[0]:
            return None
        if (rows and rows[0][0] != after + 1) or (not rows and after != meta[0]):
            return None
        return [unpack_row(r[0], r[1], r[2], bytes(r[3]), bytes(r[4])) for r in rows]

    async def latest_snapshot(self, session_id: str) -> Snapshot | None:
        def read(db: sqlite3.Connection) -> Any:
            return db.execute(
                "SELECT seq, epoch, updates FROM snapshots WHERE session = ?", (session_id,)
            ).fetchone()

        row = await self._run(read)
        return None if row is None else Snapshot(row[0], row[1], orjson.loads(row[2]))

    async def _load(
        self, session_id: str
    ) -> tuple[SessionRecord, LogMeta, Snapshot | None, list[Row]] | None:
        # One query a table: the record, the log's metadata, the snapshot, the events.
        def read(db: sqlite3.Connection) -> tuple[Any, Any, Any, list[Any]]:
            record = db.execute(
                "SELECT record FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            meta = db.execute(
                "SELECT epoch, lineage, writer, clean, last_seq FROM logs WHERE id = ?",
                (session_id,),
            ).fetchone()
            snap = db.execute(
                "SELECT seq, epoch, updates FROM snapshots WHERE session = ?", (session_id,)
            ).fetchone()
            rows = db.execute(
                "SELECT seq, message_id, origin, v2, v1 FROM events WHERE session = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
            return record, meta, snap, rows

        record, meta, snap, rows = await self._run(read)
        if record is None or meta is None:
            return None
        try:
            log_meta = LogMeta(
                int(meta[0]),
                lineage_of(orjson.loads(meta[1])),
                str(meta[2]),
                bool(meta[3]),
                int(meta[4]),
            )
            snapshot = None if snap is None else Snapshot(snap[0], snap[1], orjson.loads(snap[2]))
            events = [unpack_row(r[0], r[1], r[2], bytes(r[3]), bytes(r[4])) for r in rows]
        except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
            raise StoreError(f"session {session_id}: the stored log is damaged: {exc}") from None
        return SessionRecord.from_json(orjson.loads(record[0])), log_meta, snapshot, events

    # -- share links and the audit trail -------------------------------------------------------
    # Each call is its own transaction, committed before it returns: a revocation or a counted
    # use survives the process (``synchronous`` says whether it survives the machine).

    async def links(self) -> list[dict[str, Any]]:
        def read(db: sqlite3.Connection) -> list[Any]:
            with _transaction(db):
                db.execute("DELETE FROM links WHERE expires_at < ?", (time.time() - LINK_KEEP,))
                return db.execute(f"SELECT {_LINK} FROM links ORDER BY rowid").fetchall()

        return [_link_record(row) for row in await self._run(read)]

    async def link(self, link_id: str) -> dict[str, Any] | None:
        def read(db: sqlite3.Connection) -> Any:
            return db.execute(f"SELECT {_LINK} FROM links WHERE id = ?", (link_id,)).fetchone()

        row = await self._run(read)
        return None if row is None else _link_record(row)

    async def add_link(self, record: dict[str, Any]) -> None:
        def add(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.execute(
                    "INSERT INTO links (id, record, expires_at, max_uses, uses, revoked_at, "
                    "revoked_by) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                    (
                        record["link_id"],
                        orjson.dumps(record),
                        float(record["expires_at"]),
                        record.get("max_uses"),
                        int(record.get("uses") or 0),
                        record.get("revoked_at"),
                        record.get("revoked_by"),
                    ),
                )

        await self._run(add)

    async def revoke_link(self, link_id: str, at: float, by: str) -> dict[str, Any] | None:
        def revoke(db: sqlite3.Connection) -> Any:
            with _transaction(db):
                db.execute(
                    "UPDATE links SET revoked_at = ?, revoked_by = ? "
                    "WHERE id = ? AND revoked_at IS NULL",
                    (at, by, link_id),
                )
                return db.execute(f"SELECT {_LINK} FROM links WHERE id = ?", (link_id,)).fetchone()

        row = await self._run(revoke)
        return None if row is None else _link_record(row)

    async def use_link(self, link_id: str) -> tuple[str, dict[str, Any] | None]:
        def use(db: sqlite3.Connection) -> tuple[str, Any]:
            with _transaction(db):
                row = db.execute(f"SELECT {_LINK} FROM links WHERE id = ?", (link_id,)).fetchone()
                if row is None:
                    return "unknown", None
                status = link_status(_link_record(row))
                if status == "ok":
                    db.execute("UPDATE links SET uses = uses + 1 WHERE id = ?", (link_id,))
                    row = db.execute(
                        f"SELECT {_LINK} FROM links WHERE id = ?", (link_id,)
                    ).fetchone()
                return status, row

        status, row = await self._run(use)
        return status, None if row is None else _link_record(row)

    async def append_audit(self, entries: list[dict[str, Any]], keep: int) -> None:
        def append(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.executemany(
                    "INSERT INTO audit (entry) VALUES (?)",
                    [(orjson.dumps(entry, default=str),) for entry in entries],
                )
                db.execute("DELETE FROM audit WHERE id <= (SELECT max(id) FROM audit) - ?", (keep,))

        await self._run(append)

    async def read_audit(self, before: str | None, limit: int) -> list[tuple[str, dict[str, Any]]]:
        bound = None if before is None else audit_number(before)

        def read(db: sqlite3.Connection) -> list[Any]:
            if bound is None:
                sql = "SELECT id, entry FROM audit ORDER BY id DESC LIMIT ?"
                return db.execute(sql, (limit,)).fetchall()
            sql = "SELECT id, entry FROM audit WHERE id < ? ORDER BY id DESC LIMIT ?"
            return db.execute(sql, (bound, limit)).fetchall()

        return [(str(row[0]), orjson.loads(row[1])) for row in await self._run(read)]


_LINK = "record, uses, revoked_at, revoked_by"


def _link_record(row: Any) -> dict[str, Any]:
    """A stored link: its record as created, with the changing columns."""
    record: dict[str, Any] = orjson.loads(row[0])
    record.update(uses=int(row[1]), revoked_at=row[2], revoked_by=row[3])
    return record


class _transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.db.execute("ROLLBACK" if kind is not None else "COMMIT")


def _lineage(lineage: dict[int, int]) -> bytes:
    return orjson.dumps({str(k): v for k, v in lineage.items()})


def _write_batch(db: sqlite3.Connection, node: str, items: list[Item]) -> list[str]:
    """One transaction for the whole batch (runs in the worker thread); see ``_write``."""
    refused: list[str] = []
    with _transaction(db):
        for item in items:
            sid = item.session_id
            if item.create:
                exists = db.execute("SELECT 1 FROM logs WHERE id = ?", (sid,)).fetchone()
                if exists is not None:
                    refused.append(sid)
                    continue
                db.execute(
                    "INSERT INTO logs (id, epoch, lineage, writer, clean, last_seq) "
                    "VALUES (?, ?, ?, ?, 0, 0)",
                    (sid, item.epoch, _lineage(item.lineage), node),
                )
            meta = db.execute("SELECT writer, last_seq FROM logs WHERE id = ?", (sid,)).fetchone()
            if meta is None or meta[0] != node or (item.rows and item.rows[0][0] != meta[1] + 1):
                refused.append(sid)
                continue
            if item.rows:
                db.executemany(
                    "INSERT INTO events (session, seq, message_id, origin, v2, v1) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(sid, r[0], r[1], r[5], r[2], pack_v1(r)) for r in item.rows],
                )
            db.execute(
                "UPDATE logs SET epoch = ?, lineage = ?, last_seq = ?, clean = 0 WHERE id = ?",
                (item.epoch, _lineage(item.lineage), item.last_seq, sid),
            )
            if item.snapshot is not None:
                db.execute(
                    "INSERT INTO snapshots (session, seq, epoch, updates) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (session) DO UPDATE SET seq = excluded.seq, "
                    "epoch = excluded.epoch, updates = excluded.updates",
                    (
                        sid,
                        item.snapshot.seq,
                        item.snapshot.epoch,
                        orjson.dumps(item.snapshot.updates),
                    ),
                )
            if item.trim_below > 1:
                db.execute(
                    "DELETE FROM events WHERE session = ? AND seq < ?", (sid, item.trim_below)
                )
    return refused


__all__ = ["SqliteStore"]
