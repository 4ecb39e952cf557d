"""The Redis store's connection class: redis-py's asyncio connection, its commands packed by
hiredis where hiredis is installed.

redis-py's synchronous client packs commands into the Redis protocol with hiredis when it can
(``HiredisRespSerializer``); its asyncio client always packs them in Python, argument by
argument. The hub's write-behind sends one ``EVALSHA`` per session per batch with a dozen or
more arguments, on the event loop that also fans events out: in the many-sessions benchmark on
Redis (S2-store), packing was about 7% of the hub's samples. hiredis packs such a command
about four times faster (7 against 30 microseconds on the benchmark machine), into the very
same bytes.

hiredis takes ``str`` (UTF-8), ``bytes``, ``int``, ``float`` and ``memoryview`` arguments and
packs them into the bytes redis-py would (the tests compare the two); a command with any other
argument (``bytearray``, or one redis-py refuses with ``DataError``, such as ``None`` or a
``bool``) is packed by redis-py, so its behaviour stays redis-py's. Without hiredis (an
optional speed-up, the ``fast`` extra) every command is packed by redis-py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _pack
except ImportError:  # pragma: no cover - hiredis is in the test extra
    _pack = None

__all__ = ["PackedConnection", "hiredis_packing"]


def hiredis_packing() -> bool:
    """Whether commands are packed by hiredis (installed), else by redis-py in Python."""
    return _pack is not None


class PackedConnection(aioredis.Connection):
    """``redis.asyncio.Connection`` whose ``pack_command`` is hiredis's when available."""

    def pack_command(self, *args: Any) -> list[bytes]:
        if _pack is None:  # pragma: no cover - hiredis is in the test extra
            return super().pack_command(*args)
        # As redis-py does: a command name given as "SCRIPT LOAD" is two words.
        if isinstance(args[0], str):
            words = tuple(args[0].encode().split()) + args[1:]
        elif b" " in args[0]:
            words = tuple(args[0].split()) + args[1:]
        else:
            words = args
        try:
            return [_pack(words)]
        except TypeError:
            return super().pack_command(*args)
