"""Messages between the nodes of one hub: what a node's clients ask of a session another node
owns, and what an owner asks or tells the clients of other nodes.

Theory of operation
-------------------
Every node reads its inbox in the store (``run_inbox``). A follower sends what its clients ask
of a mirrored session (``hub.sessions.mirror``: prompts, cancels, config, the hub methods of
``FORWARDED_METHODS``) to the session's owner (``forward``): while the session has no live
owner the request waits for one, up to ``owner_wait``; an owner that takes a request says so
(``ack``), runs it once for a ``RemoteClient`` with the role the follower gave it, and sends
the answer back.

A follower tells the owner when one of its clients attaches to or leaves a mirrored session
(``join``, ``left``): the owner attaches a ``RemoteClient`` stand-in (``relayed``: in the
presence, offered permission requests, outside the fan-out) and carries the requests and
notifications the session sends it to the client's node (``ask``, ``tell``), which hands them
to its client and sends the answer back. Messages for one node go out in order, retried while
the store does not answer (``owner_wait`` at most).
"""

from __future__ import annotations

import logging
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from hub.protocol.errors import NOT_OWNER, RpcError, hub_error
from hub.sessions.client import ClientHandle, ReplyHandler
from hub.sessions.errors import SessionFailure
from hub.sessions.mirror import MirrorSession
from hub.sessions.nodes import FOLLOW_BLOCK, RETRY, Node, beat
from hub.sessions.remote import RemoteClient, run_method
from hub.settings import ROLES, Role
from hub.store import SharedStore

log = logging.getLogger("hub.sessions")

FORWARD_TIMEOUT = 30.0
"""Seconds a forwarded request waits for the owner's answer once the owner has taken it (a v1
prompt waits for its turn)."""
SERVED_KEPT = 10_000
"""Ids of forwarded requests an owner remembers having served (a resend is not run twice)."""


@dataclass
class _Pending:
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: RpcError | None = None
    taken: bool = False
    """The owner said it has the request (``ack``): from then on it is never sent again."""
    wake: anyio.Event = field(default_factory=anyio.Event)


