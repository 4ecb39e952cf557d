"""Bringing stored sessions back when the hub starts on a durable store.

Theory of operation
-------------------
For every session in the store's directory, the store gives back its record, its live log
(continuing where the stored one ends, under a new epoch when it was not closed cleanly) and the
updates that rebuild its state (the latest snapshot, then the events after it). The session is
rebuilt from those without replaying anything to anyone, and what the restart ended is then
recorded as ordinary events, so that every client sees it and a replay tells it: nobody is
attached any more (``_hub_presence``), nobody holds the lease or waits in the queue, pending
permission requests are ``cancelled``, and a turn that was running is over (an idle
``state_update`` carrying the error).

The agent side comes back in a task of its own: ``session/resume`` (v2) or ``session/resume`` /
``session/load`` (v1) through ``hub.agents``, then a ``_hub_agent`` event ``restarted``; where
the agent cannot take the session back (no resume or load, an unknown session, an agent no
longer configured) the session is marked ``lost`` (``_hub_agent`` ``lost``): it stays listed,
readable and replayable, and a prompt is refused with ``SESSION_LOST``. Prompts sent before the
agent answered wait for it (``Session.ready``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from hub.agents.errors import AgentError
from hub.protocol.compact import compact
from hub.protocol.errors import AGENT_UNAVAILABLE, InvalidParams, PeerError, hub_error
from hub.sessions.core import Defaults, Spawner
from hub.sessions.metrics import SessionMetrics
from hub.sessions.session import Session
from hub.settings import Settings
from hub.store import Restored, SessionRecord, Store, StoreError

if TYPE_CHECKING:
    from hub.agents.agent import Agent, PromptAck

log = logging.getLogger("hub.sessions")


class UnconfiguredAgent:
    """The agent of a restored session whose agent is no longer configured: every operation
    is refused with ``AGENT_UNAVAILABLE`` (the session is ``lost``)."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def _refuse(self) -> AgentError:
        return AgentError(
            hub_error(AGENT_UNAVAILABLE, f"Agent '{self._name}' is not configured on this hub")
        )

    async def prompt(self, session_id: str, blocks: Sequence[dict[str, Any]], /) -> PromptAck:
        raise self._refuse()

    async def cancel(self, session_id: str, /) -> None:
        raise self._refuse()

    async def set_config_option(
        self, session_id: str, config_id: str, kind: str, value: Any, /
    ) -> list[dict[str, Any]]:
        raise self._refuse()

    async def set_mode(self, session_id: str, mode_id: str, /) -> None:
        raise self._refuse()

    async def extension(
        self, session_id: str | None, method: str, params: dict[str, Any], /
    ) -> Any:
        raise self._refuse()

    async def close_session(self, session_id: str, /) -> None:
        return None

    async def delete_session(self, session_id: str, /) -> None:
        return None


def record_of(session: Session, creator: str | None) -> SessionRecord:
    """The directory record of ``session`` as it is now."""
    return SessionRecord(
        session_id=session.id,
        agent=session.agent.name,
        cwd=session.cwd,
        agent_session_id=session.agent_session_id,
        prompt_policy=session.prompt_policy,
        permission_policy=session.permission_policy,
        creator=creator,
        created_at=session.created_at,
        mcp_servers=tuple(session.mcp_servers),
        status="lost" if session.lost else "open",
    )


def rebuild(
    restored: Restored,
    agent: Agent | UnconfiguredAgent,
    *,
    settings: Settings,
    store: Store,
    on_change: Callable[[Session], None],
    spawn: Spawner,
    metrics: SessionMetrics | None = None,
) -> Session:
    """The session ``restored`` holds, with its state, log and policies, nobody attached.
    ``StoreError`` when the stored updates do not fold."""
    record = restored.record
    session = Session(
        record.session_id,
        agent,
        record.agent_session_id,
        cwd=record.cwd,
        settings=settings,
        on_change=on_change,
        spawn=spawn,
        store=store,
        log=restored.log,
        metrics=metrics,
    )
    session.created_at = record.created_at or session.created_at
    session.mcp_servers = [dict(s) for s in record.mcp_servers]
    try:
        session.state.apply_all(restored.updates)
    except InvalidParams as exc:
        raise StoreError(
            f"session {record.session_id}: a stored update does not fold: {exc}"
        ) from None
    # The live v1 rendering continues from the state (tool calls, terminals it refers to).
    for update in compact(session.state):
        try:
            session.v1.update(update)
        except PeerError:
            pass
    # Ids minted from here on (queue entries, permissions) must not repeat earlier ones, and
    # each of those took at least one event.
    session.core.counter = restored.log.last_seq
    # The policies and `lost` are the fold's; the record says what they were before it.
    session.core.defaults = Defaults.of(record, settings)
    return session


def settle(session: Session) -> None:
    """Record, as events, what the restart ended (see the module docstring)."""
    state = session.state
    presence = state.hub("_hub_presence")
    if presence is not None and (presence.get("clients") or presence.get("count")):
        session.emit({"sessionUpdate": "_hub_presence", "clients": [], "count": 0, "viewers": 0})
    lease = state.hub("_hub_lease")
    if lease is not None and lease.get("holder") is not None:
        session.emit({"sessionUpdate": "_hub_lease", "holder": None, "reason": "restarted"})
    queue = state.hub("_hub_queue")
    if queue is not None and queue.get("entries"):
        session.emit({"sessionUpdate": "_hub_queue", "entries": []})
    for permission_id in state.pending_permissions:
        session.emit(
            {
                "sessionUpdate": "_hub_permission",
                "permissionId": permission_id,
                "status": "cancelled",
                "outcome": {"outcome": "cancelled"},
            }
        )
    if state.foreground != "idle":
        error = hub_error(AGENT_UNAVAILABLE, "The hub restarted during the turn")
        session.emit(
            {
                "sessionUpdate": "state_update",
                "state": "idle",
                "_meta": {"acp-hub": {"error": error.to_dict()}},
            }
        )


async def reattach(session: Session, agent: Agent | None, on_lost: Callable[[], None]) -> None:
    """Have the agent take ``session`` back (see the module docstring); ``session.ready`` is
    set when that is settled either way."""
    ready = session.ready
    if ready is None:
        ready = session.ready = anyio.Event()
    try:
        if session.lost:
            return
        if agent is None:
            message = f"agent {session.agent.name!r} is not configured on this hub"
        else:
            try:
                result = await agent.resume_session(
                    session.agent_session_id,
                    session.cwd,
                    session,
                    mcp_servers=session.mcp_servers,
                )
            except AgentError as exc:
                message = exc.error.message
            else:
                log.info("= %s: agent %s took the session back", session.id, agent.name)
                session.on_agent_event({"status": "restarted"})
                options = result.get("configOptions")
                if isinstance(options, list) and options:
                    session.emit(
                        {"sessionUpdate": "config_option_update", "configOptions": options}
                    )
                return
        log.warning("! %s: lost: %s", session.id, message)
        session.on_agent_event({"status": "lost", "message": message})
        on_lost()
    finally:
        ready.set()
        session.ready = None
        session.changed()


__all__ = ["UnconfiguredAgent", "reattach", "rebuild", "record_of", "settle"]
