"""Test support for the supervisor: a recording ``SessionSink``, agent specs, process checks.

``RecordingSink`` keeps everything the supervisor hands it and lets a test wait for a
condition (``wait_for``) without sleeping: every call wakes the waiters, which re-check.
Permission requests are held until the test answers them (or answered at once by
``permission_policy``), so a test can act while one is pending.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from hub.agents.agent import Agent, RestartPolicy
from hub.agents.process import ShutdownTimings
from hub.agents.spec import AgentSpec, ProtocolChoice
from hub.agents.supervisor import Supervisor

SCRIPTED_AGENT = Path(__file__).resolve().parent / "scripted_agent.py"
TIMEOUT = 15.0

TEST_POLICY = RestartPolicy(
    backoff_initial=0.05,
    backoff_max=0.4,
    healthy_after=30.0,
    initialize_timeout=20.0,
    drain_timeout=1.0,
    shutdown=ShutdownTimings(stdin_grace=1.0, term_grace=1.0, kill_wait=3.0),
)


def text(value: str) -> list[dict[str, Any]]:
    """A prompt of one text block."""
    return [{"type": "text", "text": value}]


def scripted_spec(
    home: Path,
    *flags: str,
    name: str = "scripted",
    protocol: ProtocolChoice = "auto",
) -> AgentSpec:
    """The scripted agent (``--protocol`` from ``protocol``) with its own ``HOME``."""
    proto = ["--protocol", str(protocol)] if protocol != "auto" else []
    return AgentSpec(
        name=name,
        command=sys.executable,
        args=(str(SCRIPTED_AGENT), *proto, *flags),
        env={"HOME": str(home)},
        protocol=protocol,
    )


@dataclass(eq=False)
class PermissionCall:
    params: dict[str, Any]
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: dict[str, Any] | None = None
    cancelled: bool = False


class RecordingSink:
    """A ``SessionSink`` that records everything (see the module docstring)."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.extensions: list[tuple[str, dict[str, Any]]] = []
        self.completions: list[dict[str, Any]] = []
        self.permissions: list[PermissionCall] = []
        self.elicitations: list[dict[str, Any]] = []
        self.permission_policy: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self.elicitation_answer: dict[str, Any] = {"action": "decline"}
        self._changed = anyio.Event()

    # -- waiting ------------------------------------------------------------------------------

    def _poke(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[], bool], within: float = TIMEOUT) -> None:
        with anyio.fail_after(within):
            while not predicate():
                await self._changed.wait()

    async def wait_idle(self, count: int = 1) -> dict[str, Any]:
        """Wait for the ``count``-th idle state update; return it."""
        await self.wait_for(lambda: len(self.idles()) >= count)
        return self.idles()[count - 1]

    async def wait_permission(self, count: int = 1) -> PermissionCall:
        await self.wait_for(lambda: len(self.permissions) >= count)
        return self.permissions[count - 1]

    # -- reading ------------------------------------------------------------------------------

    def variants(self) -> list[str]:
        return [str(u.get("sessionUpdate")) for u in self.updates]

    def states(self) -> list[str]:
        return [str(u["state"]) for u in self.updates if u.get("sessionUpdate") == "state_update"]

    def idles(self) -> list[dict[str, Any]]:
        return [
            u
            for u in self.updates
            if u.get("sessionUpdate") == "state_update" and u.get("state") == "idle"
        ]

    def text(self, variant: str = "agent_message_chunk") -> str:
        out = []
        for u in self.updates:
            if u.get("sessionUpdate") == variant:
                out.append(u["content"].get("text", ""))
            elif u.get("sessionUpdate") == variant.removesuffix("_chunk"):
                out.extend(b.get("text", "") for b in u.get("content") or [])
        return "".join(out)

    def statuses(self) -> list[str]:
        return [str(e["status"]) for e in self.events]

    # -- SessionSink ----------------------------------------------------------------------------

    def on_update(self, update: dict[str, Any]) -> None:
        self.updates.append(update)
        self._poke()

    async def on_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        call = PermissionCall(params)
        self.permissions.append(call)
        self._poke()
        if self.permission_policy is not None:
            call.answer = self.permission_policy(params)
            return call.answer
        try:
            await call.answered.wait()
        except anyio.get_cancelled_exc_class():
            call.cancelled = True
            self._poke()
            raise
        assert call.answer is not None
        return call.answer

    def answer(self, call: PermissionCall, answer: dict[str, Any]) -> None:
        call.answer = answer
        call.answered.set()

    async def on_elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        self.elicitations.append(params)
        self._poke()
        return self.elicitation_answer

    def on_elicitation_complete(self, params: dict[str, Any]) -> None:
        self.completions.append(params)
        self._poke()

    def on_agent_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self._poke()

    def on_extension(self, method: str, params: dict[str, Any]) -> None:
        self.extensions.append((method, params))
        self._poke()

    async def on_extension_request(self, method: str, params: dict[str, Any]) -> Any:
        self.extensions.append((method, params))
        self._poke()
        return {"echoed": method}


