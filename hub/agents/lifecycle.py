"""``Lifecycle``: the states of one agent and every legal transition, in one table.

Theory of operation
-------------------
An agent runs at most one process (an *incarnation*) at a time. Its lifecycle is a small
state machine driven by events; ``TRANSITIONS`` below is the whole of it, and nothing else
in ``hub.agents`` decides what state an agent is in::

    IDLE --spawn--> STARTING --ready--> RUNNING
      ^                |                   |
      |               end                 end        (exit, stdout closed, failed start)
      |                v                   v
      +--wound_down-- ENDING <-------------+
                       |
    stop (from any state but CLOSED): ---> STOPPING --wound_down--> CLOSED

``IDLE`` has no process: the next operation spawns one. ``STARTING`` covers ``initialize``,
the configured login and the re-attachment of the registered sessions. ``ENDING`` and
``STOPPING`` are the shielded wind-down of an incarnation (a crash, or a stop the hub asked
for); the difference is what follows: ``IDLE`` (restartable, sessions are told the process
exited) or ``CLOSED`` (for good, sessions are not told). The first ``end`` or ``stop`` keeps
its reason; a later one in ``ENDING``/``STOPPING`` changes nothing but ``ENDING`` to
``STOPPING``, because several causes race (the leader's exit, stdout closing, a stop) and
all mean the same.

An event with no entry in the table is a bug in the hub, not something an agent can cause:
``fire`` raises ``LifecycleError``.
"""

from __future__ import annotations

import enum

import anyio

__all__ = ["TRANSITIONS", "AgentState", "Lifecycle", "LifecycleError", "Trigger"]


class AgentState(enum.Enum):
    """Where an agent is in its lifecycle (see the module docstring)."""

    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"
    ENDING = "ending"
    STOPPING = "stopping"
    CLOSED = "closed"


class Trigger(enum.Enum):
    """What moves an agent from one state to the next."""

    SPAWN = "spawn"  # a process was started
    READY = "ready"  # initialized, logged in (if configured), sessions re-attached
    END = "end"  # the process exited, closed stdout, or failed to start
    STOP = "stop"  # the hub stops the agent for good
    WOUND_DOWN = "wound_down"  # the incarnation is cleaned up


_S, _T = AgentState, Trigger

TRANSITIONS: dict[tuple[AgentState, Trigger], AgentState] = {
    (_S.IDLE, _T.SPAWN): _S.STARTING,
    (_S.IDLE, _T.STOP): _S.CLOSED,
    (_S.STARTING, _T.READY): _S.RUNNING,
    (_S.STARTING, _T.END): _S.ENDING,
    (_S.STARTING, _T.STOP): _S.STOPPING,
    (_S.RUNNING, _T.END): _S.ENDING,
    (_S.RUNNING, _T.STOP): _S.STOPPING,
    (_S.ENDING, _T.END): _S.ENDING,
    (_S.ENDING, _T.STOP): _S.STOPPING,
    (_S.ENDING, _T.WOUND_DOWN): _S.IDLE,
    (_S.STOPPING, _T.END): _S.STOPPING,
    (_S.STOPPING, _T.STOP): _S.STOPPING,
    (_S.STOPPING, _T.WOUND_DOWN): _S.CLOSED,
    (_S.CLOSED, _T.STOP): _S.CLOSED,
}
"""``(state, trigger) -> next state``; a pair that is not here is illegal."""

ENDED = frozenset({AgentState.ENDING, AgentState.STOPPING, AgentState.CLOSED})
"""States in which the current incarnation is over (or there is none left to run)."""


class LifecycleError(RuntimeError):
    """An illegal transition: a bug in the hub."""


class Lifecycle:
    """The current ``AgentState`` of one agent, the reason of the last end, and a way to
    wait for a state."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.state = AgentState.IDLE
        self.reason = ""
        """Why the current (or last) incarnation ended or is stopping."""
        self.spawns = 0
        """How many incarnations were started (``spawn`` transitions)."""
        self._changed = anyio.Event()

    def fire(self, trigger: Trigger, reason: str = "") -> AgentState:
        """Apply ``trigger``; returns the new state. Raises ``LifecycleError`` if the table
        has no such transition. An ``end``/``stop`` that starts a wind-down records
        ``reason``."""
        try:
            target = TRANSITIONS[self.state, trigger]
        except KeyError:
            raise LifecycleError(
                f"agent {self.name}: {trigger.value} is illegal in state {self.state.value}"
            ) from None
        if trigger in (Trigger.END, Trigger.STOP) and self.state not in ENDED:
            self.reason = reason
        elif trigger is Trigger.SPAWN:
            self.reason = ""
            self.spawns += 1
        if target is not self.state:
            self.state = target
            self._changed.set()
            self._changed = anyio.Event()
        return target

    async def wait_for(self, *states: AgentState) -> AgentState:
        """Return the state once it is one of ``states``."""
        while self.state not in states:
            await self._changed.wait()
        return self.state
