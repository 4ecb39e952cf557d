"""A real hub on an ephemeral loopback port, and a small real ACP WebSocket client.

``running_hub`` starts uvicorn in the test's event loop with the hub app; ``AcpClient`` is a
test client over the ``websockets`` library that records every frame, answers nothing on its
own, and folds the session updates it sees so tests can compare states.
"""

from __future__ import annotations

import math
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
import uvicorn
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from hub.agents.spec import AgentSpec
from hub.protocol.state import SessionState
from hub.server.app import HubApp, create_app
from hub.server.proxies import uvicorn_proxy_options
from hub.server.wsprotocol import FairWebSocketProtocol
from hub.settings import Settings
from tests.credentials import owner_token, with_test_key

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "tests" / "agents" / "scripted_agent.py"
TIMEOUT = 20.0


def scripted_agent(name: str = "scripted", protocol: int | str = 2, *flags: str) -> AgentSpec:
    """The project's scripted test agent as an agent definition."""
    return AgentSpec(
        name=name,
        command=sys.executable,
        args=(str(SCRIPTED), "--protocol", str(protocol), *flags),
    )


def with_workspace(settings: Settings) -> Settings:
    """``settings`` with ``/`` as the workspace root unless the test chose roots: the suite's
    sessions work in ``/tmp`` and in temporary directories (tests of the roots set their own)."""
    if settings.workspace_roots:
        return settings
    return replace(settings, workspace_roots=("/",))


@dataclass
class HubHandle:
    """A running test hub. ``url`` carries the default owner credential (``?token=``), so
    every client of a test is admitted unless it connects to ``bare_url``."""

    url: str
    http: str
    app: HubApp
    server: uvicorn.Server
    bare_url: str = ""

    @property
    def http_acp(self) -> str:
        """The Streamable HTTP ``/acp`` URL with the default owner credential."""
        return self.url.replace("ws://", "http://", 1)

    def url_with(self, token: str) -> str:
        """The ``/acp`` URL carrying ``token`` instead of the default owner token."""
        return f"{self.bare_url}?token={token}"


@asynccontextmanager
async def running_hub(
    agents: Mapping[str, AgentSpec] | list[AgentSpec],
    settings: Settings | None = None,
    default: str | None = None,
) -> AsyncIterator[HubHandle]:
    """Serve the hub on 127.0.0.1 with an ephemeral port for the duration of the block."""
    if isinstance(agents, list):
        agents = {a.name: a for a in agents}
    settings = with_workspace(settings or Settings())
    with tempfile.TemporaryDirectory(prefix="acp-hub-test-") as state:
        # The known test key, and the hub's state (links, audit) in a fresh directory.
        settings = with_test_key(settings, Path(state))
        async with _serve(agents, settings, default) as handle:
            yield handle


@asynccontextmanager
async def _serve(
    agents: Mapping[str, AgentSpec], settings: Settings, default: str | None
) -> AsyncIterator[HubHandle]:
    app, hub = create_app(settings, agents, default)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        ws=FairWebSocketProtocol,
        ws_max_size=settings.max_frame_bytes,
        ws_ping_interval=settings.ping_interval,
        ws_ping_timeout=settings.ping_timeout,
        ws_per_message_deflate=False,
        **uvicorn_proxy_options(settings),
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    stopped = anyio.Event()

    async def serve() -> None:
        try:
            await server.serve()
        finally:
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        try:
            with anyio.fail_after(TIMEOUT):
                while not server.started:  # noqa: ASYNC110 - uvicorn offers no event for this
                    await anyio.sleep(0.005)
            port = server.servers[0].sockets[0].getsockname()[1]
            bare = f"ws://127.0.0.1:{port}/acp"
            url = f"{bare}?token={owner_token()}" if hub.gate.enabled else bare
            yield HubHandle(url, f"http://127.0.0.1:{port}", hub, server, bare)
        finally:
            hub.close_connections(1001, "test over")
            server.should_exit = True
            # Whatever ended the test (a failure too), the server shuts down in order and
            # closes every socket it holds, instead of being cancelled with them open.
            with anyio.CancelScope(shield=True), anyio.move_on_after(TIMEOUT):
                await stopped.wait()


