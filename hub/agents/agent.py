"""``Agent``: one configured agent, its process lifecycle and its v2-shaped API.

Theory of operation
-------------------
An ``Agent`` owns at most one running *incarnation* at a time: a process
(``AgentProcess``), its JSON-RPC ``Connection``, the version negotiated in ``initialize``.
The incarnation runs as a task of the supervisor's task group (``_run``); the first caller
that needs the agent starts it (``ensure_started``) and waits until it is initialized and
its registered sessions are re-attached.

State table (``_run``)::

    spawn -> initialize -> re-attach sessions -> running -> ended -> wound down
              | fails                                        ^ leader exited, stdout
              v                                              | closed, or stop requested
            stop the process, raise AgentError to the starter

"Ended" is whichever comes first: the leader exits (crash, or stop), the agent closes
stdout, or the hub stops it (``aclose``). Winding down is shielded and ordered: stop the
process (or end what is left of its group), let the reader drain what the agent wrote
before dying, fail every in-flight request with ``AGENT_UNAVAILABLE`` (a v1 prompt turn then
ends with an ``idle`` carrying the error), cancel every pending permission and elicitation
task, and - unless the hub stopped the agent - tell every registered sink
``{"status": "exited", ...}`` after an ``idle`` for a session that was mid-turn.

Restart: nothing restarts by itself. The next operation starts a new incarnation, after a
backoff if the last one crashed soon after starting (``RestartPolicy``: 0.1 s doubling up to
5 s, back to the start after a healthy period), and re-attaches every registered session
with ``session/resume`` (v2; v1 with ``sessionCapabilities.resume``) or ``session/load``
(v1 ``loadSession``; the replayed history is swallowed, the hub has it). Each sink then
gets ``{"status": "restarted"}``, or ``{"status": "lost", "message"}`` and is dropped.

Versions: everything the session layer sees is v2-shaped. For a v1 agent, each session has
an ``AgentV1Translator`` that turns its updates into v2 and synthesizes what v1 never says
(``user_message`` + ``running`` when a prompt is forwarded, ``idle`` with the stop reason
when the prompt returns, ``requires_action`` while a permission is pending). An agent that
answers ``protocolVersion: 2`` with a v1-shaped ``initialize`` result is spoken to in v1;
one that negotiated v2 and later sends v1 updates is logged and its v1 updates are
translated as far as they are well-formed. Malformed updates of known variants are logged
and dropped, never handed to a sink; ``_hub_*`` variants are the hub's and never accepted
from an agent.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.abc

from hub import __version__
from hub.agents.connection import Connection, DispatchBatch
from hub.agents.errors import AgentError, agent_unavailable, unsupported
from hub.agents.process import AgentProcess, ShutdownTimings, group_alive
from hub.agents.sink import SessionSink
from hub.agents.spec import AgentSpec
from hub.protocol import version as versions
from hub.protocol.errors import (
    SESSION_LOST,
    InvalidParams,
    RpcError,
    TranslationError,
    VersionError,
    hub_error,
    invalid_params,
    method_not_found,
    resource_not_found,
)
from hub.protocol.framing import DEFAULT_MAX_LINE
from hub.protocol.state import REMOVED_VARIANTS
from hub.protocol.state import check as check_update
from hub.protocol.translate import (
    AgentV1Translator,
    auth_methods_v1_to_v2,
    capabilities_v1_to_v2,
    mcp_servers_v2_to_v1,
    permission_outcome_for_agent,
    permission_request_v1_to_v2,
    prompt_v2_to_v1,
)

__all__ = ["CLIENT_INFO", "Agent", "NewSessionResult", "PromptAck", "RestartPolicy"]

logger = logging.getLogger("hub.agents")

CLIENT_INFO = {"name": "acp-hub", "title": "acp-hub", "version": __version__}

_CHUNKS = frozenset({"user_message_chunk", "agent_message_chunk", "agent_thought_chunk"})
_CANCELLED = {"outcome": "cancelled"}
_BUSY_STATES = frozenset({"running", "requires_action"})


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """Timing of starts, restarts and shutdowns (seconds).

    A crash within ``healthy_after`` seconds of a start doubles the delay before the next
    start, from ``backoff_initial`` up to ``backoff_max``; a crash after a healthy period
    starts over from ``backoff_initial``.
    """

    backoff_initial: float = 0.1
    backoff_max: float = 5.0
    healthy_after: float = 10.0
    initialize_timeout: float = 30.0
    drain_timeout: float = 2.0
    shutdown: ShutdownTimings = field(default_factory=ShutdownTimings)

    def delay(self, failures: int) -> float:
        """The delay before the next start after ``failures`` consecutive quick failures."""
        if failures <= 0:
            return 0.0
        return float(min(self.backoff_initial * 2 ** min(failures - 1, 62), self.backoff_max))


@dataclass(frozen=True, slots=True)
class NewSessionResult:
    """``session/new`` as the session layer needs it: the id, the v2 config options, and the
    agent's raw result (in the agent's version)."""

    session_id: str
    config_options: list[dict[str, Any]]
    raw: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PromptAck:
    """A prompt was accepted; ``message_id`` is the user message's id when known (always
    for v1 agents, whose id the hub mints; for v2 agents when they answer ``{messageId}``)."""

    message_id: str | None


@dataclass(eq=False, slots=True)
class _Session:
    session_id: str
    sink: SessionSink
    cwd: str
    mcp_servers: list[dict[str, Any]]
    # v1 agents: always; v2 agents: created when they send v1 updates anyway.
    translator: AgentV1Translator | None = None
    swallow: bool = False  # a re-attaching session/load is replaying history we already have
    state: str = "idle"  # the foreground state last delivered
    permissions: set[anyio.CancelScope] = field(default_factory=set)


@dataclass(eq=False, slots=True)
class _Live:
    """One incarnation of the agent."""

    process: AgentProcess
    conn: Connection | None = None
    version: int = 0
    started_at: float = math.inf
    ended: anyio.Event = field(default_factory=anyio.Event)
    reader_done: anyio.Event = field(default_factory=anyio.Event)
    finished: anyio.Event = field(default_factory=anyio.Event)
    end_reason: str = ""
    stop_reason: str | None = None  # set when the hub stops the agent on purpose
    speaks_v1_noted: bool = False
    wound_down: bool = False

    def end(self, reason: str) -> None:
        if not self.ended.is_set():
            self.end_reason = reason
            self.ended.set()

    @property
    def usable(self) -> bool:
        return self.conn is not None and not self.ended.is_set()


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
        self._dispatch_batch = dispatch_batch
        self._tg = task_group
        self._max_line = max_line
        self._stderr_lines = stderr_lines
        self.policy = policy or RestartPolicy()
        self.version: int | None = None
        """The protocol version spoken to the current (or last) process."""
        self.capabilities: dict[str, Any] = {}
        """The agent's capabilities in the v2 shape (v1 ones translated)."""
        self.info: dict[str, Any] | None = None
        self.auth_methods: list[dict[str, Any]] = []
        """Auth methods in the v2 shape (``methodId``, ``type``)."""
        self.initialize_result: dict[str, Any] = {}
        """The raw ``initialize`` result of the current (or last) process."""
        self._v1_caps: dict[str, Any] = {}
        self._live: _Live | None = None
        self._last_process: AgentProcess | None = None
        self.pids: list[int] = []
        """The pids (= process group ids) of the processes started, oldest first (the last
        20)."""
        self._sessions: dict[str, _Session] = {}
        self._elicitations: dict[str, str] = {}  # elicitationId -> sessionId (URL mode)
        self._lost: set[str] = set()  # sessions that could not be re-attached
        self._start_lock = anyio.Lock()
        self._failures = 0
        self._next_start = 0.0
        self._closing = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def running(self) -> bool:
        """Whether a process is up and initialized."""
        return self._live is not None and self._live.usable

    @property
    def pid(self) -> int | None:
        """The pid (and pgid) of the running process."""
        return self._live.process.pid if self._live is not None and self.running else None

    def session_ids(self) -> list[str]:
        """The agent session ids that have a registered sink."""
        return list(self._sessions)

    def stderr_tail(self) -> str:
        """The last lines the current (or last) process wrote to stderr."""
        return self._last_process.stderr_tail() if self._last_process is not None else ""

    async def wait_stderr(self, predicate: Callable[[str], bool]) -> None:
        """Return once ``predicate(stderr_tail())`` holds for the current process (for
        instance a login URL the agent prints). Bound it with a timeout."""
        while True:
            process = self._last_process
            if process is not None and predicate(process.stderr_tail()):
                return
            if process is None:
                raise agent_unavailable(self.name, "it has not been started")
            await process.next_stderr_line()

    # -- capabilities ------------------------------------------------------------------------

    def supports(self, operation: str) -> bool:
        """Whether the agent advertised what ``operation`` needs.

        Operations: ``list``, ``resume``, ``close``, ``delete``, ``load``, ``set_mode``,
        ``replay`` (resume with history replay). Unknown before the first start.
        """
        return self._needs(operation) is None

    def _needs(self, operation: str) -> str | None:
        """``None`` if ``operation`` is supported, else the capability it lacks."""
        if self.version == 2:
            session = self.capabilities.get("session")
            if operation in ("list", "resume", "close", "replay"):
                return None if isinstance(session, dict) else "capabilities.session"
            if operation == "delete":
                ok = isinstance(session, dict) and session.get("delete") is not None
                return None if ok else "capabilities.session.delete"
            if operation in ("load", "set_mode"):
                return f"session/{operation} (removed in protocol v2)"
            return operation
        caps = self._v1_caps
        sessions = caps.get("sessionCapabilities")
        sessions = sessions if isinstance(sessions, dict) else {}
        if operation in ("list", "resume", "close", "delete"):
            ok = sessions.get(operation) is not None
            return None if ok else f"agentCapabilities.sessionCapabilities.{operation}"
        if operation in ("load", "replay"):
            return None if caps.get("loadSession") is True else "agentCapabilities.loadSession"
        if operation == "set_mode":
            return None
        return operation

    def _require(self, operation: str, method: str) -> None:
        needs = self._needs(operation)
        if needs is not None:
            raise unsupported(self.name, method, needs)

    # -- lifecycle ---------------------------------------------------------------------------

    async def ensure_started(self) -> None:
        """Start the agent unless it is running: spawn, initialize, re-attach the registered
        sessions. Waits out the restart backoff first. Raises ``AgentError``
        (``AGENT_UNAVAILABLE``) if it cannot be started."""
        if self.running:
            return
        async with self._start_lock:
            if self._closing:
                raise agent_unavailable(self.name, "the hub is shutting down")
            if self.running:
                return
            previous = self._live
            if previous is not None:
                await previous.finished.wait()
            delay = self._next_start - anyio.current_time()
            if delay > 0:
                logger.info("= agent %s: restarting in %.2fs (backoff)", self.name, delay)
                await anyio.sleep(delay)
            live: _Live = await self._tg.start(self._run)
            self._live = live

    async def _ready(self) -> _Live:
        await self.ensure_started()
        live = self._live
        if live is None or live.conn is None or not live.usable:
            raise agent_unavailable(self.name, "it exited while starting")
        return live

    async def aclose(self, reason: str = "hub shutdown") -> None:
        """Stop the agent for good (ordered shutdown, see ``AgentProcess.stop``); sinks are
        not told. Later operations raise ``AGENT_UNAVAILABLE``."""
        self._closing = True
        with anyio.CancelScope(shield=True):
            async with self._start_lock:
                live = self._live
                if live is not None and not live.finished.is_set():
                    live.stop_reason = reason
                    live.end(reason)
                    await live.finished.wait()

    async def restart(self, reason: str = "restart requested") -> None:
        """Stop the running process (sinks are told it exited) and start a new one."""
        live = self._live
        if live is not None and not live.finished.is_set():
            live.stop_reason = reason
            live.end(reason)
            await live.finished.wait()
        self._next_start = 0.0
        await self.ensure_started()

    async def _run(
        self, *, task_status: anyio.abc.TaskStatus[_Live] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """One incarnation, from spawn to wind-down (see the module docstring)."""
        try:
            process = await AgentProcess.spawn(self.spec, stderr_lines=self._stderr_lines)
        except OSError as exc:
            self._note_failure(started=False)
            raise agent_unavailable(
                self.name, f"cannot run {self.spec.command!r}: {exc.strerror or exc}"
            ) from None
        self._last_process = process
        self.pids = [*self.pids[-19:], process.pid]
        live = _Live(process)
        started = False
        start_error: AgentError | None = None
        try:
            async with anyio.create_task_group() as tg:
                conn = Connection(
                    self.name,
                    process.stdin,
                    process.stdout,
                    tg,
                    on_request=partial(self._on_request, live),
                    on_notification=partial(self._on_notification, live),
                    on_request_seen=self._on_request_seen,
                    max_line=self._max_line,
                    dispatch_batch=self._dispatch_batch,
                )
                live.conn = conn
                tg.start_soon(self._read, live)
                tg.start_soon(process.pump_stderr)
                tg.start_soon(self._watch_exit, live)
                start_error = await self._start_up(live)
                if start_error is None and live.usable:
                    live.started_at = anyio.current_time()
                    started = True
                    logger.info(
                        "= agent %s: ready (pid %d, protocol %d)",
                        self.name,
                        process.pid,
                        live.version,
                    )
                    task_status.started(live)
                    await live.ended.wait()
                else:
                    live.end(start_error.error.message if start_error else "exited on start")
                await self._wind_down(live)
                tg.cancel_scope.cancel()
        except Exception:
            logger.exception("! agent %s: supervisor task failed", self.name)
        finally:
            with anyio.CancelScope(shield=True):
                if not live.wound_down:
                    live.end(live.end_reason or "cancelled")
                    await self._wind_down(live)
                await process.aclose()
                self._after_exit(live, started)
                live.finished.set()
        if not started:
            if start_error is None:
                tail = process.stderr_tail()
                start_error = agent_unavailable(
                    self.name,
                    f"it ended during startup ({live.end_reason}, "
                    f"{_describe(*process.exit_status())})"
                    + (f": {tail.splitlines()[-1][:300]}" if tail else ""),
                    stderr=tail[-2000:],
                )
            raise start_error

    async def _start_up(self, live: _Live) -> AgentError | None:
        """Initialize and re-attach, unless the process ends first; the error, if any."""
        error: AgentError | None = None

        async def guard(scope: anyio.CancelScope) -> None:
            await live.ended.wait()
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(guard, tg.cancel_scope)
            try:
                with anyio.fail_after(self.policy.initialize_timeout):
                    await self._initialize(live)
                await self._reattach(live)
            except TimeoutError:
                error = agent_unavailable(
                    self.name, f"no answer to initialize within {self.policy.initialize_timeout}s"
                )
            except AgentError as exc:
                error = exc
            tg.cancel_scope.cancel()
        return error  # None also when the process ended first: `_run` then says how

    async def _read(self, live: _Live) -> None:
        assert live.conn is not None
        try:
            await live.conn.run()
        finally:
            live.reader_done.set()
            live.end("stdout closed")

    async def _watch_exit(self, live: _Live) -> None:
        await live.process.wait_exit()
        live.end("agent exited")

    async def _wind_down(self, live: _Live) -> None:
        """Stop or clean up the process, drain its output, fail what is in flight."""
        with anyio.CancelScope(shield=True):
            process = live.process
            if live.stop_reason is not None:
                await process.stop(live.stop_reason, self.policy.shutdown)
            elif process.returncode is not None:
                # The leader is gone: end its leftovers, so that pipes they hold close, and
                # read what the agent wrote before it died.
                if group_alive(process.pgid):
                    process.signal_group(signal.SIGTERM)
                with anyio.move_on_after(self.policy.drain_timeout):
                    await live.reader_done.wait()
            else:
                await process.stop(live.end_reason, self.policy.shutdown)
            code, sig = process.exit_status()
            if live.conn is not None and not live.conn.closed:
                why = f"the agent process exited ({_describe(code, sig)})"
                live.conn.close(agent_unavailable(self.name, why).error)
            await process.end_group("agent exited", self.policy.shutdown)
            live.wound_down = True

    def _after_exit(self, live: _Live, started: bool) -> None:
        code, sig = live.process.exit_status()
        logger.info(
            "= agent %s: process %d ended (%s; %s)",
            self.name,
            live.process.pid,
            live.end_reason,
            _describe(code, sig),
        )
        if live.stop_reason is None:
            self._note_failure(started=started, uptime=anyio.current_time() - live.started_at)
        if not started or self._closing:
            return
        event = {"status": "exited", "exitCode": code, "signal": sig}
        for entry in list(self._sessions.values()):
            for scope in entry.permissions:
                scope.cancel()
            if live.version == 2 and entry.state in _BUSY_STATES:
                error = agent_unavailable(self.name, "the agent process exited").error
                self._deliver(
                    entry,
                    {
                        "sessionUpdate": "state_update",
                        "state": "idle",
                        "_meta": {"acp-hub": {"error": error.to_dict()}},
                    },
                )
            entry.state = "idle"
            _call_sink(self.name, entry.sink.on_agent_event, event)

    def _note_failure(self, *, started: bool, uptime: float = 0.0) -> None:
        if self._closing:
            return
        if started and uptime >= self.policy.healthy_after:
            self._failures = 1
        else:
            self._failures += 1
        self._next_start = anyio.current_time() + self.policy.delay(self._failures)

    # -- initialize and re-attach ------------------------------------------------------------

    async def _initialize(self, live: _Live) -> None:
        assert live.conn is not None
        offered = versions.offer(self.spec.protocol)
        params: dict[str, Any] = {"protocolVersion": offered}
        elicitation: dict[str, Any] = {"form": {}, "url": {}}
        if offered == 2:
            params["info"] = CLIENT_INFO
            params["capabilities"] = {"elicitation": elicitation}
        else:
            params["clientInfo"] = CLIENT_INFO
            params["clientCapabilities"] = {
                "fs": {"readTextFile": False, "writeTextFile": False},
                "terminal": False,
                "elicitation": elicitation,
            }
        result = await live.conn.request("initialize", params)
        if not isinstance(result, dict):
            raise agent_unavailable(self.name, f"initialize answered {result!r}")
        try:
            version = versions.accept(offered, result.get("protocolVersion"), self.spec.protocol)
        except VersionError as exc:
            raise agent_unavailable(self.name, str(exc)) from None
        if version == 2 and "agentCapabilities" in result and "capabilities" not in result:
            logger.warning(
                "! agent %s claims protocol 2 but answered initialize in the v1 shape; "
                "speaking v1 to it",
                self.name,
            )
            live.speaks_v1_noted = True
            version = 1
        live.version = version
        self.version = version
        self.initialize_result = result
        if version == 1:
            caps = result.get("agentCapabilities")
            self._v1_caps = caps if isinstance(caps, dict) else {}
            try:
                self.capabilities = capabilities_v1_to_v2(self._v1_caps)
            except InvalidParams as exc:
                logger.warning("! agent %s: malformed agentCapabilities: %s", self.name, exc)
                self.capabilities = {}
            info = result.get("agentInfo")
            try:
                self.auth_methods = auth_methods_v1_to_v2(_dicts(result.get("authMethods")))
            except InvalidParams as exc:
                logger.warning("! agent %s: malformed authMethods: %s", self.name, exc)
                self.auth_methods = []
        else:
            caps = result.get("capabilities")
            self._v1_caps = {}
            self.capabilities = caps if isinstance(caps, dict) else {}
            info = result.get("info")
            self.auth_methods = _dicts(result.get("authMethods"))
        self.info = info if isinstance(info, dict) else None

    async def _reattach(self, live: _Live) -> None:
        """Re-attach every registered session to a fresh process (after a crash)."""
        for entry in list(self._sessions.values()):
            try:
                result = await self._attach(live, entry, replay=False)
            except AgentError as exc:
                if live.conn is None or live.conn.closed:
                    raise
                self._drop(entry.session_id)
                self._lost.add(entry.session_id)
                logger.warning(
                    "! agent %s: session %s lost: %s",
                    self.name,
                    entry.session_id,
                    exc.error.message,
                )
                _call_sink(
                    self.name,
                    entry.sink.on_agent_event,
                    {"status": "lost", "message": exc.error.message},
                )
                continue
            entry.state = "idle"
            logger.info("= agent %s: session %s re-attached", self.name, entry.session_id)
            _call_sink(self.name, entry.sink.on_agent_event, {"status": "restarted"})
            options = result.get("configOptions")
            if isinstance(options, list):
                self._deliver(
                    entry, {"sessionUpdate": "config_option_update", "configOptions": options}
                )

    async def _attach(self, live: _Live, entry: _Session, *, replay: bool) -> dict[str, Any]:
        """Attach ``entry`` (already registered) with resume or load; the v2-shaped result.

        Without ``replay`` a v1 agent that can only load is asked to load and its replay
        is swallowed.
        """
        assert live.conn is not None
        sid = entry.session_id
        if live.version == 2:
            self._require("resume", "session/resume")
            params: dict[str, Any] = {"sessionId": sid, "cwd": entry.cwd}
            if entry.mcp_servers:
                params["mcpServers"] = entry.mcp_servers
            if replay:
                params["replayFrom"] = {"type": "start"}
            result = await live.conn.request("session/resume", params)
            return result if isinstance(result, dict) else {}
        servers = self._v1_mcp_servers(entry.mcp_servers)
        if not replay and self.supports("resume"):
            method, swallow = "session/resume", False
        elif self.supports("load"):
            method, swallow = "session/load", not replay
        else:
            raise unsupported(
                self.name,
                "session/load" if replay else "session/resume",
                "agentCapabilities.loadSession"
                + ("" if replay else " or sessionCapabilities.resume"),
            )
        translator = entry.translator
        assert translator is not None
        setup: list[dict[str, Any]] = []

        def on_reply(result: Any, error: RpcError | None) -> None:
            # Runs in the reader: the replay (if any) is over, live updates follow.
            entry.swallow = False
            if error is None:
                try:
                    setup.extend(translator.session_setup(result))
                except InvalidParams as exc:
                    logger.warning("! agent %s: malformed %s result: %s", self.name, method, exc)

        entry.swallow = swallow
        try:
            await live.conn.request(
                method,
                {"sessionId": sid, "cwd": entry.cwd, "mcpServers": servers},
                on_reply=on_reply,
            )
        finally:
            entry.swallow = False
        return {"configOptions": translator.config_options} if setup else {}

    # -- session registry --------------------------------------------------------------------

    def _register(self, entry: _Session) -> None:
        self._lost.discard(entry.session_id)
        old = self._sessions.get(entry.session_id)
        if old is not None and old.sink is not entry.sink:
            logger.info("= agent %s: session %s gets a new sink", self.name, entry.session_id)
        self._sessions[entry.session_id] = entry

    def _drop(self, session_id: str) -> None:
        entry = self._sessions.pop(session_id, None)
        if entry is not None:
            for scope in entry.permissions:
                scope.cancel()
        for eid in [e for e, s in self._elicitations.items() if s == session_id]:
            del self._elicitations[eid]

    def _entry(self, session_id: str) -> _Session:
        entry = self._sessions.get(session_id)
        if entry is None:
            if session_id in self._lost:
                raise AgentError(
                    hub_error(
                        SESSION_LOST,
                        f"agent '{self.name}' lost session {session_id!r} when it restarted",
                        {"agent": self.name, "sessionId": session_id},
                    )
                )
            raise AgentError(
                resource_not_found(f"agent '{self.name}' has no attached session {session_id!r}")
            )
        return entry

    def _new_entry(
        self, session_id: str, sink: SessionSink, cwd: str, mcp_servers: Sequence[Any]
    ) -> _Session:
        entry = _Session(session_id, sink, cwd, [dict(s) for s in mcp_servers])
        if self.version == 1:
            entry.translator = AgentV1Translator()
        return entry

    def _v1_mcp_servers(self, servers: Sequence[Any]) -> list[dict[str, Any]]:
        mcp = self._v1_caps.get("mcpCapabilities")
        http = isinstance(mcp, dict) and mcp.get("http") is True
        try:
            return mcp_servers_v2_to_v1(servers, http=http)
        except (InvalidParams, TranslationError) as exc:
            raise AgentError(invalid_params(str(exc))) from None

    # -- operations --------------------------------------------------------------------------

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[dict[str, Any]], sink: SessionSink
    ) -> NewSessionResult:
        """``session/new``; ``sink`` is registered for the new session before any of its
        updates is dispatched. ``mcp_servers`` are v2 entries."""
        live = await self._ready()
        assert live.conn is not None
        if live.version == 1:
            servers: list[dict[str, Any]] = self._v1_mcp_servers(mcp_servers)
        else:
            servers = [dict(s) for s in mcp_servers]
        holder: list[_Session] = []

        def on_reply(result: Any, error: RpcError | None) -> None:
            if error is not None or not isinstance(result, dict):
                return
            sid = result.get("sessionId")
            if not isinstance(sid, str) or not sid:
                return
            entry = self._new_entry(sid, sink, cwd, mcp_servers)
            if live.version == 2 and "modes" in result:
                self._note_v1(live, "its session/new result carries v1 modes")
                entry.translator = AgentV1Translator()
            self._register(entry)
            holder.append(entry)

        try:
            result = await live.conn.request(
                "session/new", {"cwd": cwd, "mcpServers": servers}, on_reply=on_reply
            )
        except BaseException:
            for entry in holder:
                self._drop(entry.session_id)
            raise
        if not holder:
            raise agent_unavailable(self.name, f"session/new answered {result!r}")
        entry = holder[0]
        options: list[dict[str, Any]]
        if entry.translator is not None:
            try:
                entry.translator.session_setup(result)
            except InvalidParams as exc:
                logger.warning("! agent %s: malformed session/new result: %s", self.name, exc)
            options = entry.translator.config_options
        else:
            raw_options = result.get("configOptions")
            options = _dicts(raw_options)
        return NewSessionResult(entry.session_id, options, result)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """``session/list`` (v2 shape ``{sessions, nextCursor?}``; a ``null`` result is an
        empty list)."""
        live = await self._ready()
        assert live.conn is not None
        self._require("list", "session/list")
        params: dict[str, Any] = {}
        if cwd is not None:
            params["cwd"] = cwd
        if cursor is not None:
            params["cursor"] = cursor
        result = await live.conn.request("session/list", params)
        if result is None:
            return {"sessions": []}
        if not isinstance(result, dict) or not isinstance(result.get("sessions"), list):
            logger.warning("! agent %s: malformed session/list result %r", self.name, result)
            return {"sessions": []}
        return result

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        sink: SessionSink,
        replay: bool = False,
        *,
        mcp_servers: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """Attach ``sink`` to an existing agent session.

        v2: ``session/resume`` (``replayFrom: start`` with ``replay``). v1: ``session/load``
        with ``replay`` (needs ``loadSession``); without, ``session/resume`` if advertised,
        else ``session/load`` with the replay swallowed. Replayed updates reach ``sink``
        before this returns. Returns the v2-shaped result (``configOptions`` when known).
        """
        live = await self._ready()
        return await self._attach_new(live, session_id, cwd, sink, mcp_servers, replay=replay)

    async def load_session(
        self,
        session_id: str,
        cwd: str,
        sink: SessionSink,
        *,
        mcp_servers: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """v1 ``session/load``: attach ``sink`` and receive the whole history through it
        before this returns. Raises ``UNSUPPORTED`` for v2 agents (use ``resume_session``
        with ``replay``) and v1 agents without ``loadSession``."""
        live = await self._ready()
        self._require("load", "session/load")
        return await self._attach_new(live, session_id, cwd, sink, mcp_servers, replay=True)

    async def _attach_new(
        self,
        live: _Live,
        session_id: str,
        cwd: str,
        sink: SessionSink,
        mcp_servers: Sequence[dict[str, Any]],
        *,
        replay: bool,
    ) -> dict[str, Any]:
        previous = self._sessions.get(session_id)
        entry = self._new_entry(session_id, sink, cwd, mcp_servers)
        if previous is not None and previous.translator is not None:
            entry.translator = previous.translator
        self._register(entry)
        try:
            return await self._attach(live, entry, replay=replay)
        except BaseException:
            if self._sessions.get(session_id) is entry:
                if previous is not None:
                    self._sessions[session_id] = previous
                else:
                    self._drop(session_id)
            raise

    async def close_session(self, session_id: str) -> None:
        """``session/close``; the sink is dropped."""
        live = await self._ready()
        assert live.conn is not None
        self._require("close", "session/close")
        await live.conn.request("session/close", {"sessionId": session_id})
        self._drop(session_id)

    async def delete_session(self, session_id: str) -> None:
        """``session/delete``; the sink is dropped."""
        live = await self._ready()
        assert live.conn is not None
        self._require("delete", "session/delete")
        await live.conn.request("session/delete", {"sessionId": session_id})
        self._drop(session_id)

    async def prompt(self, session_id: str, blocks: Sequence[dict[str, Any]]) -> PromptAck:
        """Forward a prompt; return when the agent accepted it.

        v2: the agent's acknowledgement (``{}`` or ``{messageId}``). v1: as soon as the
        prompt is sent, after ``user_message`` and ``running`` went to the sink; the v1
        response later becomes ``idle`` with its stop reason (or ``idle`` without one and
        the error in ``_meta["acp-hub"].error``).
        """
        live = await self._ready()
        assert live.conn is not None
        entry = self._entry(session_id)
        if live.version == 2:
            return await self._prompt_v2(live, entry, blocks)
        translator = entry.translator
        assert translator is not None
        try:
            v1_blocks = prompt_v2_to_v1(blocks)
            message_id, updates = translator.prompt_started(blocks)
        except (InvalidParams, TranslationError) as exc:
            raise AgentError(invalid_params(str(exc))) from None

        def on_reply(result: Any, error: RpcError | None) -> None:
            if error is None:
                reason = result.get("stopReason") if isinstance(result, dict) else None
                if isinstance(reason, str):
                    done = translator.prompt_finished(reason)
                else:
                    error = invalid_params(f"prompt result without a stopReason: {result!r}")
            if error is not None:
                done = translator.prompt_failed(error)
            for update in done:
                self._deliver(entry, update)

        for update in updates:
            self._deliver(entry, update)
        try:
            await live.conn.start_request(
                "session/prompt", {"sessionId": session_id, "prompt": v1_blocks}, on_reply
            )
        except AgentError as exc:
            for update in translator.prompt_failed(exc.error):
                self._deliver(entry, update)
            raise
        return PromptAck(message_id)

    async def _prompt_v2(
        self, live: _Live, entry: _Session, blocks: Sequence[dict[str, Any]]
    ) -> PromptAck:
        assert live.conn is not None

        def on_reply(result: Any, error: RpcError | None) -> None:
            if error is None and isinstance(result, dict) and "stopReason" in result:
                # A v1 habit: the answer came at the end of the turn.
                self._note_v1(live, "it answered session/prompt with a stopReason")
                if entry.state != "idle":
                    self._deliver(
                        entry,
                        {
                            "sessionUpdate": "state_update",
                            "state": "idle",
                            "stopReason": result["stopReason"],
                        },
                    )

        result = await live.conn.request(
            "session/prompt",
            {"sessionId": entry.session_id, "prompt": list(blocks)},
            on_reply=on_reply,
        )
        message_id = result.get("messageId") if isinstance(result, dict) else None
        return PromptAck(message_id if isinstance(message_id, str) else None)

    async def cancel(self, session_id: str) -> None:
        """``session/cancel``; pending permission requests of the session are answered
        ``cancelled`` (the client owes the agent that, whatever observers do)."""
        entry = self._sessions.get(session_id)
        if entry is not None:
            for scope in list(entry.permissions):
                scope.cancel()
        live = self._live
        if live is None or live.conn is None or not live.usable:
            return  # nothing runs: nothing to cancel
        await live.conn.notify("session/cancel", {"sessionId": session_id})

    async def set_config_option(
        self, session_id: str, config_id: str, type: str, value: Any
    ) -> list[dict[str, Any]]:
        """``session/set_config_option``; returns the full v2 option set. For v1 agents the
        synthetic mode option is routed to ``session/set_mode``."""
        live = await self._ready()
        assert live.conn is not None
        entry = self._entry(session_id)
        params = {"sessionId": session_id, "configId": config_id, "type": type, "value": value}
        translator = entry.translator
        if live.version == 2:
            result = await live.conn.request("session/set_config_option", params)
            return _dicts(result.get("configOptions") if isinstance(result, dict) else None)
        assert translator is not None
        try:
            method, v1_params = translator.set_config_option(params)
        except (InvalidParams, TranslationError) as exc:
            raise AgentError(invalid_params(str(exc))) from None
        result = await live.conn.request(method, v1_params)
        if method == "session/set_mode":
            translator.mode_set(str(value))
            return translator.config_options
        try:
            return _dicts(translator.set_config_option_result(result)["configOptions"])
        except InvalidParams as exc:
            raise AgentError(invalid_params(f"agent answered: {exc}")) from None

    async def set_mode(self, session_id: str, mode_id: str) -> None:
        """v1 ``session/set_mode``; the mode option's new value goes to the sink as a
        ``config_option_update``."""
        live = await self._ready()
        assert live.conn is not None
        entry = self._entry(session_id)
        self._require("set_mode", "session/set_mode")
        await live.conn.request("session/set_mode", {"sessionId": session_id, "modeId": mode_id})
        if entry.translator is not None:
            for update in entry.translator.mode_set(mode_id):
                self._deliver(entry, update)

    async def call_extension(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send an ``_``-prefixed extension request and return its result."""
        if not method.startswith("_"):
            raise AgentError(invalid_params(f"{method!r} is not an extension method"))
        live = await self._ready()
        assert live.conn is not None
        return await live.conn.request(method, params or {})

    # -- what the agent sends ----------------------------------------------------------------

    def _note_v1(self, live: _Live, what: str) -> None:
        if not live.speaks_v1_noted:
            live.speaks_v1_noted = True
            logger.warning(
                "! agent %s negotiated protocol 2 but speaks v1 (%s); translating what is "
                "well-formed",
                self.name,
                what,
            )

    def _deliver(self, entry: _Session, update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") == "state_update":
            state = update.get("state")
            if isinstance(state, str):
                entry.state = state
        _call_sink(self.name, entry.sink.on_update, update)

    def _on_notification(self, live: _Live, method: str, params: dict[str, Any]) -> None:
        if method == "session/update":
            self._on_update(live, params)
        elif method == "elicitation/complete":
            eid = params.get("elicitationId")
            sid = self._elicitations.pop(eid, None) if isinstance(eid, str) else None
            entry = self._sessions.get(sid) if sid is not None else None
            if entry is None:
                logger.info("= agent %s: elicitation/complete for unknown %r", self.name, eid)
                return
            _call_sink(self.name, entry.sink.on_elicitation_complete, params)
        elif method.startswith("_"):
            sid = params.get("sessionId")
            entry = self._sessions.get(sid) if isinstance(sid, str) else None
            if entry is None:
                logger.info(
                    "= agent %s: extension notification %s: %s",
                    self.name,
                    method,
                    str(params)[:200],
                )
                return
            _call_sink(self.name, partial(entry.sink.on_extension, method), params)
        else:
            logger.info("= agent %s: notification %s ignored", self.name, method)

    def _on_update(self, live: _Live, params: dict[str, Any]) -> None:
        sid = params.get("sessionId")
        entry = self._sessions.get(sid) if isinstance(sid, str) else None
        if entry is None:
            logger.info("= agent %s: update for unknown session %r dropped", self.name, sid)
            return
        if entry.swallow:
            return
        update = params.get("update")
        variant = update.get("sessionUpdate") if isinstance(update, dict) else None
        if not isinstance(update, dict) or not isinstance(variant, str):
            logger.warning(
                "! agent %s: malformed session/update dropped: %r", self.name, str(params)[:200]
            )
            return
        if variant.startswith("_hub"):
            logger.warning(
                "! agent %s: the hub's own %s update is not accepted from an agent",
                self.name,
                variant,
            )
            return
        if live.version == 1:
            assert entry.translator is not None
            try:
                updates = entry.translator.update(update)
            except InvalidParams as exc:
                logger.warning(
                    "! agent %s: malformed %s update dropped: %s", self.name, variant, exc
                )
                return
        else:
            updates = self._check_v2(live, entry, update, variant)
        for item in updates:
            self._deliver(entry, item)

    def _check_v2(
        self, live: _Live, entry: _Session, update: dict[str, Any], variant: str
    ) -> list[dict[str, Any]]:
        # A removed v2 name, or a chunk without a message id, is a v1 habit (and never valid
        # v2): translated. Anything else is checked as the session's fold will check it.
        if variant in REMOVED_VARIANTS or (variant in _CHUNKS and update.get("messageId") is None):
            self._note_v1(live, f"it sent a v1 {variant} update")
            if entry.translator is None:
                entry.translator = AgentV1Translator()
            try:
                return entry.translator.update(update)
            except InvalidParams as exc:
                problem = exc
        else:
            try:
                check_update(update)
                return [update]
            except InvalidParams as exc:
                problem = exc
        logger.warning("! agent %s: malformed %s update dropped: %s", self.name, variant, problem)
        return []

    def _on_request_seen(self, method: str, params: dict[str, Any]) -> None:
        # In stream order: an `elicitation/complete` right behind its `elicitation/create`
        # must find the binding even before the create's task has run.
        if method == "elicitation/create":
            eid, sid = params.get("elicitationId"), params.get("sessionId")
            if isinstance(eid, str) and isinstance(sid, str) and sid in self._sessions:
                self._elicitations[eid] = sid

    async def _on_request(self, live: _Live, method: str, params: dict[str, Any]) -> Any:
        if method == "session/request_permission":
            return await self._serve_permission(live, params)
        if method == "elicitation/create":
            return await self._serve_elicitation(params)
        if method.startswith(("fs/", "terminal/")):
            logger.warning(
                "! agent %s asked for %s, which the hub does not offer", self.name, method
            )
        else:
            logger.info("= agent %s: request %s not served", self.name, method)
        raise AgentError(method_not_found(method))

    async def _serve_permission(self, live: _Live, params: dict[str, Any]) -> dict[str, Any]:
        sid = params.get("sessionId")
        entry = self._sessions.get(sid) if isinstance(sid, str) else None
        if entry is None:
            logger.warning(
                "! agent %s: permission request for unknown session %r: cancelled", self.name, sid
            )
            return {"outcome": dict(_CANCELLED)}
        v1_shape = "toolCall" in params and "title" not in params
        if live.version == 1 or v1_shape:
            if live.version == 2:
                self._note_v1(live, "it sent a v1 permission request")
            try:
                request = permission_request_v1_to_v2(params)
            except InvalidParams as exc:
                raise AgentError(invalid_params(str(exc))) from None
        else:
            request = dict(params)
            options = request.get("options")
            if not isinstance(request.get("title"), str) or not (
                isinstance(options, list)
                and options
                and all(isinstance(o, dict) and isinstance(o.get("optionId"), str) for o in options)
            ):
                raise AgentError(invalid_params("a permission request needs a title and options"))
        options = request["options"]
        translator = entry.translator if live.version == 1 else None
        if translator is not None:
            for update in translator.permission_pending():
                self._deliver(entry, update)
        scope = anyio.CancelScope()
        entry.permissions.add(scope)
        answer: Any = _CANCELLED
        try:
            with scope:
                answer = await entry.sink.on_permission(request)
        finally:
            entry.permissions.discard(scope)
            if translator is not None and live.conn is not None and not live.conn.closed:
                for update in translator.permission_answered():
                    self._deliver(entry, update)
        if scope.cancelled_caught:
            answer = _CANCELLED
        try:
            outcome = permission_outcome_for_agent(answer, options)
        except InvalidParams as exc:
            logger.warning(
                "! agent %s: permission answer %r refused (%s): cancelled", self.name, answer, exc
            )
            outcome = dict(_CANCELLED)
        return {"outcome": outcome}

    async def _serve_elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        sid = params.get("sessionId")
        entry = self._sessions.get(sid) if isinstance(sid, str) else None
        if entry is None:
            logger.warning(
                "! agent %s: elicitation without an attached session: cancelled", self.name
            )
            return {"action": "cancel"}
        result = await entry.sink.on_elicitation(dict(params))
        if not isinstance(result, dict) or not isinstance(result.get("action"), str):
            logger.warning("! agent %s: elicitation answer %r refused: cancel", self.name, result)
            return {"action": "cancel"}
        return result


def _describe(code: int | None, sig: str | None) -> str:
    if sig is not None:
        return f"killed by {sig}"
    if code is not None:
        return f"exit code {code}"
    return "still running"


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _call_sink(agent: str, fn: Any, *args: Any) -> None:
    """Call a synchronous sink method; a failing sink must not take the reader down."""
    try:
        fn(*args)
    except Exception:
        logger.exception("! agent %s: session sink failed", agent)
