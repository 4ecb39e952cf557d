"""Several hub nodes on one Redis: ownership, following other nodes' sessions, forwarding.

Theory of operation
-------------------
Every session has one owner: the node that runs its agent, arbitrates it and writes its log
(a single writer). Ownership is a lease in the store (``Store.claim``) that the owner renews
every third of ``node_lease``; a node that stops renewing (killed, partitioned, its Redis
calls failing for that long) loses it, and any other node may claim it.

Four tasks run on every node while its registry runs:

* ``_own``: renews the leases of the sessions this node owns, and scans the directory. A
  session nobody owns (its owner died; or it was stopped cleanly and released) is claimed and
  restored here exactly as on a restart (``SessionRegistry.take``: a new epoch when its log was
  not closed cleanly, the agent takes it back, ``_hub_agent`` to every client). A session whose
  lease this node lost is let go: its local clients are told (``_hub/session_closed`` with
  ``moved: true``) and reconnect to it through any node. The scan also keeps the directory that
  ``session/list`` shows for sessions owned elsewhere.
* ``_beat``: says this node is alive (a heartbeat with a short TTL, ``beat``: a third of
  ``node_lease``, at least 3 s, renewed three times as often), and looks at the heartbeats
  of the nodes owning sessions in the directory. A node whose heartbeat stopped (killed, its
  machine lost) has its sessions claimed at once (``SharedStore.claim_from``, a compare and
  set on the owner key), not after its lease runs out; the other surviving nodes race for
  them and one wins each. The log's writer field is the fencing token: the taker writes itself
  there before it writes (``DurableStore``), so a node that was only stalled finds its writes
  refused and its leases gone, and lets its sessions go.
* ``_follow``: reads, with one blocking ``XREAD``, the streams of the sessions this node
  mirrors for its clients (``hub.sessions.mirror``) and hands each mirror its events.
* ``Relay.run_inbox`` (``hub.sessions.relay``): reads this node's inbox: requests other nodes
  forwarded for sessions owned here (prompts and cancels from their clients), run as a
  ``RemoteClient`` with the role the forwarding node gave it, and the answers to requests this
  node forwarded.

The routing is here too: whether an attach must first follow a session another node owns
(``follows_first``), and a close of such a session sent to its owner (``close_at_owner``).

A node trusts the other nodes on its Redis: they are one hub (``docs/deployment.md``).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from hub.protocol.errors import NOT_OWNER, hub_error, resource_not_found
from hub.sessions.client import ClientHandle
from hub.sessions.errors import SessionFailure
from hub.sessions.mirror import Gap, MirrorSession
from hub.sessions.nodes import FOLLOW_BLOCK, RETRY, Node, beat
from hub.sessions.ops import SessionOps
from hub.sessions.relay import Relay
from hub.store import SessionRecord, SharedStore, StoreError

log = logging.getLogger("hub.sessions")

REMOTE_ATTACH = frozenset({"session/resume", "session/load", "session/attach"})
"""Attaching methods that may name a session another hub node owns."""


class Cluster:
    """See the module docstring; one per registry on a shared store."""

    def __init__(self, registry: Node, store: SharedStore) -> None:
        self.registry = registry
        self.store = store
        self.mirrors: dict[str, MirrorSession] = {}
        self.directory: dict[str, tuple[SessionRecord, str | None]] = {}
        """Every session of the store's directory and its owner, as of the last scan."""
        self._mirrors_changed = anyio.Event()
        self.relay = Relay(registry, store, self.mirrors)
        """The messages between this node and the others (``hub.sessions.relay``)."""
        self.proxies = self.relay.proxies
        """Owner side: the clients of other nodes attached to sessions owned here."""
        self._quiet_until = 0.0
        """Until when other nodes' heartbeats are not judged (the store just came back: theirs
        may have expired while it did not answer)."""

    # -- the tasks ---------------------------------------------------------------------------

    def start(self) -> None:
        self.registry.spawn(self._own, name="cluster ownership")
        self.registry.spawn(self._beat, name="cluster heartbeat")
        self.registry.spawn(self._follow, name="cluster follow")
        self.registry.spawn(self.relay.run_inbox, name="cluster inbox")

    async def _own(self) -> None:
        lease = self.registry.settings.node_lease
        failing = False
        while True:
            try:
                lost = await self.store.renew(list(self.registry.sessions), lease)
                if failing:
                    self._quiet(beat(lease)[0])
                for session_id in lost:
                    self._let_go(session_id)
                await self._scan()
                if failing:
                    log.warning("= cluster: the store answers again")
                failing = False
            except Exception as exc:  # the store's and the redis client's errors alike
                if not failing:
                    log.warning("! cluster: renewing and scanning failed: %s", exc)
                failing = True
                self._quiet(beat(lease)[0])
            self.store.reads_failing = failing
            await anyio.sleep(lease / 3)

    async def _beat(self) -> None:
        ttl, every = beat(self.registry.settings.node_lease)
        failing = False
        while True:
            try:
                await self.store.heartbeat(ttl)
                if failing:
                    self._quiet(ttl)
                if anyio.current_time() >= self._quiet_until:
                    await self._claim_dead()
                failing = False
            except Exception as exc:  # the store's and the redis client's errors alike
                if not failing:
                    log.warning("! cluster: the heartbeat failed: %s", exc)
                failing = True
                self._quiet(ttl)
            await anyio.sleep(every)

    def _quiet(self, ttl: float) -> None:
        """The store failed or just came back: every node's heartbeat may have expired while
        it did not answer, so none is judged for a whole TTL from now (they beat again)."""
        self._quiet_until = max(self._quiet_until, anyio.current_time() + ttl)

    async def _claim_dead(self) -> None:
        """Claim at once the sessions of the owners whose heartbeat stopped; the clients of
        those nodes are no longer attached here."""
        me = self.store.node
        owners = {owner for _, owner in self.directory.values() if owner and owner != me}
        nodes = owners | {proxy.node for proxy in self.proxies.values()}
        if not nodes:
            return
        alive = await self.store.alive(sorted(nodes))
        dead = nodes - alive
        if not dead:
            return
        for (session_id, _), proxy in list(self.proxies.items()):
            if proxy.node in dead:
                self.relay.leave(session_id, proxy.client_id, "its node is gone")
        lease = self.registry.settings.node_lease
        for node in sorted(dead & owners):
            theirs = [sid for sid, (_, owner) in self.directory.items() if owner == node]
            taken = await self.store.claim_from(theirs, node, lease)
            if not taken:
                continue
            log.warning(
                "! cluster: node %s stopped its heartbeat: this node takes %d of its sessions",
                node,
                len(taken),
            )
            for session_id in taken:
                record = self.directory[session_id][0]
                self.directory[session_id] = (record, me)
                if await self.registry.take(session_id, record.agent, record.creator):
                    log.info("= %s: taken over by this node", session_id)

    async def _scan(self) -> None:
        records = await self.store.records()
        owners = await self.store.owners([r.session_id for r in records])
        self.directory = {r.session_id: (r, owners.get(r.session_id)) for r in records}
        for record in records:
            if (
                owners.get(record.session_id) is None
                and record.session_id not in self.registry.sessions
            ) and await self.registry.take(record.session_id, record.agent, record.creator):
                log.info("= %s: taken over by this node", record.session_id)
        # Clients of nodes that died are no longer attached here.
        nodes = sorted({proxy.node for proxy in self.proxies.values()})
        if nodes and anyio.current_time() >= self._quiet_until:
            alive = await self.store.alive(nodes)
            for (session_id, _), proxy in list(self.proxies.items()):
                if proxy.node not in alive:
                    self.relay.leave(session_id, proxy.client_id, "its node is gone")
        # A mirrored session whose owner changed: tell the new owner about the clients here.
        for session_id, mirror in self.mirrors.items():
            owner = self.directory.get(session_id, (None, None))[1]
            if owner is not None and owner != mirror.registered_with:
                mirror.registered_with = owner
                for attachment in tuple(mirror.attached.values()):
                    self.relay.join(mirror, attachment.client)
        for session_id, mirror in list(self.mirrors.items()):
            if session_id not in self.directory or session_id in self.registry.sessions:
                if not mirror.attached or session_id not in self.directory:
                    self._close_mirror(session_id)
            elif not mirror.attached:
                # Followed for nobody since the last scan: stop (a new attach builds it again).
                if mirror.idle:
                    self._close_mirror(session_id)
                mirror.idle = True
            else:
                mirror.idle = False

    def _let_go(self, session_id: str) -> None:
        """This node lost the lease of ``session_id``: another node owns it now."""
        session = self.registry.sessions.pop(session_id, None)
        if session is None:
            return
        log.warning("! %s: another node owns it now; its clients here are moved", session_id)
        session.closed = True
        # The stand-ins of other nodes' clients: those follow the session on their own node,
        # which tells the new owner about them at its next scan.
        for key in [key for key in self.proxies if key[0] == session_id]:
            del self.proxies[key]
        session.dismiss({"sessionId": session_id, "moved": True}, "moved to another node")
        self.registry.changed(session)

    async def _follow(self) -> None:
        failing = False
        while True:
            positions = {sid: mirror.log.last_seq for sid, mirror in self.mirrors.items()}
            if not positions:
                await self._mirrors_changed.wait()
                self._mirrors_changed = anyio.Event()
                continue
            try:
                read = await self.store.follow(positions, FOLLOW_BLOCK)
            except Exception as exc:
                if not failing:
                    log.warning("! cluster: following the streams failed, retrying: %s", exc)
                failing = True
                await anyio.sleep(RETRY)
                continue
            if failing:
                log.warning("= cluster: following the streams again")
                failing = False
            for session_id, rows in read.items():
                mirror = self.mirrors.get(session_id)
                if mirror is None or not rows:
                    continue
                try:
                    mirror.ingest(rows)
                except Gap as exc:
                    await self._rebuild(mirror, str(exc))

    async def _rebuild(self, mirror: MirrorSession, why: str) -> None:
        log.warning(
            "! %s: the stream does not continue this node's copy (%s): reset", mirror.id, why
        )
        try:
            restored = await self.store.read_session(mirror.id, **self.registry.bounds)
        except StoreError as exc:
            log.warning("! %s: cannot be read again: %s", mirror.id, exc)
            return
        if restored is None:
            self._close_mirror(mirror.id)
            return
        mirror.load(restored)
        mirror.reset_clients()

    def _close_mirror(self, session_id: str) -> None:
        mirror = self.mirrors.pop(session_id, None)
        if mirror is None:
            return
        mirror.closed = True
        for attachment in tuple(mirror.attached.values()):
            attachment.client.notify("_hub/session_closed", {"sessionId": session_id})
            mirror.detach(attachment.client, reason="session closed")

    # -- mirrors -----------------------------------------------------------------------------

    def follows_first(self, method: str, session_id: Any) -> bool:
        """Whether ``method`` attaches to a session another node owns that this node does not
        follow yet (``mirror`` it first)."""
        return method in REMOTE_ATTACH and self.is_remote(session_id)

    async def close_at_owner(
        self, client: ClientHandle, found: SessionOps, *, delete: bool
    ) -> None:
        """``session/close`` / ``session/delete`` of a session this node does not own, for
        ``client`` of this node: done by the owner when ``found`` is a mirror (one closed here
        already is gone)."""
        if isinstance(found, MirrorSession):
            await found.close_at_owner(client, delete=delete)

    def is_remote(self, session_id: Any) -> bool:
        """Whether ``session_id`` may be a session another node owns, not yet followed here."""
        return (
            isinstance(session_id, str)
            and session_id not in self.registry.sessions
            and session_id not in self.mirrors
        )

    async def mirror(self, session_id: str) -> MirrorSession:
        """The mirror of ``session_id`` (built from the store if this node has none yet);
        ``SessionFailure`` ``-32002`` when the store does not know it."""
        mirror = self.mirrors.get(session_id)
        if mirror is not None:
            return mirror
        try:
            restored = await self.store.read_session(session_id, **self.registry.bounds)
        except StoreError as exc:
            raise SessionFailure(hub_error(NOT_OWNER, f"session {session_id!r}: {exc}")) from None
        if restored is None:
            raise SessionFailure(resource_not_found(f"no session {session_id!r}"))
        owner = await self.store.owner(session_id)
        # No await from here on: requests that arrive together build one mirror, not one each
        # (a second mirror would take the stream's events from the first, which then has gaps).
        mirror = self.mirrors.get(session_id)  # built meanwhile by another request
        if mirror is None:
            mirror = MirrorSession(
                restored,
                self.relay.forward,
                settings=self.registry.settings,
                on_change=self.registry.changed,
                spawn=self.registry.spawn,
                metrics=self.registry.metrics,
            )
            mirror.on_join = self.relay.join
            mirror.on_leave = self.relay.left
            mirror.registered_with = owner
            self.mirrors[session_id] = mirror
            log.info("= %s: followed on this node (seq %s)", session_id, mirror.log.last_seq)
        self._mirrors_changed.set()
        return mirror


__all__ = ["REMOTE_ATTACH", "Cluster", "beat"]
