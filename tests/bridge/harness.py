"""Driving ``acp-hub bridge`` the way editors do: the Python SDK's stdio client spawns it.

``spawn_bridge`` starts the bridge as a real subprocess with ``acp.spawn_agent_process`` (the
Python SDK's editor-side stdio client, unmodified) and yields the SDK connection with the
``EditorClient`` that records what the editor was shown. The bridge's stderr goes to a file the
test can read (``BridgeRun.log``).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import uvicorn
from acp import Agent, Client, RequestError, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    CreateElicitationResponse,
    CreateTerminalResponse,
    DeclineElicitationResponse,
    DeniedOutcome,
    ElicitationMode,
    EnvVariable,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from starlette.applications import Starlette

from hub.agents.spec import AgentSpec
from hub.server.app import HubApp, create_app
from hub.server.wsprotocol import FairWebSocketProtocol
from hub.settings import Settings
from tests.credentials import owner_token, with_test_key
from tests.server.harness import with_workspace

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0


def bridge_command(url: str, *extra: str) -> tuple[str, ...]:
    """``acp-hub bridge URL ...`` run with this interpreter (and this checkout's ``hub``)."""
    return (sys.executable, "-m", "hub.cli", "bridge", url, *extra)


def bridge_env(**extra: str) -> dict[str, str]:
    """The environment a bridge subprocess needs on top of the SDK's trimmed default."""
    env = {"PYTHONPATH": str(ROOT), "ACP_HUB_LOG": "info"}
    env.update(extra)
    return env


@dataclass
class EditorClient(Client):
    """An editor that records every update it is shown and answers permission requests
    with the first option of ``permission_kind`` (``cancelled`` when it is ``None``)."""

    permission_kind: str | None = "allow_once"
    gate: anyio.Event | None = None
    """When set, permission requests are answered only once it is set (a dialog left open)."""
    updates: list[dict[str, Any]] = field(default_factory=list)
    permissions: list[dict[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def _touch(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        record = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        record["_sessionId"] = session_id
        self.updates.append(record)
        self._touch()

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permissions.append(
            {"sessionId": session_id, "toolCallId": tool_call.tool_call_id, "options": options}
        )
        self._touch()
        if self.gate is not None:
            await self.gate.wait()
        chosen = next((o for o in options if o.kind == self.permission_kind), None)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    # An editor that offers no files, terminals or elicitation (the bridge never asks).

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse | None:
        raise RequestError.method_not_found("fs/write_text_file")

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        raise RequestError.method_not_found("fs/read_text_file")

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse | None:
        # The editor's refusal of each terminal method: alike in shape only.
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse | None:
        raise RequestError.method_not_found("terminal/kill")

    async def create_elicitation(
        self, message: str, mode: ElicitationMode, **kwargs: Any
    ) -> CreateElicitationResponse:
        return DeclineElicitationResponse(action="decline")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.notices.append(method)

    def on_connect(self, conn: Agent) -> None:
        return None

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        """Wait until ``predicate()`` holds, re-checked whenever the editor is shown more."""
        with anyio.fail_after(timeout):
            while not predicate():
                await self._changed.wait()

    def texts(self, variant: str = "agent_message_chunk") -> list[str]:
        """The text of every ``variant`` update, in order."""
        return [
            str(u["content"]["text"])
            for u in self.updates
            if u.get("sessionUpdate") == variant and u.get("content", {}).get("type") == "text"
        ]


@dataclass
class BridgeRun:
    conn: ClientSideConnection
    editor: EditorClient
    process: Any
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _next_log(log_dir: Path) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    return log_dir / f"bridge-{len(list(log_dir.iterdir()))}.log"


@asynccontextmanager
async def spawn_bridge(
    url: str,
    log_dir: Path,
    *extra: str,
    editor: EditorClient | None = None,
    env: dict[str, str] | None = None,
    unstable: bool = False,
) -> AsyncIterator[BridgeRun]:
    """Spawn ``acp-hub bridge URL extra...`` through the Python SDK's stdio client
    (``unstable``: with the SDK's unstable protocol methods, elicitations among them)."""
    editor = editor or EditorClient()
    command, *args = bridge_command(url, *extra)
    log_path = _next_log(log_dir)
    with log_path.open("wb") as stderr:
        async with spawn_agent_process(
            editor,
            command,
            *args,
            env=env or bridge_env(),
            cwd=str(ROOT),
            transport_kwargs={"stderr": stderr.fileno()},
            use_unstable_protocol=unstable,
        ) as (conn, process):
            yield BridgeRun(conn, editor, process, log_path)
    assert "Traceback" not in log_path.read_text(errors="replace"), log_path.read_text()


@dataclass
class Listener:
    """A hub whose sessions and agents outlive its HTTP listener: ``start`` and ``stop``
    serve the same app on the same port again, as when the hub's server restarts."""

    app: Starlette
    hub: HubApp
    settings: Settings
    tg: anyio.abc.TaskGroup
    port: int = 0
    server: uvicorn.Server | None = None
    stopped: anyio.Event = field(default_factory=anyio.Event)

    @property
    def url(self) -> str:
        """The ``/acp`` URL with the test owner token (as ``HubHandle.url``)."""
        return f"ws://127.0.0.1:{self.port}/acp?token={owner_token()}"

    async def start(self) -> None:
        # uvicorn set as the hub's own: each harness serves its own app.
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            ws=FairWebSocketProtocol,
            ws_per_message_deflate=False,
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        self.server = server
        stopped = anyio.Event()
        self.stopped = stopped

        async def serve() -> None:
            try:
                await server.serve()
            finally:
                stopped.set()

        self.tg.start_soon(serve)
        with anyio.fail_after(TIMEOUT):
            while not server.started:
                if stopped.is_set():
                    raise AssertionError(f"the listener did not start on port {self.port}")
                await anyio.sleep(0.005)
        self.port = server.servers[0].sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and drop every connection (uvicorn closes WebSockets with 1012)."""
        if self.server is not None:
            self.server.should_exit = True
            with anyio.fail_after(TIMEOUT):
                await self.stopped.wait()
            self.server = None


@asynccontextmanager
async def listener_hub(
    agents: list[AgentSpec], settings: Settings | None = None
) -> AsyncIterator[Listener]:
    """A started ``Listener`` on an ephemeral port; the hub's lifespan spans the block."""
    with tempfile.TemporaryDirectory(prefix="acp-hub-test-") as state:
        settings = with_test_key(with_workspace(settings or Settings()), Path(state))
        app, hub = create_app(settings, {a.name: a for a in agents})
        async with hub.lifespan(app), anyio.create_task_group() as tg:
            listener = Listener(app, hub, settings, tg)
            await listener.start()
            try:
                yield listener
            finally:
                hub.close_connections(1001, "test over")
                await listener.stop()
