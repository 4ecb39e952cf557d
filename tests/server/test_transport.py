"""The pre-built WebSocket frames of the direct write path."""

from __future__ import annotations

import pytest
from websockets.frames import Frame, Opcode

from hub.server.transport import wire_frame


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 200_000])
def test_wire_frames_are_what_websockets_would_send(size: int) -> None:
    payload = b"x" * size
    assert wire_frame(payload) == Frame(Opcode.TEXT, payload).serialize(mask=False, extensions=[])


def test_the_cache_follows_the_payload_object() -> None:
    first = b"a" * 10
    second = b"b" * 10
    assert wire_frame(first).endswith(first)
    assert wire_frame(second).endswith(second)
    assert wire_frame(first) == wire_frame(bytes(first))
