"""``Agent``: one configured agent, its process lifecycle and its v2-shaped API.

Theory of operation
-------------------
An ``Agent`` owns at most one running *incarnation* at a time: a process
(``AgentProcess``), its JSON-RPC ``Connection`` and the ``Dialect`` of the version
negotiated in ``initialize``. Its state is a ``Lifecycle`` (``hub.agents.lifecycle``: the
states and every transition in one table). The incarnation runs as a task of the
supervisor's task group (``_run``); the first caller that needs the agent starts it
(``ensure_started``) and waits until it is ``RUNNING``: initialized, logged in when a login
is configured, and its registered sessions re-attached.

``_run``, in order::

    spawn (STARTING) -> initialize -> login -> re-attach sessions -> RUNNING
        -> the process exits, closes stdout, or the hub stops it (ENDING / STOPPING)
        -> wind down (shielded) -> IDLE, or CLOSED after a stop

A start that fails (no answer, a version the hub cannot speak, an exit) winds down the same
way and raises ``AgentError`` to the starter. Winding down is ordered: stop the process (or
end what is left of its group), let the reader drain what the agent wrote before dying,
fail every in-flight request with ``AGENT_UNAVAILABLE`` (a v1 prompt turn then ends with an
``idle`` carrying the error), cancel every pending permission and elicitation task, and -
unless the hub stopped the agent - tell every registered sink ``{"status": "exited", ...}``
after an ``idle`` for a session that was mid-turn.

Restart: nothing restarts by itself. The next operation starts a new incarnation, after a
backoff if the last one crashed soon after starting (``RestartPolicy``: 0.1 s doubling up to
5 s, back to the start after a healthy period), and re-attaches every registered session
(``Dialect.reattach``). Each sink then gets ``{"status": "restarted"}``, or
``{"status": "lost", "message"}`` and is dropped.

What the agent sends arrives through the connection's reader: updates go through the
dialect (translated from v1, or checked) to the session's sink; malformed updates of known
variants are logged and dropped, never handed to a sink; ``_hub_*`` variants are the hub's
and never accepted from an agent. Permission and elicitation requests are awaited on the
sink, each in a task of its own. See ``docs/agents.md``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from hub.agents.connection import Connection, DispatchBatch
from hub.agents.dialect import Dialect, PromptAck, initialize_params, open_dialect
from hub.agents.errors import AgentError, agent_unavailable
from hub.agents.inbound import Inbound
from hub.agents.lifecycle import ENDED, AgentState, Lifecycle, Trigger
from hub.agents.login import Login, LoginStatus, login_required
from hub.agents.process import AgentProcess, group_alive
from hub.agents.restart import RestartPolicy
from hub.agents.session_table import AgentSession, SessionTable
from hub.agents.sink import SessionSink
from hub.agents.spec import AgentSpec
from hub.protocol import version as versions
from hub.protocol.errors import AUTH_REQUIRED, VersionError
from hub.protocol.framing import DEFAULT_MAX_LINE

__all__ = ["Agent", "NewSessionResult", "PromptAck", "RestartPolicy"]

logger = logging.getLogger("hub.agents")


@dataclass(frozen=True, slots=True)
class NewSessionResult:
    """``session/new`` as the session layer needs it: the agent's session id and the
    session's v2 config options."""

    session_id: str
    config_options: list[dict[str, Any]]


@dataclass(eq=False, slots=True)
class _Incarnation:
    """One process of the agent, from spawn to wind-down."""

    process: AgentProcess
    inbound: Inbound
    conn: Connection | None = None
    dialect: Dialect | None = None
    started_at: float = math.inf
    reader_done: anyio.Event = field(default_factory=anyio.Event)


