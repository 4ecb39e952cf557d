"""One Streamable HTTP client: ``HttpConnection`` holds its ``ClientConnection`` (the same
method table, roles and limits as a WebSocket client's), the ``StreamOutbox`` that is its
outbox, and the bounded channel its POSTs hand messages through; it closes the connection when
no stream reads it (``FIRST_GET_TIMEOUT``, ``IDLE_TIMEOUT``). ``session_for_get`` says whether
a GET may open a session's stream."""

from __future__ import annotations

import logging
import secrets

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from hub.access.gate import Gate
from hub.access.principal import Principal
from hub.server.close_codes import GOING_AWAY
from hub.server.connection import ClientConnection
from hub.server.streamable_http.router import StreamOutbox
from hub.sessions.errors import SessionFailure
from hub.sessions.registry import SessionRegistry
from hub.settings import Role, Settings

__all__ = ["FIRST_GET_TIMEOUT", "IDLE_TIMEOUT", "INBOX_FRAMES", "HttpConnection", "session_for_get"]

log = logging.getLogger("hub.server")

IDLE_TIMEOUT = 300.0
"""Seconds an HTTP connection lives with no GET reading it and no POST."""
FIRST_GET_TIMEOUT = 30.0
"""Seconds a new HTTP connection has to open its first stream: one that never reads is not
kept for ``IDLE_TIMEOUT`` (initializing costs a client one POST; the hub holds it longer)."""
INBOX_FRAMES = 64
"""Messages a connection takes ahead of handling them before its POSTs wait."""


class HttpConnection:
    """One Streamable HTTP client: its ``ClientConnection``, outbox and inbound channel."""

    def __init__(
        self,
        registry: SessionRegistry,
        settings: Settings,
        role: Role,
        principal: str,
        *,
        access: Principal | None = None,
        gate: Gate | None = None,
        base_url: str | None = None,
    ) -> None:
        connection_id = f"c-{secrets.token_hex(16)}"
        self.outbox = StreamOutbox(settings, connection_id)
        self.conn: ClientConnection = ClientConnection(
            registry,
            outbox=self.outbox,
            settings=settings,
            role=role,
            principal=principal,
            connection_id=connection_id,
            access=access,
            gate=gate,
            base_url=base_url,
        )
        self.outbox.attached = self.conn.sessions.__contains__
        self.inbox: MemoryObjectSendStream[str]
        self._inbound: MemoryObjectReceiveStream[str]
        self.inbox, self._inbound = anyio.create_memory_object_stream[str](INBOX_FRAMES)
        self.last_activity = anyio.current_time()
        self.open_gets = 0
        self.ever_read = False
        self.ended = anyio.Event()

    @property
    def connection_id(self) -> str:
        return self.conn.connection_id

    async def _receive_text(self) -> str | None:
        try:
            return await self._inbound.receive()
        except anyio.EndOfStream:
            return None

    async def run(self) -> None:
        """The connection's message loop, and its idle watch."""
        try:
            async with anyio.create_task_group() as tg:

                async def watch_idle() -> None:
                    with anyio.move_on_after(FIRST_GET_TIMEOUT):
                        while not self.ever_read:  # noqa: ASYNC110 - checked rarely, no event
                            await anyio.sleep(FIRST_GET_TIMEOUT / 10)
                    if not self.ever_read:
                        log.info("= %s: no stream opened, closing", self.connection_id)
                        self.conn.close(GOING_AWAY, "no stream was opened")
                        return
                    while True:
                        await anyio.sleep(IDLE_TIMEOUT / 4)
                        idle = anyio.current_time() - self.last_activity
                        if self.open_gets == 0 and idle > IDLE_TIMEOUT:
                            log.info("= %s: idle, closing", self.connection_id)
                            self.conn.close(GOING_AWAY, "idle: no stream open and no request")
                            return

                tg.start_soon(watch_idle)
                await self.conn.run(self._receive_text)
                tg.cancel_scope.cancel()
        finally:
            self.inbox.close()
            self._inbound.close()
            self.ended.set()

    async def post(self, text: str) -> None:
        self.last_activity = anyio.current_time()
        await self.inbox.send(text)


async def session_for_get(registry: SessionRegistry, session_id: str, access: Principal) -> bool:
    """Whether a session stream may be opened for ``session_id``: the credential's
    ``sessions`` cover it and the hub has it. On one node of several that may be a session
    another node owns, which this node follows from now on (as ``session/resume`` would: the
    client opens the stream before it resumes). The store's errors propagate."""
    if not access.may_see(session_id):
        return False
    if registry.find(session_id) is not None:
        return True
    if not registry.is_remote(session_id):
        return False
    try:
        await registry.load_remote(session_id)
    except SessionFailure:
        return False
    return True
