"""Terminal output as plain text, for peers that cannot show a terminal.

v2 agents own their terminals and stream raw bytes
(https://agentclientprotocol.com/protocol/v2/tool-calls#display-only-terminals); a v1 client
has no such thing and gets a text block instead. ``sanitize_terminal`` makes that text: the
bytes decoded as UTF-8, escape sequences and control characters removed.
"""

from __future__ import annotations

import re

__all__ = ["sanitize_terminal"]

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor movement)
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC (titles, hyperlinks)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS / SOS / PM / APC strings
    r"|\x1b[ -/]*[0-~]?"  # other escapes, or a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _decode_complete(data: bytes) -> str:
    """UTF-8 text of ``data``, leaving out a character still incomplete at the end (a chunk
    cut inside it is completed by the next chunk) and replacing invalid bytes."""
    end = len(data)
    # Look back at most 3 bytes for the lead byte of a multi-byte sequence.
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte & 0xC0 != 0x80:  # not a continuation byte
            need = (
                2
                if byte & 0xE0 == 0xC0
                else 3
                if byte & 0xF0 == 0xE0
                else 4
                if byte & 0xF8 == 0xF0
                else 1
            )
            if back < need:
                end -= back
            break
    return data[:end].decode("utf-8", errors="replace")


def sanitize_terminal(data: bytes) -> str:
    """Terminal bytes as plain text: UTF-8 (invalid bytes replaced), escapes removed.

    A carriage return inside a line keeps what follows it (progress bars redraw the line),
    backspace and other control characters are removed; newlines and tabs stay.
    """
    text = _ANSI.sub("", _decode_complete(data)).replace("\r\n", "\n")
    lines = []
    for line in text.split("\n"):
        parts = [part for part in line.split("\r") if part]
        lines.append(_CONTROL.sub("", parts[-1] if parts else ""))
    return "\n".join(lines)
