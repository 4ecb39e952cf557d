"""``Supervisor``: the configured agents of one hub and the task group they run in.

Usage::

    async with Supervisor(config.agents, config.default_agent) as supervisor:
        agent = supervisor.get("claude")
        result = await agent.new_session("/work", [], sink)

Agents start lazily, on their first use, each in a task of the supervisor's task group.
Leaving the context (or ``aclose``) stops every agent with the ordered shutdown of
``AgentProcess.stop``, concurrently, shielded from cancellation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from types import TracebackType

import anyio
import anyio.abc

from hub.agents.agent import Agent
from hub.agents.connection import DispatchBatch
from hub.agents.restart import RestartPolicy
from hub.agents.spec import AgentSpec
from hub.protocol.framing import DEFAULT_MAX_LINE

__all__ = ["Supervisor", "UnknownAgent"]


class UnknownAgent(KeyError):
    """``Supervisor.get`` was asked for an agent that is not configured."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown agent"


class Supervisor:
    """Owns one ``Agent`` per spec; an async context manager."""

    def __init__(
        self,
        specs: Mapping[str, AgentSpec],
        default: str | None = None,
        *,
        max_line: int = DEFAULT_MAX_LINE,
        stderr_lines: int = 200,
        policy: RestartPolicy | None = None,
        dispatch_batch: DispatchBatch = contextlib.nullcontext,
    ) -> None:
        for key, spec in specs.items():
            if key != spec.name:
                raise ValueError(f"agent spec {spec.name!r} is registered as {key!r}")
        if default is not None and default not in specs:
            raise UnknownAgent(self._unknown_message(default, specs))
        self._specs = dict(specs)
        self.default_name: str | None = default if default is not None else next(iter(specs), None)
        """The agent used when a client names none (the first one unless configured)."""
        self._max_line = max_line
        self._stderr_lines = stderr_lines
        self._policy = policy
        self._dispatch_batch = dispatch_batch
        self._agents: dict[str, Agent] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    @staticmethod
    def _unknown_message(name: str, specs: Mapping[str, AgentSpec]) -> str:
        known = ", ".join(specs) or "none"
        return f"unknown agent {name!r} (configured: {known})"

    async def __aenter__(self) -> Supervisor:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._agents = {
            name: Agent(
                spec,
                tg,
                max_line=self._max_line,
                stderr_lines=self._stderr_lines,
                policy=self._policy,
                dispatch_batch=self._dispatch_batch,
            )
            for name, spec in self._specs.items()
        }
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        tg, self._tg = self._tg, None
        assert tg is not None
        # Every agent task has ended: close the group as if the body succeeded, so that an
        # exception of the body propagates as it is, not wrapped in an ExceptionGroup.
        await tg.__aexit__(None, None, None)
        return None

    def names(self) -> list[str]:
        """The configured agent names, in configuration order."""
        return list(self._specs)

    def get(self, name: str | None = None) -> Agent:
        """The agent called ``name`` (the default agent for ``None``); raises
        ``UnknownAgent`` (a ``KeyError``) naming the configured ones otherwise."""
        if not self._agents and self._specs:
            raise RuntimeError("the supervisor is not running (use `async with`)")
        key = self.default_name if name is None else name
        agent = self._agents.get(key) if key is not None else None
        if agent is None:
            raise UnknownAgent(self._unknown_message(str(name), self._specs))
        return agent

    async def aclose(self) -> None:
        """Stop every agent (ordered shutdown, concurrently); idempotent."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for agent in self._agents.values():
                    tg.start_soon(agent.aclose)