class Agent:
    """One agent definition and its (re)started process; see the module docstring.

    Operations start the agent when needed, raise ``AgentError`` (the agent's own JSON-RPC
    error, ``AGENT_UNAVAILABLE`` when it is down, ``UNSUPPORTED`` when it lacks the
    capability) and, when the awaiting task is cancelled, withdraw the request from the
    agent with ``$/cancel_request``. Create through ``Supervisor``.
    """

    def __init__(
        self,
        spec: AgentSpec,
        task_group: anyio.abc.TaskGroup,
        *,
        max_line: int = DEFAULT_MAX_LINE,
        stderr_lines: int = 200,
        policy: RestartPolicy | None = None,
        dispatch_batch: DispatchBatch = contextlib.nullcontext,
    ) -> None:
        self.spec = spec
        self.policy = policy or RestartPolicy()
        self._tg = task_group
        self._max_line = max_line
        self._stderr_lines = stderr_lines
        self._dispatch_batch = dispatch_batch
        self._lifecycle = Lifecycle(spec.name)
        self._live: _Incarnation | None = None
        self._dialect: Dialect | None = None  # of the current (or last) process
        self._last_process: AgentProcess | None = None
        self._pids: list[int] = []
        self._sessions = SessionTable(spec.name)
        self._start_lock = anyio.Lock()
        self._failures = 0
        self._next_start = 0.0
        self._login = Login(spec, self._sessions)

    # -- what the hub reads (structural: read-only properties) -------------------------------

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def state(self) -> AgentState:
        """Where the agent is in its lifecycle (``hub.agents.lifecycle``)."""
        return self._lifecycle.state

    @property
    def running(self) -> bool:
        """Whether a process is up, initialized and serving (state ``RUNNING``)."""
        return self.state is AgentState.RUNNING

    @property
    def restarts(self) -> int:
        """Processes started after the first one (after an exit, a crash or a restart)."""
        return max(0, self._lifecycle.spawns - 1)

    @property
    def version(self) -> int | None:
        """The protocol version spoken to the current (or last) process."""
        return self._dialect.version if self._dialect is not None else None

    @property
    def capabilities(self) -> dict[str, Any]:
        """The agent's capabilities in the v2 shape (v1 ones translated); empty before the
        first start."""
        return self._dialect.capabilities if self._dialect is not None else {}

    @property
    def auth_methods(self) -> list[dict[str, Any]]:
        """The agent's ``authMethods`` in the v2 shape; empty before the first start."""
        return list(self._dialect.auth_methods) if self._dialect is not None else []

    @property
    def login_status(self) -> LoginStatus:
        """What the hub knows of the agent's login (``hub.agents.login``)."""
        return self._login.status

    @property
    def pid(self) -> int | None:
        """The pid (and process group id) of the running process."""
        live = self._live
        return live.process.pid if live is not None and self.state is AgentState.RUNNING else None

    @property
    def pids(self) -> list[int]:
        """The pids (= process group ids) of the last 20 processes started, oldest first."""
        return list(self._pids)

    def stderr_tail(self) -> str:
        """The last lines the current (or last) process wrote to stderr."""
        return self._last_process.stderr_tail() if self._last_process is not None else ""

    # -- lifecycle ---------------------------------------------------------------------------

    async def ensure_started(self) -> None:
        """Start the agent unless it is running: spawn, initialize, re-attach the registered
        sessions. Waits out the restart backoff first. Raises ``AgentError``
        (``AGENT_UNAVAILABLE``) if it cannot be started."""
        if self.state is AgentState.RUNNING:
            return
        async with self._start_lock:
            # A previous incarnation may still be winding down.
            state = await self._lifecycle.wait_for(
                AgentState.IDLE, AgentState.RUNNING, AgentState.CLOSED
            )
            if state is AgentState.RUNNING:
                return
            delay = self._next_start - anyio.current_time()
            if delay > 0 and state is AgentState.IDLE:
                logger.info("= agent %s: restarting in %.2fs (backoff)", self.name, delay)
                await anyio.sleep(delay)
            if self.state is not AgentState.IDLE:
                raise agent_unavailable(self.name, "the hub is shutting down")
            await self._tg.start(self._run)

    async def _ready(self) -> Dialect:
        await self.ensure_started()
        live = self._live
        if self.state is not AgentState.RUNNING or live is None or live.dialect is None:
            raise agent_unavailable(self.name, "it exited while starting")
        return live.dialect

    async def aclose(self, reason: str = "hub shutdown") -> None:
        """Stop the agent for good (ordered shutdown, see ``AgentProcess.stop``); sinks are
        not told. Later operations raise ``AGENT_UNAVAILABLE``."""
        with anyio.CancelScope(shield=True):
            self._lifecycle.fire(Trigger.STOP, reason)
            await self._lifecycle.wait_for(AgentState.CLOSED)

    async def _run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """One incarnation, from spawn to wind-down (see the module docstring)."""
        lifecycle = self._lifecycle
        lifecycle.fire(Trigger.SPAWN)
        try:
            process = await AgentProcess.spawn(self.spec, stderr_lines=self._stderr_lines)
        except OSError as exc:
            why = f"cannot run {self.spec.command!r}: {exc.strerror or exc}"
            lifecycle.fire(Trigger.END, why)
            self._note_failure(started=False)
            lifecycle.fire(Trigger.WOUND_DOWN)
            raise agent_unavailable(self.name, why) from None
        self._last_process = process
        self._pids = [*self._pids[-19:], process.pid]
        live = _Incarnation(process, Inbound(self.name, self._sessions))
        self._live = live
        started = wound_down = False
        start_error: AgentError | None = None
        try:
            async with anyio.create_task_group() as tg:
                live.conn = live.inbound.conn = Connection(
                    self.name,
                    process.stdin,
                    process.stdout,
                    tg,
                    on_request=live.inbound.on_request,
                    on_notification=live.inbound.on_notification,
                    on_request_seen=live.inbound.on_request_seen,
                    max_line=self._max_line,
                    dispatch_batch=self._dispatch_batch,
                    response_timeout=self.policy.response_timeout,
                )
                tg.start_soon(self._read, live)
                tg.start_soon(process.pump_stderr)
                tg.start_soon(self._watch_exit, process)
                start_error = await self._start_up(live)
                if start_error is None and lifecycle.state is AgentState.STARTING:
                    lifecycle.fire(Trigger.READY)
                    live.started_at = anyio.current_time()
                    started = True
                    logger.info(
                        "= agent %s: ready (pid %d, protocol %d)",
                        self.name,
                        process.pid,
                        self.version,
                    )
                    task_status.started()
                    await lifecycle.wait_for(*ENDED)
                elif start_error is not None:
                    lifecycle.fire(Trigger.END, start_error.error.message)
                await self._wind_down(live)
                wound_down = True
                tg.cancel_scope.cancel()
        except Exception:
            logger.exception("! agent %s: supervisor task failed", self.name)
        finally:
            with anyio.CancelScope(shield=True):
                if not wound_down:
                    if lifecycle.state not in ENDED:
                        lifecycle.fire(Trigger.END, "cancelled")
                    await self._wind_down(live)
                await process.aclose()
                self._after_exit(live, started)
                lifecycle.fire(Trigger.WOUND_DOWN)
        if not started:
            if start_error is None:
                tail = process.stderr_tail()
                start_error = agent_unavailable(
                    self.name,
                    f"it ended during startup ({lifecycle.reason}, "
                    f"{process.describe_exit()})"
                    + (f": {tail.splitlines()[-1][:300]}" if tail else ""),
                    stderr=tail[-2000:],
                )
            raise start_error

    async def _start_up(self, live: _Incarnation) -> AgentError | None:
        """Initialize and re-attach, unless the process ends first; the error, if any."""
        error: AgentError | None = None

        async def guard(scope: anyio.CancelScope) -> None:
            await self._lifecycle.wait_for(*ENDED)
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(guard, tg.cancel_scope)
            try:
                with anyio.fail_after(self.policy.initialize_timeout):
                    dialect = await self._initialize(live)
                live.dialect = live.inbound.dialect = self._dialect = dialect
                await self._login.redo(dialect, self.policy.initialize_timeout)
                await self._reattach(dialect)
            except TimeoutError:
                error = agent_unavailable(
                    self.name, f"no answer to initialize within {self.policy.initialize_timeout}s"
                )
            except AgentError as exc:
                error = exc
            tg.cancel_scope.cancel()
        return error  # None also when the process ended first: `_run` then says how

    async def _read(self, live: _Incarnation) -> None:
        assert live.conn is not None
        try:
            await live.conn.run()
        finally:
            live.reader_done.set()
            self._lifecycle.fire(Trigger.END, "stdout closed")

    async def _watch_exit(self, process: AgentProcess) -> None:
        await process.wait_exit()
        self._lifecycle.fire(Trigger.END, "agent exited")

    async def _wind_down(self, live: _Incarnation) -> None:
        """Stop or clean up the process, drain its output, fail what is in flight."""
        with anyio.CancelScope(shield=True):
            process = live.process
            reason = self._lifecycle.reason
            if self.state is AgentState.STOPPING or process.returncode is None:
                await process.stop(reason, self.policy.shutdown)
            else:
                # The leader is gone: end its leftovers, so that pipes they hold close, and
                # read what the agent wrote before it died.
                if group_alive(process.pgid):
                    process.signal_group(signal.SIGTERM)
                with anyio.move_on_after(self.policy.drain_timeout):
                    await live.reader_done.wait()
            if live.conn is not None and not live.conn.closed:
                why = f"the agent process exited ({process.describe_exit()})"
                live.conn.close(agent_unavailable(self.name, why).error)
            await process.end_group("agent exited", self.policy.shutdown)

    def _after_exit(self, live: _Incarnation, started: bool) -> None:
        code, sig = live.process.exit_status()
        logger.info(
            "= agent %s: process %d ended (%s; %s)",
            self.name,
            live.process.pid,
            self._lifecycle.reason,
            live.process.describe_exit(),
        )
        if self.state is AgentState.STOPPING:
            return  # a deliberate stop: no failure, and the sinks are not told
        self._note_failure(started=started, uptime=anyio.current_time() - live.started_at)
        if not started or live.dialect is None:
            return
        error = agent_unavailable(self.name, "the agent process exited").error
        event = {"status": "exited", "exitCode": code, "signal": sig}
        for entry in self._sessions:
            entry.cancel_permissions()
            for update in live.dialect.exit_updates(entry, error):
                entry.deliver(update)
            entry.state = "idle"
            entry.tell(event)

    def _note_failure(self, *, started: bool, uptime: float = 0.0) -> None:
        if started and uptime >= self.policy.healthy_after:
            self._failures = 1
        else:
            self._failures += 1
        self._next_start = anyio.current_time() + self.policy.delay(self._failures)

    # -- initialize and re-attach ------------------------------------------------------------

    async def _initialize(self, live: _Incarnation) -> Dialect:
        assert live.conn is not None
        offered = versions.offer(self.spec.protocol)
        result = await live.conn.request("initialize", initialize_params(offered))
        if not isinstance(result, dict):
            raise agent_unavailable(self.name, f"initialize answered {result!r:.200}")
        try:
            version = versions.accept(offered, result.get("protocolVersion"), self.spec.protocol)
        except VersionError as exc:
            raise agent_unavailable(self.name, str(exc)) from None
        return open_dialect(self.name, live.conn, version, result)

    async def _reattach(self, dialect: Dialect) -> None:
        """Re-attach every registered session to a fresh process (after a crash)."""
        for entry in self._sessions:
            try:
                result = await dialect.reattach(entry)
            except AgentError as exc:
                if dialect.conn.closed:
                    raise
                self._sessions.drop(entry.session_id, lost=True)
                message = exc.error.message
                sid = entry.session_id
                logger.warning("! agent %s: session %s lost: %s", self.name, sid, message)
                entry.tell({"status": "lost", "message": message})
                continue
            entry.state = "idle"
            logger.info("= agent %s: session %s re-attached", self.name, entry.session_id)
            entry.tell({"status": "restarted"})
            options = result.get("configOptions")
            if isinstance(options, list):
                entry.deliver({"sessionUpdate": "config_option_update", "configOptions": options})

    # -- login -----------------------------------------------------------------------------

    def login_problem(self, method_id: str) -> str | None:
        """Why the hub would not send a login with ``method_id`` now (``None``: it would);
        see ``hub.agents.login.login_problem``."""
        return self._login.problem(self.auth_methods, method_id)

    async def login(self, method_id: str, meta: Mapping[str, Any] | None = None) -> None:
        """Log the agent in with ``method_id`` (``authenticate`` to v1, ``auth/login`` to
        v2) and redo that login after every restart. Raises the agent's own error when it
        refuses, ``-32602`` for a terminal method or an ``env_var`` method whose variables
        the definition's ``env`` lacks. Who may call this is the caller's business: the
        process is shared by every session of the agent."""
        await self._login.log_in(await self._ready(), method_id, meta)

    async def logout(self) -> None:
        """Log the agent out (``logout`` to v1 when advertised, ``auth/logout`` to v2) and
        forget the login to redo after a restart."""
        await self._login.log_out(await self._ready())

    # -- operations --------------------------------------------------------------------------

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[dict[str, Any]], sink: SessionSink
    ) -> NewSessionResult:
        """``session/new``; ``sink`` is registered for the new session before any of its
        updates is dispatched. ``mcp_servers`` are v2 entries."""
        dialect = await self._ready()
        servers = [dict(s) for s in mcp_servers]
        created: list[AgentSession] = []

        def register(session_id: str) -> AgentSession:
            entry = AgentSession(
                self.name, session_id, sink, cwd, servers, translator=dialect.new_translator()
            )
            self._sessions.register(entry)
            created.append(entry)
            return entry

        try:
            entry, options = await dialect.new_session(cwd, servers, register)
        except AgentError as exc:
            for entry in created:
                self._sessions.drop(entry.session_id)
            if exc.code == AUTH_REQUIRED:
                methods = dialect.auth_methods
                raise login_required(self.name, methods, self._login.status, exc.error) from None
            raise
        except BaseException:
            for entry in created:
                self._sessions.drop(entry.session_id)
            raise
        return NewSessionResult(entry.session_id, options)

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        sink: SessionSink,
        *,
        mcp_servers: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """Attach ``sink`` to the agent's existing session ``session_id``, without its history
        (a hub restarted on a durable store has it): ``session/resume``, or for a v1 agent
        without it ``session/load`` with the replay swallowed, as after a crash. Returns the
        v2-shaped result (``configOptions`` when the agent sent some); ``AgentError`` when the
        agent cannot take the session back (the caller marks it lost)."""
        dialect = await self._ready()
        entry = AgentSession(
            self.name,
            session_id,
            sink,
            cwd,
            [dict(s) for s in mcp_servers],
            translator=dialect.new_translator(),
        )
        previous = self._sessions.register(entry)
        try:
            return await dialect.reattach(entry)
        except BaseException:
            self._sessions.restore(entry, previous)
            raise

    async def close_session(self, session_id: str) -> None:
        """``session/close``; the sink is dropped."""
        dialect = await self._ready()
        dialect.require("close", "session/close")
        await dialect.conn.request("session/close", {"sessionId": session_id}, deadline=True)
        self._sessions.drop(session_id)

    async def delete_session(self, session_id: str) -> None:
        """``session/delete``; the sink is dropped."""
        dialect = await self._ready()
        dialect.require("delete", "session/delete")
        await dialect.conn.request("session/delete", {"sessionId": session_id}, deadline=True)
        self._sessions.drop(session_id)

    async def prompt(self, session_id: str, blocks: Sequence[dict[str, Any]]) -> PromptAck:
        """Forward a prompt; return when the agent accepted it.

        v2: the agent's acknowledgement (``{}`` or ``{messageId}``). v1: as soon as the
        prompt is sent, after ``user_message`` and ``running`` went to the sink; the v1
        response later becomes ``idle`` with its stop reason (or ``idle`` without one and
        the error in ``_meta["acp-hub"].error``).
        """
        dialect = await self._ready()
        return await dialect.prompt(self._sessions.require(session_id), blocks)

    async def cancel(self, session_id: str) -> None:
        """``session/cancel``; pending permission requests of the session are answered
        ``cancelled`` (the client owes the agent that, whatever observers do)."""
        entry = self._sessions.get(session_id)
        if entry is not None:
            entry.cancel_permissions()
        live = self._live
        if self.state is not AgentState.RUNNING or live is None or live.conn is None:
            return  # nothing runs: nothing to cancel
        await live.conn.notify("session/cancel", {"sessionId": session_id})

    async def set_config_option(
        self, session_id: str, config_id: str, type: str, value: Any
    ) -> list[dict[str, Any]]:
        """``session/set_config_option``; returns the full v2 option set. For v1 agents the
        synthetic mode option is routed to ``session/set_mode``."""
        dialect = await self._ready()
        entry = self._sessions.require(session_id)
        return await dialect.set_config_option(entry, config_id, type, value)

    async def set_mode(self, session_id: str, mode_id: str) -> None:
        """v1 ``session/set_mode``; the mode option's new value goes to the sink as a
        ``config_option_update``. ``UNSUPPORTED`` for v2 agents."""
        dialect = await self._ready()
        await dialect.set_mode(self._sessions.require(session_id), mode_id)

    async def extension(self, session_id: str | None, method: str, params: dict[str, Any]) -> Any:
        """A request the hub does not handle itself (ACP's extension surface: ``_vendor/...``
        methods, session methods the hub has no entry for), passed to the agent as the client
        sent it but for ``sessionId``, which becomes the agent's session id (``None``: a
        method configured to need no session). Unknown methods are not translated between
        versions: they pass unchanged. Returns the agent's result; ``AgentError`` with the
        agent's own error, or when it does not answer within ``response_timeout``."""
        dialect = await self._ready()
        if session_id is not None:
            params = {**params, "sessionId": self._sessions.require(session_id).session_id}
        return await dialect.conn.request(method, params, deadline=True)
