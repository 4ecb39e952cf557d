"""Stand-ins for the session tests: an in-process agent, list-backed clients, and a session
whose deferred work runs in a task group of the test (``hub_session``). Shared by
``test_session.py`` and the tests of the session's parts (turns, lease, permissions)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import orjson
import pytest

from hub.agents import PromptAck
from hub.protocol.errors import RpcError
from hub.protocol.jsonrpc import RequestId
from hub.protocol.state import SessionState
from hub.sessions.client import ReplyHandler
from hub.sessions.errors import SessionFailure
from hub.sessions.session import Session
from hub.settings import Role, Settings

ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow"}}
OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "deny", "name": "Deny", "kind": "reject_once"},
]


# -- stand-ins ---------------------------------------------------------------------------------


@dataclass
class ListSink:
    """A ``FrameSink`` that keeps every frame (replay pages read at once)."""

    frames: list[bytes] = field(default_factory=list)

    def push(self, frame: bytes) -> bool:
        self.frames.append(frame)
        return True

    def push_pages(self, pages: Iterable[bytes]) -> bool:
        self.frames.extend(pages)
        return True


@dataclass
class Client:
    """A ``ClientHandle`` that records what the session sends it and answers on request."""

    client_id: str
    role: Role = "owner"
    version: int = 2
    name: str = ""
    principal: str = "someone"
    program: str = ""
    hub_events: bool = True
    batches: bool = False
    outbox: ListSink = field(default_factory=ListSink)
    asked: dict[RequestId, tuple[str, dict[str, Any], ReplyHandler]] = field(default_factory=dict)
    withdrawn: list[RequestId] = field(default_factory=list)
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _next: int = 0

    def request(self, method: str, params: dict[str, Any], on_reply: ReplyHandler) -> RequestId:
        self._next += 1
        self.asked[self._next] = (method, params, on_reply)
        return self._next

    def withdraw(self, request_id: RequestId) -> None:
        self.withdrawn.append(request_id)
        self.asked.pop(request_id, None)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.notes.append((method, params))

    # -- reading what it got -----------------------------------------------------------------

    def messages(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for frame in self.outbox.frames:
            message = orjson.loads(frame)
            out.extend(message if isinstance(message, list) else [message])
        return out

    def updates(self, variant: str | None = None) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.messages()
            if variant is None or m["params"]["update"].get("sessionUpdate") == variant
        ]

    def seqs(self) -> list[int]:
        return [
            m["params"]["_meta"]["acp-hub"]["seq"]
            for m in self.messages()
            if "seq" in m["params"]["_meta"]["acp-hub"]
        ]

    def fold(self) -> SessionState:
        return SessionState().apply_all(self.updates())

    def answer(
        self, request_id: RequestId, result: Any = None, error: RpcError | None = None
    ) -> None:
        _, _, on_reply = self.asked.pop(request_id)
        on_reply(result, error)

    def permission_copies(self) -> list[RequestId]:
        return [rid for rid, (m, _, _) in self.asked.items() if m == "session/request_permission"]


@dataclass
class Agent:
    """An ``AgentHandle`` in the test's process: records prompts and answers as told."""

    name: str = "fake"
    prompts: list[list[dict[str, Any]]] = field(default_factory=list)
    cancels: int = 0
    fail_with: BaseException | None = None
    gate: anyio.Event | None = None
    """``prompt`` waits for it before it answers (a slow agent)."""
    ack_id: Callable[[int], str | None] = lambda n: f"u-{n}"
    session: Session | None = None
    """When set, ``prompt`` sends the user message and ``running`` first, as agents do."""

    async def prompt(self, session_id: str, blocks: Sequence[dict[str, Any]], /) -> PromptAck:
        self.prompts.append(list(blocks))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        message_id = self.ack_id(len(self.prompts))
        if self.session is not None:
            self.session.on_update(
                {
                    "sessionUpdate": "user_message",
                    "messageId": f"u-{len(self.prompts)}",
                    "content": list(blocks),
                }
            )
            self.session.on_update({"sessionUpdate": "state_update", "state": "running"})
        return PromptAck(message_id)

    async def cancel(self, session_id: str, /) -> None:
        self.cancels += 1

    async def set_config_option(
        self, session_id: str, config_id: str, kind: str, value: Any, /
    ) -> list[dict[str, Any]]:
        return [
            {
                "configId": config_id,
                "name": config_id,
                "type": "select",
                "currentValue": value,
                "options": [{"value": value, "name": str(value)}],
            }
        ]

    async def set_mode(self, session_id: str, mode_id: str, /) -> None:
        pass

    async def extension(
        self, session_id: str | None, method: str, params: dict[str, Any], /
    ) -> Any:
        return {"method": method, "sessionId": session_id}

    async def close_session(self, session_id: str, /) -> None:
        pass

    async def delete_session(self, session_id: str, /) -> None:
        pass


def record(client: Client, variant: str) -> dict[str, Any]:
    """The ``variant`` record of the state ``client`` folded (it must have one)."""
    found = client.fold().hub(variant)
    assert found is not None, variant
    return found


def idle(session: Session, stop_reason: str = "end_turn") -> None:
    session.on_update({"sessionUpdate": "state_update", "state": "idle", "stopReason": stop_reason})


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


@asynccontextmanager
async def hub_session(
    agent: Agent | None = None, **settings: Any
) -> AsyncIterator[tuple[Session, Agent, anyio.abc.TaskGroup]]:
    """A session on ``agent`` whose deferred work runs in a task group of the test."""
    agent = agent or Agent()
    async with anyio.create_task_group() as tg:

        def spawn(fn: Callable[[], Awaitable[None]], name: str) -> None:
            async def run() -> None:
                await fn()

            tg.start_soon(run, name=name)

        session = Session(
            "s-1", agent, "a-1", cwd="/tmp", settings=Settings(**settings), spawn=spawn
        )
        agent.session = session
        with anyio.fail_after(5):
            yield session, agent, tg
        tg.cancel_scope.cancel()


def join(session: Session, client: Client, replay: str | None = None) -> dict[str, Any]:
    cursor = session.attach(client, replay=replay)
    session.announce(client)
    return cursor


async def until(predicate: Callable[[], bool]) -> None:
    """Let the session's tasks run until ``predicate()`` holds (the test's deadline applies)."""
    while not predicate():
        await anyio.lowlevel.checkpoint()


async def failure(call: Awaitable[Any]) -> RpcError:
    with pytest.raises(SessionFailure) as info:
        await call
    return info.value.error


async def ask(session: Session, tg: anyio.abc.TaskGroup) -> list[dict[str, Any]]:
    """Start an agent permission request; its outcome lands in the returned list."""
    outcomes: list[dict[str, Any]] = []

    async def run() -> None:
        outcomes.append(await session.on_permission({"sessionId": "a-1", "options": OPTIONS}))

    tg.start_soon(run)
    await until(lambda: bool(session.permissions.pending))
    return outcomes
