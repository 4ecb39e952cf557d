"""Where sessions are kept: the store interface and its three implementations.

``open_store(setting)`` builds the store the ``store`` setting names (``memory``,
``sqlite:///PATH``, ``redis://HOST:PORT/DB``); ``hub.store.base`` has the interface the
sessions layer talks to, ``docs/design/store.md`` the design.
"""

from __future__ import annotations

from hub.settings import StoreUrl, parse_store_url
from hub.store.base import Restored, SessionRecord, SharedStore, Snapshot, Store, StoreError


def open_store(setting: str, *, node: str = "") -> Store:
    """The store named by ``setting`` (not yet connected: enter its ``running()``); ``node``
    names this node as writer and owner (empty: a random name)."""
    url = parse_store_url(setting)
    store: Store
    if url.kind == "sqlite":
        from hub.store.sqlite import SqliteStore

        store = SqliteStore(url.target, synchronous=dict(url.options).get("synchronous", "normal"))
    elif url.kind == "redis":
        from hub.store.redis import RedisStore

        store = RedisStore(url.target)
    else:
        from hub.store.memory import MemoryStore

        return MemoryStore()
    if node:
        store.node = node
    return store


# The package's face: `hub.store.base`'s names the layers above use, and `open_store`.
__all__ = [
    "Restored",
    "SessionRecord",
    "SharedStore",
    "Snapshot",
    "Store",
    "StoreError",
    "StoreUrl",
    "open_store",
    "parse_store_url",
]
