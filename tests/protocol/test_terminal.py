"""Terminal output as plain text (``sanitize_terminal``)."""

from __future__ import annotations

import pytest

from hub.protocol.terminal import sanitize_terminal


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"\x1b[1;31mred\x1b[0m", "red"),
        (b"\x1b]0;title\x07after", "after"),
        (b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        (b"\x1bPq#0\x1b\\x", "x"),
        (b"a\x1b(Bb\x1b=c\x1b", "abc"),
        (b"\xc2\x9b2Jz", "z"),
        (b"10%\r50%\r100%\nnext", "100%\nnext"),
        (b"line\r\n", "line\n"),
        (b"bell\x07 nul\x00 tab\t", "bell nul tab\t"),
        (b"\xff ok", "\ufffd ok"),
    ],
)
def test_sanitize_terminal(raw: bytes, shown: str) -> None:
    assert sanitize_terminal(raw) == shown


def test_terminal_text_never_shows_half_a_character_while_streaming() -> None:
    data = "héllo ✓ 😀 done".encode()
    for cut in range(len(data) + 1):
        text = sanitize_terminal(data[:cut])
        assert "\ufffd" not in text
        assert data.decode().startswith(text)
    assert sanitize_terminal(b"ok \xff bad") == "ok \ufffd bad"  # invalid bytes still shown
