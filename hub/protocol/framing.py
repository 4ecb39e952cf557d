"""Newline-delimited JSON framing for stdio connections.

Theory of operation
-------------------
ACP over stdio sends one JSON-RPC message per line. ``LineDecoder`` turns a stream of byte
chunks, cut anywhere, into complete lines; ``encode_line`` turns one serialized message into
a frame.

Memory is bounded by ``max_line``: a line longer than that is reported once as a
``LineTooLong`` and the rest of it is skipped up to the next newline *without being
buffered*, so a peer writing a 100 MB line costs at most ``max_line`` bytes. The limit
applies to the raw line without its ``\\n`` (a trailing ``\\r`` counts), so the verdict does
not depend on how the stream was chunked.

Each byte is scanned once: ``feed`` only searches the new chunk for newlines, and the
partial line is kept in a ``bytearray`` that grows by appending.
"""

from __future__ import annotations

from hub.protocol.errors import LineTooLong

__all__ = ["DEFAULT_MAX_LINE", "LineDecoder", "LineTooLong", "encode_line"]

DEFAULT_MAX_LINE = 32 * 1024 * 1024
"""Default maximum line length in bytes (32 MiB; images and file contents travel inline)."""

_NL = b"\n"


class LineDecoder:
    """Split a byte stream into lines.

    Call ``feed`` with every chunk read, in order, and ``close`` once at end of stream. Both
    return the complete lines found, in order, as ``bytes`` without the ``\\n`` and without
    one trailing ``\\r``; lines that are empty or only whitespace are skipped. A line longer
    than ``max_line`` bytes appears as a single ``LineTooLong`` in its place (returned, not
    raised), and decoding carries on with the following line.
    """

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError(f"max_line must be positive, got {max_line}")
        self.max_line = max_line
        self._buf = bytearray()
        # True while skipping the remainder of an overlong line up to its newline.
        self._discarding = False

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete line currently held (never more than ``max_line``)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray) -> list[bytes | LineTooLong]:
        """Consume a chunk; return the lines (and overlong-line errors) it completes."""
        out: list[bytes | LineTooLong] = []
        pos = 0
        end = len(data)
        if self._discarding:
            nl = data.find(_NL)
            if nl < 0:
                return out
            self._discarding = False
            pos = nl + 1
        limit = self.max_line
        while pos < end:
            nl = data.find(_NL, pos)
            if nl < 0:
                pending = len(self._buf) + end - pos
                if pending > limit:
                    out.append(LineTooLong(pending, limit))
                    self._buf.clear()
                    self._discarding = True
                else:
                    self._buf += data[pos:]
                break
            if self._buf:
                self._buf += data[pos:nl]
                line = bytes(self._buf)
                self._buf.clear()
            else:
                line = bytes(data[pos:nl])
            pos = nl + 1
            self._emit(line, out)
        return out

    def close(self) -> list[bytes | LineTooLong]:
        """Signal end of stream; return the unterminated last line, if any.

        The decoder is reset and may be fed a new stream afterwards.
        """
        out: list[bytes | LineTooLong] = []
        if self._buf:
            line = bytes(self._buf)
            self._buf.clear()
            self._emit(line, out)
        self._discarding = False
        return out

    def _emit(self, line: bytes, out: list[bytes | LineTooLong]) -> None:
        if len(line) > self.max_line:
            out.append(LineTooLong(len(line), self.max_line))
            return
        if line.endswith(b"\r"):
            line = line[:-1]
        if line and not line.isspace():
            out.append(line)


def encode_line(payload: bytes) -> bytes:
    """Frame one serialized message: ``payload`` followed by ``\\n``.

    Raises ``ValueError`` if ``payload`` contains a newline (it would split the frame;
    orjson never emits one).
    """
    if _NL in payload:
        raise ValueError("a framed payload must not contain a newline")
    return payload + _NL
