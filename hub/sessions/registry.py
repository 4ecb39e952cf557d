"""The hub's sessions across all agents: create, find, list, close, delete.

Session ids are minted by the hub (``s-`` and 16 hex digits), so they are unique across
agents whatever ids the agents use, and stable for the session's life: an agent restart
re-attaches the same hub session to the agent's session.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from hub.agents.errors import AgentError
from hub.protocol.errors import invalid_params, resource_not_found
from hub.sessions.client import ClientHandle
from hub.sessions.errors import SessionFailure
from hub.sessions.metrics import SessionMetrics
from hub.sessions.session import Session
from hub.settings import Settings

if TYPE_CHECKING:
    from hub.agents.supervisor import Supervisor

log = logging.getLogger("hub.sessions")


class SessionRegistry:
    """Every live session of this hub; background work runs in its task group."""

    def __init__(
        self, settings: Settings, supervisor: Supervisor, *, metrics: SessionMetrics | None = None
    ) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self.metrics = metrics if metrics is not None else SessionMetrics()
        """Shared by every session of the registry (the hub's ``/metrics``)."""
        self.sessions: dict[str, Session] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self.listeners: list[Callable[[Session], None]] = []

    @asynccontextmanager
    async def running(self) -> AsyncIterator[SessionRegistry]:
        """Run the registry's task group for the duration of the block."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield self
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def spawn(self, fn: Callable[[], Awaitable[Any]], name: str) -> None:
        """Run ``fn`` in the registry's task group (errors are logged, never propagated)."""
        if self._tg is None:
            raise RuntimeError("the session registry is not running")

        async def guarded() -> None:
            try:
                await fn()
            except Exception:
                log.exception("! background task %s failed", name)

        self._tg.start_soon(guarded, name=name)

    def find(self, session_id: Any) -> Session | None:
        """The session ``session_id`` (any JSON value), or ``None``."""
        return self.sessions.get(session_id) if isinstance(session_id, str) else None

    def get(self, session_id: Any) -> Session:
        """The session ``session_id``, or ``SessionFailure`` with ``-32002``."""
        session = self.find(session_id)
        if session is None:
            raise SessionFailure(resource_not_found(f"no session {session_id!r}"))
        return session

    def _notify(self, session: Session) -> None:
        for listener in self.listeners:
            listener(session)

    async def new_session(
        self, client: ClientHandle, agent_name: str | None, cwd: str, mcp_servers: list[Any]
    ) -> Session:
        """Start a session on ``agent_name`` (default agent when ``None``)."""
        name = agent_name or self.supervisor.default_name
        if name is None:
            raise SessionFailure(invalid_params("no agent is configured"))
        try:
            agent = self.supervisor.get(name)
        except KeyError:
            raise SessionFailure(invalid_params(f"unknown agent {name!r}")) from None
        session_id = f"s-{secrets.token_hex(8)}"
        session = Session(
            session_id,
            agent,
            "",
            cwd=cwd,
            settings=self.settings,
            on_change=self._notify,
            spawn=self.spawn,
            metrics=self.metrics,
        )
        try:
            result = await agent.new_session(cwd, mcp_servers, session)
        except AgentError as exc:
            raise SessionFailure(exc.error) from exc
        session.agent_session_id = result.session_id
        if result.config_options:
            session.emit(
                {"sessionUpdate": "config_option_update", "configOptions": result.config_options}
            )
        session.emit_policies()
        self.sessions[session_id] = session
        log.info("= %s: new session on agent %s (%s)", session_id, name, result.session_id)
        self._notify(session)
        return session

    def list(self) -> list[dict[str, Any]]:
        """The v2 ``SessionInfo`` entries of every session, with the hub's ``_meta``."""
        entries = []
        for session in self.sessions.values():
            entry: dict[str, Any] = {
                "sessionId": session.id,
                "cwd": session.cwd,
                "_meta": {"acp-hub": session.summary()},
            }
            if session.state.title:
                entry["title"] = session.state.title
            entries.append(entry)
        return entries

    async def close(self, client: ClientHandle, session: Session, *, delete: bool) -> None:
        """Close (and with ``delete`` forget at the agent) a session; owner only."""
        session.require(client, "owner", "session/delete" if delete else "session/close")
        session.closed = True
        self.sessions.pop(session.id, None)
        for attachment in tuple(session.attached.values()):
            attachment.client.notify(
                "_hub/session_closed",
                {"sessionId": session.id, "deleted": delete, "by": client.client_id},
            )
            session.detach(attachment.client, reason="session closed")
        try:
            if delete:
                await session.agent.delete_session(session.agent_session_id)
            else:
                await session.agent.close_session(session.agent_session_id)
        except AgentError as exc:
            # The hub's session is gone either way; the agent's answer is logged.
            log.info(
                "= %s: agent answered %s: %s", session.id, "delete" if delete else "close", exc
            )
        self._notify(session)
