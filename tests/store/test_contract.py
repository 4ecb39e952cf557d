"""The store contract, run against all three stores (memory, SQLite, a real redis-server).

Each test drives a store as the sessions layer does: logs opened by the store, events
appended with the seq the log allocates, snapshots taken from a real fold and compaction, the
directory read and written. The durable stores are then reopened (a new store instance on the
same file or server) to check what comes back, clean and not.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import redis.asyncio as aioredis

from hub.protocol.compact import compact
from hub.protocol.state import SessionState
from hub.store import SessionRecord, Store, open_store, parse_store_url
from hub.store.durable import DurableStore, Item, WrittenLog
from hub.store.log import EventLog, Row, row_frames
from hub.store.redis import RedisStore
from hub.store.redis_scripts import WRITE
from tests.redis_server import RedisServer, store_setting

KINDS = ["memory", "sqlite", "redis"]
BOUNDS = {"max_events": 1000, "max_bytes": 1 << 24}


@pytest.fixture(params=KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_setting(request.param, tmp_path / "data" / "hub.db", request)


@asynccontextmanager
async def running(url: str) -> AsyncIterator[Store]:
    store = open_store(url)
    async with store.running():
        yield store


def frame(session_id: str, seq: int, epoch: int, update: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": session_id,
                "update": update,
                "_meta": {"acp-hub": {"seq": seq, "epoch": epoch}},
            },
        }
    )


def chunk(n: int, message: str = "m-1") -> dict[str, Any]:
    return {
        "sessionUpdate": "agent_message_chunk",
        "messageId": message,
        "content": {"type": "text", "text": f"part {n} "},
    }


class Writer:
    """Appends real updates to a log as ``Session.emit`` does, folding them as it goes."""

    def __init__(self, session_id: str, log: EventLog) -> None:
        self.session_id = session_id
        self.log = log
        self.state = SessionState()

    def emit(self, update: dict[str, Any], *, hub_only: bool = False) -> Row:
        self.state.apply(update)
        seq = self.log.next_seq()
        v2 = frame(self.session_id, seq, self.log.epoch, update)
        if hub_only:  # a `_hub_*` event: only v1 clients that opted in get it
            v1: tuple[bytes, ...] = ()
            v1_hub: tuple[bytes, ...] = (v2,)
        elif seq % 3 == 0:  # an update that renders to two v1 updates
            v1 = v1_hub = (frame(self.session_id, seq, self.log.epoch, {"v1": 1}), v2)
        else:
            v1 = v1_hub = (v2,)
        origin = "c-1" if seq % 5 == 0 else None
        message_id = update.get("messageId")
        self.log.append_row(seq, message_id, v2, v1, v1_hub, origin)
        return self.log.rows_after(seq - 1)[0]

    def many(self, count: int) -> list[Row]:
        return [self.emit(chunk(self.log.next_seq())) for _ in range(count)]


def record(session_id: str, **changes: Any) -> SessionRecord:
    base = SessionRecord(
        session_id=session_id,
        agent="scripted",
        cwd="/tmp/project",
        agent_session_id="sess-1",
        prompt_policy="queue",
        permission_policy="first",
        creator="alice",
        created_at="2026-01-01T00:00:00Z",
        mcp_servers=({"name": "fs", "command": "mcp-fs", "args": []},),
    )
    fields = {**base.to_json(), **changes}
    return SessionRecord.from_json(fields)


def same_rows(a: list[Row], b: list[Row]) -> bool:
    """Rows equal in every field the wire depends on (frames, ids, origin, size)."""
    return list(a) == list(b)


async def test_appended_events_read_back_after_any_seq(store_url: str) -> None:
    async with running(store_url) as store:
        log = store.open_log("s-1", **BOUNDS)
        writer = Writer("s-1", log)
        writer.emit(
            {"sessionUpdate": "_hub_policy", "prompt": "queue", "permission": "first"},
            hub_only=True,
        )
        rows = [log.rows_after(0)[0], *writer.many(30)]
        assert [r[0] for r in rows] == list(range(1, 32))  # seqs allocated by the log
        await store.flush()
        for after in (0, 1, 7, 30):
            read = await store.read_after("s-1", after)
            assert read is not None
            assert same_rows(read, rows[after:])
        assert await store.read_after("s-1", 31) == []
        assert await store.read_after("s-1", 32) is None  # a cursor from the future
        assert await store.read_after("s-1", -1) is None
        assert await store.read_after("s-unknown", 0) is None


# A store and a writer of its own, as in the tests around it: each reads alone.
async def test_v1_frames_and_their_sharing_survive(store_url: str) -> None:
    async with running(store_url) as store:
        log = store.open_log("s-1", **BOUNDS)
        writer = Writer("s-1", log)
        writer.emit(
            {"sessionUpdate": "_hub_policy", "prompt": "queue", "permission": "first"},
            hub_only=True,
        )
        writer.many(5)
        await store.flush()
        read = await store.read_after("s-1", 0)
        assert read is not None
        frames = [row_frames(row) for row in read]
        assert frames[0][0] == ()  # a hub-only event
        assert frames[0][1] == (read[0][2],)
        assert frames[1][0] == (read[1][2],)  # seq 2 shares the v2 frame
        assert frames[1][0][0] is read[1][2]
        assert frames[1][1] is frames[1][0]
        assert read[1][3] is None
        assert read[1][4] is None
        assert len(frames[2][0]) == 2  # seq 3 renders to two v1 frames
        assert frames[2][0][1] is read[2][2]
        assert read[4][5] == "c-1"  # origins
        assert read[1][5] is None
        assert [r[6] for r in read] == [r[6] for r in log.rows_after(0)]  # sizes counted alike


async def test_retained_tail_covers_every_cursor_the_live_log_serves(store_url: str) -> None:
    async with running(store_url) as store:
        log = store.open_log("s-1", max_events=5, max_bytes=1 << 24)
        writer = Writer("s-1", log)
        writer.many(12)
        store.snapshot(log, compact(writer.state))
        writer.many(8)
        await store.flush()
        assert log.first_retained == 16
        for after in range(21):
            read = await store.read_after("s-1", after)
            if log.covers(after):
                assert read is not None
                assert [r[0] for r in read] == list(range(after + 1, 21))
            elif read is not None:  # a durable store may keep more (events after its snapshot)
                assert [r[0] for r in read] == list(range(after + 1, 21))
        snapshot = await store.latest_snapshot("s-1")
        assert snapshot is not None
        assert (snapshot.seq, snapshot.epoch) == (12, log.epoch)
        rebuilt = SessionState().apply_all(snapshot.updates)
        assert rebuilt.message("m-1") is not None
        if store.durable:
            # Not trimmed past the snapshot: the snapshot and the events after it rebuild it.
            assert await store.read_after("s-1", 12) is not None
            assert await store.read_after("s-1", 11) is None


async def test_the_directory_keeps_records(store_url: str) -> None:
    async with running(store_url) as store:
        assert await store.records() == []
        await store.save_record(record("s-1"))
        await store.save_record(record("s-2", created_at="2026-01-02T00:00:00Z", creator=None))
        await store.save_record(record("s-1", prompt_policy="lease", status="lost"))
        records = {r.session_id: r for r in await store.records()}
        assert set(records) == {"s-1", "s-2"}
        assert records["s-1"].prompt_policy == "lease"
        assert records["s-1"].status == "lost"
        assert records["s-1"].mcp_servers == ({"name": "fs", "command": "mcp-fs", "args": []},)
        assert records["s-2"].creator is None
        log = store.open_log("s-1", **BOUNDS)
        Writer("s-1", log).many(3)
        await store.flush()
        await store.remove("s-1")
        assert [r.session_id for r in await store.records()] == ["s-2"]
        assert await store.read_after("s-1", 0) is None
        assert await store.latest_snapshot("s-1") is None
        assert await store.restore("s-1", **BOUNDS) is None


async def test_memory_store_keeps_nothing_across_instances() -> None:
    async with running("memory") as store:
        await store.save_record(record("s-1"))
        Writer("s-1", store.open_log("s-1", **BOUNDS)).many(3)
    async with running("memory") as store:
        assert await store.records() == []
        assert await store.restore("s-1", **BOUNDS) is None


def durable(url: str) -> None:
    if parse_store_url(url).kind == "memory":
        pytest.skip("the memory store keeps nothing across a restart (by design)")


async def test_clean_restart_keeps_epoch_history_and_state(store_url: str) -> None:
    durable(store_url)
    async with running(store_url) as store:
        await store.save_record(record("s-1"))
        log = store.open_log("s-1", **BOUNDS)
        writer = Writer("s-1", log)
        writer.many(40)
        store.snapshot(log, compact(writer.state))
        writer.emit({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
        writer.many(5)
        epoch, rows = log.epoch, log.rows_after(0)
    async with running(store_url) as store:
        restored = await store.restore("s-1", **BOUNDS)
        assert restored is not None
        assert restored.clean
        assert restored.record == record("s-1")
        assert restored.log.epoch == epoch
        assert restored.log.last_seq == 46
        assert same_rows(restored.log.rows_after(0), rows)
        state = SessionState().apply_all(restored.updates)
        assert state.snapshot() == writer.state.snapshot()
        # The history continues where it stopped, and is written again.
        again = Writer("s-1", restored.log)
        again.state = state
        more = again.many(3)
        assert [r[0] for r in more] == [47, 48, 49]
        await store.flush()
        read = await store.read_after("s-1", 44)
        assert read is not None
        assert [r[0] for r in read] == [45, 46, 47, 48, 49]


async def test_unclean_restart_continues_under_a_new_epoch(store_url: str) -> None:
    """A second store takes the log over while the first still runs (as after a crash): the
    new epoch serves old cursors up to the stored seq, and the first store is fenced."""
    durable(store_url)
    async with running(store_url) as first:
        await first.save_record(record("s-1"))
        log = first.open_log("s-1", **BOUNDS)
        writer = Writer("s-1", log)
        writer.many(10)
        await first.flush()
        old_epoch = log.epoch
        async with running(store_url) as second:
            restored = await second.restore("s-1", **BOUNDS)
            assert restored is not None
            assert not restored.clean
            new = restored.log
            assert new.epoch > old_epoch
            assert new.lineage == {old_epoch: 10}
            assert new.serves(old_epoch, 10)
            assert new.serves(old_epoch, 3)
            assert not new.serves(old_epoch, 11)  # an event the crash may have lost
            assert new.serves(new.epoch, 10)
            Writer("s-1", new).many(2)
            await second.flush()
            # The first store's later writes are refused: one writer per log.
            writer.many(1)
            await first.flush()
            assert isinstance(log, WrittenLog)
            assert log.fenced
            read = await second.read_after("s-1", 9)
            assert read is not None
            assert [r[0] for r in read] == [10, 11, 12]
            assert orjson.loads(read[-1][2])["params"]["_meta"]["acp-hub"]["epoch"] == new.epoch
        # The second closed cleanly: the next restore keeps its epoch and lineage.
    async with running(store_url) as third:
        again = await third.restore("s-1", **BOUNDS)
        assert again is not None
        assert again.clean
        assert again.log.epoch == new.epoch
        assert again.log.lineage == {old_epoch: 10}


async def test_restore_folds_snapshot_and_later_events(store_url: str) -> None:
    durable(store_url)
    async with running(store_url) as store:
        await store.save_record(record("s-1"))
        log = store.open_log("s-1", max_events=4, max_bytes=1 << 24)
        writer = Writer("s-1", log)
        for turn in range(3):
            for n in range(10):
                writer.emit(chunk(n, message=f"m-{turn}"))
            store.snapshot(log, compact(writer.state))
        writer.emit(chunk(99, message="m-last"))
        expected = writer.state.snapshot()
    async with running(store_url) as store:
        restored = await store.restore("s-1", max_events=4, max_bytes=1 << 24)
        assert restored is not None
        assert SessionState().apply_all(restored.updates).snapshot() == expected
        assert restored.log.last_seq == 31
        assert restored.log.first_retained == 28  # the live tail bound applies again


async def test_sqlite_file_is_private(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/deep/dir/hub.db"
    async with running(url) as store:
        await store.save_record(record("s-1"))
    mode = stat.S_IMODE(os.stat(tmp_path / "deep" / "dir" / "hub.db").st_mode)
    assert mode == 0o600


async def test_a_redis_restart_delays_writes_and_loses_nothing(redis_server: RedisServer) -> None:
    """Redis stopped (it saves its data) while events are appended: the writes fail, the
    store says so (``healthy``), keeps every event and writes them once Redis is back."""
    async with running(redis_server.url) as store:
        assert isinstance(store, DurableStore)
        log = store.open_log("s-1", **BOUNDS)
        writer = Writer("s-1", log)
        rows = writer.many(5)
        await store.flush()
        await anyio.to_thread.run_sync(redis_server.stop)
        rows += writer.many(5)
        with anyio.fail_after(30):
            while store.healthy:  # noqa: ASYNC110 - the writer's failure is the event awaited
                await anyio.sleep(0.02)
        rows += writer.many(5)
        await anyio.to_thread.run_sync(redis_server.start)
        with anyio.fail_after(30):
            await store.flush()
        assert store.healthy
        read = await store.read_after("s-1", 0)
        assert read is not None
        assert same_rows(read, rows)


async def test_a_batch_across_many_sessions_lands_whole(store_url: str) -> None:
    """One batch of the writer holding more sessions and events than one script call takes
    (``hub.store.redis.CHUNK``): a thousand sessions of two events, one of 1,234 (split over
    calls), all appended before the writer runs. Every session reads back exactly."""
    async with running(store_url) as store:
        writers = [Writer(f"s-{n}", store.open_log(f"s-{n}", **BOUNDS)) for n in range(1000)]
        await store.save_record(record("s-long"))
        long = Writer("s-long", store.open_log("s-long", max_events=5000, max_bytes=1 << 24))
        rows = {w.session_id: w.many(2) for w in writers}
        rows["s-long"] = long.many(1234)
        await store.flush()
        for session_id, expected in rows.items():
            read = await store.read_after(session_id, 0)
            assert read is not None
            assert same_rows(read, expected), session_id
    if store_url.startswith("memory"):
        return
    async with running(store_url) as again:
        restored = await again.restore("s-long", max_events=5000, max_bytes=1 << 24)
        assert restored is not None
        assert restored.clean
        assert restored.log.next_seq() == 1235


async def test_a_redis_write_sent_again_writes_nothing_twice(redis_server: RedisServer) -> None:
    """The write of a batch whose answer was lost is sent again (the writer retries): each
    session of the call finds its events written and succeeds without adding them again; a
    session another node writes is refused alone, the others of its call written."""
    async with running(redis_server.url) as store:
        assert isinstance(store, RedisStore)
        logs = {sid: EventLog(max_events=1000, max_bytes=1 << 24) for sid in ("s-1", "s-2", "s-3")}
        rows = {sid: Writer(sid, log).many(3 if sid != "s-2" else 600) for sid, log in logs.items()}

        def items() -> list[Item]:
            return [
                Item(sid, True, rows[sid], log.epoch, {}, rows[sid][-1][0], 0, None, None)  # type: ignore[arg-type]
                for sid, log in logs.items()
            ]

        client = aioredis.Redis.from_url(redis_server.url)
        try:
            await client.hset("acp-hub:{s-3}:meta", mapping={"writer": "another node"})
            assert await store._write(items()) == ["s-3"]
            assert await store._write(items()) == ["s-3"]
            assert await client.xlen("acp-hub:{s-3}:log") == 0
        finally:
            await client.aclose()
        for sid in ("s-1", "s-2"):
            read = await store.read_after(sid, 0)
            assert read is not None
            assert same_rows(read, rows[sid]), sid


async def test_scripts_flushed_from_redis_are_loaded_again(redis_server: RedisServer) -> None:
    """Redis forgets its scripts (a restart, ``SCRIPT FLUSH``): the writer's batch is refused
    with ``NOSCRIPT``, loads the script and sends the refused commands again; nothing is
    lost, written twice or taken for another node's write."""
    async with running(redis_server.url) as store:
        assert isinstance(store, DurableStore)
        writers = [Writer(sid, store.open_log(sid, **BOUNDS)) for sid in ("s-1", "s-2")]
        rows = {w.session_id: w.many(3) for w in writers}
        await store.flush()
        client = aioredis.Redis.from_url(redis_server.url)
        try:
            await client.script_flush()
            for w in writers:
                rows[w.session_id] += w.many(3)
            with anyio.fail_after(30):
                await store.flush()
            assert await client.script_exists(hashlib.sha1(WRITE.encode()).hexdigest()) == [True]
        finally:
            await client.aclose()
        assert store.healthy
        for w in writers:
            rows[w.session_id] += w.many(2)  # the session is still this node's to write
        await store.flush()
        for sid, expected in rows.items():
            read = await store.read_after(sid, 0)
            assert read is not None
            assert same_rows(read, expected), sid


