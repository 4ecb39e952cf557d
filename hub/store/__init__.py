"""Where sessions are kept: the store interface and its three implementations.

``open_store(setting)`` builds the store the ``store`` setting names (``memory``,
``sqlite:///PATH``, ``redis://HOST:PORT/DB``); ``hub.store.base`` has the interface the
sessions layer talks to, ``docs/design/store.md`` the design.
"""

from __future__ import annotations

from hub.settings import StoreUrl, parse_store_url
from hub.store.base import Restored, SessionRecord, Snapshot, Store, StoreError


def open_store(setting: str) -> Store:
    """The store named by ``setting`` (not yet connected: enter its ``running()``)."""
    url = parse_store_url(setting)
    if url.kind == "sqlite":
        from hub.store.sqlite import SqliteStore

        return SqliteStore(url.target, synchronous=dict(url.options).get("synchronous", "normal"))
    if url.kind == "redis":
        from hub.store.redis import RedisStore

        return RedisStore(url.target)
    from hub.store.memory import MemoryStore

    return MemoryStore()


__all__ = [
    "Restored",
    "SessionRecord",
    "Snapshot",
    "Store",
    "StoreError",
    "StoreUrl",
    "open_store",
    "parse_store_url",
]
