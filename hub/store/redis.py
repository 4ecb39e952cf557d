"""The Redis store: sessions in a Redis every node of the hub can reach.

Keys (``PREFIX`` is ``acp-hub``; the braces put a session's keys in one cluster slot):

* ``acp-hub:sessions`` — a hash, session id -> the JSON ``SessionRecord`` (the directory);
* ``acp-hub:{SID}:log`` — a stream, one entry per event, with the seq as its id (``0-SEQ``)
  and fields ``v2`` (the v2 frame), ``f`` (the v1 frames, ``hub.store.codec``), ``m`` (message
  id) and ``o`` (origin), trimmed (``XTRIM MINID``) to the retained tail but never past the
  snapshot;
* ``acp-hub:{SID}:meta`` — a hash: ``epoch``, ``lineage`` (JSON), ``writer``, ``clean``,
  ``last_seq``;
* ``acp-hub:{SID}:snap`` — the latest snapshot (JSON ``{seq, epoch, updates}``);
* ``acp-hub:{links}:link:ID`` — a hash per share link: ``r`` (its record as created, JSON),
  ``max`` (its ``maxUses``, empty for none), ``uses``, and once revoked ``rat``/``rby``;
  it expires ``LINK_KEEP`` after the link; ``acp-hub:{links}:ids`` — a set of the link ids;
* ``acp-hub:{links}:changes`` — a stream with one entry per change of a link (created,
  revoked, used): its number ``n`` (from the counter ``acp-hub:{links}:n``) and the hash as
  the change left it; every node reads it to keep its copy of the links;
* ``acp-hub:audit`` — a stream, one entry per audit record (field ``e``, JSON), trimmed to
  about ``audit_retained`` entries;
* ``acp-hub:conn:{CID}`` — where a Streamable HTTP connection lives (JSON, with a TTL its node
  renews: ``hub.server.placement``).

A write-behind batch is one Lua script call (``WRITE``, with the other scripts in
``hub.store.redis_scripts``) per ``CHUNK`` events: for each session in it, the script checks
that this node is still the log's writer and that the first seq follows the stored last seq,
then adds the events, updates the metadata, stores the snapshot and trims, atomically, and
answers one result per session. A session whose events it finds already written (a retry
after an answer lost to a timeout) succeeds without writing them again. All calls of a batch
go in one write on one connection (one round trip; ``_script_batch``). A call spans sessions,
so it needs a Redis where one script may touch any key: a single server (with its replicas),
not a Redis Cluster (the braces above keep each session's keys in one slot all the same).
Durability beyond the Redis process is the Redis server's own (``appendonly yes``;
``docs/deployment.md``).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, RedisError, ResponseError

from hub.store.base import LINK_KEEP, SessionRecord, Snapshot, StoreError
from hub.store.codec import pack_v1, unpack_row
from hub.store.durable import DurableStore, Item, LogMeta, WrittenLog, lineage_of
from hub.store.log import Row
from hub.store.redis_connection import PackedConnection
from hub.store.redis_scripts import (
    ADD_LINK,
    CLAIM,
    CLAIM_FROM,
    MARK_CLEAN,
    RELEASE,
    RENEW,
    REVOKE_LINK,
    USE_LINK,
    WRITE,
)

log = logging.getLogger("hub.store")

PREFIX = "acp-hub"
CHUNK = 500
"""Events per script call: a long batch is split so that Redis is never blocked for long."""
TIMEOUT = 5.0
"""Seconds before a Redis command that got no answer fails (a stalled server)."""
POOL_SIZE = 64
"""Connections to Redis per node at most. The blocking reads (the followers of the session
streams, the node inbox and the link changes) hold one each while they wait; every other
command borrows one for a round trip, and waits for a free one when all are busy."""

CHANNEL_LENGTH = 10_000
"""Entries kept in a node's inbox stream (requests forwarded to it and answers to it)."""

LINKS = f"{PREFIX}:{{links}}"
"""The share links' keys (one cluster slot: their scripts touch several)."""
AUDIT = f"{PREFIX}:audit"
LINK_CHANGES = 10_000
"""Entries kept in the stream of link changes (a node that fell further behind reloads)."""
AUDIT_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")


