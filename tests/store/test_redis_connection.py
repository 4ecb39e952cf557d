"""The Redis store's connection packs commands with hiredis into redis-py's very bytes, and
falls back to redis-py for what hiredis does not take."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from hub.store.redis import RedisStore
from hub.store.redis_connection import PackedConnection, hiredis_packing
from tests.redis_server import RedisServer

ARG = st.one_of(
    st.text(),
    st.binary(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
)


def _packed(conn: Connection, *args: Any) -> bytes:
    return b"".join(conn.pack_command(*args))


def test_hiredis_is_there() -> None:
    # The test extra installs hiredis: the fast path is the one under test below.
    assert hiredis_packing()


@given(
    st.sampled_from(["EVALSHA", "XADD", "SCRIPT LOAD", b"HSET", b"CLIENT SETNAME"]), st.lists(ARG)
)
def test_the_same_bytes_as_redis_py(command: str | bytes, args: list[Any]) -> None:
    assert _packed(PackedConnection(), command, *args) == _packed(Connection(), command, *args)


def test_arguments_hiredis_refuses_are_redis_pys_to_pack_or_refuse() -> None:
    ours, theirs = PackedConnection(), Connection()
    # redis-py packs a bytearray; hiredis refuses it: the result is redis-py's.
    assert _packed(ours, "SET", "k", bytearray(b"v")) == _packed(
        theirs, "SET", "k", bytearray(b"v")
    )
    # redis-py refuses these with DataError; so does the store's connection.
    for bad in (None, True, [1], {"a": 1}):
        with pytest.raises(DataError):
            ours.pack_command("SET", "k", bad)


async def test_the_store_talks_to_a_real_redis_through_it(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url)
    async with store.running():
        pool = store.redis.connection_pool
        assert pool.connection_class is PackedConnection
        # A script call with every kind of argument, answered by a real redis-server.
        echo = store.redis.register_script("return ARGV")
        args: list[str | bytes | int | float] = ["é", b"\x00\xff", 42, -7, 1.5, ""]
        assert await echo(keys=["acp-hub:{t}:k"], args=args) == [
            "é".encode(),
            b"\x00\xff",
            b"42",
            b"-7",
            b"1.5",
            b"",
        ]
