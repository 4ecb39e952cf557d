"""The two servers under test, driven through one interface by the scenarios.

``HubTarget`` speaks the hub's wire contract (``docs/protocol.md``): ``initialize``,
``session/new`` on the ``bench`` agent, ``session/resume`` with an optional ``replayFrom``,
``session/prompt`` whose text tells ``agent.py`` what to stream. ``BaselineTarget`` speaks the
baseline's two-method protocol (``baseline.py``), where a group stands for a session.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tests.bench.wsclient import Conn, Recorder, connect

__all__ = [
    "BaselineTarget",
    "ClusterTarget",
    "HubTarget",
    "Session",
    "SplitHubTarget",
    "SpreadHubTarget",
    "Target",
    "make_target",
    "open_from",
    "open_many",
]


@dataclass
class Session:
    """A session (hub) or group (baseline) and the connection that created it."""

    id: str
    epoch: Any
    creator: Conn


class Target(Protocol):
    """What a scenario needs from a server."""

    kind: str
    host: str
    port: int

    async def open(self, recorder: Recorder, *, rcvbuf: int | None = None) -> Conn:
        """A connected client, ready to create or attach."""
        ...

    async def open_observer(self, recorder: Recorder) -> Conn:
        """A connected client for a plain observer (the hub: of the configured version)."""
        ...

    async def open_for(self, session: Session, recorder: Recorder) -> Conn:
        """A connected client for an observer of ``session`` (where it should attach)."""
        ...

    async def create(self, conn: Conn) -> Session:
        """A new session; ``conn`` is attached to it and live."""
        ...

    async def attach(
        self,
        conn: Conn,
        session: Session,
        replay: dict[str, Any] | None = None,
        *,
        viewer: bool = False,
    ) -> int:
        """Attach ``conn`` (live after this returns); the seq the stream continues after.
        ``viewer``: as a viewer (the hub: ``_meta["acp-hub"].role``), as an audience watches;
        the bench has no credentials, so every connection may otherwise act as the owner."""
        ...

    async def stream(
        self,
        sessions: Sequence[Session],
        rate: float,
        count: int,
        size: int,
        *,
        starts: Sequence[float] | None = None,
        **extra: object,
    ) -> None:
        """Start ``count`` updates of about ``size`` bytes at ``rate``/s in every session.

        ``starts`` (one per session, ``CLOCK_MONOTONIC`` seconds) is when each session's first
        update falls due (default: as soon as the server has the request). The same start for
        every session puts the streams in step: each session's update ``n`` falls due in the
        same instant, in both servers alike.
        """
        ...

    def cancel(self, session: Session) -> None:
        """Stop a session's stream early (hub: ``session/cancel``)."""
        ...


def _meta_seq(result: Any) -> tuple[int, Any]:
    meta = ((result or {}).get("_meta") or {}).get("acp-hub") or {}
    return int(meta.get("seq", 0)), meta.get("epoch")


def _ignore(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


class HubTarget:
    """The hub at ``host:port`` with a ``bench`` agent."""

    kind = "hub"

    def __init__(
        self, host: str, port: int, agent: str = "bench", observer_version: int = 2
    ) -> None:
        self.host, self.port, self.agent = host, port, agent
        self.observer_version = observer_version
        self.cwd = os.getcwd()
        self._v1: set[int] = set()

    async def open(self, recorder: Recorder, *, rcvbuf: int | None = None) -> Conn:
        return await self.open_on(self.port, recorder, rcvbuf=rcvbuf)

    async def open_on(self, port: int, recorder: Recorder, *, rcvbuf: int | None = None) -> Conn:
        """A v2 client of the node listening on ``port``, initialized."""
        conn = await connect(self.host, port, "/acp", recorder, rcvbuf=rcvbuf)
        await conn.request(
            "initialize",
            {
                "protocolVersion": 2,
                "info": {"name": "acp-hub-bench", "version": "0.1.0"},
                "capabilities": {},
            },
        )
        return conn

    async def open_observer(self, recorder: Recorder) -> Conn:
        if self.observer_version == 2:
            return await self.open(recorder)
        conn = await connect(self.host, self.port, "/acp", recorder)
        await conn.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {},
                "clientInfo": {"name": "acp-hub-bench", "version": "0.1.0"},
            },
        )
        self._v1.add(id(conn))
        conn.strict_seq = False
        return conn

    async def open_for(self, session: Session, recorder: Recorder) -> Conn:
        return await self.open_observer(recorder)

    async def create(self, conn: Conn) -> Session:
        result = await conn.request(
            "session/new",
            {"cwd": self.cwd, "mcpServers": [], "_meta": {"acp-hub": {"agent": self.agent}}},
        )
        seq, epoch = _meta_seq(result)
        conn.attached_at(seq)
        return Session(str(result["sessionId"]), epoch, conn)

    async def attach(
        self,
        conn: Conn,
        session: Session,
        replay: dict[str, Any] | None = None,
        *,
        viewer: bool = False,
    ) -> int:
        params: dict[str, Any] = {"sessionId": session.id, "cwd": self.cwd}
        if id(conn) in self._v1:
            params["mcpServers"] = []
            if replay is not None:
                raise ValueError("v1 observers attach live only")
        elif replay is not None:
            params["replayFrom"] = replay
        if viewer:
            params["_meta"] = {"acp-hub": {"role": "viewer"}}
        seq, _ = _meta_seq(await conn.request("session/resume", params))
        conn.attached_at(seq)
        return seq

    async def stream(
        self,
        sessions: Sequence[Session],
        rate: float,
        count: int,
        size: int,
        *,
        starts: Sequence[float] | None = None,
        **extra: object,
    ) -> None:
        words = " ".join(f"{k}={v}" for k, v in extra.items())
        text = f"rate={rate:g} count={count} size={size} {words}".strip()
        waits = []
        for i, s in enumerate(sessions):
            start = f" start={starts[i]:.6f}" if starts else ""
            params = {"sessionId": s.id, "prompt": [{"type": "text", "text": text + start}]}
            answer = s.creator.request("session/prompt", params)
            if id(s.creator) in self._v1:
                # v1 answers a prompt when its turn ends: do not wait for that here.
                answer.add_done_callback(_ignore)
            else:
                waits.append(answer)
        await asyncio.gather(*waits)

    def cancel(self, session: Session) -> None:
        session.creator.notify("session/cancel", {"sessionId": session.id})


