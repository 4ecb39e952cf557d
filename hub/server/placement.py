"""Where each Streamable HTTP connection lives, for the other nodes on a shared store.

Theory of operation
-------------------
A Streamable HTTP connection (``hub.server.streamable_http``) is process state: its
``ClientConnection``, its streams and what they keep for ``Last-Event-ID``. With several nodes
on one Redis, the node that answered its ``initialize`` records a ``Place`` for it in the store
(``acp-hub:conn:{CID}``): its own name, the address the other nodes reach it at, and the
connection's principal. The record lives ``node_lease`` seconds and is written again every
third of that while the connection lives (one pipelined round trip for all of this node's
connections), and dropped when it ends: the record of a node that died expires with it.

A request for a connection another node holds is relayed there (``hub.server.forward``) once
the receiving node has admitted its credential and found that the record's principal is the
credential's: a connection id presented with anybody else's token is answered as an unknown
connection, before anything reaches the holder (which checks both again).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import anyio
import orjson
from starlette.types import Scope

from hub.settings import Settings
from hub.store import SharedStore

log = logging.getLogger("hub.server")

CONNECTION_ID = re.compile(r"c-[0-9a-f]{32}")
"""The shape of the ids ``HttpConnection`` makes: anything else is looked up nowhere."""
DROP_TIMEOUT = 5.0
"""Seconds a stopping node spends dropping its records (they expire anyway)."""


@dataclass(frozen=True, slots=True)
class Place:
    """Where one connection lives: the node, its address, and the connection's principal."""

    node: str
    url: str
    principal: str

    def to_json(self) -> bytes:
        return orjson.dumps({"node": self.node, "url": self.url, "principal": self.principal})

    @classmethod
    def from_json(cls, raw: bytes) -> Place | None:
        """The place ``to_json`` wrote; ``None`` for anything else."""
        try:
            data = orjson.loads(raw)
            return cls(str(data["node"]), str(data["url"]), str(data["principal"]))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None


def node_url(settings: Settings, scope: Scope) -> str | None:
    """The address other nodes reach this one at for a connection whose ``initialize`` came
    as ``scope``: ``node_url``, else the local address the request arrived at (the socket's,
    which a proxy's ``X-Forwarded-*`` headers do not change); ``None`` when neither is known
    (a Unix socket)."""
    if settings.node_url:
        return settings.node_url.rstrip("/")
    server = scope.get("server")
    if not server or server[1] is None:
        return None
    host = str(server[0])
    return f"http://[{host}]:{server[1]}" if ":" in host else f"http://{host}:{server[1]}"


class Placements:
    """This node's records of its connections' places, and the lookups of other nodes'."""

    def __init__(self, store: SharedStore, ttl: float) -> None:
        self.store = store
        self.ttl = ttl
        self.local: dict[str, Place] = {}
        """The places of the connections this node holds (what the renewal writes)."""
        self._open: set[str] = set()
        """The connections opened here and not forgotten yet: only these may be placed."""
        self._ended: list[str] = []
        self._wakeup = anyio.Event()

    @property
    def node(self) -> str:
        return self.store.node

    def open(self, connection_id: str) -> None:
        """A connection opens here: it may be placed until it is forgotten."""
        self._open.add(connection_id)

    async def place(self, connection_id: str, url: str, principal: str) -> None:
        """Record that this node holds ``connection_id`` (reached at ``url``); a store that
        does not answer is logged, and the renewal writes the record when it answers again.
        A connection that ended already (forgotten before its ``initialize`` was answered) is
        not placed: its record would be renewed for as long as the node lives."""
        if connection_id not in self._open:
            return
        place = Place(self.node, url, principal)
        self.local[connection_id] = place
        try:
            await self.store.place_connections({connection_id: place.to_json()}, self.ttl)
        except Exception as exc:  # the store's and the redis client's errors alike
            log.warning("! %s: its place is not recorded yet: %s", connection_id, exc)

    def forget(self, connection_id: str) -> None:
        """The connection ended: its record is dropped by the renewal task, soon."""
        self._open.discard(connection_id)
        if self.local.pop(connection_id, None) is not None:
            self._ended.append(connection_id)
            self._wakeup.set()

    async def find(self, connection_id: str) -> Place | None:
        """The place of a connection (of any node), ``None`` when unknown; the store's errors
        propagate."""
        if CONNECTION_ID.fullmatch(connection_id) is None:
            return None
        raw = await self.store.connection_place(connection_id)
        return None if raw is None else Place.from_json(raw)

    async def run(self) -> None:
        """Renew this node's records every third of their life, and drop those of ended
        connections; at the end, drop every record left."""
        failing = False
        renew_at = anyio.current_time() + self.ttl / 3
        try:
            while True:
                with anyio.move_on_after(renew_at - anyio.current_time()):
                    await self._wakeup.wait()
                self._wakeup = anyio.Event()
                try:
                    if self._ended:
                        ended, self._ended = self._ended, []
                        await self.store.drop_connections(ended)
                    if anyio.current_time() >= renew_at:
                        renew_at = anyio.current_time() + self.ttl / 3
                        places = {cid: place.to_json() for cid, place in self.local.items()}
                        await self.store.place_connections(places, self.ttl)
                    failing = False
                except Exception as exc:  # the store's and the redis client's errors alike
                    if not failing:
                        log.warning("! the connections' places are not renewed: %s", exc)
                    failing = True
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(DROP_TIMEOUT):
                try:
                    await self.store.drop_connections([*self._ended, *self.local])
                except Exception as exc:
                    log.info("= the connections' places were left to expire: %s", exc)