async def test_a_stalled_redis_delays_writes_and_loses_nothing(redis_server: RedisServer) -> None:
    async with running(redis_server.url) as store:
        log = store.open_log("s-1", **BOUNDS)
        writer = Writer("s-1", log)
        rows = writer.many(3)
        await store.flush()
        redis_server.pause()
        try:
            rows += writer.many(3)
            flushed = False

            async def flush() -> None:
                nonlocal flushed
                await store.flush()
                flushed = True

            async with anyio.create_task_group() as tg:
                tg.start_soon(flush)
                await anyio.sleep(0.3)  # the stall itself: time is what is being simulated
                assert not flushed
                redis_server.resume()
        finally:
            redis_server.resume()
        read = await store.read_after("s-1", 0)
        assert read is not None
        assert same_rows(read, rows)


async def test_ownership_is_exclusive_on_a_shared_store(store_url: str) -> None:
    """One owner per session on a shared store (a lease: claimed, renewed, released, taken
    by another node once released); a store that is not shared grants it always."""
    async with running(store_url) as one, running(store_url) as two:
        assert await one.claim("s-1", 30.0)
        if not one.shared:
            assert await two.claim("s-1", 30.0)
            assert await one.renew(["s-1"], 30.0) == []
            return
        assert await one.owner("s-1") == one.node
        assert not await two.claim("s-1", 30.0)
        assert await one.claim("s-1", 30.0)  # the owner claims again: renewed
        assert await one.renew(["s-1", "s-2"], 30.0) == ["s-2"]
        assert await two.renew(["s-1"], 30.0) == ["s-1"]
        await two.release(["s-1"])  # not its to release
        assert await one.owner("s-1") == one.node
        await one.release(["s-1"])
        assert await one.owner("s-1") is None
        assert await two.claim("s-1", 30.0)
        assert await two.owner("s-1") == two.node