class _StderrLines(logging.Handler):
    """Wakes a waiter whenever an agent's stderr line is logged (``hub.agents.stderr``)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.changed = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.changed.set()
        self.changed = anyio.Event()


@contextmanager
def _stderr_lines() -> Iterator[_StderrLines]:
    logger = logging.getLogger("hub.agents.stderr")
    handler, level = _StderrLines(), logger.level
    logger.addHandler(handler)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def wait_stderr(
    agent: Agent, predicate: Callable[[str], bool], within: float = TIMEOUT
) -> None:
    """Wait until ``predicate(agent.stderr_tail())`` holds (each stderr line the agent
    writes is logged: the log wakes the check)."""
    with _stderr_lines() as lines, anyio.fail_after(within):
        while not predicate(agent.stderr_tail()):
            await lines.changed.wait()


def live_members(pgid: int) -> list[int]:
    """Pids of the processes of group ``pgid`` that are not zombies (Linux /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def group_gone(pgid: int) -> bool:
    """No running process is left in group ``pgid`` (orphaned zombies awaiting init's reaping
    do not count: they hold no resources and run no code)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    if Path("/proc").is_dir():
        return not live_members(pgid)
    return False


async def wait_group_gone(pgid: int, within: float = 5.0) -> bool:
    """Whether group ``pgid`` has no running process left within ``within`` seconds.

    Polls the kernel: nothing signals the end of a process that is not our child.
    """
    for _ in range(int(within / 0.05)):
        if group_gone(pgid):
            return True
        await anyio.sleep(0.05)
    return group_gone(pgid)


class Supervised:
    """Creates supervisors for a test and remembers every process group they started."""

    def __init__(self) -> None:
        self.supervisors: list[Supervisor] = []

    @asynccontextmanager
    async def __call__(
        self, *specs: AgentSpec, policy: RestartPolicy = TEST_POLICY, **kwargs: Any
    ) -> AsyncIterator[Supervisor]:
        supervisor = Supervisor({s.name: s for s in specs}, policy=policy, **kwargs)
        self.supervisors.append(supervisor)
        async with supervisor:
            yield supervisor

    @asynccontextmanager
    async def session(
        self, home: Path, *, protocol: ProtocolChoice, sink: RecordingSink | None = None
    ) -> AsyncIterator[tuple[Agent, RecordingSink, str]]:
        """A supervisor of the scripted agent (``scripted_spec(home, protocol=protocol)``) with
        one session in ``home`` open on ``sink`` (a new ``RecordingSink`` by default): yields
        the agent, the sink and the session id."""
        async with self(scripted_spec(home, protocol=protocol)) as sup:
            agent = sup.get("scripted")
            sink = RecordingSink() if sink is None else sink
            sid = (await agent.new_session(str(home), [], sink)).session_id
            yield agent, sink, sid

    def pgids(self) -> list[int]:
        return [
            pid
            for supervisor in self.supervisors
            for name in supervisor.names()
            for pid in supervisor.get(name).pids
        ]