def _link_keys(link_id: str) -> list[str]:
    return [f"{LINKS}:link:{link_id}", f"{LINKS}:changes", f"{LINKS}:n", f"{LINKS}:ids"]


def _fields(flat: list[Any]) -> dict[bytes, bytes]:
    """A hash answered as a flat list (a script's ``HGETALL``) as a dict."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def _link_record(fields: dict[bytes, bytes]) -> dict[str, Any]:
    """A stored link's hash as its record."""
    record: dict[str, Any] = orjson.loads(fields[b"r"])
    revoked_at = fields.get(b"rat")
    record.update(
        uses=int(fields.get(b"uses") or 0),
        revoked_at=float(revoked_at) if revoked_at else None,
        revoked_by=_text(fields.get(b"rby")) if revoked_at else None,
    )
    return record


def _key(session_id: str, part: str) -> str:
    return f"{PREFIX}:{{{session_id}}}:{part}"


def _lineage(lineage: dict[int, int]) -> bytes:
    return orjson.dumps({str(k): v for k, v in lineage.items()})


def _text(value: Any) -> str | None:
    """A stored message id or origin (``""`` stands for none)."""
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text or None


def _row(entry_id: Any, fields: dict[bytes, bytes]) -> Row:
    seq = int((entry_id.decode() if isinstance(entry_id, bytes) else entry_id).split("-")[1])
    return unpack_row(
        seq, _text(fields.get(b"m")), _text(fields.get(b"o")), fields[b"v2"], fields[b"f"]
    )