async def test_many_concurrent_commands_wait_for_a_connection(store_url: str) -> None:
    """More concurrent commands than the Redis pool has connections (as when hundreds of
    clients open sessions at once) all succeed: they wait for a connection, not fail."""
    async with running(store_url) as store:
        claimed = await _gather([store.claim(f"s-{i}", 30.0) for i in range(300)])
        assert claimed == [True] * 300
        owners = await _gather([store.owner(f"s-{i}") for i in range(300)])
        assert set(owners) == ({store.node} if store.shared else {None})


async def _gather(calls: list[Any]) -> list[Any]:
    results: list[Any] = [None] * len(calls)

    async def one(i: int) -> None:
        results[i] = await calls[i]

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i)
    return results


async def test_a_lease_not_renewed_expires(redis_server: RedisServer) -> None:
    async with running(redis_server.url) as one, running(redis_server.url) as two:
        assert await one.claim("s-1", 0.05)
        with anyio.fail_after(10):
            while not await two.claim("s-1", 30.0):  # noqa: ASYNC110 - Redis's clock expires it
                await anyio.sleep(0.02)
        assert await one.renew(["s-1"], 30.0) == ["s-1"]


async def test_reading_a_session_takes_nothing_over(store_url: str) -> None:
    durable(store_url)
    async with running(store_url) as writer:
        await writer.save_record(record("s-1"))
        log = writer.open_log("s-1", **BOUNDS)
        Writer("s-1", log).many(5)
        await writer.flush()
        async with running(store_url) as reader:
            copy = await reader.read_session("s-1", **BOUNDS)
            assert copy is not None
            assert not isinstance(copy.log, WrittenLog)
            assert (copy.log.epoch, copy.log.last_seq) == (log.epoch, 5)
            assert len(copy.updates) == 5
        # The writer still writes its log: nothing was fenced.
        Writer("s-1", log).many(1)
        await writer.flush()
        assert isinstance(log, WrittenLog)
        assert not log.fenced


async def test_connection_places_are_shared_renewed_and_expire(redis_server: RedisServer) -> None:
    """Where a Streamable HTTP connection lives: one node records it, another reads it; a
    record not renewed expires, a dropped one is gone at once."""
    async with running(redis_server.url) as one, running(redis_server.url) as two:
        assert isinstance(one, RedisStore)
        assert isinstance(two, RedisStore)
        await one.place_connections({"c-1": b'{"node":"one"}', "c-2": b"two"}, 30.0)
        assert await two.connection_place("c-1") == b'{"node":"one"}'
        await one.place_connections({"c-2": b"renewed"}, 0.05)
        await one.drop_connections(["c-1"])
        assert await two.connection_place("c-1") is None
        with anyio.fail_after(10):
            while await two.connection_place("c-2") is not None:  # noqa: ASYNC110 - Redis's clock
                await anyio.sleep(0.02)
        await one.drop_connections([])
        await one.place_connections({}, 1.0)
