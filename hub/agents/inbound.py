"""What an agent process sends the hub: notifications and requests, routed to the sinks.

One ``Inbound`` per process, called by its connection's reader (``hub.agents.connection``):

* ``session/update`` goes through the dialect (translated from v1, or checked) to the
  session's sink, in the agent's order. Malformed updates of known variants are logged and
  dropped; ``_hub_*`` variants are the hub's and never accepted from an agent; updates of a
  session being re-attached with ``session/load`` are swallowed (the hub has the history).
* ``session/request_permission`` and ``elicitation/create`` are checked (a malformed one is
  answered ``-32602`` and never shown to anyone), then awaited on the sink, each in a task of
  its own; an answer the hub does not understand becomes ``cancelled``: nothing unknown
  counts as approval. ``elicitation/complete`` goes to the sink that was asked.
* Notifications with a method the hub does not know (``_``-prefixed extensions, and any other
  name that is not ACP's or JSON-RPC's own) naming a session go to its sink; others are
  logged. The hub's own (``_hub/...``) are never accepted from an agent.
* Other requests naming a registered session (``sessionId``) go to its sink
  (``on_extension_request``: the client whose prompt runs, or the lease holder, answers);
  ``fs/*`` and ``terminal/*`` (the hub offers neither), the hub's own ``_hub/...`` and
  requests naming no session: ``-32601``.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import anyio

from hub.agents.connection import Connection
from hub.agents.dialect import Dialect
from hub.agents.errors import AgentError
from hub.agents.session_table import SessionTable, call_sink
from hub.protocol.elicitation import check_elicitation
from hub.protocol.errors import InvalidParams, invalid_params, method_not_found
from hub.protocol.permissions import permission_outcome_for_agent

__all__ = ["Inbound"]

logger = logging.getLogger("hub.agents")

_CANCELLED = {"outcome": "cancelled"}
_KNOWN = frozenset(
    {
        "initialize",
        "authenticate",
        "logout",
        "auth/login",
        "auth/logout",
        "session/new",
        "session/load",
        "session/resume",
        "session/attach",
        "session/detach",
        "session/list",
        "session/prompt",
        "session/cancel",
        "session/set_mode",
        "session/set_config_option",
        "session/close",
        "session/delete",
        "session/request_permission",
        "elicitation/create",
    }
)
_KNOWN_PREFIXES = ("$/", "rpc.", "fs/", "terminal/")
"""ACP's and JSON-RPC's own methods: an agent's notification with one of these names is not
passed on as if it were an extension (each has its own meaning, or none as a notification)."""


class Inbound:
    """Routes what one agent process sends (see the module docstring). ``dialect`` is set
    once ``initialize`` succeeded; until then updates and permission requests are refused."""

    def __init__(self, name: str, sessions: SessionTable) -> None:
        self.name = name
        self.sessions = sessions
        self.dialect: Dialect | None = None
        self.conn: Connection | None = None

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        """A notification of the agent (synchronous, in stream order)."""
        if method == "session/update":
            self._on_update(params)
        elif method == "elicitation/complete":
            eid = params.get("elicitationId")
            entry = self.sessions.elicitation_session(eid)
            if entry is None:
                logger.info("= agent %s: elicitation/complete for unknown %r", self.name, eid)
                return
            call_sink(self.name, entry.sink.on_elicitation_complete, params)
        elif method.startswith("_hub"):
            # The hub's own notifications to clients: an agent must not speak in its name.
            logger.warning(
                "! agent %s: the hub's own notification %s is not accepted from an agent",
                self.name,
                method[:100],
            )
        elif method not in _KNOWN and not method.startswith(_KNOWN_PREFIXES):
            # An extension (`_vendor/...`) or a method the hub does not know: passed on live.
            entry = self.sessions.get(params.get("sessionId"))
            if entry is None:
                logger.info(
                    "= agent %s: extension notification %s: %s",
                    self.name,
                    method,
                    str(params)[:200],
                )
                return
            call_sink(self.name, partial(entry.sink.on_extension, method), params)
        else:
            logger.info("= agent %s: notification %s ignored", self.name, method)

    def _on_update(self, params: dict[str, Any]) -> None:
        sid = params.get("sessionId")
        entry = self.sessions.get(sid)
        if entry is None or self.dialect is None:
            logger.info("= agent %s: update for unknown session %r dropped", self.name, sid)
            return
        if entry.swallow:
            return
        update = params.get("update")
        variant = update.get("sessionUpdate") if isinstance(update, dict) else None
        if not isinstance(update, dict) or not isinstance(variant, str):
            logger.warning(
                "! agent %s: malformed session/update dropped: %r", self.name, str(params)[:200]
            )
            return
        if variant.startswith("_hub"):
            logger.warning(
                "! agent %s: the hub's own %s update is not accepted from an agent",
                self.name,
                variant,
            )
            return
        for item in self.dialect.updates(entry, update):
            entry.deliver(item)

    def on_request_seen(self, method: str, params: dict[str, Any]) -> None:
        """A request of the agent, in stream order, before its task serves it."""
        # In stream order: an `elicitation/complete` right behind its `elicitation/create`
        # must find the binding even before the create's task has run.
        if method == "elicitation/create":
            self.sessions.bind_elicitation(params.get("elicitationId"), params.get("sessionId"))

    async def on_request(self, method: str, params: dict[str, Any]) -> Any:
        """Serve a request of the agent (in a task of its own); ``AgentError`` answers it
        with that error."""
        if method == "session/request_permission":
            return await self._serve_permission(params)
        if method == "elicitation/create":
            return await self._serve_elicitation(params)
        if method.startswith(("fs/", "terminal/")):
            logger.warning(
                "! agent %s asked for %s, which the hub does not offer", self.name, method
            )
        elif not method.startswith(("_hub", "$/")) and (
            entry := self.sessions.get(params.get("sessionId"))
        ):
            return await entry.sink.on_extension_request(method, params)
        else:
            logger.info("= agent %s: request %s not served", self.name, method)
        raise AgentError(method_not_found(method))

    async def _serve_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        sid = params.get("sessionId")
        entry = self.sessions.get(sid)
        if entry is None or self.dialect is None:
            logger.warning(
                "! agent %s: permission request for unknown session %r: cancelled", self.name, sid
            )
            return {"outcome": dict(_CANCELLED)}
        try:
            request = self.dialect.permission_request(params)
        except AgentError as exc:
            error = exc.error
            logger.warning(
                "! agent %s: malformed permission request refused: %s",
                self.name,
                error.data if error.data is not None else error.message,
            )
            raise
        options = request["options"]
        translator = self.dialect.turn_translator(entry)
        if translator is not None:
            for update in translator.permission_pending():
                entry.deliver(update)
        scope = anyio.CancelScope()
        entry.permissions.add(scope)
        answer: Any = _CANCELLED
        try:
            with scope:
                answer = await entry.sink.on_permission(request)
        finally:
            entry.permissions.discard(scope)
            if translator is not None and self.conn is not None and not self.conn.closed:
                for update in translator.permission_answered():
                    entry.deliver(update)
        if scope.cancelled_caught:
            answer = _CANCELLED
        try:
            outcome = permission_outcome_for_agent(answer, options)
        except InvalidParams as exc:
            logger.warning(
                "! agent %s: permission answer %.200r refused (%s): cancelled",
                self.name,
                answer,
                exc,
            )
            outcome = dict(_CANCELLED)
        return {"outcome": outcome}

    async def _serve_elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        entry = self.sessions.get(params.get("sessionId"))
        if entry is None:
            logger.warning(
                "! agent %s: elicitation without an attached session: cancelled", self.name
            )
            return {"action": "cancel"}
        try:
            request = check_elicitation(params)
        except InvalidParams as exc:
            # Nothing malformed is put in front of a person: the agent is told what is wrong.
            logger.warning("! agent %s: malformed elicitation refused: %s", self.name, exc)
            raise AgentError(invalid_params(str(exc))) from None
        result = await entry.sink.on_elicitation(request)
        if not isinstance(result, dict) or not isinstance(result.get("action"), str):
            logger.warning(
                "! agent %s: elicitation answer %.200r refused: cancel", self.name, result
            )
            return {"action": "cancel"}
        return result
