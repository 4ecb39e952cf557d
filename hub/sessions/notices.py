"""Notices: the moments in a session someone away from the screen wants to hear about.

Theory of operation
-------------------
Five events are worth telling a person who is not watching: a permission request waits for an
answer (``permission_waiting``), an elicitation waits for one (``elicitation_waiting``), a turn
ended (``turn_ended``), the agent exited (``agent_exited``), the agent lost the session
(``session_lost``). Four of them are updates the session already emits; ``notice_of`` reads
them off ``Session.emit`` (one set lookup per event, and only the session that owns the session
emits: a node that mirrors it never does, so with several nodes each notice arises once). The
fifth is raised by ``hub.sessions.elicitation`` itself, since an elicitation is asked of one
client and leaves no event in the log.

A ``Notice`` is a plain value handed to the session's ``notice`` callback (the registry's), which
must not block: what is done with it (``hub.server.webhooks``) happens later, in tasks of its
own, never on the fan-out path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Final

NOTICE_EVENTS: Final = (
    "permission_waiting",
    "elicitation_waiting",
    "turn_ended",
    "agent_exited",
    "session_lost",
)
"""Every notice's ``event``, in the order the docs list them."""

NOTICE_VARIANTS: Final = frozenset({"_hub_permission", "state_update", "_hub_agent"})
"""The update variants ``notice_of`` may turn into a notice (``Session.emit`` tests this set
first, so that the other updates cost one lookup)."""

MAX_TEXT: Final = 200
"""Characters of a title or message a notice carries (it is for a person, not a transcript)."""


@dataclass(frozen=True, slots=True)
class Notice:
    """One notice: what happened, in which session, when (Unix seconds), and its details."""

    event: str
    session_id: str
    agent: str
    cwd: str
    detail: dict[str, Any] = field(default_factory=dict)
    seq: int | None = None
    at: float = field(default_factory=time.time)


def clip(value: Any) -> str:
    """``value`` as a string of at most ``MAX_TEXT`` characters (``""`` when not a string)."""
    if not isinstance(value, str):
        return ""
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "\u2026"


def notice_of(update: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The notice ``update`` (an update the session emitted) is, as ``(event, detail)``, or
    ``None`` when it is none."""
    variant = update.get("sessionUpdate")
    if variant == "_hub_permission":
        request = update.get("request")
        # The first record of a request carries it; later pending records (consensus) do not.
        if update.get("status") != "pending" or not isinstance(request, dict):
            return None
        subject = request.get("subject")
        tool = subject.get("toolCall") if isinstance(subject, dict) else None
        tool = tool if isinstance(tool, dict) else request.get("toolCall")
        tool = tool if isinstance(tool, dict) else {}
        options = request.get("options")
        names = [
            clip(o.get("name"))
            for o in (options if isinstance(options, list) else [])
            if isinstance(o, dict)
        ]
        return "permission_waiting", {
            "permissionId": update.get("permissionId"),
            "title": clip(request.get("title") or tool.get("title")),
            "kind": clip(tool.get("kind")),
            "options": names,
        }
    if variant == "state_update":
        if update.get("state") != "idle":
            return None
        detail: dict[str, Any] = {"stopReason": update.get("stopReason")}
        meta = update.get("_meta")
        hub = meta.get("acp-hub") if isinstance(meta, dict) else None
        error = hub.get("error") if isinstance(hub, dict) else None
        if isinstance(error, dict):
            detail["error"] = clip(error.get("message"))
        elif detail["stopReason"] is None:
            return None  # idle without a turn ending (a session's first state)
        return "turn_ended", detail
    if variant == "_hub_agent":
        status = update.get("status")
        if status == "exited":
            return "agent_exited", {"message": clip(update.get("message"))}
        if status == "lost":
            return "session_lost", {"message": clip(update.get("message"))}
    return None
