"""A small recording client of the Streamable HTTP profile of ``/acp``, over httpx.

It speaks v1 or v2 (the Python SDK's HTTP client speaks only v1), keeps every SSE event of
every stream with its ``id``, and can drop a stream and open it again with ``Last-Event-ID``,
which the SDK's client cannot. It answers nothing on its own. Given a ``route`` (several hub
nodes' URLs), it sends every request after ``initialize`` to the next URL of it in turn, as a
round-robin load balancer would.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import httpx
import orjson

from tests.server.harness import TIMEOUT, RpcFailure, initialize_params

SESSION_SCOPED = {
    "session/prompt",
    "session/cancel",
    "session/set_mode",
    "session/set_config_option",
    "session/close",
}


@dataclass
class SseEvent:
    stream: str | None
    id: str | None
    event: str | None
    data: Any


async def parse_sse(response: httpx.Response, stream: str | None) -> AsyncIterator[SseEvent]:
    """The events of an SSE response (comments skipped)."""
    fields: dict[str, str] = {}
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SseEvent(
                    stream, fields.get("id"), fields.get("event"), orjson.loads("\n".join(data))
                )
            fields, data = {}, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        else:
            fields[name] = value


@dataclass
class HttpAcp:
    """A Streamable HTTP ACP client; see the module docstring."""

    url: str
    http: httpx.AsyncClient
    tg: anyio.abc.TaskGroup
    version: int = 2
    connection_id: str | None = None
    init_result: dict[str, Any] = field(default_factory=dict)
    """The answer to ``initialize``."""
    events: list[SseEvent] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    """Notifications other than ``session/update``, whole."""
    closes: list[Any] = field(default_factory=list)
    statuses: dict[str | None, int] = field(default_factory=dict)
    finished: list[str | None] = field(default_factory=list)
    """The streams whose GET ended from the hub's side (not dropped by the client), in order."""
    route: list[str] = field(default_factory=list)
    served_by: list[str] = field(default_factory=list)
    """The URL each request after ``initialize`` went to, in order."""
    _responses: dict[Any, dict[str, Any]] = field(default_factory=dict)
    _streams: dict[str | None, anyio.CancelScope] = field(default_factory=dict)
    _changed: anyio.Event = field(default_factory=anyio.Event)
    _next_id: int = 0

    # The wait of tests/agents/harness.py's sink, on this client's own changes.
    def _touch(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        with anyio.fail_after(timeout):
            while not predicate():
                await self._changed.wait()

    def target(self) -> str:
        """Where the next request goes: ``url`` for ``initialize``, else the next of
        ``route`` (``url`` without one)."""
        if self.connection_id is None or not self.route:
            return self.url
        url = self.route[len(self.served_by) % len(self.route)]
        self.served_by.append(url)
        return url

    def headers(self, session_id: str | None = None) -> dict[str, str]:
        out = {"Content-Type": "application/json"}
        if self.connection_id is not None:
            out["Acp-Connection-Id"] = self.connection_id
        if session_id is not None:
            out["Acp-Session-Id"] = session_id
        return out

    # -- streams ---------------------------------------------------------------------------

    def open_stream(self, session_id: str | None = None, last_event_id: str | None = None) -> None:
        """Start reading the connection's stream or a session's (after ``last_event_id``)."""
        scope = anyio.CancelScope()
        self._streams[session_id] = scope
        self.tg.start_soon(self._read, session_id, last_event_id, scope)

    def drop_stream(self, session_id: str | None) -> None:
        """Close a stream's GET from the client's side, as a network drop would."""
        self._streams.pop(session_id).cancel()

    def last_event_id(self, session_id: str | None) -> str | None:
        ids = [e.id for e in self.events if e.stream == session_id and e.id is not None]
        return ids[-1] if ids else None

    async def _read(
        self, session_id: str | None, last_event_id: str | None, scope: anyio.CancelScope
    ) -> None:
        headers = {"Accept": "text/event-stream", **self.headers(session_id)}
        headers.pop("Content-Type")
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        with scope:
            async with self.http.stream("GET", self.target(), headers=headers) as response:
                self.statuses[session_id] = response.status_code
                self._touch()
                if response.status_code != 200:
                    return
                async for event in parse_sse(response, session_id):
                    self.events.append(event)
                    if event.event == "close":
                        self.closes.append(event.data)
                    else:
                        self._record(event.data)
                    self._touch()
                self.finished.append(session_id)
                self._touch()

    def _record(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.requests.append(message)
        elif message.get("method") == "session/update":
            self.updates.append(message["params"])
        elif "method" in message:
            self.notifications.append(message)
        elif "method" not in message:
            self._responses[message.get("id")] = message

    # -- sending ---------------------------------------------------------------------------

    async def post(self, message: dict[str, Any], session_id: str | None = None) -> httpx.Response:
        return await self.http.post(
            self.target(), content=orjson.dumps(message), headers=self.headers(session_id)
        )

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        request_id = self._next_id
        session_id = params.get("sessionId") if method in SESSION_SCOPED else None
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = await self.post(message, session_id)
        assert response.status_code == 202, (response.status_code, response.text)
        await self.wait_for(lambda: request_id in self._responses)
        answer = self._responses.pop(request_id)
        if "error" in answer:
            raise RpcFailure(answer["error"])
        return answer.get("result")

    async def answer(self, request_id: Any, result: Any, session_id: str) -> None:
        response = await self.post(
            {"jsonrpc": "2.0", "id": request_id, "result": result}, session_id
        )
        assert response.status_code == 202, response.text

    async def initialize(self, **hub_meta: Any) -> dict[str, Any]:
        params = initialize_params(self.version, "http-client", **hub_meta)
        message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        response = await self.post(message)
        assert response.status_code == 200, response.text
        self.connection_id = response.headers["acp-connection-id"]
        self.open_stream(None)
        body = response.json()
        assert "result" in body, body
        self.init_result = dict(body["result"])
        return self.init_result

    def session_updates(self, session_id: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u.get("sessionId") == session_id]

    def seqs(self, session_id: str) -> list[int]:
        return [
            int(u["_meta"]["acp-hub"]["seq"])
            for u in self.session_updates(session_id)
            if "seq" in u.get("_meta", {}).get("acp-hub", {})
        ]


@asynccontextmanager
async def http_acp(
    url: str, version: int = 2, *, route: list[str] | None = None, **hub_meta: Any
) -> AsyncIterator[HttpAcp]:
    """An initialized ``HttpAcp`` (at ``url``, then over ``route``) with its connection's
    stream open; DELETE on exit."""
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT, read=None)) as http,
        anyio.create_task_group() as tg,
    ):
        client = HttpAcp(url, http, tg, version, route=list(route or []))
        try:
            await client.initialize(**hub_meta)
            yield client
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                if client.connection_id is not None:
                    with contextlib.suppress(httpx.HTTPError):  # a node of the route is gone
                        await http.delete(client.target(), headers=client.headers())
            tg.cancel_scope.cancel()
