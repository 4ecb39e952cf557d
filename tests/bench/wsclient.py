"""A lean WebSocket client for the load generator: one ``asyncio.Protocol`` per connection.

Theory of operation
-------------------
A full client library spends more CPU per frame than the server under test, so the load
generator would saturate its own core first. This client does only what a benchmark needs:

- the RFC 6455 opening handshake (section 4.1) without extensions, so frames are never
  compressed;
- a frame parser for unmasked server frames (section 5.2): text, close, ping; continuation
  frames are joined;
- masked client frames (section 5.3) for the few requests it sends.

A text frame that contains ``"session/update"`` is not decoded as JSON: the parser looks for
``"acp-hub":`` followed by ``"seq":`` (the hub's cursor, several per v2 batch frame), for
``@ts=`` (the send timestamp of ``payload.marker``) and for ``_hub_reset``. Frames marked
``"replay":true`` are compacted replay: they carry no seq and only their markers are counted.
Every other frame is decoded with ``json.loads`` and, if it is a response, resolves the
waiting request.

Each connection checks its own stream: seqs must rise by exactly one; a lower or equal seq is
a duplicate, a jump is a gap; ``_hub_reset`` starts a new count of both. The agent's own numbering
in the live markers (``@n=``, restarting at 1 each prompt turn) is checked the same way.
Latencies (receive time minus send timestamp) are appended to the shared ``Recorder`` while
it is on and the connection is live (its attach response has arrived).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import socket
import struct
from array import array
from collections.abc import Callable
from typing import Any, cast

from tests.bench.payload import TS_MARK, now

__all__ = ["Conn", "Recorder", "RequestFailed", "connect", "frame"]

_SESSION_UPDATE = b'"session/update"'
_HUB_META = b'"acp-hub":'
_SEQ = b'"seq":'
_REPLAY = b'"replay":true'
_RESET = b'"_hub_reset"'
_N_MARK = b"@n="
_DIGITS = frozenset(b"0123456789")


class RequestFailed(Exception):
    """The server answered a request with a JSON-RPC error."""


class Recorder:
    """Latency samples (seconds) and delivery counts shared by the connections of a run."""

    def __init__(self) -> None:
        self.on = False
        self.latencies: array[float] = array("d")
        self.received: array[float] = array("d")
        self.deliveries = 0

    def start(self) -> None:
        """Clear the samples and start recording."""
        self.latencies = array("d")
        self.received = array("d")
        self.deliveries = 0
        self.on = True

    def stop(self) -> array[float]:
        """Stop recording; the samples of the window."""
        self.on = False
        return self.latencies


def _int_at(data: bytes, i: int) -> int:
    """The decimal integer starting at ``data[i]`` (after optional spaces)."""
    n = len(data)
    while i < n and data[i] == 0x20:
        i += 1
    j = i
    while j < n and data[j] in _DIGITS:
        j += 1
    return int(data[i:j])


def _mask(payload: bytes, key: bytes) -> bytes:
    n = len(payload)
    if n == 0:
        return payload
    repeated = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(repeated, "little")).to_bytes(
        n, "little"
    )


def frame(opcode: int, payload: bytes) -> bytes:
    """A masked client frame of ``opcode`` (1: text) carrying ``payload``."""
    key = os.urandom(4)
    n = len(payload)
    if n < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return header + key + _mask(payload, key)


class Conn(asyncio.Protocol):
    """One WebSocket connection; see the module docstring."""

    def __init__(self, host: str, port: int, path: str, recorder: Recorder) -> None:
        self.host, self.port, self.path = host, port, path
        self.recorder = recorder
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[int] = loop.create_future()
        self.close_code: int | None = None
        self._handshaken = False
        self._buf = b""
        self._fragments: list[bytes] = []
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        # The stream check.
        self.live = False
        self.last_seq: int | None = None
        self.updates = 0
        self.duplicates = 0
        self.gaps = 0
        self.resets = 0
        self.early = 0
        # v1 clients that did not ask for the hub's events do not get the `_hub_*` updates:
        # their seqs skip those (counted in ``skipped``, not as gaps).
        self.strict_seq = True
        self.skipped = 0
        # Each stream's cursor, as the session's above: alike in shape only.
        # The agent's numbering (``@n=``), checked whatever the protocol version.
        self.last_n: int | None = None
        self.number_gaps = 0
        self.number_duplicates = 0
        self.marks = 0
        self.recorded = 0
        """Stamped updates this connection recorded (while the recorder was on)."""
        self.replay_frames = 0
        self.replay_marks = 0
        self.frames = 0
        self.frame_bytes = 0
        self.first_live_at: float | None = None
        self.on_update: Callable[[Conn], None] | None = None
        self.on_raw: Callable[[bytes], None] | None = None
        """When set, every text frame goes to it undecoded, and nowhere else."""
        self.on_session_update: Callable[[bytes, float], None] | None = None
        """When set, every ``session/update`` frame also goes to it undecoded, with the time
        it arrived, before it is checked as usual."""
        self.counting = False
        """When set, ``session/update`` frames are only counted (``frames``, ``marks``): no
        seq check, no latency. S11 reads 10,000 observers this way but a sample of them."""

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they implement it.
        self.transport = cast(asyncio.Transport, transport)
        key = base64.b64encode(os.urandom(16)).decode()
        self.transport.write(
            (
                f"GET {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )

    def connection_lost(self, exc: Exception | None) -> None:
        code = self.close_code if self.close_code is not None else 1006
        if not self.opened.done():
            self.opened.set_exception(ConnectionError(f"closed during the handshake: {exc}"))
        if not self.closed.done():
            self.closed.set_result(code)
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection closed ({code})"))
        self._pending.clear()

    def data_received(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        if not self._handshaken:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self._buf = buf
                return
            status = buf[: buf.find(b"\r\n")]
            if b" 101 " not in status + b" ":
                self.opened.set_exception(ConnectionError(status.decode(errors="replace")))
                assert self.transport is not None
                self.transport.close()
                return
            self._handshaken = True
            self.opened.set_result(None)
            buf = buf[end + 4 :]
        received = now()
        pos, size = 0, len(buf)
        while size - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            n = b1 & 0x7F
            head = 2
            if n == 126:
                if size - pos < 4:
                    break
                n = (buf[pos + 2] << 8) | buf[pos + 3]
                head = 4
            elif n == 127:
                if size - pos < 10:
                    break
                n = int.from_bytes(buf[pos + 2 : pos + 10], "big")
                head = 10
            if size - pos < head + n:
                break
            payload = buf[pos + head : pos + head + n]
            pos += head + n
            self._frame(b0, payload, received)
        self._buf = buf[pos:] if pos < size else b""

    # Frames

    def _frame(self, b0: int, payload: bytes, received: float) -> None:
        opcode = b0 & 0x0F
        fin = b0 & 0x80
        if opcode == 0:
            self._fragments.append(payload)
            if not fin:
                return
            payload = b"".join(self._fragments)
            self._fragments.clear()
            opcode = 1
        elif not fin:
            self._fragments = [payload]
            return
        if opcode == 1 or opcode == 2:
            self._text(payload, received)
        elif opcode == 8:
            self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
            self._send(8, payload[:2])
            assert self.transport is not None
            self.transport.close()
        elif opcode == 9:
            self._send(10, payload)

    def _text(self, data: bytes, received: float) -> None:
        self.frames += 1
        self.frame_bytes += len(data)
        if self.on_raw is not None:
            self.on_raw(data)
            return
        if self.counting and data.find(_SESSION_UPDATE) >= 0:
            self.marks += data.count(TS_MARK)
            return
        if data.find(_SESSION_UPDATE) >= 0:
            if self.on_session_update is not None:
                self.on_session_update(data, received)
            if data.find(_RESET) >= 0:
                # Sent with the replay that follows it: both counts start again after it (the
                # replay holds what was missed, the agent's numbering too).
                self.resets += 1
                self.last_seq = None
                self.last_n = None
            if data.find(_REPLAY) >= 0:
                self.replay_frames += 1
                self.replay_marks += data.count(_N_MARK)
                return
            i = data.find(_HUB_META)
            while i >= 0:
                j = data.find(_SEQ, i, i + 80)
                if j >= 0:
                    self._seq(_int_at(data, j + 6))
                i = data.find(_HUB_META, i + 10)
            i = data.find(_N_MARK)
            while i >= 0:
                self._number(_int_at(data, i + 3))
                i = data.find(_N_MARK, i + 3)
            i = data.find(TS_MARK)
            if i >= 0:
                rec = self.recorder
                record = rec.on and self.live
                while i >= 0:
                    self.marks += 1
                    if record:
                        end = data.find(b"@", i + 4)
                        rec.latencies.append(received - float(data[i + 4 : end]))
                        rec.received.append(received)
                        rec.deliveries += 1
                        self.recorded += 1
                    i = data.find(TS_MARK, i + 4)
                if self.live and self.first_live_at is None:
                    self.first_live_at = received
            if self.on_update is not None:
                self.on_update(self)
            return
        message = json.loads(data)
        if isinstance(message, dict) and "id" in message and "method" not in message:
            fut = self._pending.pop(message["id"], None)
            if fut is not None and not fut.done():
                if "error" in message:
                    fut.set_exception(RequestFailed(json.dumps(message["error"])))
                else:
                    fut.set_result(message.get("result"))

    def _seq(self, seq: int) -> None:
        self.updates += 1
        last = self.last_seq
        if last is None or seq == last + 1:
            self.last_seq = seq
        elif seq <= last:
            self.duplicates += 1
        else:
            if self.strict_seq:
                self.gaps += seq - last - 1
            else:
                self.skipped += seq - last - 1
            self.last_seq = seq

    def _number(self, n: int) -> None:
        """The agent's own update number: 1, 2, 3... within each prompt turn."""
        last = self.last_n
        if last is not None and n != last + 1 and n != 1:
            if n <= last:
                self.number_duplicates += 1
            else:
                self.number_gaps += n - last - 1
        self.last_n = n

    def attached_at(self, seq: int) -> None:
        """The attach response says the stream continues after ``seq``: check and go live.

        Updates after ``seq`` that arrived *before* the response (the hub sends the joiner's
        own ``_hub_presence`` that way) are no duplicates as long as the stream goes on
        after them without a repeat; they are counted in ``early``.
        """
        if self.last_seq is None:
            self.last_seq = seq
        elif self.last_seq < seq:
            self.gaps += seq - self.last_seq
            self.last_seq = seq
        elif self.last_seq > seq:
            self.early += self.last_seq - seq
        self.live = True

    # Sending

    def _send(self, opcode: int, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame(opcode, payload))

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a JSON-RPC notification."""
        self._send(1, json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode())

    def request(self, method: str, params: dict[str, Any]) -> asyncio.Future[Any]:
        """Send a JSON-RPC request; the future resolves to its result (or RequestFailed)."""
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self._send(1, json.dumps(body).encode())
        return fut

    def close(self, code: int = 1000) -> None:
        """Start the closing handshake."""
        self._send(8, struct.pack("!H", code))

    def abort(self) -> None:
        """Drop the TCP connection without a closing handshake."""
        if self.transport is not None:
            self.transport.abort()

    def pause(self) -> None:
        """Stop reading: the server's frames pile up in the kernel and then in the server."""
        assert self.transport is not None
        self.transport.pause_reading()

    def resume(self) -> None:
        """Read again."""
        assert self.transport is not None
        self.transport.resume_reading()

    @property
    def local_port(self) -> int:
        """The client's ephemeral port (to find the server's side in ``/proc/net/tcp``)."""
        assert self.transport is not None
        port: int = self.transport.get_extra_info("sockname")[1]
        return port


async def connect(
    host: str,
    port: int,
    path: str,
    recorder: Recorder,
    *,
    rcvbuf: int | None = None,
    source: str | None = None,
) -> Conn:
    """Open a connection and complete the opening handshake.

    ``rcvbuf`` shrinks the socket's receive buffer before connecting (the TCP window is
    negotiated at connect time), so that a consumer that stops reading pushes back quickly.
    ``source`` is the local address to connect from (e.g. ``127.0.0.2``): each loopback
    address has its own ephemeral ports, so that tens of thousands of connections fit.
    """
    loop = asyncio.get_running_loop()
    sock: socket.socket | None = None
    if source is not None:
        _, conn = await loop.create_connection(
            lambda: Conn(host, port, path, recorder), host, port, local_addr=(source, 0)
        )
    elif rcvbuf is not None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await loop.sock_connect(sock, (host, port))
        _, conn = await loop.create_connection(lambda: Conn(host, port, path, recorder), sock=sock)
    else:
        _, conn = await loop.create_connection(lambda: Conn(host, port, path, recorder), host, port)
    await asyncio.wait_for(conn.opened, 30)
    return conn
