"""What the bridge keeps per request and per session: the cursors of the sessions the editor
knows, the prompts it follows until their turn settles, the requests in flight either way, and
what of a replayed state the editor was already shown (``unseen``).

No I/O: ``hub.bridge.core`` owns these records (``docs/protocol.md`` for the cursors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hub.bridge.frames import hub_meta
from hub.protocol.errors import RpcError
from hub.protocol.variants import CHUNKS

__all__ = ["Cursor", "Outgoing", "Pending", "PromptWait", "Tracked", "cursor_of", "unseen"]

Cursor = tuple[int, int]
"""``(epoch, seq)`` of a session's last event (``docs/protocol.md``)."""


def cursor_of(result: Any) -> Cursor | None:
    """The ``(epoch, seq)`` in ``result``'s ``_meta["acp-hub"]``, if it has both."""
    meta = hub_meta(result)
    epoch, seq = meta.get("epoch"), meta.get("seq")
    if isinstance(epoch, int) and isinstance(seq, int):
        return (epoch, seq)
    return None


@dataclass
class PromptWait:
    """A prompt from the editor, followed until the session's events settle it."""

    session_id: str
    message_id: str | None = None
    """The user message it became (a ``_hub_prompt`` naming one of our connections)."""
    stop_reason: str | None = None
    """The stop reason of its turn, once it ended."""
    answered: bool = False
    """The editor got its answer (a v2 prompt queued by the hub is still followed)."""
    orphan_of: Any = None
    """The editor's request id, while its answer was lost with a dropped connection."""


@dataclass
class Pending:
    """A request the bridge sent to the hub."""

    method: str
    params: dict[str, Any]
    editor_id: Any = None
    """The editor's id, or ``None`` for the bridge's own requests."""
    kind: str = "relay"
    """``relay``, ``attach`` (``--session``'s ``session/new``) or ``own``."""
    prompt: PromptWait | None = None
    hub_id: int = -1
    result: Any = None
    error: RpcError | None = None
    lost: bool = False
    """The connection it was sent on dropped before the answer came."""


@dataclass
class Outgoing:
    """A hub request passed on to the editor (a permission request, an elicitation)."""

    editor_id: int
    generation: int
    hub_id: Any
    key: tuple[str, str] | None
    answer: dict[str, Any] | None = None
    """The editor's answer (``{"result"}`` or ``{"error"}``), kept while the hub connection it
    belongs to is down."""


@dataclass
class Tracked:
    """A session the editor knows."""

    session_id: str
    cwd: str
    cursor: Cursor | None = None
    turn_message: str | None = None
    prompts: list[PromptWait] = field(default_factory=list)
    shown: dict[str, str] = field(default_factory=dict)
    """The text of each message (by id) the editor was shown, from its chunks."""
    own: set[str] = field(default_factory=set)
    """The user messages this editor sent (it rendered them itself)."""
    tools: set[str] = field(default_factory=set)
    resetting: bool = False
    """A ``_hub_reset`` came: the state that follows is one the editor partly has."""


def unseen(track: Tracked, update: dict[str, Any]) -> dict[str, Any] | None:
    """What of ``update`` the editor has not been shown (``None``: nothing), recording it.

    Live updates pass unchanged. The state a ``_hub_reset`` sends again is cut to what the
    editor lacks: a message's text beyond what its chunks already showed, a known tool call as
    an update of it. The editor's own prompts are never echoed to it (it rendered them)."""
    variant = update.get("sessionUpdate")
    message_id = update.get("messageId")
    content = update.get("content")
    if variant == "user_message_chunk" and message_id in track.own:
        return None
    if variant in CHUNKS and isinstance(message_id, str) and isinstance(content, dict):
        text = content.get("text")
        if content.get("type") == "text" and isinstance(text, str):
            before = track.shown.get(message_id, "")
            if not track.resetting:
                track.shown[message_id] = before + text
                return update
            track.shown[message_id] = text
            if not text.startswith(before):
                return update  # the message changed: shown again whole
            rest = text[len(before) :]
            return {**update, "content": {**content, "text": rest}} if rest else None
    tool_call_id = update.get("toolCallId")
    if variant == "tool_call" and isinstance(tool_call_id, str):
        if tool_call_id in track.tools and track.resetting:
            return {**update, "sessionUpdate": "tool_call_update"}
        track.tools.add(tool_call_id)
    return update