class Relay:
    """See the module docstring; one per ``Cluster``, which shares its ``mirrors``."""

    def __init__(
        self, registry: Node, store: SharedStore, mirrors: dict[str, MirrorSession]
    ) -> None:
        self.registry = registry
        self.store = store
        self.mirrors = mirrors
        """The sessions this node follows (the cluster's): their clients are here."""
        self._pending: dict[str, _Pending] = {}
        self.proxies: dict[tuple[str, str], RemoteClient] = {}
        """Owner side: the clients of other nodes attached to sessions owned here."""
        self._calls: dict[str, ReplyHandler] = {}
        """Owner side: requests sent to clients of other nodes, waiting for the answer."""
        self._asked: dict[str, tuple[ClientHandle, Any]] = {}
        """Follower side: requests the owner sent to a local client (its id there)."""
        self._served: dict[str, None] = {}
        """Owner side: the ids of the forwarded requests taken here (oldest first)."""
        self._outgoing: dict[str, deque[tuple[dict[str, Any], Callable[[], None] | None, float]]]
        self._outgoing = {}
        """Messages for each node's inbox, in order, sent by one task per node."""

    async def run_inbox(self) -> None:
        after = "0-0"
        # Alike in shape to the cluster's follow loop, which reads its positions again each retry.
        failing = False
        while True:
            try:
                after, messages = await self.store.receive(after, FOLLOW_BLOCK * 2)
            except Exception as exc:
                if not failing:
                    log.warning("! cluster: reading the inbox failed, retrying: %s", exc)
                failing = True
                await anyio.sleep(RETRY)
                continue
            failing = False
            for message in messages:
                try:
                    self._dispatch(message)
                except Exception:
                    log.exception("! cluster: a message from another node failed")

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if "ack" in message:
            taken = self._pending.get(str(message["ack"]))
            if taken is not None:
                taken.taken = True
                taken.wake.set()
            return
        if "re" in message:
            rid = str(message["re"])
            error = RpcError.from_dict(message["error"]) if "error" in message else None
            call = self._calls.pop(rid, None)
            if call is not None:
                call(message.get("result"), error)
                return
            pending = self._pending.get(rid)
            if pending is not None:
                pending.result = message.get("result")
                pending.error = error
                pending.done.set()
                pending.wake.set()
        elif op == "join":
            self._joined(message)
        elif op == "leave":
            self.leave(
                str(message.get("session")),
                str((message.get("client") or {}).get("id")),
                str(message.get("reason") or "detached"),
            )
        elif op in ("request", "withdraw", "notify"):
            self._for_local_client(message)
        else:
            rid, origin = str(message.get("rid")), message.get("from")
            if rid in self._served:
                return  # sent again after a failed send: it runs once
            self._served[rid] = None
            if len(self._served) > SERVED_KEPT:
                del self._served[next(iter(self._served))]
            if isinstance(origin, str):
                # Taken: from now on the sender waits for the answer, and never sends it to
                # another node (it may be running here).
                self._send_later(origin, {"ack": rid})
            self._serve_later(message)

    # -- forwarding --------------------------------------------------------------------------

    async def forward(
        self, mirror: MirrorSession, op: str, client: ClientHandle, params: dict[str, Any]
    ) -> Any:
        """Run ``op`` (``prompt``, ``cancel``, ...) for ``client`` on ``mirror``'s owner.

        While the session has no live owner (its node died and nobody took it over yet, or the
        store does not answer), the request waits for one, up to ``owner_wait`` seconds, and is
        sent to it then. A request sent to an owner that dies before taking it (``ack``) is
        sent to the next owner; one the owner took is never sent elsewhere (it may be running):
        if that owner dies, it fails with ``-32051`` at once."""
        wait = self.registry.settings.owner_wait
        deadline = anyio.current_time() + wait
        rid = secrets.token_hex(8)
        message = {
            "op": op,
            "session": mirror.id,
            "rid": rid,
            "from": self.store.node,
            "client": {
                "id": client.client_id,
                "name": client.name,
                "principal": client.principal,
                "role": mirror.role_of(client),
                "version": client.version,
            },
            "params": params,
        }
        # A v1 prompt is answered when its turn ends: it waits as long as the turn.
        answer_wait = None if op == "prompt" and client.version < 2 else FORWARD_TIMEOUT
        pending = self._pending[rid] = _Pending()
        try:
            while True:
                owner = await self._live_owner(mirror.id, deadline)
                if owner is None:
                    raise SessionFailure(
                        hub_error(
                            NOT_OWNER,
                            f"No node owned the session within {wait:g} s; try again shortly",
                        )
                    )
                try:
                    await self.store.send(owner, message)
                except Exception as exc:  # the store's and the redis client's errors alike
                    # Maybe sent: the owner runs a request id once, so it is sent again.
                    log.info("= %s: forwarding %s failed, sending again: %s", mirror.id, op, exc)
                    await anyio.sleep(beat(self.registry.settings.node_lease)[1])
                    continue
                if await self._answered(mirror.id, pending, owner, answer_wait, op):
                    break
                log.info(
                    "= %s: the owner %s is gone; %s goes to the next one", mirror.id, owner, op
                )
        finally:
            self._pending.pop(rid, None)
        if pending.error is not None:
            raise SessionFailure(pending.error)
        return pending.result

    async def _live_owner(self, session_id: str, deadline: float) -> str | None:
        """The session's owner once it is a node whose heartbeat runs (this one, or another),
        waiting for one until ``deadline``; ``None`` past it."""
        every = beat(self.registry.settings.node_lease)[1]
        while True:
            try:
                owner = await self.store.owner(session_id)
                if owner is not None and (
                    owner == self.store.node or await self.store.alive([owner])
                ):
                    return owner
            except Exception as exc:  # the store does not answer: wait for it as for an owner
                log.info("= %s: the owner cannot be read: %s", session_id, exc)
            left = deadline - anyio.current_time()
            if left <= 0:
                return None
            await anyio.sleep(min(every, left))

    async def _answered(
        self, session_id: str, pending: _Pending, owner: str, answer_wait: float | None, op: str
    ) -> bool:
        """Wait for the answer to a request sent to ``owner``: ``True`` once answered,
        ``False`` when ``owner`` died before taking it (send it to the next owner)."""
        ttl, every = beat(self.registry.settings.node_lease)
        silent_since: float | None = None
        try:
            with anyio.fail_after(answer_wait):
                while not pending.done.is_set():
                    wake = pending.wake
                    if wake.is_set():
                        pending.wake = wake = anyio.Event()
                    with anyio.move_on_after(every):
                        await wake.wait()
                    if pending.done.is_set() or owner == self.store.node:
                        continue
                    try:
                        # Gone: another node took the session over, or its heartbeat has
                        # been missing for a whole TTL (not one late beat after a stall).
                        moved = await self.store.owner(session_id) != owner
                        silent = not await self.store.alive([owner])
                    except Exception:  # the store does not answer: keep waiting
                        continue
                    now = anyio.current_time()
                    silent_since = (silent_since or now) if silent else None
                    gone = moved or (silent_since is not None and now - silent_since >= ttl)
                    if not gone:
                        continue
                    if not pending.taken:
                        return False
                    lost = f"The node owning the session was lost during {op}"
                    raise SessionFailure(hub_error(NOT_OWNER, lost))
        except TimeoutError:
            raise SessionFailure(
                hub_error(NOT_OWNER, f"The node owning the session did not answer {op}")
            ) from None
        return True

    def _serve_later(self, message: dict[str, Any]) -> None:
        async def serve() -> None:
            await self._serve(message)

        self.registry.spawn(serve, name="forwarded request")

    async def _owned(self, session_id: str) -> Any:
        """The session ``session_id`` owned here; one this node claimed and is still restoring
        is waited for (``owner_wait`` at most), ``None`` for one owned elsewhere."""
        session = self.registry.sessions.get(session_id)
        if session is not None:
            return session
        with anyio.move_on_after(self.registry.settings.owner_wait):
            while session_id not in self.registry.sessions:
                try:
                    if await self.store.owner(session_id) != self.store.node:
                        return None
                except Exception:  # the store does not answer: wait for it
                    pass
                await anyio.sleep(beat(self.registry.settings.node_lease)[1] / 5)
        return self.registry.sessions.get(session_id)

    async def _serve(self, message: dict[str, Any]) -> None:
        """Run a request another node forwarded, and send it the answer."""
        reply: dict[str, Any] = {"re": message.get("rid")}
        origin = message.get("from")
        try:
            session = await self._owned(str(message.get("session")))
            if session is None:
                raise SessionFailure(hub_error(NOT_OWNER, "This node does not own the session"))
            info = message.get("client") or {}
            role: Role = info["role"] if info.get("role") in ROLES else "viewer"
            client = RemoteClient(
                str(info.get("id")),
                str(info.get("name")),
                role,
                int(info.get("version") or 2),
                str(info.get("principal") or "unknown"),
            )
            proxy = self.proxies.get((session.id, client.client_id))
            if proxy is not None:
                client = proxy  # the stand-in attached here, with its node to answer it
            params = message.get("params") or {}
            op = message.get("op")
            if op == "prompt":
                reply["result"] = await session.prompt(client, params.get("blocks"))
            elif op == "cancel":
                await session.cancel(client)
                reply["result"] = None
            elif op == "config":
                reply["result"] = await session.set_config_option(
                    client,
                    str(params.get("configId")),
                    str(params.get("kind")),
                    params.get("value"),
                )
            elif op == "mode":
                await session.set_mode(client, str(params.get("modeId")))
                reply["result"] = None
            elif op == "close":
                await self.registry.close(client, session, delete=bool(params.get("delete")))
                reply["result"] = None
            elif op == "extension":
                reply["result"] = await session.extension(
                    client, str(params.get("method")), params.get("params") or {}
                )
            elif op == "method":
                reply["result"] = run_method(
                    session, client, str(params.get("method")), params.get("params") or {}
                )
            else:
                raise SessionFailure(hub_error(NOT_OWNER, f"{op!r} is not forwarded"))
        except SessionFailure as exc:
            reply["error"] = exc.error.to_dict()
        except Exception as exc:
            error = getattr(exc, "error", None)
            if isinstance(error, RpcError):
                reply["error"] = error.to_dict()
            else:
                log.exception("! cluster: a forwarded request failed")
                reply["error"] = {"code": -32603, "message": "internal error"}
        if isinstance(origin, str):
            try:
                await self.store.send(origin, reply)
            except Exception as exc:
                log.warning("! cluster: the answer to %s was not sent: %s", origin, exc)

    # -- clients of other nodes --------------------------------------------------------------

    def _send_later(
        self,
        node: str,
        message: dict[str, Any],
        undelivered: Callable[[], None] | None = None,
    ) -> None:
        """Send ``message`` to ``node``'s inbox after those queued for it before (in order).
        While the store does not answer it is tried again, for ``owner_wait`` seconds; then it
        is dropped, logged, and ``undelivered`` is called (to refuse what it carried visibly)."""
        queue = self._outgoing.get(node)
        if queue is None:
            queue = self._outgoing[node] = deque()
            queue.append((message, undelivered, anyio.current_time()))
            self.registry.spawn(lambda: self._send_queued(node), name="cluster send")
        else:
            queue.append((message, undelivered, anyio.current_time()))

    async def _send_queued(self, node: str) -> None:
        queue = self._outgoing[node]
        wait = self.registry.settings.owner_wait
        every = beat(self.registry.settings.node_lease)[1]
        failing = False
        try:
            while queue:
                message, undelivered, queued = queue[0]
                try:
                    await self.store.send(node, message)
                except Exception as exc:  # the store's and the redis client's errors alike
                    if anyio.current_time() - queued < wait:
                        if not failing:
                            log.info("= cluster: node %s cannot be told yet: %s", node, exc)
                        failing = True
                        await anyio.sleep(every)
                        continue
                    log.warning(
                        "! cluster: a message to node %s was not sent in %g s: %s", node, wait, exc
                    )
                    if undelivered is not None:
                        undelivered()
                queue.popleft()
        finally:
            self._outgoing.pop(node, None)

    def _client_info(self, session: Any, client: ClientHandle) -> dict[str, Any]:
        return {
            "id": client.client_id,
            "name": client.name,
            "principal": client.principal,
            "program": client.program,
            "role": session.role_of(client),
            "version": client.version,
            "hub_events": client.hub_events,
        }

    def join(self, mirror: MirrorSession, client: ClientHandle) -> None:
        """A client attached to ``mirror`` here: the owner attaches its stand-in."""
        owner = mirror.registered_with
        if owner is None:
            return
        message = {
            "op": "join",
            "session": mirror.id,
            "from": self.store.node,
            "client": self._client_info(mirror, client),
        }
        self._send_later(owner, message)

    def left(self, mirror: MirrorSession, client: ClientHandle, reason: str) -> None:
        owner = mirror.registered_with
        if owner is None:
            return
        for rid, (asked, _) in list(self._asked.items()):
            if asked is client:
                del self._asked[rid]
        self._send_later(
            owner,
            {
                "op": "leave",
                "session": mirror.id,
                "from": self.store.node,
                "client": {"id": client.client_id},
                "reason": reason,
            },
        )

    def _joined(self, message: dict[str, Any]) -> None:
        """Owner side: a client of another node attached to a session owned here."""
        session = self.registry.sessions.get(str(message.get("session")))
        info = message.get("client") or {}
        node = message.get("from")
        if session is None or not isinstance(node, str) or not isinstance(info.get("id"), str):
            return
        role: Role = info["role"] if info.get("role") in ROLES else "viewer"
        proxy = RemoteClient(
            info["id"],
            str(info.get("name")),
            role,
            int(info.get("version") or 2),
            str(info.get("principal") or "unknown"),
            program=str(info.get("program") or ""),
            hub_events=bool(info.get("hub_events", True)),
            node=node,
            session_id=session.id,
            relay=self,
        )
        self.proxies[(session.id, proxy.client_id)] = proxy
        session.attach(proxy, replay=None, role=role, relayed=True)
        session.announce(proxy)

    def leave(self, session_id: str, client_id: str, reason: str) -> None:
        proxy = self.proxies.pop((session_id, client_id), None)
        session = self.registry.sessions.get(session_id)
        if proxy is not None and session is not None:
            session.detach(proxy, reason=reason)  # its requests are withdrawn (``tell``)

    def ask(
        self, proxy: RemoteClient, method: str, params: dict[str, Any], on_reply: ReplyHandler
    ) -> str:
        """Owner side: send a request to a client of another node; ``on_reply`` gets its
        answer. Returns the id the owner knows the request by."""
        rid = secrets.token_hex(8)
        self._calls[rid] = on_reply
        self.tell(proxy, {"op": "request", "rid": rid, "method": method, "params": params})
        return rid

    def tell(self, proxy: RemoteClient, message: dict[str, Any]) -> None:
        """Owner side: a message for the client ``proxy`` stands for, on its node."""
        if message.get("op") == "withdraw":
            self._calls.pop(str(message.get("rid")), None)
        self._send_later(
            proxy.node,
            {
                **message,
                "session": proxy.session_id,
                "from": self.store.node,
                "client": {"id": proxy.client_id},
            },
        )

    def _for_local_client(self, message: dict[str, Any]) -> None:
        """Follower side: the owner sends a request or notification to a client here."""
        mirror = self.mirrors.get(str(message.get("session")))
        client_id = str((message.get("client") or {}).get("id"))
        attachment = mirror.attached.get(client_id) if mirror is not None else None
        op, rid, owner = message.get("op"), str(message.get("rid")), message.get("from")
        if op == "withdraw":
            asked = self._asked.pop(rid, None)
            if asked is not None:
                asked[0].withdraw(asked[1])
            return
        if attachment is None or not isinstance(owner, str):
            if op == "request" and isinstance(owner, str):
                error = hub_error(NOT_OWNER, "the client is no longer attached")
                self._send_later(owner, {"re": rid, "error": error.to_dict()})
            return
        client = attachment.client
        params = message.get("params") or {}
        method = str(message.get("method"))
        if op == "notify":
            asked = self._asked.get(str(params.get("requestId")))
            if asked is not None:  # it names the owner's id of a request: the local one
                params = {**params, "requestId": asked[1]}
            client.notify(method, params)
            return

        def on_reply(result: Any, error: RpcError | None) -> None:
            asked = self._asked.pop(rid, None)
            answer: dict[str, Any] = {"re": rid, "result": result}
            if error is not None:
                answer["error"] = error.to_dict()

            def undelivered() -> None:
                # Never dropped in silence: the client learns its answer did not count.
                if error is None and asked is not None:
                    lost = hub_error(
                        NOT_OWNER, "The answer could not reach the node owning the session"
                    )
                    client.notify(
                        "_hub/answer_refused",
                        {
                            "sessionId": message.get("session"),
                            "requestId": asked[1],
                            "error": lost.to_dict(),
                        },
                    )

            self._send_later(owner, answer, undelivered)

        self._asked[rid] = (client, client.request(method, params, on_reply))


__all__ = ["Relay"]