class SplitHubTarget(HubTarget):
    """Two hub nodes sharing one Redis: sessions are created on the first, observers attach
    alternately to the first and the second (which follows the session through Redis)."""

    def __init__(self, host: str, port: int, second_port: int) -> None:
        super().__init__(host, port)
        self.second_port = second_port
        self._next = 0

    async def open_observer(self, recorder: Recorder) -> Conn:
        self._next += 1
        return await self.open_on(self.port if self._next % 2 else self.second_port, recorder)


class SpreadHubTarget(HubTarget):
    """Two hub nodes sharing one Redis, each serving half of the sessions: sessions are
    created alternately on the first and the second node, and every observer attaches on the
    node that created its session (which owns it and runs its agent). Scale-out: no session
    crosses nodes."""

    def __init__(self, host: str, port: int, second_port: int) -> None:
        super().__init__(host, port)
        self.second_port = second_port
        self._next = 0

    async def open_observer(self, recorder: Recorder) -> Conn:
        self._next += 1
        return await self.open_on(self.port if self._next % 2 else self.second_port, recorder)

    async def open_for(self, session: Session, recorder: Recorder) -> Conn:
        return await self.open_on(session.creator.port, recorder)


class ClusterTarget(HubTarget):
    """Several hub nodes sharing one Redis, addressed by index (``ports[i]``); sessions are
    created through ``open_on`` on whichever node the scenario chooses."""

    def __init__(self, host: str, ports: Sequence[int]) -> None:
        super().__init__(host, ports[0])
        self.ports = list(ports)


class BaselineTarget:
    """The baseline broadcast server at ``host:port``."""

    kind = "baseline"

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._groups = itertools.count(1)

    async def open(self, recorder: Recorder, *, rcvbuf: int | None = None) -> Conn:
        return await connect(self.host, self.port, "/", recorder, rcvbuf=rcvbuf)

    async def open_observer(self, recorder: Recorder) -> Conn:
        return await self.open(recorder)

    async def open_for(self, session: Session, recorder: Recorder) -> Conn:
        return await self.open(recorder)

    async def create(self, conn: Conn) -> Session:
        session = Session(f"g{next(self._groups)}", "e1", conn)
        await self.attach(conn, session)
        return session

    async def attach(
        self,
        conn: Conn,
        session: Session,
        replay: dict[str, Any] | None = None,
        *,
        viewer: bool = False,
    ) -> int:
        seq, _ = _meta_seq(await conn.request("attach", {"group": session.id}))
        # The other target's twin: the bench drives each target through its own class.
        conn.attached_at(seq)
        return seq

    async def stream(
        self,
        sessions: Sequence[Session],
        rate: float,
        count: int,
        size: int,
        *,
        starts: Sequence[float] | None = None,
        **extra: object,
    ) -> None:
        params: dict[str, Any] = {
            "groups": [s.id for s in sessions],
            "rate": rate,
            "count": count,
            "size": size,
        }
        if starts:
            params["starts"] = list(starts)
        await sessions[0].creator.request("stream", params)

    def cancel(self, session: Session) -> None:
        """The baseline's streams always run to their count."""


def make_target(kind: str, host: str, port: int, observer_version: int = 2) -> Target:
    """A target of ``kind`` (``hub`` or ``baseline``); hub observers speak ``observer_version``."""
    if kind == "hub":
        return HubTarget(host, port, observer_version=observer_version)
    if kind == "baseline":
        return BaselineTarget(host, port)
    raise ValueError(f"unknown target kind {kind!r}")


async def open_many(
    target: Target,
    recorder: Recorder,
    sessions: Sequence[Session],
    per_session: int,
    *,
    concurrency: int = 100,
) -> list[Conn]:
    """Open ``per_session`` connections attached (live) to each of ``sessions``, as
    viewers: the observers of a session are its audience."""
    gate = asyncio.Semaphore(concurrency)

    async def one(session: Session) -> Conn:
        async with gate:
            conn = await target.open_for(session, recorder)
            await target.attach(conn, session, viewer=True)
            return conn

    jobs = [one(s) for s in sessions for _ in range(per_session)]
    return list(await asyncio.gather(*jobs))


async def open_from(target: Target, recorder: Recorder, source: str) -> Conn:
    """A client of ``target`` connected from the local address ``source`` (a ``127.0.0.x``),
    initialized for the hub: S12's tens of thousands of connections spread over several
    source addresses, so that no one address runs out of ephemeral ports."""
    path = "/acp" if target.kind == "hub" else "/"
    conn = await connect(target.host, target.port, path, recorder, source=source)
    if target.kind == "hub":
        await conn.request(
            "initialize",
            {
                "protocolVersion": 2,
                "info": {"name": "acp-hub-bench", "version": "0.1.0"},
                "capabilities": {},
            },
        )
    return conn
