"""The editor's side of the bridge: newline-delimited JSON-RPC on stdin and stdout.

ACP's stdio transport (https://agentclientprotocol.com/protocol/transports) sends one JSON-RPC
message per line. ``EditorChannel.receive`` returns the next line (bounded by ``max_line``
through ``hub.protocol.framing.LineDecoder``; an overlong line is reported, not buffered), or
``None`` at end of input. ``send`` writes one message and waits until the pipe has taken it, so
a slow editor slows the bridge's reading from the hub down (and, past the hub's outbox bound,
the hub closes the bridge's connection with 1013; the bridge resumes with its cursor).
Nothing but JSON-RPC is ever written to stdout; logs go to stderr.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import IO

from hub.protocol.errors import LineTooLong
from hub.protocol.framing import DEFAULT_MAX_LINE, LineDecoder, encode_line

READ_CHUNK = 64 * 1024


class EditorClosed(Exception):
    """The editor closed its end of the stdout pipe."""


class EditorChannel:
    """stdin/stdout of the bridge process as an asyncio line channel; see the module docs."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_line: int = DEFAULT_MAX_LINE,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._decoder = LineDecoder(max_line)
        self._lines: list[bytes | LineTooLong] = []
        self._eof = False

    @classmethod
    async def open(
        cls,
        stdin: IO[bytes] | None = None,
        stdout: IO[bytes] | None = None,
        *,
        max_line: int = DEFAULT_MAX_LINE,
    ) -> EditorChannel:
        """Wrap the process's stdin and stdout (pipes, as an editor starts its agent)."""
        loop = asyncio.get_running_loop()
        stdin = stdin or sys.stdin.buffer
        stdout = stdout or sys.stdout.buffer
        reader = asyncio.StreamReader(limit=READ_CHUNK)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
        # A duplicate of stdout's descriptor: closing the transport must not close fd 1 under
        # whatever else still writes to it at exit.
        out = os.fdopen(os.dup(stdout.fileno()), "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(), out
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(reader, writer, max_line=max_line)

    async def receive(self) -> bytes | LineTooLong | None:
        """The next line from the editor, a ``LineTooLong`` in its place, or ``None`` at EOF."""
        while not self._lines:
            if self._eof:
                return None
            chunk = await self._reader.read(READ_CHUNK)
            if chunk:
                self._lines.extend(self._decoder.feed(chunk))
            else:
                self._eof = True
                self._lines.extend(self._decoder.close())
        return self._lines.pop(0)

    async def send(self, payload: bytes) -> None:
        """Write one message (a serialized JSON-RPC object) and wait for the pipe to take it.

        Writes happen in call order; ``EditorClosed`` when the editor is gone."""
        if self._writer.is_closing():
            raise EditorClosed("stdout is closed")
        self._writer.write(encode_line(payload))
        try:
            await self._writer.drain()
        except (ConnectionError, BrokenPipeError) as exc:
            raise EditorClosed(str(exc)) from exc

    def close(self) -> None:
        """Close stdout (what was written is flushed by the transport first)."""
        if not self._writer.is_closing():
            self._writer.close()