class RpcFailure(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')} {error.get('data', '')}")
        self.error = error

    @property
    def code(self) -> int:
        return int(self.error["code"])


def initialize_params(version: int, name: str, /, **hub_meta: Any) -> dict[str, Any]:
    """``initialize``'s params of a client called ``name`` speaking ``version``, with
    ``hub_meta`` as its ``_meta["acp-hub"]``."""
    params: dict[str, Any] = {"protocolVersion": version}
    if version >= 2:
        params["info"] = {"name": name, "version": "1"}
        params["capabilities"] = {}
    else:
        params["clientInfo"] = {"name": name, "version": "1"}
        params["clientCapabilities"] = {}
    if hub_meta:
        params["_meta"] = {"acp-hub": hub_meta}
    return params


@dataclass
class AcpClient:
    """A recording ACP client over a real WebSocket (see the module docstring)."""

    ws: ClientConnection
    version: int = 2
    frames: list[Any] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    cancelled: set[Any] = field(default_factory=set)
    close_code: int | None = None
    close_reason: str | None = None
    _next_id: int = 100
    _responses: dict[Any, dict[str, Any]] = field(default_factory=dict)
    _changed: anyio.Event = field(default_factory=anyio.Event)
    init_result: dict[str, Any] = field(default_factory=dict)

    # -- receiving ---------------------------------------------------------------------------

    async def reader(self) -> None:
        try:
            async for raw in self.ws:
                message = orjson.loads(raw)
                self.frames.append(message)
                for entry in message if isinstance(message, list) else [message]:
                    self._record(entry)
                self._changed.set()
                self._changed = anyio.Event()
        except ConnectionClosed:
            pass
        finally:
            rcvd = self.ws.protocol.close_rcvd
            self.close_code = rcvd.code if rcvd is not None else 1006
            self.close_reason = rcvd.reason if rcvd is not None else None
            self._changed.set()

    def _record(self, entry: dict[str, Any]) -> None:
        if "method" in entry and "id" in entry:
            self.requests.append(entry)
        elif "method" in entry:
            self.notifications.append(entry)
            if entry["method"] == "session/update":
                self.updates.append(entry["params"])
            if entry["method"] == "$/cancel_request":
                self.cancelled.add(entry["params"]["requestId"])
        else:
            self._responses[entry.get("id")] = entry

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        """Wait until ``predicate()`` holds (re-checked on every frame)."""
        with anyio.fail_after(timeout):
            while not predicate():
                if self.close_code is not None:
                    if predicate():
                        return
                    raise AssertionError(f"connection closed ({self.close_code}) while waiting")
                await self._changed.wait()

    # -- sending -----------------------------------------------------------------------------

    async def send(self, message: Any) -> None:
        await self.ws.send(orjson.dumps(message).decode())

    async def start(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request and return its id without waiting."""
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return request_id

    async def response(self, request_id: Any, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The raw answer to ``request_id`` (a result or an error), once it arrives."""
        await self.wait_for(lambda: request_id in self._responses, timeout)
        return self._responses.pop(request_id)

    async def result(self, request_id: Any, timeout: float = TIMEOUT) -> Any:
        await self.wait_for(lambda: request_id in self._responses, timeout)
        response = self._responses.pop(request_id)
        if "error" in response:
            raise RpcFailure(response["error"])
        return response.get("result")

    async def call(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = TIMEOUT
    ) -> Any:
        return await self.result(await self.start(method, params), timeout)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def answer(self, request_id: Any, result: Any) -> None:
        await self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    # -- ACP helpers -------------------------------------------------------------------------

    async def initialize(self, **hub_meta: Any) -> dict[str, Any]:
        params = initialize_params(self.version, "test-client", **hub_meta)
        self.init_result = await self.call("initialize", params)
        return self.init_result

    async def new_session(self, agent: str | None = None, cwd: str = "/tmp") -> str:
        params: dict[str, Any] = {"cwd": cwd, "mcpServers": []}
        if agent is not None:
            params["_meta"] = {"acp-hub": {"agent": agent}}
        result = await self.call("session/new", params)
        return str(result["sessionId"])

    async def prompt(self, session_id: str, text: str) -> Any:
        return await self.call(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )

    def session_updates(self, session_id: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u.get("sessionId") == session_id]

    def seqs(self, session_id: str) -> list[int]:
        out = []
        for params in self.session_updates(session_id):
            seq = params.get("_meta", {}).get("acp-hub", {}).get("seq")
            if seq is not None:
                out.append(int(seq))
        return out

    def last_seq(self, session_id: str) -> int:
        seqs = self.seqs(session_id)
        return seqs[-1] if seqs else 0

    def fold(self, session_id: str) -> SessionState:
        """Fold every update seen for ``session_id`` (v2 clients), honouring ``_hub_reset``."""
        state = SessionState()
        for params in self.session_updates(session_id):
            state.apply(params["update"])
        return state

    def idle_count(self, session_id: str) -> int:
        return sum(
            1
            for p in self.session_updates(session_id)
            if p["update"].get("sessionUpdate") == "state_update"
            and p["update"].get("state") == "idle"
            and p["update"].get("stopReason") is not None
        )


@asynccontextmanager
async def acp_client(
    url: str, version: int = 2, *, open_timeout: float = 10.0, **hub_meta: Any
) -> AsyncIterator[AcpClient]:
    """Connect (the opening handshake within ``open_timeout`` seconds), start the reader,
    initialize; close on exit."""
    async with connect(
        url, max_size=None, compression=None, ping_interval=None, open_timeout=open_timeout
    ) as ws:
        client = AcpClient(ws, version)
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.reader)
            try:
                await client.initialize(**hub_meta)
                yield client
            finally:
                await ws.close()
                tg.cancel_scope.cancel()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[index]
