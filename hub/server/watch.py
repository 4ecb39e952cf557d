"""Live summaries of every session for the clients that watch them all: the team dashboard.

Theory of operation
-------------------
A client calls ``_hub/subscribe_sessions``: it is answered with the first page of cards of the
sessions it may see (``page_size`` of them, ordered by session id, with a ``nextCursor`` while
more follow; it calls again with ``{cursor}`` for each next page) and from then on receives
``_hub/sessions_changed`` notifications ``{sessions, removed}`` with the cards that changed and
the ids of sessions that are gone, over its own connection (one connection watches every
session; it attaches to none). A notification carries at most ``page_size`` cards too (a pass
that changed more sends several). Pages keep every answer small whatever the number of
sessions: one answer with every card of a full hub (1,000 sessions, 1-2 MB) could pass a
client's ``outbox_bytes`` on its own. ``_hub/unsubscribe_sessions`` stops the notifications; so
does the connection closing (``forget``).

One ``SessionWatch`` per registry does the work for every subscriber. A session's card can
only change when something is appended to its log (every state change the hub or the agent
makes is an event) or when it is created or closed, so the watch keeps each session's
``(epoch, last seq)`` and, on each pass, rebuilds only the cards whose log moved. A pass runs
at most every ``interval`` seconds while a session streams, and about ``settle`` seconds after
the registry says a session changed (a turn started or ended, a permission request waits), so
a burst of changes is one notification and a busy hub costs the same per subscriber whatever
the agents stream. Each pass encodes its notification once and hands the same bytes to every
subscriber's outbox, whose byte bound applies as to any other frame. A subscriber whose
credential covers only some sessions gives a ``visible`` test: it is told only of those, in a
notification encoded for it alone. The task runs only while
someone is subscribed. The wire contract is in ``docs/protocol.md``.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from typing import Any, Final, Protocol

import anyio

from hub.protocol import jsonrpc
from hub.sessions.client import FrameSink
from hub.sessions.ops import SessionOps as Session
from hub.sessions.registry import SessionRegistry

log = logging.getLogger("hub.server")


class Subscriber(Protocol):
    """What the watch needs of a subscribed client (a connection is one)."""

    # Structural: a Protocol's read-only properties, declared one by one.
    @property
    def client_id(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    @property
    def outbox(self) -> FrameSink: ...


ANSWER_LINES: Final = 4
"""Lines of the agent's latest answer a card carries."""
ANSWER_CHARS: Final = 400
"""Characters of the agent's latest answer a card carries at most."""


def _iso(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall)) + f".{int(wall % 1 * 1000):03d}Z"


def answer_tail(session: Session) -> str:
    """The last few lines of the agent's latest message (its text blocks), trimmed."""
    message = session.state.latest_message("agent_message")
    if message is None:
        return ""
    text = "".join(
        block["text"]
        for block in message["content"]
        if isinstance(block, dict) and isinstance(block.get("text"), str)
    )
    lines = [line for line in text[-4 * ANSWER_CHARS :].splitlines() if line.strip()]
    tail = "\n".join(lines[-ANSWER_LINES:])
    return tail if len(tail) <= ANSWER_CHARS else "\u2026" + tail[-(ANSWER_CHARS - 1) :]


def card(session: Session) -> dict[str, Any]:
    """The dashboard's picture of ``session`` (the ``_hub/sessions_changed`` entry).

    ``session/list``'s ``_meta["acp-hub"]`` summary, flattened, plus the session's title and
    working directory, when the running turn started (``turnStartedAt``, ISO 8601 UTC, or
    ``null``), the pending permission requests with what a person needs to answer them
    (``permissionId``, ``title``, ``description``, ``options``, ``subject``, and ``tool``: the
    subject's tool call as the session knows it), and ``answer``: the last lines of
    the agent's latest message.
    """
    summary = session.summary()
    pending = []
    for permission_id, record in session.state.pending_permissions.items():
        request = record.get("request") or {}
        entry: dict[str, Any] = {
            "permissionId": permission_id,
            "title": request.get("title") or (request.get("toolCall") or {}).get("title"),
            "options": request.get("options") or [],
        }
        if isinstance(request.get("description"), str):
            entry["description"] = request["description"]
        subject = request.get("subject")
        if isinstance(subject, dict):
            entry["subject"] = subject
            tool = subject.get("toolCall")
            if isinstance(tool, dict) and isinstance(tool.get("toolCallId"), str):
                # The tool call as the session knows it (its raw input, paths, diffs).
                known = session.state.tool_call(tool["toolCallId"])
                if known is not None:
                    entry["tool"] = known
        pending.append(entry)
    turn = session.turns.current
    started = None
    if turn is not None:
        started = _iso(time.time() - (time.monotonic() - turn.started))
    return {
        "sessionId": session.id,
        "cwd": session.cwd,
        "title": session.state.title,
        **{k: v for k, v in summary.items() if k != "pendingPermissions"},
        "pendingPermissions": pending,
        "turnStartedAt": started,
        "answer": answer_tail(session),
    }


