"""Prompt settlement: answering the editor's prompts from the sessions' events.

A prompt is answered by the hub like any request, unless its answer was lost with a dropped
connection. The bridge follows each prompt of a session it tracks (``PromptWait``) until its turn
settles: the hub's ``_hub_prompt`` naming one of the bridge's connections gives the user message
it became (a v2 prompt is answered with that id), the turn's idle ``state_update`` its stop
reason (a v1 prompt's answer). A v1 prompt whose turn ended while the bridge was away, in a
replay that carries no turn end (after a ``_hub_reset``), is answered from ``session/list``
(``turn_over_known`` and ``read_listing``). A session the hub no longer has fails its prompts.

Pure functions over the ``Tracked`` sessions; they return the frames for the editor as actions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from hub.bridge.actions import Action, ToEditor
from hub.bridge.frames import hub_meta
from hub.bridge.tracking import Pending, PromptWait, Tracked
from hub.protocol import jsonrpc
from hub.protocol.errors import RpcError
from hub.protocol.prompts import stop_reason_for_v1

__all__ = [
    "Listing",
    "follow",
    "forget",
    "lose_session",
    "prompt_answered",
    "prompt_started",
    "read_listing",
    "settle",
    "turn_ended",
    "turn_over_known",
]

log = logging.getLogger("hub.bridge")

Sessions = dict[str, Tracked]


def follow(sessions: Sessions, pending: Pending) -> None:
    """Follow ``pending`` (a ``session/prompt``) if the editor's session is tracked."""
    session_id = pending.params.get("sessionId")
    track = sessions.get(session_id) if isinstance(session_id, str) else None
    if track is not None:
        pending.prompt = PromptWait(track.session_id)
        track.prompts.append(pending.prompt)


def forget(sessions: Sessions, pending: Pending) -> None:
    """Stop following ``pending``'s prompt, if it had one."""
    wait = pending.prompt
    track = sessions.get(wait.session_id) if wait is not None else None
    if track is not None and wait in track.prompts:
        track.prompts.remove(wait)


def prompt_answered(sessions: Sessions, pending: Pending, result: Any) -> list[Action]:
    """The hub answered a followed prompt: pass the answer on unless the editor already got
    one; a prompt the hub queued (v2) is followed until it starts."""
    wait = pending.prompt
    out: list[Action] = []
    if wait is None:
        return out
    if not wait.answered:
        wait.answered = True
        out.append(ToEditor(jsonrpc.response(pending.editor_id, result)))
    if hub_meta(result).get("queued") is not True:
        forget(sessions, pending)
    return out


def settle(sessions: Sessions, wait: PromptWait, version: int) -> list[Action]:
    """Answer a prompt whose answer was lost, if the session's events tell it by now."""
    track = sessions.get(wait.session_id)
    if wait.answered and wait.message_id is not None:
        if track is not None and wait in track.prompts:
            track.prompts.remove(wait)  # a queued v2 prompt that has now started
        return []
    if wait.orphan_of is None:
        return []
    if version >= 2 and wait.message_id is not None:
        result: dict[str, Any] = {
            "messageId": wait.message_id,
            "_meta": {"acp-hub": {"queued": False, "messageId": wait.message_id}},
        }
    elif version < 2 and wait.stop_reason is not None:
        result = {"stopReason": stop_reason_for_v1(wait.stop_reason)}
    else:
        return []
    editor_id, wait.orphan_of = wait.orphan_of, None
    wait.answered = True
    if track is not None and wait in track.prompts:
        track.prompts.remove(wait)
    return [ToEditor(jsonrpc.response(editor_id, result))]


def prompt_started(
    sessions: Sessions,
    track: Tracked,
    update: dict[str, Any],
    connection_ids: list[str],
    version: int,
) -> list[Action]:
    """A ``_hub_prompt``: the session's turn is ``messageId``'s; when one of the bridge's
    connections sent it, it is the oldest prompt not yet matched to a message."""
    message_id = update.get("messageId")
    if not isinstance(message_id, str):
        return []
    track.turn_message = message_id
    if update.get("clientId") not in connection_ids:
        return []
    track.own.add(message_id)
    wait = next((w for w in track.prompts if w.message_id is None), None)
    if wait is None:
        return []
    wait.message_id = message_id
    return settle(sessions, wait, version)


def turn_ended(sessions: Sessions, track: Tracked, stop_reason: str, version: int) -> list[Action]:
    """The session went idle with ``stop_reason``: the prompts of its turn are settled."""
    out: list[Action] = []
    if track.turn_message is None:
        return out
    for wait in list(track.prompts):
        if wait.message_id == track.turn_message:
            wait.stop_reason = stop_reason
            out.extend(settle(sessions, wait, version))
    return out


def lose_session(sessions: Sessions, track: Tracked, error: RpcError) -> list[Action]:
    """The hub no longer has ``track``: forget it; its prompts waiting for an answer fail."""
    sessions.pop(track.session_id, None)
    message = f"the hub no longer has session {track.session_id}"
    out: list[Action] = [
        ToEditor(jsonrpc.error(wait.orphan_of, RpcError(error.code, message, error.data)))
        for wait in track.prompts
        if wait.orphan_of is not None
    ]
    track.prompts.clear()
    return out


def turn_over_known(track: Tracked, wait: PromptWait) -> str | None:
    """``end_turn`` when a later prompt of the session started (so ``wait``'s turn ended, its
    reason unknown); ``None`` when only the hub can tell (``session/list``)."""
    return "end_turn" if track.turn_message != wait.message_id else None


@dataclass(frozen=True)
class Listing:
    """What one page of ``session/list`` tells of a turn: ``next`` is the next page's params
    when the session was not on this one, else ``stop_reason`` (``None``: still running or
    unknown) is the answer."""

    stop_reason: str | None = None
    next: dict[str, Any] | None = None


def read_listing(listed: Any, session_id: str, params: dict[str, Any]) -> Listing:
    """Read a ``session/list`` page (asked with ``params``) for ``session_id``'s turn: the
    session shown idle gives its stop reason (``end_turn`` if none); pages are followed by
    their ``nextCursor`` (``docs/protocol.md``) until the session shows or they end."""
    if not isinstance(listed, dict):
        return Listing()
    entries = listed.get("sessions")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("sessionId") == session_id:
            meta = hub_meta(entry)
            if meta.get("state") == "idle":
                reason = meta.get("stopReason")
                return Listing(reason if isinstance(reason, str) else "end_turn")
            return Listing()
    cursor = listed.get("nextCursor")
    if not isinstance(cursor, str) or cursor == params.get("cursor"):
        return Listing()
    return Listing(next={"cursor": cursor})
