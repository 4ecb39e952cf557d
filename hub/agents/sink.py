"""``SessionSink``: what the session layer gives the supervisor for each agent session.

The supervisor holds one sink per agent session id (registered by ``new_session``, dropped
by ``close_session``/``delete_session`` or when the session is lost) and calls it from the
agent's reader:

* ``on_update`` receives every ``session/update`` of the session as an *internal v2* update
  object, in the agent's order. It is called synchronously from the reader and must not block
  (append to a log, wake waiters, return). Updates of v1 agents arrive translated, including
  the hub's own ``user_message`` and ``state_update`` (``running``, ``requires_action``,
  ``idle`` with the turn's ``stopReason``).
* ``on_permission`` and ``on_elicitation`` are awaited in a task of their own per request;
  they return the v2 answer (``{"outcome": "selected", "optionId": ...}`` or
  ``{"outcome": "cancelled"}``; an elicitation result ``{"action": ...}``). The task is
  cancelled when the agent withdraws the request with ``$/cancel_request`` (the agent is
  then answered ``-32800``) or when the agent dies (nobody is answered): clean up and let
  ``CancelledError`` propagate.
* ``on_elicitation_complete`` relays ``elicitation/complete`` for an elicitation this sink
  was asked.
* ``on_agent_event`` reports the agent's lifecycle: ``{"status": "exited", "exitCode": c,
  "signal": s}`` when the process died (both keys present, one of them ``None``),
  ``{"status": "restarted"}`` after the session was re-attached to a new process, and
  ``{"status": "lost", "message": ...}`` when it could not be (the sink is then dropped).
* ``on_extension`` receives ``_``-prefixed notifications whose params name this session.
* ``on_extension_request`` serves a request of the agent whose method the hub does not know
  and whose params name this session (in a task of its own, like ``on_permission``): it
  returns the result to answer, or raises ``AgentError`` to answer an error (``-32601`` when
  no client can take it).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["SessionSink"]


class SessionSink(Protocol):
    """The session layer's side of one agent session (see the module docstring)."""

    def on_update(self, update: dict[str, Any]) -> None: ...

    async def on_permission(self, params: dict[str, Any]) -> dict[str, Any]: ...

    async def on_elicitation(self, params: dict[str, Any]) -> dict[str, Any]: ...

    def on_elicitation_complete(self, params: dict[str, Any]) -> None: ...

    def on_agent_event(self, event: dict[str, Any]) -> None: ...

    def on_extension(self, method: str, params: dict[str, Any]) -> None: ...

    async def on_extension_request(self, method: str, params: dict[str, Any]) -> Any: ...
