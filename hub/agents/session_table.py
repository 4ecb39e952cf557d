"""The agent sessions one agent knows: each with its ``SessionSink``, and the table of them.

An ``AgentSession`` is registered (``SessionTable.register``) before the agent can send
anything for it - from the reply hook of ``session/new``, or before ``session/resume`` /
``session/load`` is written - and dropped by ``close``/``delete`` or when a restarted
process could not re-attach it (it is then remembered as *lost*, so that later operations
say so rather than "not found"). Every update reaches the sink through ``deliver``, which
also remembers the foreground state last delivered (a crash mid-turn ends the turn).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from hub.agents.errors import AgentError
from hub.agents.sink import SessionSink
from hub.protocol.agent_v1 import AgentV1Translator
from hub.protocol.errors import SESSION_LOST, hub_error, resource_not_found

__all__ = ["AgentSession", "SessionTable", "call_sink"]

logger = logging.getLogger("hub.agents")


def call_sink(agent: str, fn: Any, *args: Any) -> None:
    """Call a synchronous sink method; a failing sink must not take the reader down."""
    try:
        fn(*args)
    except Exception:
        logger.exception("! agent %s: session sink failed", agent)


@dataclass(eq=False, slots=True)
class AgentSession:
    """One agent session and where its updates go."""

    agent: str
    session_id: str
    sink: SessionSink
    cwd: str
    mcp_servers: list[dict[str, Any]]
    translator: AgentV1Translator | None = None
    """v1 agents: always; v2 agents: created when they send v1 updates anyway."""
    swallow: bool = False
    """A re-attaching ``session/load`` is replaying history the hub already has."""
    state: str = "idle"
    """The foreground state last delivered."""
    permissions: set[anyio.CancelScope] = field(default_factory=set)
    """The tasks waiting for the sink's answer to a permission request."""

    def deliver(self, update: dict[str, Any]) -> None:
        """Hand one internal v2 update to the sink."""
        if update.get("sessionUpdate") == "state_update":
            state = update.get("state")
            if isinstance(state, str):
                self.state = state
        call_sink(self.agent, self.sink.on_update, update)

    def tell(self, event: dict[str, Any]) -> None:
        """Report a lifecycle or login event to the sink (``SessionSink.on_agent_event``)."""
        call_sink(self.agent, self.sink.on_agent_event, event)

    def cancel_permissions(self) -> None:
        """Cancel every pending permission task (each answers the agent ``cancelled``)."""
        for scope in list(self.permissions):
            scope.cancel()


MAX_BOUND_ELICITATIONS = 1024
"""URL elicitations of one agent whose session the hub remembers for ``elicitation/complete``."""


class SessionTable:
    """The registered sessions of one agent, the lost ones, and URL elicitations in flight."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self._sessions: dict[str, AgentSession] = {}
        self._lost: set[str] = set()
        self._elicitations: dict[str, str] = {}  # elicitationId -> sessionId (URL mode)

    def __iter__(self) -> Iterator[AgentSession]:
        """The registered sessions (a copy: callers may drop while iterating)."""
        return iter(list(self._sessions.values()))

    def get(self, session_id: object) -> AgentSession | None:
        """The session registered as ``session_id`` (any JSON value), or ``None``."""
        return self._sessions.get(session_id) if isinstance(session_id, str) else None

    def register(self, entry: AgentSession) -> AgentSession | None:
        """Register ``entry`` (replacing and returning any previous one)."""
        self._lost.discard(entry.session_id)
        old = self._sessions.get(entry.session_id)
        if old is not None and old.sink is not entry.sink:
            logger.info("= agent %s: session %s gets a new sink", self.agent, entry.session_id)
        self._sessions[entry.session_id] = entry
        return old

    def restore(self, entry: AgentSession, previous: AgentSession | None) -> None:
        """Undo ``register(entry)`` after a failed attach: put ``previous`` back."""
        if self._sessions.get(entry.session_id) is not entry:
            return
        if previous is not None:
            self._sessions[entry.session_id] = previous
        else:
            self.drop(entry.session_id)

    def drop(self, session_id: str, *, lost: bool = False) -> None:
        """Forget a session (its pending permissions are cancelled)."""
        entry = self._sessions.pop(session_id, None)
        if entry is not None:
            entry.cancel_permissions()
        if lost:
            self._lost.add(session_id)
        for eid in [e for e, s in self._elicitations.items() if s == session_id]:
            del self._elicitations[eid]

    def require(self, session_id: str) -> AgentSession:
        """The registered session; ``AgentError`` (``SESSION_LOST`` or not found) if none."""
        entry = self._sessions.get(session_id)
        if entry is not None:
            return entry
        if session_id in self._lost:
            raise AgentError(
                hub_error(
                    SESSION_LOST,
                    f"agent '{self.agent}' lost session {session_id!r} when it restarted",
                    {"agent": self.agent, "sessionId": session_id},
                )
            )
        raise AgentError(
            resource_not_found(f"agent '{self.agent}' has no attached session {session_id!r}")
        )

    def bind_elicitation(self, elicitation_id: object, session_id: object) -> None:
        """Remember which session a URL elicitation belongs to (its ``complete`` names only
        the elicitation), until its ``complete`` or the session goes, and for at most
        ``MAX_BOUND_ELICITATIONS`` of the agent's elicitations (the oldest is forgotten first:
        ``complete`` is optional, an agent may never send it)."""
        if isinstance(elicitation_id, str) and self.get(session_id) is not None:
            assert isinstance(session_id, str)
            self._elicitations.pop(elicitation_id, None)
            while len(self._elicitations) >= MAX_BOUND_ELICITATIONS:
                del self._elicitations[next(iter(self._elicitations))]
            self._elicitations[elicitation_id] = session_id

    def elicitation_session(self, elicitation_id: object) -> AgentSession | None:
        """The session of a completed URL elicitation (forgotten as it is returned)."""
        if not isinstance(elicitation_id, str):
            return None
        return self.get(self._elicitations.pop(elicitation_id, None))
