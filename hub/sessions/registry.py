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
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc

from hub.access.audit import AuditSink, NullAudit
from hub.agents.errors import AgentError
from hub.protocol.errors import (
    LIMIT_REACHED,
    NOT_OWNER,
    hub_error,
    invalid_params,
    resource_not_found,
)
from hub.sessions import restore, workspace
from hub.sessions.agent_handle import AgentHandle
from hub.sessions.archive import ArchivedAgent
from hub.sessions.client import ClientHandle
from hub.sessions.cluster import Cluster
from hub.sessions.errors import SessionFailure
from hub.sessions.metrics import SessionMetrics
from hub.sessions.notices import Notice
from hub.sessions.ops import SessionOps
from hub.sessions.session import Session
from hub.settings import Settings
from hub.store import SessionRecord, SharedStore, Store, StoreError
from hub.store.memory import MemoryStore

if TYPE_CHECKING:
    from hub.agents.agent import Agent
    from hub.agents.supervisor import Supervisor

log = logging.getLogger("hub.sessions")


class SessionRegistry:
    """Every live session of this hub; background work runs in its task group."""

    # Alike in shape only: a constructor's parts, then its optional ones by keyword.
    def __init__(
        self,
        settings: Settings,
        supervisor: Supervisor,
        store: Store | None = None,
        *,
        metrics: SessionMetrics | None = None,
        audit: AuditSink | None = None,
    ) -> None:
        self.settings = settings
        self.audit: AuditSink = audit if audit is not None else NullAudit()
        """The audit trail (``hub.access.audit``): sessions created and closed, and what
        each session records itself (policies, permission decisions)."""
        self.supervisor = supervisor
        self.metrics = metrics if metrics is not None else SessionMetrics()
        """Shared by every session of the registry (the hub's ``/metrics``)."""
        self.store: Store = store if store is not None else MemoryStore()
        self.sessions: dict[str, Session] = {}
        self.workspace_roots = workspace.resolve_roots(settings.workspace_roots)
        """The resolved ``workspace_roots`` a session's ``cwd`` must lie under."""
        self._tg: anyio.abc.TaskGroup | None = None
        self.listeners: list[Callable[[SessionOps], None]] = []
        self.notices: list[Callable[[Notice], None]] = []
        """Told of the notices of the sessions this node owns (``hub.sessions.notices``)."""
        self._saving: set[str] = set()
        self._save_again: set[str] = set()
        self.cluster: Cluster | None = None
        """With a shared store (several nodes): ownership, mirrors and forwarding."""

    def _notice(self, notice: Notice) -> None:
        for listener in self.notices:
            listener(notice)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[SessionRegistry]:
        """Run the registry's task group for the duration of the block; with a durable store,
        bring its sessions back first and leave each with a snapshot at the end."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self.settings.idle_session_timeout > 0:
                tg.start_soon(self._reap_idle_sessions, name="idle session reaper")
            try:
                if self.store.durable:
                    await self._restore_all()
                if self.store.shared:
                    self.cluster = Cluster(self, cast(SharedStore, self.store))
                    self.cluster.start()
                yield self
            finally:
                for session in self.sessions.values():
                    session.snapshot()
                if self.store.shared:
                    await self._hand_over()
                self._tg = None
                tg.cancel_scope.cancel()

    async def _hand_over(self) -> None:
        """At a clean shutdown with several nodes: write what is queued, then give up the
        sessions this node owns, so that other nodes take them over at once."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            try:
                await self.store.flush()
                await self.store.release(list(self.sessions))
            except Exception as exc:
                log.warning("! the sessions were not handed over (they will be): %s", exc)

    async def _restore_all(self) -> None:
        """Every session of the store's directory this node may own, rebuilt
        (``hub.sessions.restore``); with several nodes, the sessions another live node owns
        are left to it (``hub.sessions.cluster`` takes them over if it dies)."""
        for record in await self.store.records():
            await self.take(record.session_id, record.agent, record.creator)

    @property
    def bounds(self) -> dict[str, int]:
        """The retained-tail bounds of every session's log."""
        return {
            "max_events": self.settings.retained_events,
            "max_bytes": self.settings.retained_bytes,
        }

    async def take(self, session_id: str, agent_name: str, creator: str | None) -> bool:
        """Restore ``session_id`` from the store and own it (after claiming it, with several
        nodes); ``False`` when another node owns it or it cannot be restored (logged)."""
        if session_id in self.sessions:
            return True
        if not await self.store.claim(session_id, self.settings.node_lease):
            return False
        try:
            restored = await self.store.restore(session_id, **self.bounds)
        except StoreError as exc:
            log.error("! %s: cannot be restored: %s", session_id, exc)
            return False
        if restored is None:
            log.warning("! %s: in the directory without a log; skipped", session_id)
            return False
        try:
            agent: Agent | None = self.supervisor.get(agent_name)
        except KeyError:
            agent = None
        try:
            session = restore.rebuild(
                restored,
                agent if agent is not None else restore.UnconfiguredAgent(agent_name),
                settings=self.settings,
                store=self.store,
                on_change=self._notify,
                spawn=self.spawn,
                metrics=self.metrics,
            )
        except StoreError as exc:
            log.error("! %s: cannot be restored: %s", session_id, exc)
            return False
        session.creator = creator
        session.on_record = self.save_record
        restore.settle(session)
        session.audit = self.audit
        session.notice = self._notice
        self.sessions[session.id] = session
        log.info(
            "= %s: restored (epoch %s, seq %s%s)",
            session.id,
            session.log.epoch,
            session.log.last_seq,
            "" if restored.clean else ", continued after an unclean stop",
        )
        self._reattach_later(session, agent)
        self._notify(session)
        return True

    def _reattach_later(self, session: Session, agent: Agent | None) -> None:
        session.ready = anyio.Event()  # prompts wait from now on, not from when the task runs

        async def reattach() -> None:
            await restore.reattach(session, agent, lambda: self.save_record(session))

        self.spawn(reattach, name=f"reattach {session.id}")

    def save_record(self, session: Session) -> None:
        """Write ``session``'s directory record to the store (coalesced: one write at a time
        per session, the latest state last)."""
        if session.closed or self._tg is None:
            return
        if session.id in self._saving:
            self._save_again.add(session.id)
            return
        self._saving.add(session.id)

        async def save() -> None:
            try:
                while True:
                    self._save_again.discard(session.id)
                    if session.closed:
                        return
                    try:
                        await self.store.save_record(restore.record_of(session, session.creator))
                    except StoreError as exc:
                        log.warning("! %s: the directory record was not saved: %s", session.id, exc)
                    if session.id not in self._save_again:
                        return
            finally:
                self._saving.discard(session.id)

        self.spawn(save, name=f"save {session.id}")

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

    def find(self, session_id: Any) -> SessionOps | None:
        """The session ``session_id`` (any JSON value), or ``None``: one this node owns, or
        one it follows for its clients (``hub.sessions.mirror``)."""
        if not isinstance(session_id, str):
            return None
        session: SessionOps | None = self.sessions.get(session_id)
        if session is None and self.cluster is not None:
            session = self.cluster.mirrors.get(session_id)
        return session

    def changed(self, session: SessionOps) -> None:
        """Tell the listeners that ``session``'s summary may have changed."""
        self._notify(session)

    def is_remote(self, session_id: Any) -> bool:
        """Whether ``session_id`` may be a session another node owns that this node does not
        follow yet (``load_remote`` then follows it)."""
        return self.cluster is not None and self.cluster.is_remote(session_id)

    def follows_first(self, method: str, session_id: Any) -> bool:
        """Whether ``method`` names a session another node owns that this node must follow
        before it can answer (``load_remote``)."""
        return self.cluster is not None and self.cluster.follows_first(method, session_id)

    async def load_remote(self, session_id: str) -> SessionOps:
        """Follow the session another node owns (``SessionFailure`` -32002 if unknown)."""
        if self.cluster is None:
            raise SessionFailure(resource_not_found(f"no session {session_id!r}"))
        return await self.cluster.mirror(session_id)

    def get(self, session_id: Any) -> SessionOps:
        """The session ``session_id``, or ``SessionFailure`` with ``-32002``."""
        session = self.find(session_id)
        if session is None:
            raise SessionFailure(resource_not_found(f"no session {session_id!r}"))
        return session

    def _notify(self, session: SessionOps) -> None:
        for listener in self.listeners:
            listener(session)

    async def new_session(
        self,
        client: ClientHandle,
        agent_name: str | None,
        cwd: str,
        mcp_servers: list[Any],
        *,
        creator: str | None = None,
    ) -> Session:
        """Start a session on ``agent_name`` (default agent when ``None``) for the principal
        ``creator``; ``-32050`` when the hub or that principal holds its maximum of sessions."""
        self._check_session_caps(creator)
        name = agent_name or self.supervisor.default_name
        if name is None:
            raise SessionFailure(invalid_params("no agent is configured"))
        try:
            agent = self.supervisor.get(name)
        except KeyError:
            raise SessionFailure(invalid_params(f"unknown agent {name!r}")) from None
        session = await self._fresh_session(agent, cwd)
        session_id = session.id
        session.audit = self.audit
        session.notice = self._notice
        session.mcp_servers = [dict(s) for s in mcp_servers if isinstance(s, dict)]
        session.creator = creator if creator is not None else client.name
        try:
            result = await agent.new_session(cwd, mcp_servers, session)
        except AgentError as exc:
            await self._forget(session_id)
            raise SessionFailure(exc.error) from exc
        session.agent_session_id = result.session_id
        # Checked again: other session/new requests may have finished while the agent worked.
        try:
            self._check_session_caps(creator)
        except SessionFailure:
            await self._forget(session_id)
            self.spawn(lambda: agent.close_session(result.session_id), "close surplus session")
            raise
        if self.store.durable:
            # In the directory before anyone learns the session's id.
            try:
                await self.store.save_record(restore.record_of(session, session.creator))
            except StoreError as exc:
                log.warning("! %s: the directory record was not saved: %s", session_id, exc)
        session.on_record = self.save_record
        if result.config_options:
            session.emit(
                {"sessionUpdate": "config_option_update", "configOptions": result.config_options}
            )
        session.emit_policies()
        self.sessions[session_id] = session
        if self.store.shared:
            # Another node may be asked for the session as soon as its id is out: its log
            # must be readable there first (the writes are behind), within owner_wait.
            with anyio.move_on_after(self.settings.owner_wait) as waited:
                try:
                    await self.store.flush()
                except StoreError as exc:
                    log.warning("! %s: the log was not written: %s", session_id, exc)
            if waited.cancelled_caught:
                log.warning("! %s: the log was not written within owner_wait", session_id)
        log.info("= %s: new session on agent %s (%s)", session_id, name, result.session_id)
        self.audit.record(
            "session_created", sessionId=session_id, agent=name, cwd=cwd, principal=client.principal
        )
        self._notify(session)
        return session

    async def import_archive(
        self, head: dict[str, Any], updates: list[dict[str, Any]], creator: str
    ) -> Session:
        """A new read-only session rebuilt from an export (``hub.sessions.archive``)."""
        self._check_session_caps(creator)
        found = head.get("session")
        origin: dict[str, Any] = found if isinstance(found, dict) else {}
        session = await self._fresh_session(
            ArchivedAgent(str(origin.get("agent") or "unknown")), str(origin.get("cwd") or "")
        )
        session_id = session.id
        session.audit = self.audit
        session.creator = creator
        for update in updates:
            session.emit(update)
        session.on_agent_event(
            {"status": "lost", "message": f"archived from session {origin.get('id')!s}"}
        )
        session.on_record = self.save_record
        self.sessions[session_id] = session
        self.save_record(session)
        log.info("= %s: imported from an export of %s", session_id, origin.get("id"))
        self.audit.record(
            "session_imported", sessionId=session_id, source=origin.get("id"), principal=creator
        )
        self._notify(session)
        return session

    async def _fresh_session(self, agent: AgentHandle, cwd: str) -> Session:
        """A session under a fresh id, not yet in ``sessions`` nor started on ``agent``;
        ``-32051`` when a shared store cannot record that this node owns it."""
        session_id = f"s-{secrets.token_hex(8)}"
        if self.store.shared:
            # This node owns what it creates (a fresh id: nobody else can hold it).
            try:
                await self.store.claim(session_id, self.settings.node_lease)
            except StoreError as exc:
                raise SessionFailure(
                    hub_error(NOT_OWNER, f"the store is unavailable: {exc}")
                ) from None
        return Session(
            session_id,
            agent,
            "",
            cwd=cwd,
            settings=self.settings,
            on_change=self._notify,
            spawn=self.spawn,
            metrics=self.metrics,
            store=self.store,
        )

    def _check_session_caps(self, creator: str | None) -> None:
        settings = self.settings
        if settings.max_sessions and len(self.sessions) >= settings.max_sessions:
            raise SessionFailure(
                hub_error(
                    LIMIT_REACHED,
                    f"This hub holds its maximum of {settings.max_sessions} sessions",
                    {"limit": "max_sessions", "max": settings.max_sessions},
                )
            )
        cap = settings.max_sessions_per_principal
        if creator is not None and cap:
            mine = sum(1 for s in self.sessions.values() if s.creator == creator)
            if mine >= cap:
                raise SessionFailure(
                    hub_error(
                        LIMIT_REACHED,
                        f"You hold your maximum of {cap} sessions: close one first",
                        {"limit": "max_sessions_per_principal", "max": cap},
                    )
                )

    async def _reap_idle_sessions(self) -> None:
        """Close sessions nobody is attached to and no turn runs in, once they have been idle
        for ``idle_session_timeout`` seconds (docs/limits.md)."""
        timeout = self.settings.idle_session_timeout
        period = min(60.0, max(0.05, timeout / 4))
        while True:
            await anyio.sleep(period)
            now = anyio.current_time()
            for session in list(self.sessions.values()):
                if session.attached or session.turns.busy:
                    session.idle_since = None
                elif session.idle_since is None:
                    session.idle_since = now
                elif now - session.idle_since >= timeout:
                    log.info("= %s: closed after %.0f s without clients", session.id, timeout)
                    await self.close(None, session, delete=False)

    def list(
        self,
        *,
        cwd: str | None = None,
        after: str | None = None,
        limit: int | None = None,
        visible: Callable[[str], bool] | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """One page of ``session/list``: the v2 ``SessionInfo`` entries with the hub's ``_meta``.

        Sessions are ordered by id, which neither a new session nor a closed one changes: a
        client that pages with ``after`` (the last id of its previous page) sees every session
        that existed throughout its paging exactly once. ``cwd`` keeps the sessions of that
        working directory only, ``visible`` (a test of the session id) those a client may
        see; ``limit`` caps the page (``None``: no cap). Only the entries of the page are
        built. Returns the entries and whether more follow.
        """
        shown: dict[str, SessionOps | tuple[SessionRecord, str | None]] = dict(self.sessions)
        if self.cluster is not None:
            shown.update({k: v for k, v in self.cluster.mirrors.items() if k not in shown})
            # Owned by other nodes and not followed here: what the directory says.
            for session_id, known in self.cluster.directory.items():
                shown.setdefault(session_id, known)
        ids = sorted(
            i
            for i, v in shown.items()
            if (after is None or i > after)
            and (cwd is None or _cwd_of(v) == cwd)
            and (visible is None or visible(i))
        )
        more = limit is not None and len(ids) > limit
        page = ids[:limit] if limit is not None else ids
        return [_info(i, shown[i]) for i in page], more

    async def close(self, client: ClientHandle | None, found: SessionOps, *, delete: bool) -> None:
        """Close (and with ``delete`` forget at the agent) a session; owner only. ``client``
        ``None`` is the hub itself (an idle session reaped). A session another node owns is
        closed there (``hub.sessions.cluster``)."""
        if client is not None:
            found.require(client, "owner", "session/delete" if delete else "session/close")
        session = self.sessions.get(found.id)
        if session is None or session is not found:  # not (or no longer) owned here
            if client is not None and self.cluster is not None:
                await self.cluster.close_at_owner(client, found, delete=delete)
            return  # only the owner reaps its idle sessions
        session.closed = True
        self.sessions.pop(session.id, None)
        self.audit.record(
            "session_closed",
            sessionId=session.id,
            deleted=delete,
            principal=None if client is None else client.principal,
            reason="closed" if client is not None else "idle",
        )
        await self._forget(session.id)
        session.dismiss(
            {
                "sessionId": session.id,
                "deleted": delete,
                "by": None if client is None else client.client_id,
                "principal": None if client is None else client.principal,
                "name": None if client is None else client.name,
            },
            "session closed",
        )
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

    async def _forget(self, session_id: str) -> None:
        """Remove a session from the store (logged, never raised: the session is gone here)."""
        try:
            await self.store.remove(session_id)
        except StoreError as exc:
            log.warning("! %s: not removed from the store: %s", session_id, exc)


def _cwd_of(listed: SessionOps | tuple[SessionRecord, str | None]) -> str:
    """The ``cwd`` of a listed session, or of a directory record ``(record, owner)``."""
    if isinstance(listed, tuple):
        return listed[0].cwd
    return listed.cwd


def _info(session_id: str, listed: SessionOps | tuple[SessionRecord, str | None]) -> dict[str, Any]:
    """The ``SessionInfo`` of a session here (or mirrored), or of another node's record."""
    if isinstance(listed, tuple):
        record, owner = listed
        return {
            "sessionId": session_id,
            "cwd": record.cwd,
            "_meta": {
                "acp-hub": {
                    "agent": record.agent,
                    "agentSessionId": record.agent_session_id,
                    "state": "lost" if record.status == "lost" else "unknown",
                    "promptPolicy": record.prompt_policy,
                    "permissionPolicy": record.permission_policy,
                    "node": owner,
                }
            },
        }
    entry: dict[str, Any] = {
        "sessionId": listed.id,
        "cwd": listed.cwd,
        "_meta": {"acp-hub": listed.summary()},
    }
    if listed.state.title:
        entry["title"] = listed.state.title
    return entry
