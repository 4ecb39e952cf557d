"""Catch-ups: what a client attaching to a session is sent before its answer.

Theory of operation
-------------------
A client attaching asks for nothing (live only), the compacted state (``start``), the events
after a cursor (``after``), only what waits (``pending_only``) or the events after a message
(``message``). A cursor or a message the log cannot serve gets a ``_hub_reset`` and the
compacted state instead. The frames are rendered for the client's version (v1 clients get
``_hub_*`` updates only when they asked for them), grouped into JSON-RPC batch pages for clients
that take batches, and produced lazily: the session hands the iterator to the client's sink,
which encodes a page only when its transport takes more, so a large replay never stalls the
others. Replayed updates carry ``replay: true`` and the epoch instead of a seq.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from hub.protocol.client_v1 import ClientV1Renderer
from hub.protocol.compact import compact
from hub.protocol.state import SessionState
from hub.sessions import arbiter
from hub.sessions.client import ClientHandle
from hub.sessions.metrics import SessionMetrics
from hub.sessions.ops import Replay
from hub.settings import Settings
from hub.store.log import EventLog, Row, v1_frames


class Source(Protocol):
    """What the catch-up reads of a session (``hub.sessions.core.SessionCore`` is one)."""

    # Structural: a Protocol's read-only properties, declared one by one.
    @property
    def id(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def state(self) -> SessionState: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def metrics(self) -> SessionMetrics: ...

    @property
    def v1(self) -> ClientV1Renderer: ...

    def frame(self, update: dict[str, Any], meta: dict[str, Any]) -> bytes: ...


log = logging.getLogger("hub.sessions")


class CatchUp:
    """The catch-up frames of one session's attaching clients; see the module docstring."""

    def __init__(self, session: Source) -> None:
        self._session = session

    def frames(
        self,
        client: ClientHandle,
        replay: Replay,
        after: tuple[int, int] | None,
        message_id: str | None,
    ) -> Iterable[bytes]:
        """The frames ``client`` gets before its attach answer (see ``Session.attach``),
        timed by the session's metrics as they are taken."""
        session = self._session
        state, event_log = session.state, session.log
        frames: Iterable[bytes]
        kind = "replay"  # what the catch-up is, for the metrics
        if replay == "after" and after is not None:
            epoch, seq = after
            rows = event_log.rows_covered(seq) if event_log.serves(epoch, seq) else None
            if rows is None:
                kind, frames = "reset", self.reset(client, epoch, seq)
            else:
                kind, frames = "resume", self._events(client, rows)
        elif replay in ("start", "after"):
            frames = self._replay(client, compact(state))
        elif replay == "pending_only":
            frames = self._replay(client, arbiter.pending_only(compact(state)))
        elif replay == "message" and message_id is not None:
            last = event_log.last_of_message(message_id)
            rows = None if last is None else event_log.rows_covered(last)
            if rows is None:
                kind, frames = "reset", self.reset(client, event_log.epoch, 0)
            else:
                kind, frames = "resume", self._events(client, rows)
        else:
            return []
        return session.metrics.catch_up(kind, frames)

    def _pages(self, client: ClientHandle, frames: Iterable[bytes]) -> Iterator[bytes]:
        """Group notification frames into v2 batch frames of bounded size (only for clients
        that asked for batches: the TypeScript SDK, for one, drops every batch it receives).

        Lazy: ``frames`` is consumed (and, for a replay, encoded) only as the client's sink
        takes the pages, so a large replay does not stall everyone else while it is built."""
        if not client.batches:
            yield from frames
            return
        current: list[bytes] = []
        size = 0
        limit = self._session.settings.replay_page_bytes
        for frame in frames:
            if current and size + len(frame) > limit:
                yield b"[" + b",".join(current) + b"]" if len(current) > 1 else current[0]
                current, size = [], 0
            current.append(frame)
            size += len(frame) + 1
        if current:
            yield b"[" + b",".join(current) + b"]" if len(current) > 1 else current[0]

    def _rendered(self, client: ClientHandle, updates: list[dict[str, Any]]) -> list[Any]:
        if client.version >= 2:
            return updates
        rendered = self._session.v1.render_replay(updates)
        if not client.hub_events:
            rendered = [
                u for u in rendered if not str(u.get("sessionUpdate", "")).startswith("_hub_")
            ]
        return rendered

    def _replay(self, client: ClientHandle, updates: list[dict[str, Any]]) -> Iterator[bytes]:
        """``updates`` (a compaction, or part of one) as replay frames for ``client``: rendered
        for its version, ``_meta`` with the epoch and ``replay: true`` instead of a seq, in
        pages when it takes batches. The updates are rendered now and encoded lazily: a
        compaction is a snapshot (it shares no container the fold changes later)."""
        session = self._session
        meta = {"epoch": session.log.epoch, "replay": True}
        rendered = self._rendered(client, updates)
        return self._pages(client, (session.frame(u, meta) for u in rendered))

    def reset(self, client: ClientHandle, epoch: int, seq: int) -> Iterator[bytes]:
        """A ``_hub_reset`` and the compacted state, for a client whose cursor ``(epoch,
        seq)`` cannot be served (or that must start over)."""
        session = self._session
        event_log = session.log
        shared = event_log.last_seq if epoch == event_log.epoch else event_log.lineage.get(epoch)
        if shared is None:
            reason = "epoch changed"
        elif seq > shared:
            # Events the client saw that the log does not hold (an owner that died before it
            # wrote them, then another node took over): the client must start over.
            reason = "cursor ahead of the log"
        else:
            reason = "cursor older than the log"
        reset = {"sessionUpdate": "_hub_reset", "reason": reason, "epoch": event_log.epoch}
        log.info(
            "= %s: %s resumes from %s/%s: %s, full replay",
            session.id,
            client.client_id,
            epoch,
            seq,
            reason,
        )
        # Like every `_hub_*` update, the reset reaches v1 clients only if they opted in.
        return self._replay(client, [reset, *compact(session.state)])

    def _events(self, client: ClientHandle, rows: list[Row]) -> Iterator[bytes]:
        if client.version >= 2:
            frames = [row[2] for row in rows]  # each row's v2 frame
        else:
            frames = v1_frames(rows, client.client_id, client.hub_events)
        return self._pages(client, frames)