class RedisStore(DurableStore):
    """See the module docstring and ``hub.store.base.Store``."""

    kind = "redis"
    shared = True

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self._redis: aioredis.Redis | None = None
        self._write_script: Any = None
        self._clean_script: Any = None
        self._claim_script: Any = None
        self._renew_script: Any = None
        self._release_script: Any = None
        self._claim_from_script: Any = None
        self._link_scripts: dict[str, Any] = {}

    @property
    def redis(self) -> aioredis.Redis:
        if self._redis is None:
            raise StoreError("the redis store is not open")
        return self._redis

    async def _connect(self) -> None:
        # A blocking pool: a command waits (up to TIMEOUT) for one of POOL_SIZE connections
        # instead of failing; the client library's default pool refuses the 101st
        # concurrent command ("Too many connections"), as when many clients open sessions
        # at once.
        pool = aioredis.BlockingConnectionPool.from_url(
            self.url,
            connection_class=PackedConnection,
            max_connections=POOL_SIZE,
            timeout=TIMEOUT,
            socket_timeout=TIMEOUT,
            socket_connect_timeout=TIMEOUT,
        )
        client = aioredis.Redis.from_pool(pool)
        try:
            await client.ping()
            cluster = (await client.info("cluster")).get("cluster_enabled")
        except (RedisError, OSError) as exc:
            await client.aclose()
            raise StoreError(f"cannot reach the redis store: {exc}") from None
        if cluster:
            await client.aclose()
            # Refused at start rather than by every write: the write-behind's script spans
            # sessions, which a cluster refuses (CROSSSLOT) whatever the slots' owners.
            raise StoreError(
                "the redis store is a Redis Cluster node: the hub needs one Redis server"
                " (with replicas if you like; its writes span many sessions' keys)"
            )
        self._redis = client
        self._write_script = client.register_script(WRITE)
        self._clean_script = client.register_script(MARK_CLEAN)
        self._claim_script = client.register_script(CLAIM)
        self._renew_script = client.register_script(RENEW)
        self._release_script = client.register_script(RELEASE)
        self._claim_from_script = client.register_script(CLAIM_FROM)
        self._link_scripts = {
            name: client.register_script(script)
            for name, script in (("add", ADD_LINK), ("revoke", REVOKE_LINK), ("use", USE_LINK))
        }

    async def _disconnect(self) -> None:
        client, self._redis = self._redis, None
        if client is not None:
            await client.aclose()

    # -- writes ------------------------------------------------------------------------------

    async def _write(self, items: list[Item]) -> list[str]:
        # Each item in parts of at most CHUNK events, and the parts in calls of at most CHUNK
        # events and CHUNK parts: the first part of an item creates its log, the last one
        # trims it and stores its snapshot. A call's parts run in order, the calls too (one
        # connection), so a long item's parts land in order.
        calls: list[list[str]] = []
        commands: list[tuple[Any, ...]] = []
        sessions: list[str] = []
        keys: list[str] = []
        args: list[Any] = [self.node]
        events = 0

        def send() -> None:
            nonlocal args, keys, sessions, events
            # The command's name as bytes: packed as it is (a str name is split into words,
            # a copy of the whole command: thousands of arguments here).
            commands.append((b"EVALSHA", self._write_script.sha, len(keys), *keys, *args))
            calls.append(sessions)
            sessions, keys, args, events = [], [], [self.node], 0

        for item in items:
            sid = item.session_id
            rows = item.rows
            # A batch item with no rows still writes its metadata (one part, no events).
            starts = range(0, len(rows), CHUNK) if rows else (0,)
            lineage = _lineage(item.lineage)
            base = _key(sid, "")  # the session's keys: base + "meta", "log", "snap"
            for start in starts:
                chunk = rows[start : start + CHUNK]
                if sessions and (events + len(chunk) > CHUNK or len(sessions) >= CHUNK):
                    send()
                last = start + CHUNK >= len(rows)
                snapshot = item.snapshot
                keys += (base + "meta", base + "log", base + "snap")
                args += (
                    "1" if item.create and start == 0 else "0",
                    item.epoch,
                    lineage,
                    chunk[-1][0] if chunk else item.last_seq,
                    item.trim_below if last else 0,
                    orjson.dumps(
                        {"seq": snapshot.seq, "epoch": snapshot.epoch, "updates": snapshot.updates}
                    )
                    if last and snapshot is not None
                    else b"",
                    len(chunk),
                )
                for row in chunk:
                    args += (row[0], row[1] or "", row[5] or "", row[2], pack_v1(row))
                sessions.append(sid)
                events += len(chunk)
        if sessions:
            send()
        replies = await self._script_batch(self._write_script, commands)
        refused: list[str] = []
        for parts, results in zip(calls, replies, strict=True):
            for session_id, result in zip(parts, results, strict=True):
                if result == 1 or session_id in refused:
                    continue
                refused.append(session_id)
                if result == -1:
                    log.warning(
                        "! %s: its stored log is gone from redis (restarted without persistence?)",
                        session_id,
                    )
        return refused

    async def _script_batch(self, script: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
        """The replies of ``commands`` (``EVALSHA`` calls of ``script``), sent in one write on
        one connection of the pool: a pipeline without redis-py's per-command machinery
        (a coroutine per command queued and per reply parsed, with its response callbacks),
        which runs on the event loop that fans events out (``docs/design/store.md``). Every
        reply is read before any error is raised, so the connection stays in step; the first
        error other than ``NOSCRIPT`` is raised (the writer retries the batch, as it did a
        pipeline's). Commands refused with ``NOSCRIPT`` (a Redis that lost its scripts:
        restarted, or flushed) did not run: the script is loaded and they are sent again, the
        others not.
        """
        replies = await self._send_batch(commands)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            await self.redis.script_load(script.script)
            again = await self._send_batch([commands[i] for i in missing])
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    async def _send_batch(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Each command's reply, or the ``ResponseError`` it got; see ``_script_batch``."""
        if not commands:
            return []
        pool: Any = self.redis.connection_pool
        connection = await pool.get_connection()
        try:
            await connection.send_packed_command(connection.pack_commands(commands))
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(await connection.read_response())
                except ResponseError as exc:
                    replies.append(exc)
        except BaseException:
            # Cancelled or cut off with replies still unread: the connection is out of step.
            await connection.disconnect(nowait=True)
            raise
        finally:
            await pool.release(connection)
        return replies

    async def _take_over(self, session_id: str, log: WrittenLog) -> None:
        await self.redis.hset(
            _key(session_id, "meta"),
            mapping={
                "writer": self.node,
                "epoch": log.epoch,
                "lineage": _lineage(log.lineage),
                "clean": 0,
            },
        )

    async def _mark_clean(self, logs: list[WrittenLog]) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            for lg in logs:
                await self._clean_script(
                    keys=[_key(lg.session_id, "meta")], args=[self.node], client=pipe
                )
            await pipe.execute()

    async def save_record(self, record: SessionRecord) -> None:
        await self.redis.hset(
            f"{PREFIX}:sessions", record.session_id, orjson.dumps(record.to_json())
        )

    async def remove(self, session_id: str) -> None:
        self.forget(session_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hdel(f"{PREFIX}:sessions", session_id)
            pipe.delete(*(_key(session_id, part) for part in ("meta", "log", "snap")))
            await pipe.execute()

    # -- reads -------------------------------------------------------------------------------

    async def records(self) -> list[SessionRecord]:
        stored = await self.redis.hgetall(f"{PREFIX}:sessions")
        records = [SessionRecord.from_json(orjson.loads(v)) for v in stored.values()]
        return sorted(records, key=lambda r: (r.created_at, r.session_id))

    async def read_after(self, session_id: str, after: int) -> list[Row] | None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hget(_key(session_id, "meta"), "last_seq")
            pipe.xrange(_key(session_id, "log"), f"0-{max(after, 0) + 1}", "+")
            last, entries = await pipe.execute()
        if last is None or after < 0 or after > int(last):
            return None
        rows = [_row(entry_id, fields) for entry_id, fields in entries]
        if (rows and rows[0][0] != after + 1) or (not rows and after != int(last)):
            return None
        return rows

    async def latest_snapshot(self, session_id: str) -> Snapshot | None:
        raw = await self.redis.get(_key(session_id, "snap"))
        if raw is None:
            return None
        data = orjson.loads(raw)
        return Snapshot(int(data["seq"]), int(data["epoch"]), list(data["updates"]))

    async def _load(
        self, session_id: str
    ) -> tuple[SessionRecord, LogMeta, Snapshot | None, list[Row]] | None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hget(f"{PREFIX}:sessions", session_id)
            pipe.hgetall(_key(session_id, "meta"))
            pipe.get(_key(session_id, "snap"))
            pipe.xrange(_key(session_id, "log"), "-", "+")
            record, meta, snap, entries = await pipe.execute()
        if record is None or not meta:
            return None
        try:
            log_meta = LogMeta(
                int(meta[b"epoch"]),
                lineage_of(orjson.loads(meta[b"lineage"])),
                meta.get(b"writer", b"").decode(),
                meta.get(b"clean") == b"1",
                int(meta[b"last_seq"]),
            )
            snapshot = None
            if snap is not None:
                data = orjson.loads(snap)
                snapshot = Snapshot(int(data["seq"]), int(data["epoch"]), list(data["updates"]))
            rows = [_row(entry_id, fields) for entry_id, fields in entries]
        except (KeyError, ValueError, TypeError, orjson.JSONDecodeError) as exc:
            raise StoreError(f"session {session_id}: the stored log is damaged: {exc}") from None
        return SessionRecord.from_json(orjson.loads(record)), log_meta, snapshot, rows

    # -- several nodes -----------------------------------------------------------------------

    async def claim(self, session_id: str, ttl: float) -> bool:
        result = await self._claim_script(
            keys=[_key(session_id, "owner")], args=[self.node, max(1, int(ttl * 1000))]
        )
        return bool(result == 1)

    async def _on_owners(self, script: Any, session_ids: list[str], *args: Any) -> list[Any]:
        """Run ``script`` with ``args`` on the owner key of each of ``session_ids`` (one round
        trip); the answers, in the same order."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for session_id in session_ids:
                await script(keys=[_key(session_id, "owner")], args=list(args), client=pipe)
            results: list[Any] = await pipe.execute()
        return results

    async def renew(self, session_ids: list[str], ttl: float) -> list[str]:
        if not session_ids:
            return []
        px = max(1, int(ttl * 1000))
        results = await self._on_owners(self._renew_script, session_ids, self.node, px)
        return [sid for sid, ok in zip(session_ids, results, strict=True) if ok != 1]

    async def claim_from(self, session_ids: list[str], node: str, ttl: float) -> list[str]:
        """Take over the sessions of ``session_ids`` that ``node`` still owns (compare and
        set, one round trip): the ones now owned here."""
        if not session_ids:
            return []
        px = max(1, int(ttl * 1000))
        results = await self._on_owners(self._claim_from_script, session_ids, self.node, node, px)
        return [sid for sid, ok in zip(session_ids, results, strict=True) if ok == 1]

    async def release(self, session_ids: list[str]) -> None:
        if session_ids:
            await self._on_owners(self._release_script, session_ids, self.node)

    async def owner(self, session_id: str) -> str | None:
        return _text(await self.redis.get(_key(session_id, "owner")))

    async def owners(self, session_ids: list[str]) -> dict[str, str | None]:
        """The owner of each of ``session_ids`` (one round trip)."""
        if not session_ids:
            return {}
        values = await self.redis.mget([_key(sid, "owner") for sid in session_ids])
        return {sid: _text(v) for sid, v in zip(session_ids, values, strict=True)}

    async def heartbeat(self, ttl: float) -> None:
        """Say this node is alive for ``ttl`` seconds."""
        await self.redis.set(f"{PREFIX}:node:{self.node}:alive", b"1", px=max(1, int(ttl * 1000)))

    async def alive(self, nodes: list[str]) -> set[str]:
        """Which of ``nodes`` said they were alive within their ``ttl``."""
        if not nodes:
            return set()
        values = await self.redis.mget([f"{PREFIX}:node:{n}:alive" for n in nodes])
        return {n for n, v in zip(nodes, values, strict=True) if v is not None}

    async def follow(self, positions: dict[str, int], block: float) -> dict[str, list[Row]]:
        """The events after ``positions[session_id]`` of each session's stream, waiting up
        to ``block`` seconds for the first (one ``XREAD`` for all of them)."""
        if not positions:
            return {}
        streams: dict[Any, Any] = {_key(sid, "log"): f"0-{seq}" for sid, seq in positions.items()}
        answer: Any = await self.redis.xread(streams, count=CHUNK, block=max(1, int(block * 1000)))
        out: dict[str, list[Row]] = {}
        for key, entries in answer or []:
            name = key.decode() if isinstance(key, bytes) else str(key)
            session_id = name[len(PREFIX) + 2 : -len("}:log")]
            out[session_id] = [_row(entry_id, fields) for entry_id, fields in entries]
        return out

    async def send(self, node: str, message: dict[str, Any]) -> None:
        """Append ``message`` to the inbox of ``node`` (requests forwarded to it, answers)."""
        await self.redis.xadd(
            f"{PREFIX}:node:{node}:inbox",
            {"m": orjson.dumps(message)},
            maxlen=CHANNEL_LENGTH,
            approximate=True,
        )

    async def receive(self, after: str, block: float) -> tuple[str, list[dict[str, Any]]]:
        """The messages in this node's inbox after entry ``after`` (``"0-0"`` at first: the
        inbox is the node's own, new with the process), waiting up to ``block`` seconds; the
        entry id to read after next time."""
        key = f"{PREFIX}:node:{self.node}:inbox"
        answer: Any = await self.redis.xread(
            {key: after}, count=CHUNK, block=max(1, int(block * 1000))
        )
        messages: list[dict[str, Any]] = []
        last = after
        for _, entries in answer or []:
            for entry_id, fields in entries:
                last = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                try:
                    message = orjson.loads(fields[b"m"])
                except (KeyError, orjson.JSONDecodeError):
                    log.warning("! redis store: a malformed message in the inbox, skipped")
                    continue
                if isinstance(message, dict):
                    messages.append(message)
        return last, messages

    async def place_connections(self, places: dict[str, bytes], ttl: float) -> None:
        """Record (or renew) each connection of ``places`` for ``ttl`` seconds (one round
        trip): its id -> what the server layer keeps about where it lives."""
        if not places:
            return
        px = max(1, int(ttl * 1000))
        async with self.redis.pipeline(transaction=False) as pipe:
            for connection_id, place in places.items():
                pipe.set(f"{PREFIX}:conn:{connection_id}", place, px=px)
            await pipe.execute()

    async def connection_place(self, connection_id: str) -> bytes | None:
        """What ``place_connections`` recorded for ``connection_id``, unless it expired."""
        value = await self.redis.get(f"{PREFIX}:conn:{connection_id}")
        return value.encode() if isinstance(value, str) else value

    async def drop_connections(self, connection_ids: list[str]) -> None:
        """Forget the records of ``connection_ids`` (the connections ended)."""
        if connection_ids:
            await self.redis.delete(*(f"{PREFIX}:conn:{cid}" for cid in connection_ids))

    # -- share links and the audit trail -------------------------------------------------------
    # Every change of a link is one script call: the hash and the change stream's entry are
    # written together, so a node reading the stream never misses a change it can see.

    async def _link_script(self, name: str, link_id: str, *args: Any) -> Any:
        return await self._link_scripts[name](
            keys=_link_keys(link_id), args=[link_id, LINK_CHANGES, *args]
        )

    async def links(self) -> list[dict[str, Any]]:
        ids: list[Any] = sorted(await self.redis.smembers(f"{LINKS}:ids"))
        async with self.redis.pipeline(transaction=False) as pipe:
            for link_id in ids:
                pipe.hgetall(f"{LINKS}:link:{link_id.decode()}")
            found = await pipe.execute()
        gone = [link_id for link_id, fields in zip(ids, found, strict=True) if not fields]
        if gone:  # expired (``LINK_KEEP`` after the link did)
            await self.redis.srem(f"{LINKS}:ids", *gone)
        return [_link_record(fields) for fields in found if fields]

    async def link(self, link_id: str) -> dict[str, Any] | None:
        fields: Any = await self.redis.hgetall(f"{LINKS}:link:{link_id}")
        return _link_record(fields) if fields else None

    async def add_link(self, record: dict[str, Any]) -> None:
        created = {k: v for k, v in record.items() if k not in ("uses", "revoked_at", "revoked_by")}
        revoked_at = record.get("revoked_at")
        await self._link_script(
            "add",
            record["link_id"],
            orjson.dumps(created),
            "" if record.get("max_uses") is None else int(record["max_uses"]),
            int((float(record["expires_at"]) + LINK_KEEP) * 1000),
            int(record.get("uses") or 0),
            "" if revoked_at is None else repr(float(revoked_at)),
            record.get("revoked_by") or "",
        )

    async def revoke_link(self, link_id: str, at: float, by: str) -> dict[str, Any] | None:
        flat = await self._link_script("revoke", link_id, repr(float(at)), by)
        return None if not flat else _link_record(_fields(flat))

    async def use_link(self, link_id: str) -> tuple[str, dict[str, Any] | None]:
        answer = await self._link_script("use", link_id)
        status = answer[0].decode() if isinstance(answer[0], bytes) else str(answer[0])
        return status, _link_record(_fields(answer[1:])) if len(answer) > 1 else None

    async def link_mark(self) -> tuple[str, int | None]:
        """Where the stream of link changes is now (see ``SharedStore.link_mark``)."""
        last: Any = await self.redis.xrevrange(f"{LINKS}:changes", count=1)
        if not last:
            return "0-0", None
        entry_id, fields = last[0]
        return _text(entry_id) or "0-0", int(fields[b"n"])

    async def link_changes(
        self, after: str, block: float
    ) -> tuple[str, list[tuple[int, dict[str, Any]]]]:
        """The link changes after entry ``after`` (see ``SharedStore.link_changes``)."""
        answer: Any = await self.redis.xread(
            {f"{LINKS}:changes": after}, count=CHUNK, block=max(1, int(block * 1000))
        )
        changes: list[tuple[int, dict[str, Any]]] = []
        last = after
        for _, entries in answer or []:
            for entry_id, fields in entries:
                last = _text(entry_id) or last
                try:
                    changes.append((int(fields[b"n"]), _link_record(fields)))
                except (KeyError, ValueError, orjson.JSONDecodeError):
                    log.warning("! redis store: a malformed link change, skipped")
        return last, changes

    async def append_audit(self, entries: list[dict[str, Any]], keep: int) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            for entry in entries:
                pipe.xadd(
                    AUDIT, {"e": orjson.dumps(entry, default=str)}, maxlen=keep, approximate=True
                )
            await pipe.execute()

    async def read_audit(self, before: str | None, limit: int) -> list[tuple[str, dict[str, Any]]]:
        if before is not None and not AUDIT_ID.fullmatch(before):
            raise ValueError("not an audit entry id")
        top = "+" if before is None else f"({before}"
        try:
            entries: Any = await self.redis.xrevrange(AUDIT, max=top, min="-", count=limit)
        except ResponseError:  # an id past what a stream id holds, or before the first
            raise ValueError("not an audit entry id") from None
        return [(_text(entry_id) or "", orjson.loads(fields[b"e"])) for entry_id, fields in entries]


__all__ = ["RedisStore"]
