"""The cursor of ``session/list``'s pages.

``session/list`` answers at most ``list_page_size`` sessions, ordered by session id, and a
``nextCursor`` while more follow (https://agentclientprotocol.com/protocol/v2/session-list#pagination;
``docs/protocol.md``). The cursor names the last session id of the page it follows: the next
page starts after that id, whether or not the session still exists, so sessions created or
closed meanwhile neither repeat nor hide the others.

A cursor is opaque to clients: ``c1.`` and the id in unpadded URL-safe base64. It carries no
authority (any id orders the same way), so a forged one can only skip ahead; one that is not
a string, is longer than ``MAX_CURSOR`` characters or does not decode is refused with
``-32602``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from hub.protocol.errors import invalid_params
from hub.sessions.errors import SessionFailure

__all__ = ["MAX_CURSOR", "after_cursor", "cursor_after"]

MAX_CURSOR = 512
"""The longest cursor accepted, in characters (session ids are far shorter)."""

_PREFIX = "c1."


def cursor_after(session_id: str) -> str:
    """The cursor of the page that follows the session ``session_id``."""
    encoded = base64.urlsafe_b64encode(session_id.encode()).rstrip(b"=").decode()
    return _PREFIX + encoded


def after_cursor(cursor: Any) -> str | None:
    """The session id a ``cursor`` from ``cursor_after`` names; ``None`` for no cursor (the
    first page). Raises ``SessionFailure`` (``-32602``) for a malformed one."""
    if cursor is None:
        return None
    if not isinstance(cursor, str) or not cursor.startswith(_PREFIX) or len(cursor) > MAX_CURSOR:
        raise SessionFailure(invalid_params("cursor: not a cursor of this hub's session/list"))
    body = cursor[len(_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        # Only the URL-safe alphabet, and the canonical encoding of what it decodes to.
        if not raw or cursor_after(raw.decode()) != cursor:
            raise ValueError(cursor)
        return raw.decode()
    except (binascii.Error, ValueError):
        raise SessionFailure(
            invalid_params("cursor: not a cursor of this hub's session/list")
        ) from None
