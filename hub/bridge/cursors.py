"""Cursors: where each session the editor knows stands, and where a (re)attach replays from.

Every ``session/update`` of the hub carries ``(epoch, seq)`` in ``_meta["acp-hub"]``
(``docs/protocol.md``); the bridge keeps the last one per session (``advance``). After a dropped
connection it resumes each session after that cursor (``resume_params``), so the hub sends
exactly the events the editor missed: an update at or below the cursor of the same epoch is a
duplicate and dropped. ``--session`` attaches with the whole state replayed
(``attach_params``). Pure functions over the ``Tracked`` records.
"""

from __future__ import annotations

import logging
from typing import Any

from hub.bridge.tracking import Tracked

__all__ = ["advance", "attach_params", "resume_params"]

log = logging.getLogger("hub.bridge")


def advance(track: Tracked, meta: dict[str, Any], version: int) -> bool:
    """Move ``track``'s cursor to the update whose ``_meta["acp-hub"]`` is ``meta``; ``False``
    when the update is one the editor already had (a seq below the cursor: drop it). A gap is
    logged (on v2: v1 connections get the hub's events, so their seqs are contiguous)."""
    seq, epoch = meta.get("seq"), meta.get("epoch")
    if not isinstance(seq, int) or not isinstance(epoch, int):
        return True
    cursor = track.cursor
    if cursor is not None and cursor[0] == epoch:
        if seq < cursor[1]:
            log.warning("! %s: seq %d again (at %d): dropped", track.session_id, seq, cursor[1])
            return False
        if seq > cursor[1] + 1 and version >= 2:
            log.warning("! %s: seqs %d..%d missing", track.session_id, cursor[1] + 1, seq - 1)
    track.cursor = (epoch, seq)
    return True


def resume_params(track: Tracked, version: int) -> dict[str, Any]:
    """The ``session/resume`` that takes ``track`` up after its cursor (the whole state when it
    has none yet)."""
    params: dict[str, Any] = {"sessionId": track.session_id, "cwd": track.cwd}
    if track.cursor is not None:
        epoch, seq = track.cursor
        if version >= 2:
            params["replayFrom"] = {"type": "_hub_after", "epoch": epoch, "seq": seq}
        else:
            params["_meta"] = {"acp-hub": {"after": {"epoch": epoch, "seq": seq}}}
    return params


def attach_params(session_id: str, params: dict[str, Any], version: int) -> dict[str, Any]:
    """The ``session/resume`` that attaches the editor's ``session/new`` (``params``) to the
    shared session ``session_id``, replaying it all."""
    cwd = params.get("cwd")
    out: dict[str, Any] = {
        "sessionId": session_id,
        "cwd": cwd if isinstance(cwd, str) else "/",
        "mcpServers": [],
    }
    if version >= 2:
        out["replayFrom"] = {"type": "start"}
    else:
        out["_meta"] = {"acp-hub": {"replay": "start"}}
    if params.get("mcpServers"):
        log.warning("! session/new attaches to %s: its mcpServers are ignored", session_id)
    return out
