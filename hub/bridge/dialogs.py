"""Dialogs: the hub's requests passed on to the editor (permission requests, elicitations).

Each gets an id of the bridge's own towards the editor (``Outgoing``), remembered with the hub
connection (``generation``) and hub id it came with. A permission request is also known by its
``(sessionId, permissionId)``: when the hub offers it again on a new connection, the editor's
open dialog is matched to it (and an answer the editor gave meanwhile is delivered); when the
hub's record says it was settled, or the hub cancels it, the dialog is withdrawn from the editor
with ``$/cancel_request``. Pure: methods return the frames to send as actions.
"""

from __future__ import annotations

import logging
from typing import Any

from hub.bridge.actions import Action, ToEditor, ToHub
from hub.bridge.frames import answer_frame, hub_meta, payload
from hub.bridge.tracking import Outgoing
from hub.protocol import jsonrpc

__all__ = ["Dialogs"]

log = logging.getLogger("hub.bridge")


class Dialogs:
    """The hub's requests the editor was shown and has not settled."""

    def __init__(self) -> None:
        self._outgoing: dict[int, Outgoing] = {}
        self._permissions: dict[tuple[str, str], Outgoing] = {}
        self._next_editor_id = 0

    def __len__(self) -> int:
        return len(self._outgoing)

    def from_hub(self, req: jsonrpc.Request, generation: int) -> list[Action]:
        """A request from the hub on connection ``generation``: show it to the editor, unless
        the editor already shows it (then answer it if the editor already did)."""
        params = req.params if isinstance(req.params, dict) else {}
        key: tuple[str, str] | None = None
        permission_id = hub_meta(params).get("permissionId")
        session_id = params.get("sessionId")
        if isinstance(permission_id, str) and isinstance(session_id, str):
            key = (session_id, permission_id)
        known = self._permissions.get(key) if key is not None else None
        log.info(
            "= hub request %s %r (permission %s): %s",
            req.method,
            req.id,
            permission_id,
            "already shown" if known is not None else "to the editor",
        )
        if known is not None:
            # The same request offered again on a new connection: the editor already shows it.
            known.generation, known.hub_id = generation, req.id
            return [ToHub(answer_frame(req.id, known.answer))] if known.answer is not None else []
        self._next_editor_id += 1
        out = Outgoing(self._next_editor_id, generation, req.id, key)
        self._outgoing[out.editor_id] = out
        if key is not None:
            self._permissions[key] = out
        return [ToEditor(jsonrpc.request(out.editor_id, req.method, req.params))]

    def answered(
        self, entry: jsonrpc.Response | jsonrpc.ErrorResponse, generation: int | None
    ) -> list[Action]:
        """The editor answered; ``generation`` is the hub connection that is up (``None``: the
        link is down). A permission's answer is kept until the hub's record settles it."""
        editor_id = entry.id
        out = self._outgoing.pop(editor_id, None) if isinstance(editor_id, int) else None
        if out is None:
            log.info("! the editor answered unknown or withdrawn request %r", editor_id)
            return []
        log.info("= the editor answered request %r", editor_id)
        if out.key is not None:
            # Kept until the hub's record says the request is settled: if the connection drops
            # first, the hub offers the request again on the next one and gets this answer.
            out.answer = payload(entry)
            self._permissions[out.key] = out
        if out.generation == generation:
            return [ToHub(answer_frame(out.hub_id, payload(entry)))]
        if out.key is None:
            log.info("! an answer to a request of a lost hub connection is dropped")
        return []

    def cancelled(self, request_id: Any, generation: int) -> list[Action]:
        """The hub cancelled its request ``request_id`` of connection ``generation``."""
        for out in list(self._outgoing.values()):
            if out.generation == generation and out.hub_id == request_id:
                return self._withdraw(out)
        return []

    def settled(self, session_id: str, permission_id: str) -> list[Action]:
        """The hub's record says the permission request was settled (by anyone)."""
        out = self._permissions.get((session_id, permission_id))
        return self._withdraw(out) if out is not None else []

    def _withdraw(self, out: Outgoing) -> list[Action]:
        """The hub no longer wants the editor's answer to ``out``: withdraw it there."""
        self._outgoing.pop(out.editor_id, None)
        if out.key is not None:
            self._permissions.pop(out.key, None)
        if out.answer is not None:
            return []
        log.info("= request %d withdrawn from the editor", out.editor_id)
        return [ToEditor(jsonrpc.notification("$/cancel_request", {"requestId": out.editor_id}))]
