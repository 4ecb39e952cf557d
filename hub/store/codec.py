"""How durable stores write an event row and read it back (no I/O).

A row's v2 frame is stored as it is; its v1 frames (``v1`` and ``v1_hub``) as one JSON array
``[v1, v1_hub | null]`` whose entries are the frame's text, or ``0`` for "the v2 frame itself"
(most updates render to v1 unchanged and share the v2 frame), and ``null`` for ``v1_hub``
when it is the same tuple as ``v1``. Reading restores that sharing, so a restored log counts
its bytes exactly as the live one did.
"""

from __future__ import annotations

from typing import Any

import orjson

from hub.store.log import Row, make_row, row_frames


def _frames_out(frames: tuple[bytes, ...], v2: bytes) -> list[Any]:
    return [0 if frame is v2 or frame == v2 else frame.decode() for frame in frames]


def _frames_in(entries: Any, v2: bytes) -> tuple[bytes, ...]:
    if not isinstance(entries, list):
        raise ValueError("stored v1 frames are not a list")
    return tuple(v2 if entry == 0 else str(entry).encode() for entry in entries)


def pack_v1(row: Row) -> bytes:
    """The stored form of ``row``'s v1 frames."""
    v2 = row[2]
    v1, v1_hub = row_frames(row)
    hub = None if v1_hub is v1 or v1_hub == v1 else _frames_out(v1_hub, v2)
    return orjson.dumps([_frames_out(v1, v2), hub])


def unpack_row(
    seq: int, message_id: str | None, origin: str | None, v2: bytes, packed: bytes
) -> Row:
    """The row stored as ``pack_v1`` and the other columns; ``ValueError`` if damaged."""
    try:
        v1_entries, hub_entries = orjson.loads(packed)
    except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
        raise ValueError(f"stored event {seq} is damaged: {exc}") from None
    v1 = _frames_in(v1_entries, v2)
    v1_hub = v1 if hub_entries is None else _frames_in(hub_entries, v2)
    return make_row(seq, message_id, v2, v1, v1_hub, origin)


def update_of(row: Row) -> dict[str, Any]:
    """The v2 update an event row carries (to fold a restored session's state)."""
    frame = orjson.loads(row[2])
    update = frame["params"]["update"]
    if not isinstance(update, dict):
        raise ValueError(f"stored event {row[0]} carries no update")
    return update
