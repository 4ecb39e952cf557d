"""A webhook receiver for the tests: a real HTTP/1.1 server on a loopback port.

Every request is recorded (path, headers, body) and answered with the next status of its
path's script (then 200), one request per connection (``Connection: close``). A script entry
``"hang"`` holds the request without an answer until ``release`` is called. ``wait_for`` wakes
on every request, so that tests wait for deliveries instead of sleeping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import orjson

MAX_REQUEST = 1024 * 1024


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Receiver:
    port: int = 0
    scripts: dict[str, list[int | str]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    released: anyio.Event = field(default_factory=anyio.Event)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    def release(self) -> None:
        """Answer (200) every request held by a ``"hang"``, and those to come."""
        self.released.set()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 20.0) -> None:
        with anyio.fail_after(timeout):
            while not predicate():
                self._changed = anyio.Event()
                await self._changed.wait()

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive()
                data += chunk
                if len(data) > MAX_REQUEST:
                    return
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            while len(body) < length:
                body += await stream.receive()
            self.received.append(Received(path, headers, body))
            self._changed.set()
            script = self.scripts.get(path, [])
            status = script.pop(0) if script else 200
            if status == "hang":
                await self.released.wait()
                status = 200
            reply = f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            await stream.send(reply.encode())


@asynccontextmanager
async def webhook_receiver(**scripts: list[int | str]) -> AsyncIterator[Receiver]:
    """Serve a ``Receiver`` on 127.0.0.1 for the block; ``scripts`` by path without its
    slash (``hook=[500, 200]`` scripts ``/hook``)."""
    receiver = Receiver(scripts={f"/{k}": list(v) for k, v in scripts.items()})
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    receiver.port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, receiver.handle)
        try:
            yield receiver
        finally:
            receiver.release()
            tg.cancel_scope.cancel()