class SessionWatch:
    """The subscribers of one registry's sessions and the pass that keeps them current."""

    def __init__(self, registry: SessionRegistry, *, interval: float = 0.5, settle: float = 0.1):
        self.registry = registry
        self.page_size = registry.settings.list_page_size
        """Cards in one answer or notification at most (``list_page_size``)."""
        self.interval = interval
        self.settle = settle
        self.subscribers: dict[str, Subscriber] = {}
        self._visible: dict[str, Callable[[str], bool]] = {}
        self._seen: dict[str, tuple[int, int]] = {}
        self._wake = anyio.Event()
        self._running = False
        registry.listeners.append(self._on_change)

    def _on_change(self, session: Session) -> None:
        self._wake.set()

    def subscribe(
        self,
        client: Subscriber,
        visible: Callable[[str], bool] | None = None,
        *,
        after: str | None = None,
        limit: int = 0,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Add ``client`` (again: nothing changes); one page of the cards of the sessions it
        may see now, ordered by id, those after the id ``after`` (``None``: from the first),
        at most ``limit`` (``0``: all), and whether more follow. ``visible(session_id)``
        limits it to some sessions (``None``: all)."""
        self.subscribers[client.client_id] = client
        if visible is None:
            self._visible.pop(client.client_id, None)
        else:
            self._visible[client.client_id] = visible
        ids = sorted(
            session_id
            for session_id in self.registry.sessions
            if (after is None or session_id > after) and (visible is None or visible(session_id))
        )
        more = 0 < limit < len(ids)
        if more:
            ids = ids[:limit]
        cards = [card(self.registry.sessions[session_id]) for session_id in ids]
        if not self._running:
            # The pass starts from what the first subscriber was just told.
            self._seen = {
                s.id: (s.log.epoch, s.log.last_seq) for s in self.registry.sessions.values()
            }
            self._running = True
            self.registry.spawn(self._run, "session watch")
        return cards, more

    def unsubscribe(self, client: Subscriber) -> None:
        self.subscribers.pop(client.client_id, None)
        self._visible.pop(client.client_id, None)

    async def _run(self) -> None:
        try:
            while True:
                with anyio.move_on_after(self.interval):
                    await self._wake.wait()
                if self._wake.is_set():
                    await anyio.sleep(self.settle)
                    self._wake = anyio.Event()
                for client in list(self.subscribers.values()):
                    if client.closed:
                        self.unsubscribe(client)
                if not self.subscribers:
                    return
                self.flush()
        finally:
            self._running = False

    def flush(self) -> None:
        """One pass: a notification with the cards that changed since the last, to everyone."""
        sessions = self.registry.sessions
        changed = []
        seen: dict[str, tuple[int, int]] = {}
        for session_id, session in sessions.items():
            mark = (session.log.epoch, session.log.last_seq)
            seen[session_id] = mark
            if self._seen.get(session_id) != mark:
                changed.append(card(session))
        removed = [session_id for session_id in self._seen if session_id not in sessions]
        self._seen = seen
        if not changed and not removed:
            return
        frames = _notifications(changed, removed, self.page_size)
        for client_id, client in self.subscribers.items():
            visible = self._visible.get(client_id)
            if visible is None:
                for frame in frames:
                    client.outbox.push(frame)
                continue
            mine = [c for c in changed if visible(c["sessionId"])]
            gone = [session_id for session_id in removed if visible(session_id)]
            if mine or gone:
                for frame in _notifications(mine, gone, self.page_size):
                    client.outbox.push(frame)


def _notifications(
    changed: list[dict[str, Any]], removed: list[str], page_size: int
) -> list[bytes]:
    """``_hub/sessions_changed`` frames of at most ``page_size`` cards each (``0``: one frame);
    the removed ids ride with the first."""
    size = page_size or max(1, len(changed))
    pages = [changed[at : at + size] for at in range(0, len(changed), size)] or [[]]
    return [
        jsonrpc.notification(
            "_hub/sessions_changed", {"sessions": page, "removed": removed if n == 0 else []}
        )
        for n, page in enumerate(pages)
    ]


_watches: weakref.WeakKeyDictionary[SessionRegistry, SessionWatch] = weakref.WeakKeyDictionary()


def forget(client: Subscriber) -> None:
    """``client`` closed: it is no longer anyone's subscriber."""
    for session_watch in _watches.values():
        session_watch.unsubscribe(client)


def watch_of(registry: SessionRegistry) -> SessionWatch:
    """The registry's one ``SessionWatch`` (made on first use)."""
    watch = _watches.get(registry)
    if watch is None:
        watch = _watches[registry] = SessionWatch(registry)
    return watch


__all__ = ["SessionWatch", "Subscriber", "answer_tail", "card", "forget", "watch_of"]
